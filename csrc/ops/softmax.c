/* The softmax family over the last dim: softmax, log_softmax, logsumexp. */
#include "xk_kernels.h"

#define MAX_ROW (INT32_MAX - 65535) /* 2^31 - 65536 elements */
/* softmax_kernel holds rows of up to REGISTER_ROW elements whole in registers and loops over longer ones, reading
 * x twice (the second time from L2 when the row is still there). On Hopper, softmax_held_kernel copies rows of up to
 * HELD_BYTES (plus TAIL_BYTES in registers: 131072 16-bit elements, 65536 float32; its configs' `when` bound the
 * length, kernels_src/softmax.py) into shared memory and reads x once: H100, bf16, 4096 x 8208 2.32 -> 2.80 TB/s,
 * 4096 x 32000 2.56-2.68 -> 2.92, 1024 x 100000 2.35 -> 2.74 (softmax). With fewer than HELD_ROWS_PER_SM rows per
 * multiprocessor its programs load, reduce and store in lockstep with nothing to overlap, and the loop wins: 132 x
 * 100000 1.92 against 2.49, 264 x 50304 2.27 against 2.69; 528 rows of either length gained 1-7%
 * (h100-2026-11-26-experiments.md, stop 31).
 * Rows past HELD_BYTES, which the held kernel takes one program per multiprocessor, go to softmax_cluster_kernel
 * instead: a cluster of 4 or 8 programs per row, each holding a share of up to 64 KB, three to a multiprocessor (rows
 * of up to 262144 16-bit elements, 131072 float32). It takes
 * - rows of the held kernel's register tail from CLUSTER_ROWS_PER_SM up to TAIL_ROWS_PER_SM rows per multiprocessor
 *   (H100, bf16 x 128256, softmax / log_softmax TB/s: 1024 rows 2.65 / 2.66 -> 2.74 / 2.81); the loop reads faster
 *   below (132 rows: 2.50 against 2.18), the held kernel's tail as fast from TAIL_ROWS_PER_SM (2112 rows: 2.82);
 * - rows past the held kernel's reach from one row per multiprocessor where each share holds at least
 *   CLUSTER_SHARE_BYTES (bf16 x 256000: 2.06-2.19 -> 2.44-2.82; float32 512 x 131072: 2.19 -> 2.83); shares of
 *   35 KB (bf16 x 140000) read 10-17% below the loop (h100-2026-11-27-experiments.md, stop 40).
 * The kernels take the same arguments (kernels_src/softmax.py's ROW_LAUNCH), so one struct serves them all; the
 * other kernels' one key is the first. */
#define REGISTER_ROW 8192
#define HELD_ROWS_PER_SM 4
#define HELD_BYTES (224 * 1024)
#define TAIL_BYTES (32 * 1024)
#define CLUSTER_ROWS_PER_SM 4
#define TAIL_ROWS_PER_SM 16
#define CLUSTER_SHARE_BYTES (48 * 1024)
#define LARGEST_CLUSTER 8
_Static_assert(sizeof(xk_softmax_held_kernel_args) == sizeof(xk_softmax_kernel_args),
               "softmax_kernel and softmax_held_kernel share their arguments");
_Static_assert(sizeof(xk_softmax_cluster_kernel_args) == sizeof(xk_softmax_kernel_args),
               "softmax_kernel and softmax_cluster_kernel share their arguments");

/* Whether softmax_cluster_kernel takes `rows` rows of `bytes` bytes (see above). */
static int takes_clusters(int64_t rows, int64_t bytes, int sm_count) {
  if (bytes <= HELD_BYTES) return 0;
  if (bytes > HELD_BYTES + TAIL_BYTES) return bytes >= LARGEST_CLUSTER * CLUSTER_SHARE_BYTES && rows >= sm_count;
  return rows >= (int64_t)CLUSTER_ROWS_PER_SM * sm_count && rows < (int64_t)TAIL_ROWS_PER_SM * sm_count;
}

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
  if (kind != XOPSAOT_LOGSUMEXP && n > REGISTER_ROW) { /* logsumexp reads its row once anyway */
    int sm_count = 0;
    XO_TRY(xo_device_sm_count(x->device, &sm_count));
    if (takes_clusters(rows, n * xo_dtype_size(x->dtype), sm_count) &&
        xo_can_launch(&xk_softmax_cluster_kernel, &keys.T, &args, x->device))
      return xo_launch(&xk_softmax_cluster_kernel, &keys.T, &args, x->device, stream);
    if (rows >= (int64_t)HELD_ROWS_PER_SM * sm_count &&
        xo_can_launch(&xk_softmax_held_kernel, &keys.T, &args, x->device))
      return xo_launch(&xk_softmax_held_kernel, &keys.T, &args, x->device, stream);
  }
  return xo_launch(&xk_softmax_kernel, &keys.T, &args, x->device, stream);
}

xopsaot_status xopsaot_softmax(const xopsaot_tensor *x, const xopsaot_tensor *out, void *stream) {
  return xopsaot_softmax_family(x, out, XOPSAOT_SOFTMAX, stream);
}
