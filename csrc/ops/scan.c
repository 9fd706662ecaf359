/* Scans along one dim (kernels_src/scan.py): cumsum (reversed, or restarting at varlen boundaries) and logcumsumexp. */
#include "xk_kernels.h"

xopsaot_status xopsaot_scan(const xopsaot_tensor *x, const xopsaot_tensor *out, const xopsaot_tensor *cu_seqlens,
                            int dim, int op, int reverse, void *stream) {
  const char *name = op == XOPSAOT_SCAN_LOGCUMSUMEXP ? "logcumsumexp" : "cumsum";
  if (op != XOPSAOT_SCAN_CUMSUM && op != XOPSAOT_SCAN_LOGCUMSUMEXP)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "scan: op is %d; supported: 0 (cumsum), 1 (logcumsumexp)", op);
  XO_TRY(xo_check_tensor(x, name, "x", -1));
  XO_TRY(xo_check_tensor(out, name, "out", -1));
  XO_TRY(xo_check_same_shape(x, out, name, "x", "out"));
  XO_TRY(xo_check_same_device(x, out, name, "x", "out"));
  const int floating = x->dtype == XOPSAOT_FLOAT16 || x->dtype == XOPSAOT_BFLOAT16 || x->dtype == XOPSAOT_FLOAT32;
  const int integer = x->dtype == XOPSAOT_INT32 || x->dtype == XOPSAOT_INT64 || x->dtype == XOPSAOT_BOOL;
  if (!floating && !(integer && op == XOPSAOT_SCAN_CUMSUM))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: dtype %s is not supported; supported: float16, bfloat16, "
                   "float32%s", name, xo_dtype_name(x->dtype), op == XOPSAOT_SCAN_CUMSUM ? ", int32, int64, bool" : "");
  XO_TRY(xo_check_dtype(out, floating ? x->dtype : XOPSAOT_INT64, name, "out"));
  const int ndim = x->ndim ? x->ndim : 1;
  if (dim < -ndim || dim >= ndim)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: dim %d is out of range for %d dims", name, dim, x->ndim);
  if (dim < 0) dim += ndim;
  int64_t outer = 1, n = x->ndim ? x->shape[dim] : 1, inner = 1;
  for (int i = 0; i < x->ndim; ++i) {
    if (i < dim) outer *= x->shape[i];
    if (i > dim) inner *= x->shape[i];
  }
  int64_t batch = 0;
  if (cu_seqlens) {
    XO_TRY(xo_check_tensor(cu_seqlens, name, "cu_seqlens", 1));
    XO_TRY(xo_check_dtype(cu_seqlens, XOPSAOT_INT32, name, "cu_seqlens"));
    XO_TRY(xo_check_same_device(cu_seqlens, x, name, "cu_seqlens", "x"));
    if (dim != 0 || cu_seqlens->shape[0] < 1 || !xo_is_contiguous(cu_seqlens))
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: cu_seqlens needs dim 0 and a contiguous (batch + 1,) "
                     "tensor", name);
    batch = cu_seqlens->shape[0] - 1;
  }
  if (xo_numel(x) == 0) return XOPSAOT_SUCCESS;
  if (!xo_is_contiguous(x) || !xo_is_contiguous(out))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: x and out must be contiguous", name);
  xk_scan_kernel_args args = {.X = x->data, .Y = out->data, .CU = cu_seqlens ? cu_seqlens->data : x->data,
                              .n = n, .inner = inner, .batch = (int32_t)batch, .varlen = cu_seqlens != NULL,
                              .reverse = reverse != 0, .op = op, .segments = cu_seqlens ? batch + 1 : outer};
  xk_scan_kernel_keys keys = {x->dtype, out->dtype};
  return xo_launch(&xk_scan_kernel, &keys.T, &args, x->device, stream);
}
