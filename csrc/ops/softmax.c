/* softmax over the last dim. */
#include "xk_kernels.h"

xopsaot_status xopsaot_softmax(const xopsaot_tensor *x, const xopsaot_tensor *out, void *stream) {
  static const char op[] = "softmax";
  int64_t rows, out_rows, stride_x, stride_y;
  XO_TRY(xo_check_tensor(x, op, "x", -1));
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  XO_TRY(xo_check_same_shape(x, out, op, "x", "out"));
  XO_TRY(xo_check_dtype(out, x->dtype, op, "out"));
  XO_TRY(xo_check_same_device(x, out, op, "x", "out"));
  XO_TRY(xo_rows(x, op, "x", &rows, &stride_x));
  XO_TRY(xo_rows(out, op, "out", &out_rows, &stride_y));
  int64_t n = x->shape[x->ndim - 1];
  if (n > INT32_MAX) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "softmax: rows of %lld elements are too long", (long long)n);
  XO_TRY(xo_require_key(&xk_softmax_kernel, XK_SOFTMAX_KERNEL_KEY_T, x->dtype, "softmax: dtype"));
  if (n == 0) return XOPSAOT_SUCCESS;
  xk_softmax_kernel_args args = {x->data, out->data, stride_x, stride_y, (int32_t)n, rows};
  xk_softmax_kernel_keys keys = {x->dtype};
  return xo_launch(&xk_softmax_kernel, &keys.T, &args, x->device, stream);
}
