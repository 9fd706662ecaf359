/* The matmul family (kernels_src/matmul.py): the batched product (matmul, mm, bmm) and the fused 2-D forms
 * (addmm, linear, gate_linear). */
#include "xk_kernels.h"

/* Whether b (k, n) is read along K (a transposed weight), along N, or neither. */
static xopsaot_status b_layout(const xopsaot_tensor *b, int64_t k, int64_t n, const char *op, int *k_contiguous) {
  const int64_t stride_k = b->strides[b->ndim - 2], stride_n = b->strides[b->ndim - 1];
  if (stride_n == 1 || n == 1)
    *k_contiguous = 0;
  else if (stride_k == 1 || k == 1)
    *k_contiguous = 1;
  else
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: b must be contiguous along one of its last two dims", op);
  return XOPSAOT_SUCCESS;
}

static xopsaot_status check_sizes(int64_t m, int64_t n, int64_t k, const xopsaot_tensor *a, const char *op) {
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: dims above 2^31-1 are not supported", op);
  if (a->strides[a->ndim - 1] != 1 && k > 1)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: a must be contiguous along its last dim", op);
  return XOPSAOT_SUCCESS;
}

/* One row of a against a K-contiguous b (a transposed weight): gemv_kernel, CUDA cores (kernels_src/matmul.py says
 * why), with gemm's epilogue as run-time switches (the plain product passes none). */
static xopsaot_status launch_gemv(void *a, const xopsaot_tensor *b, void *out, void *input, int64_t stride_in,
                                  void *residual, float alpha, float beta, int act, int64_t n, int64_t k, int device,
                                  void *stream) {
  xk_gemv_kernel_args args = {.A = a, .B = b->data, .C = out, .Input = input, .Residual = residual,
                              .N = (int32_t)n, .K = (int32_t)k, .stride_b = b->strides[b->ndim - 1],
                              .stride_in = stride_in, .alpha = alpha, .beta = beta, .has_input = input != NULL,
                              .has_residual = residual != NULL, .act = act};
  xk_gemv_kernel_keys keys = {.T = b->dtype};
  return xo_launch(&xk_gemv_kernel, &keys.T, &args, device, stream);
}

/* Whether 65 to 256 rows against at most 8192 columns: what matmul_ws serves only when split along K. */
static int splittable(const xk_matmul_kernel_args *m) { return m->M > 64 && m->M <= 256 && m->N <= 8192; }

/* K slices for matmul_ws where a splittable product's tiles would leave most multiprocessors without one: as many as
 * bring the tiles to a wave, with at least 48 K steps each and none empty; 1 (none) elsewhere, and matmul_kernel
 * serves. The tile is that of the variant a split launch (ws, k_splits 2) would take. On an H100 (bf16, 4096
 * columns) slices of 56 steps (K 14336) took 65 to 256 rows from 0.69-0.76x cuBLAS to 0.89-0.93x; slices of 16 (K
 * 4096) lost to matmul_kernel's tiles, 0.55-0.69x against 0.71-0.84x (h100-2026-11-26-experiments.md, stop 35). */
static int32_t ws_splits(const xk_matmul_ws_args *ws, const xk_matmul_ws_keys *keys, int device) {
  int sms;
  const int64_t block_n = xo_selected_const(&xk_matmul_ws, &keys->T, ws, device, "BLOCK_N", 0);
  const int64_t block_k = xo_selected_const(&xk_matmul_ws, &keys->T, ws, device, "BLOCK_K", 0);
  if (block_n <= 0 || block_k <= 0 || xo_device_sm_count(device, &sms)) return 1;
  const int64_t rows = 128; /* a tile's: matmul_ws's two consumers of 64 */
  const int64_t tiles = (ws->M + rows - 1) / rows * ((ws->N + block_n - 1) / block_n);
  const int64_t steps = (ws->K + block_k - 1) / block_k;
  int64_t splits = sms / tiles;
  if (splits > steps / 48) splits = steps / 48;
  if (splits < 2) return 1;
  const int64_t per = (steps + splits - 1) / splits;
  return (int32_t)((steps + per - 1) / per);
}

