/* Elementwise ops: add. */
#include "xk_kernels.h"

xopsaot_status xopsaot_add(const xopsaot_tensor *a, const xopsaot_tensor *b, const xopsaot_tensor *out,
                           void *stream) {
  static const char op[] = "add";
  XO_TRY(xo_check_tensor(a, op, "a", -1));
  XO_TRY(xo_check_tensor(b, op, "b", -1));
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  XO_TRY(xo_check_same_shape(a, b, op, "a", "b"));
  XO_TRY(xo_check_same_shape(a, out, op, "a", "out"));
  XO_TRY(xo_check_dtype(b, a->dtype, op, "b"));
  XO_TRY(xo_check_dtype(out, a->dtype, op, "out"));
  XO_TRY(xo_check_same_device(a, b, op, "a", "b"));
  XO_TRY(xo_check_same_device(a, out, op, "a", "out"));
  if (!xo_is_contiguous(a) || !xo_is_contiguous(b) || !xo_is_contiguous(out))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "add: a, b and out must be contiguous");
  XO_TRY(xo_require_key(&xk_add_kernel, XK_ADD_KERNEL_KEY_T, a->dtype, "add: dtype"));
  xk_add_kernel_args args = {a->data, b->data, out->data, xo_numel(a)};
  xk_add_kernel_keys keys = {a->dtype};
  return xo_launch(&xk_add_kernel, &keys.T, &args, a->device, stream);
}
