/* flash_attn forward, flash-attn's (batch, seqlen, heads, headdim) layout. */
#include <math.h>

#include "xk_kernels.h"

/* Tile offsets inside the kernel are 32-bit: a sequence stride times a block of rows must fit. */
#define MAX_SEQ_STRIDE (1 << 23)

xopsaot_status xopsaot_flash_attn(const xopsaot_tensor *q, const xopsaot_tensor *k, const xopsaot_tensor *v,
                                  const xopsaot_tensor *out, float softmax_scale, int causal, void *stream) {
  static const char op[] = "flash_attn";
  const xopsaot_tensor *all[] = {q, k, v, out};
  const char *names[] = {"q", "k", "v", "out"};
  for (int i = 0; i < 4; ++i) {
    XO_TRY(xo_check_tensor(all[i], op, names[i], 4));
    XO_TRY(xo_check_last_dim_contiguous(all[i], op, names[i]));
    XO_TRY(xo_check_dtype(all[i], q->dtype, op, names[i]));
    XO_TRY(xo_check_same_device(q, all[i], op, "q", names[i]));
    if (all[i]->strides[1] > MAX_SEQ_STRIDE || all[i]->strides[1] < 0)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "flash_attn: %s's sequence stride %lld is above %d", names[i],
                     (long long)all[i]->strides[1], MAX_SEQ_STRIDE);
  }
  XO_TRY(xo_check_same_shape(q, out, op, "q", "out"));
  XO_TRY(xo_check_same_shape(k, v, op, "k", "v"));
  const int64_t batch = q->shape[0], seqlen_q = q->shape[1], heads = q->shape[2], dim = q->shape[3];
  const int64_t seqlen_k = k->shape[1], heads_k = k->shape[2];
  if (k->shape[0] != batch)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "flash_attn: k has batch %lld but q has batch %lld",
                   (long long)k->shape[0], (long long)batch);
  if (k->shape[3] != dim)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "flash_attn: k has headdim %lld but q has headdim %lld",
                   (long long)k->shape[3], (long long)dim);
  if (heads_k == 0 || heads % heads_k)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                   "flash_attn: the heads of q (%lld) must be a multiple of the heads of k and v (%lld)",
                   (long long)heads, (long long)heads_k);
  if (seqlen_q > INT32_MAX || seqlen_k > INT32_MAX)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "flash_attn: sequence lengths above 2^31-1 are not supported");
  if (heads > 65535 || batch > 65535)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "flash_attn: batch and heads must each be at most 65535");
  if (!isfinite(softmax_scale))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "flash_attn: softmax_scale must be finite, got %g", softmax_scale);
  XO_TRY(xo_require_key(&xk_flash_attn_fwd, XK_FLASH_ATTN_FWD_KEY_T, q->dtype, "flash_attn: dtype"));
  const int32_t head_dim = dim <= INT32_MAX ? (int32_t)dim : -1;
  XO_TRY(xo_require_key(&xk_flash_attn_fwd, XK_FLASH_ATTN_FWD_KEY_HEAD_DIM, head_dim, "flash_attn: head dim"));
  xk_flash_attn_fwd_args args = {
      q->data, k->data, v->data, out->data,
      q->strides[0], q->strides[2], (int32_t)q->strides[1],
      k->strides[0], k->strides[2], (int32_t)k->strides[1],
      v->strides[0], v->strides[2], (int32_t)v->strides[1],
      out->strides[0], out->strides[2], (int32_t)out->strides[1],
      (int32_t)seqlen_q, (int32_t)seqlen_k, (int32_t)(heads / heads_k),
      softmax_scale * 1.4426950408889634f, /* log2(e): the kernel works in base 2 */
      (int32_t)heads, (int32_t)batch};
  xk_flash_attn_fwd_keys keys = {q->dtype, head_dim, causal != 0};
  return xo_launch(&xk_flash_attn_fwd, &keys.T, &args, q->device, stream);
}
