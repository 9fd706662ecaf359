/* Rotary position embeddings: apply_rotary (flash-attn's), rotary_qk (q and k in place from position ids) and
 * lrpe_cosine (Xopes'). */
#include "xk_kernels.h"

/* A tensor of `like`'s dtype and device, contiguous in its last dim. */
static xopsaot_status check_companion(const xopsaot_tensor *like, const char *like_name, const xopsaot_tensor *t,
                                      const char *op, const char *name, int ndim) {
  XO_TRY(xo_check_tensor(t, op, name, ndim));
  XO_TRY(xo_check_dtype(t, like->dtype, op, name));
  XO_TRY(xo_check_same_device(like, t, op, like_name, name));
  return xo_check_last_dim_contiguous(t, op, name);
}

/* An int32 or int64 index tensor of n elements, contiguous, on x's device. */
static xopsaot_status check_index(const xopsaot_tensor *x, const xopsaot_tensor *t, int32_t dtype, int64_t n,
                                  const char *op, const char *name) {
  XO_TRY(xo_check_tensor(t, op, name, -1));
  XO_TRY(xo_check_dtype(t, dtype, op, name));
  XO_TRY(xo_check_same_device(x, t, op, "x", name));
  if (!xo_is_contiguous(t) || xo_numel(t) != n)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s must be contiguous with %lld elements, got %lld", op, name,
                   (long long)n, (long long)xo_numel(t));
  return XOPSAOT_SUCCESS;
}

/* t (tokens..., heads, head_dim): the number of tokens and the one stride that steps through them. */
static xopsaot_status token_stride(const xopsaot_tensor *t, const char *op, const char *name, int64_t *tokens,
                                   int64_t *stride) {
  int64_t inner_stride = 0, inner_size = 1; /* the innermost token dim longer than 1 seen so far */
  *tokens = 1;
  *stride = 0;
  for (int i = t->ndim - 3; i >= 0; --i) {
    if (t->shape[i] == 1) continue;
    if (*tokens > 1 && t->strides[i] != inner_stride * inner_size)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                     "%s: %s's token dims cannot be read with one stride (dim %d has stride %lld)", op, name, i,
                     (long long)t->strides[i]);
    if (*tokens == 1) *stride = t->strides[i];
    inner_stride = t->strides[i], inner_size = t->shape[i];
    *tokens *= t->shape[i];
  }
  return XOPSAOT_SUCCESS;
}

