/* The LM head's logits, chunk by chunk of rows (lm_head.h). */
#include "lm_head.h"

#include "xk_kernels.h"

xopsaot_status xo_check_vocabulary(int64_t n, const char *op, const char *what) {
  if (n < 1 || n > INT32_MAX)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: rows of %lld %s; a row must hold 1 to 2^31-1", op,
                   (long long)n, what);
  return XOPSAOT_SUCCESS;
}

xopsaot_status xo_lm_head_check(xo_lm_head *h, const char *op) {
  XO_TRY(xo_check_tensor(h->x, op, "x", -1));
  XO_TRY(xo_check_tensor(h->weight, op, "weight", 2));
  XO_TRY(xo_check_dtype(h->weight, h->x->dtype, op, "weight"));
  XO_TRY(xo_check_same_device(h->x, h->weight, op, "x", "weight"));
  XO_TRY(xo_check_last_dim_contiguous(h->weight, op, "weight"));
  XO_TRY(xo_rows(h->x, op, "x", &h->rows, &h->stride_x));
  h->hidden = h->x->shape[h->x->ndim - 1], h->vocab = h->weight->shape[0];
  if (h->weight->shape[1] != h->hidden)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: weight is (%lld, %lld) but x has %lld features", op,
                   (long long)h->vocab, (long long)h->weight->shape[1], (long long)h->hidden);
  XO_TRY(xo_check_vocabulary(h->vocab, op, "logits (weight's rows)"));
  if (h->bias) {
    XO_TRY(xo_check_tensor(h->bias, op, "bias", 1));
    XO_TRY(xo_check_dtype(h->bias, h->x->dtype, op, "bias"));
    XO_TRY(xo_check_same_device(h->x, h->bias, op, "x", "bias"));
    if (h->bias->shape[0] != h->vocab)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: bias must be (%lld,), got (%lld,)", op,
                     (long long)h->vocab, (long long)h->bias->shape[0]);
  }
  return XOPSAOT_SUCCESS;
}

xopsaot_status xo_lm_head_chunks(const xo_lm_head *h, int64_t chunk_rows, uint64_t extra_bytes, void **workspace,
                                 void **extra, xo_logits_consumer consume, void *ctx, void *stream) {
  const xopsaot_tensor *x = h->x;
  const int64_t elem = xo_dtype_size(x->dtype);
  int64_t chunk = chunk_rows ? chunk_rows : (int64_t)(XO_LOGITS_CHUNK_BYTES / (uint64_t)(h->vocab * elem));
  if (!chunk_rows && chunk >= 128) chunk -= chunk % 128; /* whole row tiles of the product */
  if (chunk < 1) chunk = 1;
  if (chunk > h->rows) chunk = h->rows;
  const uint64_t logits_bytes = ((uint64_t)(chunk * h->vocab * elem) + 255) & ~255ull;
  *workspace = NULL;
  if (logits_bytes + extra_bytes) XO_TRY(xo_workspace_alloc(x->device, stream, logits_bytes + extra_bytes, workspace));
  if (extra) *extra = extra_bytes ? (char *)*workspace + logits_bytes : NULL;
  xopsaot_tensor w_t = *h->weight; /* weight^T: (hidden, vocab), contiguous along hidden */
  w_t.shape[0] = h->hidden, w_t.shape[1] = h->vocab, w_t.strides[0] = 1, w_t.strides[1] = h->weight->strides[0];
  const xopsaot_gemm_options linear = {.alpha = 1.0f, .beta = 1.0f, .act = -1, .gate_act = -1};
  xopsaot_status st = XOPSAOT_SUCCESS;
  for (int64_t first = 0; first < h->rows && !st; first += chunk) {
    const int64_t rows = h->rows - first < chunk ? h->rows - first : chunk;
    xopsaot_tensor a = *x, logits;
    a.ndim = 2, a.data = (char *)x->data + first * h->stride_x * elem;
    a.shape[0] = rows, a.shape[1] = h->hidden, a.strides[0] = h->stride_x, a.strides[1] = 1;
    const int64_t shape[2] = {rows, h->vocab};
    xopsaot_tensor_contiguous(&logits, *workspace, 2, shape, x->dtype, x->device);
    st = h->bias ? xopsaot_gemm(&a, &w_t, NULL, h->bias, NULL, &logits, &linear, stream)
                 : xopsaot_matmul(&a, &w_t, &logits, stream); /* the plain product keeps fewer registers */
    if (!st) st = consume(ctx, *workspace, first, rows);
  }
  return st;
}
