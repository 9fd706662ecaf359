/* dropout: out = x * keep / (1 - p) with Philox4x32-10 keep decisions (kernels_src/dropout.py). */
#include "xk_kernels.h"

xopsaot_status xopsaot_dropout(const xopsaot_tensor *x, const xopsaot_tensor *out, float p, int64_t seed,
                               int64_t offset, void *stream) {
  static const char op[] = "dropout";
  XO_TRY(xo_check_tensor(x, op, "x", -1));
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  XO_TRY(xo_check_same_shape(x, out, op, "x", "out"));
  XO_TRY(xo_check_dtype(out, x->dtype, op, "out"));
  XO_TRY(xo_check_same_device(x, out, op, "x", "out"));
  if (xo_numel(x) > 0 && (!xo_is_contiguous(x) || !xo_is_contiguous(out)))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "dropout: x and out must be contiguous");
  if (!(p >= 0.0f && p <= 1.0f)) /* also refuses NaN */
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "dropout: p is %g; it must be in [0, 1]", (double)p);
  if (offset < 0) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "dropout: offset is %lld; it must be >= 0",
                                 (long long)offset);
  XO_TRY(xo_require_key(&xk_dropout_kernel, XK_DROPOUT_KERNEL_KEY_T, x->dtype, "dropout: dtype"));
  if (xo_numel(x) == 0) return XOPSAOT_SUCCESS;
  xk_dropout_kernel_args args = {.X = x->data, .Y = out->data, .n = xo_numel(x), .p = p,
                                 .scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f, .seed = seed, .offset = offset};
  xk_dropout_kernel_keys keys = {x->dtype};
  return xo_launch(&xk_dropout_kernel, &keys.T, &args, x->device, stream);
}
