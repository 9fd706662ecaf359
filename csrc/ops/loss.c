/* Cross entropy with class-index targets (kernels_src/loss.py), and its fused form after the LM head, which computes
 * the logits chunk by chunk of rows so the full (rows, vocab) logits never exist. */
#include "lm_head.h"
#include "xk_kernels.h"

static xopsaot_status check_options(const xopsaot_cross_entropy_options *o, const char *op) {
  if (!o) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: options is NULL", op);
  if (o->reduction < XOPSAOT_REDUCTION_NONE || o->reduction > XOPSAOT_REDUCTION_SUM)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: reduction is %d; supported: 0 (none), 1 (mean), 2 (sum)", op,
                   o->reduction);
  if (!(o->label_smoothing >= 0.0f && o->label_smoothing <= 1.0f)) /* also refuses NaN */
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: label_smoothing is %g; it must be in [0, 1]", op,
                   (double)o->label_smoothing);
  return XOPSAOT_SUCCESS;
}

/* target: int32/int64, contiguous, one per row; out: per row (none) or one element, in the logits' dtype. */
static xopsaot_status check_target_out(const xopsaot_tensor *target, const xopsaot_tensor *out, int64_t rows,
                                       const xopsaot_tensor *logits, int reduction, const char *op) {
  XO_TRY(xo_check_tensor(target, op, "target", -1));
  XO_TRY(xo_check_same_device(logits, target, op, "logits", "target"));
  if (target->dtype != XOPSAOT_INT32 && target->dtype != XOPSAOT_INT64)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: target has dtype %s; supported: int32, int64 (class indices)",
                   op, xo_dtype_name(target->dtype));
  if (xo_numel(target) != rows || !xo_is_contiguous(target))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: target must be contiguous with one class index per row "
                   "(%lld), got %lld", op, (long long)rows, (long long)xo_numel(target));
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  XO_TRY(xo_check_same_device(logits, out, op, "logits", "out"));
  XO_TRY(xo_check_dtype(out, logits->dtype, op, "out"));
  const int64_t want = reduction == XOPSAOT_REDUCTION_NONE ? rows : 1;
  if (xo_numel(out) != want || !xo_is_contiguous(out))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: out must be contiguous with %lld element%s, got %lld", op,
                   (long long)want, want == 1 ? "" : "s", (long long)xo_numel(out));
  return XOPSAOT_SUCCESS;
}

/* Per-row losses of `rows` rows of logits (n classes, row stride `stride`) into loss (dtype loss_dtype). */
static xopsaot_status launch_rows(void *logits, int32_t dtype, int64_t stride, int64_t rows, int64_t n,
                                  const xopsaot_tensor *target, int64_t first_row, void *loss, int32_t loss_dtype,
                                  const xopsaot_cross_entropy_options *o, int device, void *stream) {
  if (rows == 0) return XOPSAOT_SUCCESS;
  xk_cross_entropy_kernel_args args = {
      .Logits = logits, .Target = (char *)target->data + first_row * xo_dtype_size(target->dtype), .Loss = loss,
      .stride_x = rows > 1 ? stride : n, .n_cols = (int32_t)n, .ignore_index = o->ignore_index,
      .smoothing = o->label_smoothing, .n_rows = rows};
  xk_cross_entropy_kernel_keys keys = {.T = dtype, .I = target->dtype, .L = loss_dtype};
  return xo_launch(&xk_cross_entropy_kernel, &keys.T, &args, device, stream);
}

static xopsaot_status launch_reduce(float *loss, const xopsaot_tensor *target, int64_t rows,
                                    const xopsaot_tensor *out, const xopsaot_cross_entropy_options *o,
                                    void *stream) {
  xk_loss_reduce_kernel_args args = {.Loss = loss, .Target = target->data, .Out = out->data, .n_rows = rows,
                                     .ignore_index = o->ignore_index,
                                     .mean = o->reduction == XOPSAOT_REDUCTION_MEAN};
  xk_loss_reduce_kernel_keys keys = {.I = target->dtype, .T = out->dtype};
  return xo_launch(&xk_loss_reduce_kernel, &keys.I, &args, out->device, stream);
}