/* matmul_reduce_kernel's arguments: the sum of `splits` float32 slices in `partial`, finished with m's epilogue. */
static xk_matmul_reduce_kernel_args reduce_args(const xk_matmul_kernel_args *m, void *partial, int32_t splits) {
  return (xk_matmul_reduce_kernel_args){
      .Partial = partial, .C = m->C, .Input = m->Input, .Residual = m->Residual, .M = m->M, .N = m->N,
      .k_splits = splits, .stride_cm = m->stride_cm, .stride_im = m->stride_im, .stride_in = m->stride_in,
      .stride_rm = m->stride_rm, .alpha = m->alpha, .beta = m->beta, .has_input = m->has_input,
      .has_residual = m->has_residual, .act = m->act};
}

/* Hopper: matmul_ws (kernels_src/_matmul_ws.py), whose TMA descriptors of a's, b's, the output's and the residual's
 * rows are made here, split along K (ws_splits) into a workspace that matmul_reduce_kernel finishes. Sets *launched to
 * 0, launching nothing, where it does not apply (no sm_90 variant, the config's predicate, rows TMA cannot take, rows
 * that overlap): the caller then takes matmul_kernel. */
static xopsaot_status launch_ws(const xk_matmul_kernel_args *m, const xk_matmul_kernel_keys *mk,
                                const xopsaot_tensor *b, int device, void *stream, int *launched) {
  const int64_t elem = xo_dtype_size(b->dtype), k_major = mk->B_K_CONTIGUOUS;
  const xo_tma_desc out = {.base = m->C, .rank = 2, .shape = {m->M, m->N}, .strides = {m->stride_cm, 1}};
  xk_matmul_ws_args args = {
      .desc_a = {.base = m->A, .rank = 2, .shape = {m->M, m->K}, .strides = {m->stride_am, 1}},
      .desc_b = {.base = m->B, .rank = 2, .shape = {k_major ? m->N : m->K, k_major ? m->K : m->N},
                 .strides = {m->stride_b, 1}},
      .desc_c = out,
      .desc_r = m->has_residual ? (xo_tma_desc){.base = m->Residual, .rank = 2, .shape = {m->M, m->N},
                                                .strides = {m->stride_rm, 1}}
                                : out,
      .Input = m->Input, .M = m->M, .N = m->N, .K = m->K, .k_splits = 1, .stride_im = m->stride_im,
      .stride_in = m->stride_in, .alpha = m->alpha, .beta = m->beta, .has_input = m->has_input,
      .has_residual = m->has_residual, .act = m->act};
  xk_matmul_ws_keys keys = {.T = b->dtype, .B_K_CONTIGUOUS = mk->B_K_CONTIGUOUS};
  *launched = xo_tma_takes(&args.desc_a, elem) && xo_tma_takes(&args.desc_b, elem) &&
              xo_tma_takes(&args.desc_c, elem) && xo_tma_takes(&args.desc_r, elem);
  if (!*launched) return XOPSAOT_SUCCESS;
  xk_matmul_reduce_kernel_keys reduce_keys = {.T = b->dtype};
  if (splittable(m)) {
    args.k_splits = 2; /* the split launch's variant, for its tile */
    args.k_splits = ws_splits(&args, &keys, device);
    const xk_matmul_reduce_kernel_args probe = reduce_args(m, NULL, args.k_splits);
    if (args.k_splits > 1 && !xo_can_launch(&xk_matmul_reduce_kernel, &reduce_keys.T, &probe, device))
      args.k_splits = 1;
  }
  if (!(*launched = xo_can_launch(&xk_matmul_ws, &keys.T, &args, device))) return XOPSAOT_SUCCESS;
  if (args.k_splits == 1) return xo_launch(&xk_matmul_ws, &keys.T, &args, device, stream);
  void *partial = NULL;
  XO_TRY(xo_workspace_alloc(device, stream, (uint64_t)args.k_splits * m->M * m->N * 4, &partial));
  args.Partial = partial; /* the epilogue runs in the reduction */
  args.alpha = 1.0f;
  args.has_input = args.has_residual = 0;
  args.act = -1;
  args.desc_r = out;
  xopsaot_status st = xo_launch(&xk_matmul_ws, &keys.T, &args, device, stream);
  if (!st) {
    const xk_matmul_reduce_kernel_args reduce = reduce_args(m, partial, args.k_splits);
    st = xo_launch(&xk_matmul_reduce_kernel, &reduce_keys.T, &reduce, device, stream);
  }
  xo_workspace_free(device, stream, partial); /* stream-ordered: after the reduction */
  return st;
}

