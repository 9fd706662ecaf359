/* The softmax family over the last dim: softmax, log_softmax, logsumexp. */
#include "xk_kernels.h"

#define MAX_ROW (INT32_MAX - 65535) /* 2^31 - 65536 elements */
/* softmax_kernel holds rows of up to 8192 elements whole in registers (softmax and log_softmax also 16385-32768)
 * and loops over the others, reading x twice (the second time from L2 when the row is still there). On Hopper,
 * softmax and log_softmax rows past 8192 elements may be held in shared memory and read once: by a cluster of
 * programs per row (softmax_cluster_kernel, rows past 224 KB), else a program per row (softmax_held_kernel), where
 * their configs' `when` holds (kernels_src/softmax.py: the lengths, and the rows per multiprocessor where each read
 * faster than the loop). The kernels take the same arguments (kernels_src/softmax.py's ROW_LAUNCH), so one struct
 * serves them all; the other kernels' one key is the first. */
_Static_assert(sizeof(xk_softmax_held_kernel_args) == sizeof(xk_softmax_kernel_args),
               "softmax_kernel and softmax_held_kernel share their arguments");
_Static_assert(sizeof(xk_softmax_cluster_kernel_args) == sizeof(xk_softmax_kernel_args),
               "softmax_kernel and softmax_cluster_kernel share their arguments");

xopsaot_status xopsaot_softmax_family(const xopsaot_tensor *x, const xopsaot_tensor *out, int kind, void *stream) {
  static const char op[] = "softmax";
  int64_t rows, out_rows, stride_x, stride_y;
  if (kind < XOPSAOT_SOFTMAX || kind > XOPSAOT_LOGSUMEXP)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "softmax: kind is %d; supported: 0 (softmax), 1 (log_softmax), "
                   "2 (logsumexp)", kind);
  XO_TRY(xo_check_tensor(x, op, "x", -1));
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  XO_TRY(xo_check_dtype(out, x->dtype, op, "out"));
  XO_TRY(xo_check_same_device(x, out, op, "x", "out"));
  if (x->ndim < 1) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "softmax: x must have at least 1 dim");
  const int64_t n = x->shape[x->ndim - 1];
  rows = 0, stride_x = 0;
  if (xo_numel(x) > 0) XO_TRY(xo_rows(x, op, "x", &rows, &stride_x)); /* an empty x reads nothing */
  if (kind == XOPSAOT_LOGSUMEXP) { /* out: one value per row, contiguous, x's shape with its last dim dropped or 1 */
    const int kept = out->ndim == x->ndim;
    int same = (out->ndim == x->ndim - 1 || (kept && out->shape[out->ndim - 1] == 1));
    for (int i = 0; same && i + 1 < x->ndim; ++i) same = out->shape[i] == x->shape[i];
    if (!same || !xo_is_contiguous(out))
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "logsumexp: out must be contiguous, of x's shape with its last "
                     "dim dropped or 1");
    rows = xo_numel(out); /* also when n == 0: every row's logsumexp is then -inf */
    stride_y = 0;         /* the LSE variants write row by row; 0 keeps the aligned variants (1 would not be) */
  } else {
    XO_TRY(xo_check_same_shape(x, out, op, "x", "out"));
    if (xo_numel(x) == 0) return XOPSAOT_SUCCESS;
    XO_TRY(xo_rows(out, op, "out", &out_rows, &stride_y));
  }
  /* the looping kernel forms 32-bit offsets up to two steps (of at most 16384) past the row's end */
  if (n > MAX_ROW)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: rows of %lld elements are too long; at most %lld are supported",
                   op, (long long)n, (long long)MAX_ROW);
  XO_TRY(xo_require_key(&xk_softmax_kernel, XK_SOFTMAX_KERNEL_KEY_T, x->dtype, "softmax: dtype"));
  if (rows == 0) return XOPSAOT_SUCCESS;
  xk_softmax_kernel_args args = {.X = x->data, .Y = out->data, .stride_x = stride_x, .stride_y = stride_y,
                                 .n_cols = (int32_t)n, .mode = kind, .n_rows = rows};
  xk_softmax_kernel_keys keys = {x->dtype, kind == XOPSAOT_LOGSUMEXP};
  /* logsumexp reads its row once anyway. The Hopper configs' `when` holds only past the register rows; checking
   * that here first spares shorter rows two selections (0.1-0.3 us of host time a call on an H100, stop 43) */
  if (kind != XOPSAOT_LOGSUMEXP && n > XK_SOFTMAX_KERNEL_REGISTER_ROW) {
    if (xo_can_launch(&xk_softmax_cluster_kernel, &keys.T, &args, x->device))
      return xo_launch(&xk_softmax_cluster_kernel, &keys.T, &args, x->device, stream);
    if (xo_can_launch(&xk_softmax_held_kernel, &keys.T, &args, x->device))
      return xo_launch(&xk_softmax_held_kernel, &keys.T, &args, x->device, stream);
  }
  return xo_launch(&xk_softmax_kernel, &keys.T, &args, x->device, stream);
}

xopsaot_status xopsaot_softmax(const xopsaot_tensor *x, const xopsaot_tensor *out, void *stream) {
  return xopsaot_softmax_family(x, out, XOPSAOT_SOFTMAX, stream);
}
