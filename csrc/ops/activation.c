/* Activations: elementwise (relu, gelu, gelu tanh, silu, sigmoid, tanh) and gated (act(x[..., :d]) * x[..., d:]). */
#include "xk_kernels.h"

static xopsaot_status check_act(int act, const char *op) {
  if (act < XOPSAOT_ACT_RELU || act > XOPSAOT_ACT_TANH)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: act is %d; supported: 0 (relu) to 5 (tanh)", op, act);
  return XOPSAOT_SUCCESS;
}

xopsaot_status xopsaot_activation(const xopsaot_tensor *x, const xopsaot_tensor *out, int act, void *stream) {
  static const char op[] = "activation";
  XO_TRY(check_act(act, op));
  XO_TRY(xo_check_tensor(x, op, "x", -1));
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  XO_TRY(xo_check_same_shape(x, out, op, "x", "out"));
  XO_TRY(xo_check_dtype(out, x->dtype, op, "out"));
  XO_TRY(xo_check_same_device(x, out, op, "x", "out"));
  if (!xo_is_contiguous(x) || !xo_is_contiguous(out))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "activation: x and out must be contiguous");
  XO_TRY(xo_require_key(&xk_activation_kernel, XK_ACTIVATION_KERNEL_KEY_T, x->dtype, "activation: dtype"));
  if (xo_numel(x) == 0) return XOPSAOT_SUCCESS;
  xk_activation_kernel_args args = {.X = x->data, .Y = out->data, .n = xo_numel(x), .act = act};
  xk_activation_kernel_keys keys = {x->dtype, act == XOPSAOT_ACT_GELU};
  return xo_launch(&xk_activation_kernel, &keys.T, &args, x->device, stream);
}

xopsaot_status xopsaot_gated_activation(const xopsaot_tensor *x, const xopsaot_tensor *out, int act, void *stream) {
  static const char op[] = "gated_activation";
  int64_t rows, out_rows, stride_x, stride_y;
  XO_TRY(check_act(act, op));
  XO_TRY(xo_check_tensor(x, op, "x", -1));
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  XO_TRY(xo_rows(x, op, "x", &rows, &stride_x));
  XO_TRY(xo_rows(out, op, "out", &out_rows, &stride_y));
  XO_TRY(xo_check_dtype(out, x->dtype, op, "out"));
  XO_TRY(xo_check_same_device(x, out, op, "x", "out"));
  const int64_t width = x->shape[x->ndim - 1], d = width / 2;
  int same = out->ndim == x->ndim && out->shape[out->ndim - 1] == d && width % 2 == 0;
  for (int i = 0; same && i + 1 < x->ndim; ++i) same = out->shape[i] == x->shape[i];
  if (!same)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                   "gated_activation: x's last dim (%lld) must be even and out must be x's shape with half of it",
                   (long long)width);
  XO_TRY(xo_require_key(&xk_gated_activation_kernel, XK_GATED_ACTIVATION_KERNEL_KEY_T, x->dtype,
                        "gated_activation: dtype"));
  if (rows == 0 || d == 0) return XOPSAOT_SUCCESS;
  xk_gated_activation_kernel_args args = {
      .X = x->data, .Gate = (char *)x->data + d * xo_dtype_size(x->dtype), .Y = out->data,
      .stride_x = stride_x, .stride_y = stride_y, .d = d, .act = act, .n_rows = rows};
  xk_gated_activation_kernel_keys keys = {x->dtype};
  return xo_launch(&xk_gated_activation_kernel, &keys.T, &args, x->device, stream);
}