xopsaot_status xopsaot_cross_entropy(const xopsaot_tensor *logits, const xopsaot_tensor *target,
                                     const xopsaot_tensor *out, const xopsaot_cross_entropy_options *options,
                                     void *stream) {
  static const char op[] = "cross_entropy";
  XO_TRY(check_options(options, op));
  XO_TRY(xo_check_tensor(logits, op, "logits", -1));
  int64_t rows = 0, stride = 0;
  if (logits->ndim < 1) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "cross_entropy: logits must have a class dim");
  const int64_t n = logits->shape[logits->ndim - 1];
  XO_TRY(xo_check_vocabulary(n, op, "classes"));
  XO_TRY(xo_rows(logits, op, "logits", &rows, &stride));
  XO_TRY(check_target_out(target, out, rows, logits, options->reduction, op));
  XO_TRY(xo_require_key(&xk_cross_entropy_kernel, XK_CROSS_ENTROPY_KERNEL_KEY_T, logits->dtype,
                        "cross_entropy: dtype"));
  const int d = logits->device;
  if (options->reduction == XOPSAOT_REDUCTION_NONE)
    return launch_rows(logits->data, logits->dtype, stride, rows, n, target, 0, out->data, out->dtype, options, d,
                       stream);
  void *losses = NULL;
  if (rows) XO_TRY(xo_workspace_alloc(d, stream, (uint64_t)rows * sizeof(float), &losses));
  xopsaot_status st = launch_rows(logits->data, logits->dtype, stride, rows, n, target, 0, losses,
                                  XOPSAOT_FLOAT32, options, d, stream);
  if (!st) st = launch_reduce(losses, target, rows, out, options, stream);
  xo_workspace_free(d, stream, losses);
  return st;
}

typedef struct {
  const xopsaot_tensor *target, *out;
  const xopsaot_cross_entropy_options *options;
  float *losses; /* reduced: float32 per row; else NULL (written to out) */
  int32_t dtype;
  int64_t vocab;
  int device;
  void *stream;
} chunk_losses;

static xopsaot_status chunk_loss(void *ctx, void *logits, int64_t first, int64_t rows) {
  const chunk_losses *c = ctx;
  void *loss = c->losses ? (void *)(c->losses + first) : (char *)c->out->data + first * xo_dtype_size(c->dtype);
  return launch_rows(logits, c->dtype, c->vocab, rows, c->vocab, c->target, first, loss,
                     c->losses ? XOPSAOT_FLOAT32 : c->dtype, c->options, c->device, c->stream);
}

xopsaot_status xopsaot_linear_cross_entropy(const xopsaot_tensor *x, const xopsaot_tensor *weight,
                                            const xopsaot_tensor *bias, const xopsaot_tensor *target,
                                            const xopsaot_tensor *out, const xopsaot_cross_entropy_options *options,
                                            int64_t chunk_rows, void *stream) {
  static const char op[] = "linear_cross_entropy";
  XO_TRY(check_options(options, op));
  xo_lm_head h = {.x = x, .weight = weight, .bias = bias};
  XO_TRY(xo_lm_head_check(&h, op));
  XO_TRY(check_target_out(target, out, h.rows, x, options->reduction, op));
  if (chunk_rows < 0)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: chunk_rows is %lld; it must be >= 0 (0 chooses)", op,
                   (long long)chunk_rows);
  XO_TRY(xo_require_key(&xk_cross_entropy_kernel, XK_CROSS_ENTROPY_KERNEL_KEY_T, x->dtype,
                        "linear_cross_entropy: dtype"));
  const int reduce = options->reduction != XOPSAOT_REDUCTION_NONE;
  if (h.rows == 0 && !reduce) return XOPSAOT_SUCCESS;
  chunk_losses c = {.target = target, .out = out, .options = options, .dtype = x->dtype, .vocab = h.vocab,
                    .device = x->device, .stream = stream};
  void *workspace = NULL; /* the chunk's logits, then (reduced) the float32 losses of every row, at c.losses */
  xopsaot_status st = xo_lm_head_chunks(&h, chunk_rows, reduce ? (uint64_t)h.rows * sizeof(float) : 0, &workspace,
                                        (void **)&c.losses, chunk_loss, &c, stream);
  if (!st && reduce) st = launch_reduce(c.losses, target, h.rows, out, options, stream);
  xo_workspace_free(x->device, stream, workspace);
  return st;
}
