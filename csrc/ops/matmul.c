/* matmul: (M, K) or (B, M, K) @ (K, N) or (B, K, N). */
#include "xk_kernels.h"

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
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "matmul: dims above 2^31-1 are not supported");
  if (a->strides[a->ndim - 1] != 1 && k > 1)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "matmul: a must be contiguous along its last dim");
  /* b is read along N (row-major) or along K (a transposed weight) */
  const int64_t b_stride_k = b->strides[b->ndim - 2], b_stride_n = b->strides[b->ndim - 1];
  int k_contiguous;
  if (b_stride_n == 1 || n == 1)
    k_contiguous = 0;
  else if (b_stride_k == 1 || k == 1)
    k_contiguous = 1;
  else
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "matmul: b must be contiguous along one of its last two dims");
  XO_TRY(xo_require_key(&xk_matmul_kernel, XK_MATMUL_KERNEL_KEY_T, a->dtype, "matmul: dtype"));
  xk_matmul_kernel_args args = {
      a->data, b->data, out->data, (int32_t)m, (int32_t)n, (int32_t)k,
      batch_a > 1 ? a->strides[0] : 0, a->strides[a->ndim - 2],
      batch_b > 1 ? b->strides[0] : 0, k_contiguous ? b_stride_n : b_stride_k,
      out_ndim == 3 ? out->strides[0] : 0, out->strides[out_ndim - 2], batch};
  xk_matmul_kernel_keys keys = {a->dtype, k_contiguous};
  return xo_launch(&xk_matmul_kernel, &keys.T, &args, a->device, stream);
}