/* matmul_kernel, or matmul_ws where it applies (2-D products). */
static xopsaot_status launch_matmul(const xk_matmul_kernel_args *args, const xk_matmul_kernel_keys *keys,
                                    const xopsaot_tensor *b, int device, void *stream) {
  int launched = 0;
  if (args->batch == 1) {
    xopsaot_status st = launch_ws(args, keys, b, device, stream, &launched);
    if (launched || st) return st;
  }
  return xo_launch(&xk_matmul_kernel, &keys->T, args, device, stream);
}

xopsaot_status xopsaot_matmul(const xopsaot_tensor *a, const xopsaot_tensor *b, const xopsaot_tensor *out,
                              void *stream) {
  static const char op[] = "matmul";
  XO_TRY(xo_check_tensor(a, op, "a", -1));
  XO_TRY(xo_check_tensor(b, op, "b", -1));
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  if (a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > 3)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "matmul: a and b must have 2 or 3 dims, got %d and %d", a->ndim,
                   b->ndim);
  XO_TRY(xo_check_dtype(b, a->dtype, op, "b"));
  XO_TRY(xo_check_dtype(out, a->dtype, op, "out"));
  XO_TRY(xo_check_same_device(a, b, op, "a", "b"));
  XO_TRY(xo_check_same_device(a, out, op, "a", "out"));
  const int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], n = b->shape[b->ndim - 1];
  if (b->shape[b->ndim - 2] != k)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "matmul: a has %lld columns but b has %lld rows", (long long)k,
                   (long long)b->shape[b->ndim - 2]);
  const int64_t batch_a = a->ndim == 3 ? a->shape[0] : 1, batch_b = b->ndim == 3 ? b->shape[0] : 1;
  const int64_t batch = batch_a > batch_b ? batch_a : batch_b;
  if ((batch_a != batch && batch_a != 1) || (batch_b != batch && batch_b != 1))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "matmul: batch dims %lld and %lld do not broadcast",
                   (long long)batch_a, (long long)batch_b);
  const int out_ndim = a->ndim == 3 || b->ndim == 3 ? 3 : 2;
  if (out->ndim != out_ndim || out->shape[out_ndim - 2] != m || out->shape[out_ndim - 1] != n ||
      (out_ndim == 3 && out->shape[0] != batch))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "matmul: out must have shape %s(%lld, %lld)",
                   out_ndim == 3 ? "batch x " : "", (long long)m, (long long)n);
  if (!xo_is_contiguous(out)) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "matmul: out must be contiguous");
  XO_TRY(check_sizes(m, n, k, a, op));
  int k_contiguous;
  XO_TRY(b_layout(b, k, n, op, &k_contiguous));
  XO_TRY(xo_require_key(&xk_matmul_kernel, XK_MATMUL_KERNEL_KEY_T, a->dtype, "matmul: dtype"));
  if (m == 1 && batch == 1 && k_contiguous)
    return launch_gemv(a->data, b, out->data, NULL, 0, NULL, 1.0f, 0.0f, -1, n, k, a->device, stream);
  xk_matmul_kernel_args args = {
      .A = a->data, .B = b->data, .C = out->data, .M = (int32_t)m, .N = (int32_t)n, .K = (int32_t)k,
      .stride_az = batch_a > 1 ? a->strides[0] : 0, .stride_am = a->strides[a->ndim - 2],
      .stride_bz = batch_b > 1 ? b->strides[0] : 0,
      .stride_b = k_contiguous ? b->strides[b->ndim - 1] : b->strides[b->ndim - 2],
      .stride_cz = out_ndim == 3 ? out->strides[0] : 0, .stride_cm = out->strides[out_ndim - 2], .alpha = 1.0f,
      .act = -1, .batch = batch};
  xk_matmul_kernel_keys keys = {.T = a->dtype, .B_K_CONTIGUOUS = k_contiguous, .EPILOGUE = 0};
  return launch_matmul(&args, &keys, b, a->device, stream);
}

