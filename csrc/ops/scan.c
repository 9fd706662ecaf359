/* Scans along one dim (kernels_src/scan.py): cumsum (reversed, or restarting at varlen boundaries) and logcumsumexp. */
#include "xk_kernels.h"

/* Few programs along the scan dim leave the GPU idle while each walks its whole line: below
 * SCAN_CHUNK_BELOW_PER_SM programs per multiprocessor the scan dim is split into chunks for about
 * SCAN_PROGRAMS_PER_SM, each at least SCAN_MIN_CHUNK positions (SCAN_MIN_ROW_CHUNK along the last dim, whose blocks
 * are 2048 long), and a multiple of 16 (kernels_src/scan.py hints it). SCAN_LANES is the lane tile's BLOCK_I
 * (scan_kernel's export). cumsum over lanes has a wider tile of its own (SCAN_CUMSUM_LANES) and more, shorter
 * chunks, which read faster though each program then sums more chunk totals (along dim 0 of 4096 x 4096 bf16 on an
 * H100, Triton's JIT: 16 chunks of 256 0.78, 64 of 64 1.45 TB/s; benchmarks/experiments/scan_lines.py). */
#define SCAN_CHUNK_BELOW_PER_SM 2
#define SCAN_PROGRAMS_PER_SM 4
#define SCAN_MIN_CHUNK 256
#define SCAN_MIN_ROW_CHUNK 4096
#define SCAN_LANES XK_SCAN_KERNEL_LANES
#define SCAN_CUMSUM_PROGRAMS_PER_SM 8
#define SCAN_MIN_CUMSUM_CHUNK 64
#define SCAN_CUMSUM_LANES XK_SCAN_KERNEL_CUMSUM_LANES

/* The parts the scan dim of n positions is split into, and their length (*chunk). */
static int64_t scan_parts(int64_t segments, int64_t n, int64_t inner, int op, int sm_count, int64_t *chunk) {
  const int cumsum_lanes = inner > 1 && op == XOPSAOT_SCAN_CUMSUM;
  const int64_t lanes = cumsum_lanes ? SCAN_CUMSUM_LANES : SCAN_LANES;
  const int64_t programs = segments * (inner == 1 ? 1 : (inner + lanes - 1) / lanes);
  const int64_t min_chunk = inner == 1 ? SCAN_MIN_ROW_CHUNK : cumsum_lanes ? SCAN_MIN_CUMSUM_CHUNK : SCAN_MIN_CHUNK;
  const int64_t per_sm = cumsum_lanes ? SCAN_CUMSUM_PROGRAMS_PER_SM : SCAN_PROGRAMS_PER_SM;
  int64_t parts = 1;
  if (programs < (int64_t)SCAN_CHUNK_BELOW_PER_SM * sm_count && n >= 2 * min_chunk) {
    const int64_t want = (per_sm * sm_count + programs - 1) / programs;
    parts = want < n / min_chunk ? want : n / min_chunk;
  }
  *chunk = xo_round_up((n + parts - 1) / parts, 16);
  return (n + *chunk - 1) / *chunk;
}

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
  const int64_t segments = cu_seqlens ? batch + 1 : outer;
  int sm_count = 0;
  XO_TRY(xo_device_sm_count(x->device, &sm_count));
  int64_t chunk;
  const int64_t parts = scan_parts(segments, n, inner, op, sm_count, &chunk);
  /* the lanes' row pitch, hinted where a multiple of 8; unused along the last dim, whose hints it must not cost */
  const int64_t pitch = inner == 1 ? 16 : inner;
  void *totals = NULL; /* (segments, parts, inner) chunk totals: float32 (two planes for logcumsumexp) or int64 */
  if (parts > 1) {
    const uint64_t planes = op == XOPSAOT_SCAN_LOGCUMSUMEXP ? 2 : 1, size = floating ? sizeof(float) : sizeof(int64_t);
    XO_TRY(xo_workspace_alloc(x->device, stream, (uint64_t)(segments * parts * inner) * planes * size, &totals));
    xk_scan_totals_kernel_args sums = {.X = x->data, .CU = cu_seqlens ? cu_seqlens->data : x->data, .W = totals,
                                       .n = n, .inner = inner, .pitch = pitch, .batch = (int32_t)batch,
                                       .varlen = cu_seqlens != NULL, .reverse = reverse != 0, .op = op, .chunk = chunk,
                                       .segments = segments, .parts = parts};
    xk_scan_totals_kernel_keys sums_keys = {x->dtype};
    xopsaot_status st = xo_launch(&xk_scan_totals_kernel, &sums_keys.T, &sums, x->device, stream);
    if (st) {
      xo_workspace_free(x->device, stream, totals);
      return st;
    }
  }
  xk_scan_kernel_args args = {.X = x->data, .Y = out->data, .CU = cu_seqlens ? cu_seqlens->data : x->data,
                              .W = totals ? totals : x->data, .n = n, .inner = inner, .pitch = pitch,
                              .batch = (int32_t)batch, .varlen = cu_seqlens != NULL, .reverse = reverse != 0, .op = op,
                              .chunk = chunk, .segments = segments, .parts = parts};
  xk_scan_kernel_keys keys = {x->dtype, out->dtype, parts > 1};
  xopsaot_status st = xo_launch(&xk_scan_kernel, &keys.T, &args, x->device, stream);
  xo_workspace_free(x->device, stream, totals);
  return st;
}
