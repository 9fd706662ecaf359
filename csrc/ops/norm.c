/* Norms: rms and layer norm over the last dim (fused residual add, (offset + w) weights, gates) through one
 * kernel, and group_norm. */
#include <math.h>

#include "xk_kernels.h"

/* A tensor of x's shape (or weight's (n,)), dtype and device, read or written as rows with one stride. */
static xopsaot_status check_like_x(const xopsaot_tensor *x, const xopsaot_tensor *t, const char *op, const char *name,
                                   int64_t *stride) {
  int64_t rows;
  XO_TRY(xo_check_tensor(t, op, name, -1));
  XO_TRY(xo_check_same_shape(x, t, op, "x", name));
  XO_TRY(xo_check_dtype(t, x->dtype, op, name));
  XO_TRY(xo_check_same_device(x, t, op, "x", name));
  return xo_rows(t, op, name, &rows, stride);
}

static xopsaot_status check_vector(const xopsaot_tensor *x, const xopsaot_tensor *t, int64_t n, const char *op,
                                   const char *name, const char *of) {
  XO_TRY(xo_check_tensor(t, op, name, 1));
  XO_TRY(xo_check_dtype(t, x->dtype, op, name));
  XO_TRY(xo_check_same_device(x, t, op, "x", name));
  XO_TRY(xo_check_last_dim_contiguous(t, op, name));
  if (t->shape[0] != n)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s has %lld elements but %s is %lld", op, name,
                   (long long)t->shape[0], of, (long long)n);
  return XOPSAOT_SUCCESS;
}

/* row_norm_kernel holds rows of up to 32768 elements in registers and loops over longer ones, reading x twice (the
 * second time from L2 when the row is still there). On Hopper, row_norm_held_kernel copies longer rows of up to 224
 * KB (with a residual or a gate streamed beside them, 160 KB), and in thread-block clusters of 4 programs up to 448
 * KB (320 KB), into shared memory and reads them once, where its configs' `when` holds (kernels_src/norm.py: the
 * length, the form, and the rows per multiprocessor where it read faster than the loop). Both kernels take the same
 * arguments and keys (kernels_src/norm.py's ROW_NORM_LAUNCH), so one struct of each serves both. */
_Static_assert(sizeof(xk_row_norm_held_kernel_args) == sizeof(xk_row_norm_kernel_args) &&
                   sizeof(xk_row_norm_held_kernel_keys) == sizeof(xk_row_norm_kernel_keys),
               "row_norm_kernel and row_norm_held_kernel share their arguments");

xopsaot_status xopsaot_norm(const xopsaot_tensor *x, const xopsaot_tensor *weight, const xopsaot_tensor *bias,
                            const xopsaot_tensor *residual, const xopsaot_tensor *gate, const xopsaot_tensor *out,
                            const xopsaot_tensor *residual_out, const xopsaot_norm_options *o, void *stream) {
  static const char op[] = "norm";
  int64_t rows, stride_x, stride_y, stride_r = 0, stride_h = 0, stride_g = 0;
  if (!o) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "norm: options is NULL");
  XO_TRY(xo_check_tensor(x, op, "x", -1));
  XO_TRY(xo_rows(x, op, "x", &rows, &stride_x));
  XO_TRY(check_like_x(x, out, op, "out", &stride_y));
  const int64_t n = x->shape[x->ndim - 1];
  if (weight) XO_TRY(check_vector(x, weight, n, op, "weight", "x's last dim"));
  if (bias) XO_TRY(check_vector(x, bias, n, op, "bias", "x's last dim"));
  if ((residual == NULL) != (residual_out == NULL))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "norm: residual and residual_out go together");
  if (residual && gate)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "norm: a residual and a gate cannot be combined");
  if (residual) {
    XO_TRY(check_like_x(x, residual, op, "residual", &stride_r));
    XO_TRY(check_like_x(x, residual_out, op, "residual_out", &stride_h));
  }
  if (gate) XO_TRY(check_like_x(x, gate, op, "gate", &stride_g));
  if (o->norm != XOPSAOT_NORM_RMS && o->norm != XOPSAOT_NORM_LAYER)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "norm: norm is %d; supported: 0 (rms), 1 (layer)", o->norm);
  if (gate && o->gate_act != XOPSAOT_GATE_SILU && o->gate_act != XOPSAOT_GATE_SIGMOID)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "norm: gate_act is %d; supported: 0 (silu), 1 (sigmoid)",
                   o->gate_act);
  if (n > INT32_MAX)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "norm: rows of %lld elements are too long", (long long)n);
  if (!(o->eps >= 0.0f) || o->eps == INFINITY)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "norm: eps must be finite and >= 0, got %g", o->eps);
  if (!(o->weight_offset == o->weight_offset) || o->weight_offset == INFINITY || o->weight_offset == -INFINITY)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "norm: weight_offset must be finite, got %g", o->weight_offset);
  XO_TRY(xo_require_key(&xk_row_norm_kernel, XK_ROW_NORM_KERNEL_KEY_T, x->dtype, "norm: dtype"));
  if (n == 0 || rows == 0) return XOPSAOT_SUCCESS;
  xk_row_norm_kernel_args args = {
      .X = x->data, .W = weight ? weight->data : x->data, .B = bias ? bias->data : x->data,
      .R = residual ? residual->data : x->data, .G = gate ? gate->data : x->data, .Y = out->data,
      .H = residual_out ? residual_out->data : out->data,
      .stride_x = stride_x, .stride_r = stride_r, .stride_g = stride_g, .stride_y = stride_y, .stride_h = stride_h,
      .n_cols = (int32_t)n, .eps = o->eps, .w_offset = o->weight_offset, .layer = o->norm == XOPSAOT_NORM_LAYER,
      .has_weight = weight != NULL, .has_bias = bias != NULL, .gate_silu = o->gate_act == XOPSAOT_GATE_SILU,
      .gate_pre = o->gate_pre != 0, .n_rows = rows};
  xk_row_norm_kernel_keys keys = {x->dtype, residual != NULL, gate != NULL};
  /* row_norm_held_kernel's `when` holds only past the register rows: checked here first, to spare shorter rows the
   * selection */
  if (n > XK_ROW_NORM_KERNEL_REGISTER_ROW && xo_can_launch(&xk_row_norm_held_kernel, &keys.T, &args, x->device))
    return xo_launch(&xk_row_norm_held_kernel, &keys.T, &args, x->device, stream);
  return xo_launch(&xk_row_norm_kernel, &keys.T, &args, x->device, stream);
}