static xopsaot_status check_act(int act, const char *op, const char *name) {
  if (act < -1 || act > XOPSAOT_ACT_TANH)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s is %d; supported: -1 (none) or 0 (relu) to 5 (tanh)",
                   op, name, act);
  return XOPSAOT_SUCCESS;
}

/* gate_linear's gating, act(a) * gate, in a pass of its own (the gated activation kernel) into a workspace that the
 * product then reads (kernels_src/matmul.py says why not in the product's prologue). */
static xopsaot_status gated_operand(const xopsaot_tensor *a, const xopsaot_tensor *gate, int gate_act, void *stream,
                                    xopsaot_tensor *gated) {
  const int64_t m = a->shape[0], k = a->shape[1], elem = xo_dtype_size(a->dtype);
  const int64_t shape[2] = {m, k};
  void *workspace = NULL;
  if (m * k != 0) XO_TRY(xo_workspace_alloc(a->device, stream, (uint64_t)(m * k * elem), &workspace));
  xopsaot_tensor_contiguous(gated, workspace, 2, shape, a->dtype, a->device);
  if (m * k == 0) return XOPSAOT_SUCCESS;
  xk_gated_activation_kernel_args args = {.X = a->data, .Gate = gate->data, .Y = workspace,
                                          .stride_x = m > 1 ? a->strides[0] : k, .stride_y = k, .d = k,
                                          .act = gate_act, .n_rows = m};
  xk_gated_activation_kernel_keys keys = {a->dtype};
  xopsaot_status st = xo_launch(&xk_gated_activation_kernel, &keys.T, &args, a->device, stream);
  if (st) xo_workspace_free(a->device, stream, workspace);
  return st;
}

/* input's strides as broadcast to (m, n): 0 along a dim of 1 (or a missing one). */
static xopsaot_status input_strides(const xopsaot_tensor *input, int64_t m, int64_t n, int64_t *stride_m,
                                    int64_t *stride_n) {
  const int nd = input->ndim;
  const int64_t rows = nd == 2 ? input->shape[0] : 1, cols = nd >= 1 ? input->shape[nd - 1] : 1;
  if (nd > 2 || (rows != 1 && rows != m) || (cols != 1 && cols != n))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "gemm: input does not broadcast to (%lld, %lld)", (long long)m,
                   (long long)n);
  *stride_m = rows == 1 ? 0 : input->strides[0];
  *stride_n = cols == 1 ? 0 : input->strides[nd - 1];
  return XOPSAOT_SUCCESS;
}