xopsaot_status xopsaot_rotary(const xopsaot_tensor *x, const xopsaot_tensor *cos, const xopsaot_tensor *sin,
                              const xopsaot_tensor *seqlen_offsets, const xopsaot_tensor *cu_seqlens,
                              const xopsaot_tensor *out, int64_t offset, int64_t max_seqlen, int interleaved,
                              void *stream) {
  static const char op[] = "apply_rotary";
  const int varlen = cu_seqlens != NULL;
  XO_TRY(xo_check_tensor(x, op, "x", varlen ? 3 : 4));
  XO_TRY(xo_check_last_dim_contiguous(x, op, "x"));
  XO_TRY(check_companion(x, "x", out, op, "out", x->ndim));
  XO_TRY(xo_check_same_shape(x, out, op, "x", "out"));
  XO_TRY(check_companion(x, "x", cos, op, "cos", 2));
  XO_TRY(check_companion(x, "x", sin, op, "sin", 2));
  XO_TRY(xo_check_same_shape(cos, sin, op, "cos", "sin"));
  if (cos->strides[0] != sin->strides[0])
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "apply_rotary: cos and sin must have the same row stride");
  const int d = x->ndim - 1;
  const int64_t head_dim = x->shape[d], heads = x->shape[d - 1], half = cos->shape[1];
  if (2 * half > head_dim)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                   "apply_rotary: cos has %lld columns, so rotary_dim is %lld, more than x's head_dim %lld",
                   (long long)half, (long long)(2 * half), (long long)head_dim);
  const int in_place = out->data == x->data;
  for (int i = 0; in_place && i < x->ndim; ++i)
    if (out->strides[i] != x->strides[i] && out->shape[i] > 1)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "apply_rotary: out is x with other strides; in place, "
                     "out must be x itself");
  int64_t batch, seqlen;
  if (varlen) {
    XO_TRY(xo_check_tensor(cu_seqlens, op, "cu_seqlens", 1));
    if (cu_seqlens->shape[0] < 1)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "apply_rotary: cu_seqlens must have batch + 1 >= 1 entries");
    XO_TRY(check_index(x, cu_seqlens, XOPSAOT_INT32, cu_seqlens->shape[0], op, "cu_seqlens"));
    if (max_seqlen < 0)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "apply_rotary: max_seqlen must be >= 0, got %lld",
                     (long long)max_seqlen);
    batch = cu_seqlens->shape[0] - 1, seqlen = max_seqlen;
  } else {
    batch = x->shape[0], seqlen = x->shape[1];
  }
  if (seqlen_offsets) XO_TRY(check_index(x, seqlen_offsets, XOPSAOT_INT32, batch, op, "seqlen_offsets"));
  if (heads > INT32_MAX || head_dim > INT32_MAX)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "apply_rotary: x's heads and head_dim must be below 2^31");
  XO_TRY(xo_require_key(&xk_rotary_kernel, XK_ROTARY_KERNEL_KEY_T, x->dtype, "apply_rotary: dtype"));
  if (xo_numel(x) == 0 || (in_place && half == 0)) return XOPSAOT_SUCCESS;
  const int s = varlen ? 0 : 1; /* x's token dim; the batch dim is dense only */
  xk_rotary_kernel_args args = {
      .X = x->data, .Y = out->data, .K = x->data, .COS = cos->data, .SIN = sin->data,
      .OFFSETS = seqlen_offsets ? seqlen_offsets->data : x->data, .POSITIONS = x->data,
      .CU_SEQLENS = varlen ? cu_seqlens->data : x->data,
      .heads = (int32_t)heads, .heads_k = 0, .half = (int32_t)half,
      .tail_end = (int32_t)(in_place ? 2 * half : head_dim), .n_pos = cos->shape[0], .offset = offset,
      .total = varlen && !in_place ? x->shape[0] : 0, /* varlen: tokens after the last sequence are copied */
      .pos_mode = seqlen_offsets ? 1 : 0, .varlen = varlen,
      .stride_xb = varlen ? 0 : x->strides[0], .stride_xs = x->strides[s], .stride_xh = x->strides[d - 1],
      .stride_yb = varlen ? 0 : out->strides[0], .stride_ys = out->strides[s], .stride_yh = out->strides[d - 1],
      .stride_ks = 0, .stride_kh = 0, .stride_cs = cos->strides[0], .seqlen = seqlen, .batch = batch};
  xk_rotary_kernel_keys keys = {x->dtype, interleaved != 0};
  return xo_launch(&xk_rotary_kernel, &keys.T, &args, x->device, stream);
}

xopsaot_status xopsaot_rotary_qk(const xopsaot_tensor *positions, const xopsaot_tensor *q, const xopsaot_tensor *k,
                                 const xopsaot_tensor *cos_sin_cache, int is_neox, void *stream) {
  static const char op[] = "rotary_qk";
  int64_t tokens, stride_qs, tokens_k, stride_ks = 0;
  XO_TRY(xo_check_tensor(q, op, "q", -1));
  if (q->ndim < 2) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "rotary_qk: q must be (tokens..., heads, head_size)");
  XO_TRY(xo_check_last_dim_contiguous(q, op, "q"));
  XO_TRY(token_stride(q, op, "q", &tokens, &stride_qs));
  const int64_t head_size = q->shape[q->ndim - 1];
  if (k) {
    XO_TRY(check_companion(q, "q", k, op, "k", q->ndim));
    int same = k->shape[k->ndim - 1] == head_size;
    for (int i = 0; same && i + 2 < q->ndim; ++i) same = k->shape[i] == q->shape[i];
    if (!same)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "rotary_qk: k must be (tokens..., heads_k, head_size) with q's "
                     "tokens and head_size");
    XO_TRY(token_stride(k, op, "k", &tokens_k, &stride_ks));
  }
  XO_TRY(check_companion(q, "q", cos_sin_cache, op, "cos_sin_cache", 2));
  const int64_t rot_dim = cos_sin_cache->shape[1];
  if (rot_dim % 2 || rot_dim > head_size)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "rotary_qk: cos_sin_cache has %lld columns; it must be even and "
                   "at most head_size (%lld)", (long long)rot_dim, (long long)head_size);
  XO_TRY(xo_check_tensor(positions, op, "positions", q->ndim - 2));
  for (int i = 0; i + 2 < q->ndim; ++i)
    if (positions->shape[i] != q->shape[i])
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "rotary_qk: positions must have q's token dims");
  XO_TRY(check_index(q, positions, XOPSAOT_INT64, tokens, op, "positions"));
  const int64_t heads = q->shape[q->ndim - 2], heads_k = k ? k->shape[k->ndim - 2] : 0;
  if (heads > INT32_MAX || heads_k > INT32_MAX || head_size > INT32_MAX)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "rotary_qk: heads and head_size must be below 2^31");
  XO_TRY(xo_require_key(&xk_rotary_kernel, XK_ROTARY_KERNEL_KEY_T, q->dtype, "rotary_qk: dtype"));
  if (tokens == 0 || rot_dim == 0) return XOPSAOT_SUCCESS;
  const int64_t half = rot_dim / 2;
  const char *cache = (const char *)cos_sin_cache->data;
  xk_rotary_kernel_args args = {
      .X = q->data, .Y = q->data, .K = k ? k->data : q->data, .COS = cos_sin_cache->data,
      .SIN = (void *)(cache + half * xo_dtype_size(q->dtype)), .OFFSETS = positions->data,
      .POSITIONS = positions->data, .CU_SEQLENS = positions->data,
      .heads = (int32_t)heads, .heads_k = (int32_t)heads_k, .half = (int32_t)half, .tail_end = (int32_t)(2 * half),
      .n_pos = cos_sin_cache->shape[0], .offset = 0, .total = 0, .pos_mode = 2, .varlen = 0,
      .stride_xb = 0, .stride_xs = stride_qs, .stride_xh = q->strides[q->ndim - 2],
      .stride_yb = 0, .stride_ys = stride_qs, .stride_yh = q->strides[q->ndim - 2],
      .stride_ks = stride_ks, .stride_kh = k ? k->strides[k->ndim - 2] : 0, .stride_cs = cos_sin_cache->strides[0],
      .seqlen = tokens, .batch = 1};
  xk_rotary_kernel_keys keys = {q->dtype, is_neox == 0};
  return xo_launch(&xk_rotary_kernel, &keys.T, &args, q->device, stream);
}

