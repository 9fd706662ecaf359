/* rms_norm, with the optional fused residual add. */
#include "xk_kernels.h"

xopsaot_status xopsaot_rms_norm(const xopsaot_tensor *x, const xopsaot_tensor *weight,
                                const xopsaot_tensor *residual, const xopsaot_tensor *out,
                                const xopsaot_tensor *residual_out, float eps, void *stream) {
  static const char op[] = "rms_norm";
  int64_t rows, n, stride_x, stride_y, stride_r = 0, stride_h = 0, r_rows, h_rows, y_rows;
  XO_TRY(xo_check_tensor(x, op, "x", -1));
  XO_TRY(xo_check_tensor(weight, op, "weight", 1));
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  XO_TRY(xo_rows(x, op, "x", &rows, &stride_x));
  XO_TRY(xo_check_same_shape(x, out, op, "x", "out"));
  XO_TRY(xo_rows(out, op, "out", &y_rows, &stride_y));
  n = x->shape[x->ndim - 1];
  if (weight->shape[0] != n)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "rms_norm: weight has %lld elements but x's last dim is %lld",
                   (long long)weight->shape[0], (long long)n);
  XO_TRY(xo_check_last_dim_contiguous(weight, op, "weight"));
  if ((residual == NULL) != (residual_out == NULL))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "rms_norm: residual and residual_out go together");
  const xopsaot_tensor *all[] = {weight, out, residual, residual_out};
  const char *names[] = {"weight", "out", "residual", "residual_out"};
  for (int i = 0; i < 4 && all[i]; ++i) {
    XO_TRY(xo_check_dtype(all[i], x->dtype, op, names[i]));
    XO_TRY(xo_check_same_device(x, all[i], op, "x", names[i]));
  }
  if (residual) {
    XO_TRY(xo_check_tensor(residual, op, "residual", -1));
    XO_TRY(xo_check_tensor(residual_out, op, "residual_out", -1));
    XO_TRY(xo_check_same_shape(x, residual, op, "x", "residual"));
    XO_TRY(xo_check_same_shape(x, residual_out, op, "x", "residual_out"));
    XO_TRY(xo_rows(residual, op, "residual", &r_rows, &stride_r));
    XO_TRY(xo_rows(residual_out, op, "residual_out", &h_rows, &stride_h));
  }
  if (n > INT32_MAX) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "rms_norm: rows of %lld elements are too long", (long long)n);
  if (!(eps >= 0.0f)) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "rms_norm: eps must be >= 0, got %g", eps);
  XO_TRY(xo_require_key(&xk_rms_norm_kernel, XK_RMS_NORM_KERNEL_KEY_T, x->dtype, "rms_norm: dtype"));
  if (n == 0) return XOPSAOT_SUCCESS;
  xk_rms_norm_kernel_args args = {
      x->data, weight->data, residual ? residual->data : x->data, out->data,
      residual_out ? residual_out->data : out->data, stride_x, stride_r, stride_y, stride_h, (int32_t)n, eps, rows};
  xk_rms_norm_kernel_keys keys = {x->dtype, residual != NULL};
  return xo_launch(&xk_rms_norm_kernel, &keys.T, &args, x->device, stream);
}