xopsaot_status xopsaot_gemm(const xopsaot_tensor *a, const xopsaot_tensor *b, const xopsaot_tensor *gate,
                            const xopsaot_tensor *input, const xopsaot_tensor *residual, const xopsaot_tensor *out,
                            const xopsaot_gemm_options *options, void *stream) {
  static const char op[] = "gemm";
  if (!options) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "gemm: options is NULL");
  XO_TRY(xo_check_tensor(a, op, "a", 2));
  XO_TRY(xo_check_tensor(b, op, "b", 2));
  XO_TRY(xo_check_tensor(out, op, "out", 2));
  XO_TRY(xo_check_dtype(b, a->dtype, op, "b"));
  XO_TRY(xo_check_dtype(out, a->dtype, op, "out"));
  XO_TRY(xo_check_same_device(a, b, op, "a", "b"));
  XO_TRY(xo_check_same_device(a, out, op, "a", "out"));
  XO_TRY(check_act(options->act, op, "act"));
  XO_TRY(check_act(options->gate_act, op, "gate_act"));
  const int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
  if (b->shape[0] != k)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "gemm: a has %lld columns but b has %lld rows", (long long)k,
                   (long long)b->shape[0]);
  if (out->shape[0] != m || out->shape[1] != n)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "gemm: out must have shape (%lld, %lld)", (long long)m,
                   (long long)n);
  XO_TRY(xo_check_last_dim_contiguous(out, op, "out"));
  XO_TRY(check_sizes(m, n, k, a, op));
  int k_contiguous;
  XO_TRY(b_layout(b, k, n, op, &k_contiguous));
  if (gate) {
    XO_TRY(xo_check_tensor(gate, op, "gate", 2));
    XO_TRY(xo_check_dtype(gate, a->dtype, op, "gate"));
    XO_TRY(xo_check_same_device(a, gate, op, "a", "gate"));
    XO_TRY(xo_check_same_shape(a, gate, op, "a", "gate"));
    if ((m > 1 && gate->strides[0] != a->strides[0]) || (k > 1 && gate->strides[1] != 1))
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "gemm: gate must have a's strides");
  }
  int64_t stride_im = 0, stride_in = 0, stride_rm = 0;
  const int use_input = input != NULL && options->beta != 0.0f; /* torch's addmm ignores input when beta is 0 */
  if (input) {
    XO_TRY(xo_check_tensor(input, op, "input", -1));
    XO_TRY(xo_check_dtype(input, a->dtype, op, "input"));
    XO_TRY(xo_check_same_device(a, input, op, "a", "input"));
    XO_TRY(input_strides(input, m, n, &stride_im, &stride_in));
  }
  if (residual) {
    XO_TRY(xo_check_tensor(residual, op, "residual", 2));
    XO_TRY(xo_check_dtype(residual, a->dtype, op, "residual"));
    XO_TRY(xo_check_same_device(a, residual, op, "a", "residual"));
    XO_TRY(xo_check_same_shape(out, residual, op, "out", "residual"));
    XO_TRY(xo_check_last_dim_contiguous(residual, op, "residual"));
    stride_rm = residual->strides[0];
  }
  XO_TRY(xo_require_key(&xk_matmul_kernel, XK_MATMUL_KERNEL_KEY_T, a->dtype, "gemm: dtype"));
  if (m == 0 || n == 0) return XOPSAOT_SUCCESS;
  xopsaot_tensor gated;
  if (gate) {
    XO_TRY(gated_operand(a, gate, options->gate_act, stream, &gated));
    a = &gated;
  }
  xk_matmul_kernel_args args = {
      .A = a->data, .B = b->data, .C = out->data,
      .Input = use_input ? input->data : NULL, .Residual = residual ? residual->data : NULL, .M = (int32_t)m,
      .N = (int32_t)n, .K = (int32_t)k, .stride_am = m > 1 ? a->strides[0] : k,
      .stride_b = k_contiguous ? b->strides[1] : b->strides[0], .stride_cm = m > 1 ? out->strides[0] : n,
      .stride_im = stride_im, .stride_in = stride_in, .stride_rm = m > 1 ? stride_rm : n, .alpha = options->alpha,
      .beta = options->beta, .has_input = use_input, .has_residual = residual != NULL, .act = options->act,
      .batch = 1};
  xk_matmul_kernel_keys keys = {.T = a->dtype, .B_K_CONTIGUOUS = k_contiguous, .EPILOGUE = 1};
  xopsaot_status st =
      m == 1 && k_contiguous
          ? launch_gemv(a->data, b, out->data, args.Input, stride_in, args.Residual, options->alpha, options->beta,
                        options->act, n, k, a->device, stream)
          : launch_matmul(&args, &keys, b, a->device, stream);
  if (gate) xo_workspace_free(a->device, stream, gated.data);
  return st;
}