xopsaot_status xopsaot_lrpe_cosine(const xopsaot_tensor *x, const xopsaot_tensor *theta, const xopsaot_tensor *out,
                                   int64_t offset, void *stream) {
  static const char op[] = "lrpe_cosine";
  XO_TRY(xo_check_tensor(x, op, "x", 4));
  XO_TRY(xo_check_last_dim_contiguous(x, op, "x"));
  XO_TRY(check_companion(x, "x", out, op, "out", 4));
  const int64_t heads = x->shape[2], head_dim = x->shape[3];
  int same = out->shape[3] == 2 * head_dim;
  for (int i = 0; same && i < 3; ++i) same = out->shape[i] == x->shape[i];
  if (!same)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "lrpe_cosine: out must be x's shape with its last dim doubled");
  XO_TRY(xo_check_tensor(theta, op, "theta", 2));
  XO_TRY(xo_check_dtype(theta, XOPSAOT_FLOAT32, op, "theta"));
  XO_TRY(xo_check_same_device(x, theta, op, "x", "theta"));
  XO_TRY(xo_check_last_dim_contiguous(theta, op, "theta"));
  if ((theta->shape[0] != heads && theta->shape[0] != 1) || (theta->shape[1] != head_dim && theta->shape[1] != 1))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "lrpe_cosine: theta has shape (%lld, %lld); it must broadcast to "
                   "(heads, head_dim) = (%lld, %lld)", (long long)theta->shape[0], (long long)theta->shape[1],
                   (long long)heads, (long long)head_dim);
  if (heads > INT32_MAX || head_dim > INT32_MAX / 2)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "lrpe_cosine: x's heads and head_dim are too large");
  XO_TRY(xo_require_key(&xk_lrpe_cosine_kernel, XK_LRPE_COSINE_KERNEL_KEY_T, x->dtype, "lrpe_cosine: dtype"));
  if (xo_numel(x) == 0) return XOPSAOT_SUCCESS;
  xk_lrpe_cosine_kernel_args args = {
      .X = x->data, .THETA = theta->data, .Y = out->data, .heads = (int32_t)heads, .head_dim = (int32_t)head_dim,
      .offset = offset, .stride_xb = x->strides[0], .stride_xs = x->strides[1], .stride_xh = x->strides[2],
      .stride_th = theta->shape[0] == 1 ? 0 : theta->strides[0],
      .stride_td = theta->shape[1] == 1 ? 0 : theta->strides[1], .stride_yb = out->strides[0],
      .stride_ys = out->strides[1], .stride_yh = out->strides[2], .seqlen = x->shape[1], .batch = x->shape[0]};
  xk_lrpe_cosine_kernel_keys keys = {x->dtype};
  return xo_launch(&xk_lrpe_cosine_kernel, &keys.T, &args, x->device, stream);
}