xopsaot_status xopsaot_rms_norm(const xopsaot_tensor *x, const xopsaot_tensor *weight,
                                const xopsaot_tensor *residual, const xopsaot_tensor *out,
                                const xopsaot_tensor *residual_out, float eps, void *stream) {
  const xopsaot_norm_options o = {.norm = XOPSAOT_NORM_RMS, .eps = eps};
  return xopsaot_norm(x, weight, NULL, residual, NULL, out, residual_out, &o, stream);
}

/* group_norm's long groups (more elements than its largest whole block) are split over programs in chunks of a
 * multiple of the looping block when there are fewer than 2 groups per multiprocessor, into enough chunks for 4
 * programs per multiprocessor: a first launch sums each chunk into a float32 workspace, the second adds a group's
 * sums (a fixed order: the same result on every run) and normalizes each chunk. On the H100
 * (benchmarks/experiments/group_norm_split.py) 512 groups ran fastest unsplit, 32 to 256 groups 1.1-4.5x faster
 * split. The blocks and the most splits are group_norm_kernel's exports (kernels_src/norm.py). */
#define GROUP_SPLIT_MIN XK_GROUP_NORM_KERNEL_WHOLE_BLOCK
#define GROUP_CHUNK XK_GROUP_NORM_KERNEL_LOOP_BLOCK
#define GROUP_MAX_SPLITS XK_GROUP_NORM_KERNEL_MAX_SPLITS
#define GROUP_SPLIT_BELOW_PER_SM 2
#define GROUP_PROGRAMS_PER_SM 4
#define GROUP_MAX_ELEMS ((int64_t)INT32_MAX + 1 - GROUP_CHUNK)
/* On Hopper, groups that fit shared memory are held there and x is read once: groups of up to 64 KB by a program
 * each (group_norm_held_kernel), longer ones of 48-64 KB a program by a thread-block cluster of 2, 4 or 8 programs
 * (group_norm_cluster_kernel), where their configs' `when` holds (kernels_src/norm.py: the sizes, and the programs
 * per multiprocessor where each read faster than the two passes). */
_Static_assert(sizeof(xk_group_norm_cluster_kernel_args) == sizeof(xk_group_norm_held_kernel_args),
               "group_norm_held_kernel and group_norm_cluster_kernel share their arguments");

static int64_t group_splits(int64_t rows, int64_t per_group, int sm_count, int64_t *chunk) {
  if (rows >= (int64_t)GROUP_SPLIT_BELOW_PER_SM * sm_count) return 1;
  const int64_t want = ((int64_t)GROUP_PROGRAMS_PER_SM * sm_count + rows - 1) / rows;
  const int64_t splits = want < GROUP_MAX_SPLITS ? want : GROUP_MAX_SPLITS;
  *chunk = xo_round_up((per_group + splits - 1) / splits, GROUP_CHUNK);
  return (per_group + *chunk - 1) / *chunk;
}

xopsaot_status xopsaot_group_norm(const xopsaot_tensor *x, const xopsaot_tensor *weight, const xopsaot_tensor *bias,
                                  const xopsaot_tensor *out, int64_t num_groups, float eps, void *stream) {
  static const char op[] = "group_norm";
  int64_t stride;
  XO_TRY(xo_check_tensor(x, op, "x", -1));
  if (x->ndim < 2)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "group_norm: x must be (N, C, *), got %d dims", x->ndim);
  if (!xo_is_contiguous(x)) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "group_norm: x must be contiguous");
  XO_TRY(check_like_x(x, out, op, "out", &stride));
  if (!xo_is_contiguous(out)) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "group_norm: out must be contiguous");
  const int64_t channels = x->shape[1];
  if (num_groups < 1 || channels % num_groups)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "group_norm: num_groups is %lld; it must divide the %lld channels",
                   (long long)num_groups, (long long)channels);
  if (weight) XO_TRY(check_vector(x, weight, channels, op, "weight", "the channel count"));
  if (bias) XO_TRY(check_vector(x, bias, channels, op, "bias", "the channel count"));
  if (!(eps >= 0.0f) || eps == INFINITY)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "group_norm: eps must be finite and >= 0, got %g", eps);
  XO_TRY(xo_require_key(&xk_group_norm_kernel, XK_GROUP_NORM_KERNEL_KEY_T, x->dtype, "group_norm: dtype"));
  const int64_t numel = xo_numel(x), rows = x->shape[0] * num_groups;
  if (numel == 0) return XOPSAOT_SUCCESS;
  const int64_t per_group = numel / rows, spatial = numel / (x->shape[0] * channels);
  /* the kernel's element and channel arithmetic is 32-bit, chunks included (a multiple of GROUP_CHUNK) */
  if (per_group > GROUP_MAX_ELEMS || channels > INT32_MAX)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "group_norm: a group holds %lld elements of %lld channels; at most "
                   "%lld elements and %d channels are supported", (long long)per_group, (long long)channels,
                   (long long)GROUP_MAX_ELEMS, INT32_MAX);
  int64_t splits = 1, chunk = xo_round_up(per_group, GROUP_CHUNK), programs_per_sm = 0;
  if (per_group > GROUP_SPLIT_MIN) {
    int sm_count = 0;
    XO_TRY(xo_device_sm_count(x->device, &sm_count));
    splits = group_splits(rows, per_group, sm_count, &chunk);
    xk_group_norm_held_kernel_args held = {
        .X = x->data, .W = weight ? weight->data : x->data, .B = bias ? bias->data : x->data, .Y = out->data,
        .n_elems = per_group, .spatial = (int32_t)spatial, .channels_per_group = (int32_t)(channels / num_groups),
        .groups = (int32_t)num_groups, .eps = eps, .has_weight = weight != NULL, .has_bias = bias != NULL,
        .n_rows = rows};
    xk_group_norm_held_kernel_keys held_keys = {x->dtype};
    if (xo_can_launch(&xk_group_norm_cluster_kernel, &held_keys.T, &held, x->device))
      return xo_launch(&xk_group_norm_cluster_kernel, &held_keys.T, &held, x->device, stream);
    if (xo_can_launch(&xk_group_norm_held_kernel, &held_keys.T, &held, x->device))
      return xo_launch(&xk_group_norm_held_kernel, &held_keys.T, &held, x->device, stream);
    programs_per_sm = rows * splits / sm_count; /* the long groups' configs look at it (kernels_src/norm.py) */
  }
  float *partials = NULL;
  if (splits > 1) {
    XO_TRY(xo_workspace_alloc(x->device, stream, (uint64_t)(rows * splits * 2) * sizeof(float), (void **)&partials));
    xk_group_norm_stats_kernel_args stats = {.X = x->data, .Partials = partials, .n_elems = per_group,
                                             .chunk = (int32_t)chunk, .n_rows = rows, .splits = splits};
    xk_group_norm_stats_kernel_keys stats_keys = {x->dtype};
    xopsaot_status st = xo_launch(&xk_group_norm_stats_kernel, &stats_keys.T, &stats, x->device, stream);
    if (st) {
      xo_workspace_free(x->device, stream, partials);
      return st;
    }
  }
  xk_group_norm_kernel_args args = {
      .X = x->data, .W = weight ? weight->data : x->data, .B = bias ? bias->data : x->data, .Y = out->data,
      .Partials = partials ? partials : x->data, .n_elems = per_group, .chunk = (int32_t)chunk,
      .spatial = (int32_t)spatial, .channels_per_group = (int32_t)(channels / num_groups),
      .groups = (int32_t)num_groups, .eps = eps, .has_weight = weight != NULL, .has_bias = bias != NULL,
      .n_rows = rows, .splits = splits, .programs_per_sm = programs_per_sm};
  xk_group_norm_kernel_keys keys = {x->dtype};
  xopsaot_status st = xo_launch(&xk_group_norm_kernel, &keys.T, &args, x->device, stream);
  xo_workspace_free(x->device, stream, partials);
  return st;
}
