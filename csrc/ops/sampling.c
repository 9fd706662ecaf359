/* Sampling one token per row of logits (kernels_src/sampling.py), and after the LM head (linear_sample), whose logits
 * are computed chunk by chunk of rows into a workspace. */
#include "lm_head.h"
#include "xk_kernels.h"

static xopsaot_status check_per_row(const xopsaot_tensor *t, int32_t dtype, int64_t rows, const xopsaot_tensor *like,
                                    const char *op, const char *name) {
  if (!t) return XOPSAOT_SUCCESS;
  XO_TRY(xo_check_tensor(t, op, name, -1));
  XO_TRY(xo_check_dtype(t, dtype, op, name));
  XO_TRY(xo_check_same_device(like, t, op, "logits", name));
  if (xo_numel(t) != rows || !xo_is_contiguous(t))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s must be contiguous with one value per row (%lld), got %lld",
                   op, name, (long long)rows, (long long)xo_numel(t));
  return XOPSAOT_SUCCESS;
}

static xopsaot_status check_sampling(const xopsaot_tensor *like, int64_t rows, const xopsaot_tensor *temperatures,
                                     const xopsaot_tensor *top_ks, const xopsaot_tensor *top_ps,
                                     const xopsaot_tensor *out, const xopsaot_sample_options *o, const char *op) {
  if (!o) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: options is NULL", op);
  if (!(o->temperature >= 0.0f && o->temperature < 1e30f))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: temperature is %g; it must be finite and >= 0", op,
                   (double)o->temperature);
  if (o->top_k < 0)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: top_k is %d; it must be >= 0 (0: no limit)", op, o->top_k);
  if (!(o->top_p > 0.0f && o->top_p <= 1.0f))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: top_p is %g; it must be in (0, 1]", op, (double)o->top_p);
  if (o->offset < 0)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: offset is %lld; it must be >= 0", op, (long long)o->offset);
  XO_TRY(check_per_row(temperatures, XOPSAOT_FLOAT32, rows, like, op, "temperatures"));
  XO_TRY(check_per_row(top_ks, XOPSAOT_INT32, rows, like, op, "top_ks"));
  XO_TRY(check_per_row(top_ps, XOPSAOT_FLOAT32, rows, like, op, "top_ps"));
  XO_TRY(check_per_row(out, XOPSAOT_INT64, rows, like, op, "out"));
  if (rows > INT32_MAX) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: more than 2^31-1 rows", op);
  return XOPSAOT_SUCCESS;
}

/* Rows no filter touches (greedy, or neither top_k nor top_p), at most one per two multiprocessors, are split into
 * chunks of one CHUNK_BLOCK step, a program each, which write their best score and token to a workspace; then one
 * program per row picks (kernels_src/sampling.py). One program per row walks the row: 68 us per row of 128256 bf16
 * logits on an H100 at any batch up to one row per multiprocessor (61 since stop 47). Split: 8.9 us at batch 1, 10.8
 * at 8, 39.6 at 64, but 75.8 at 131 and 78 at 132, where the whole rows' one wave reads 69
 * (benchmarks/experiments/sample_chunks.py, h100-2026-11-27-experiments.md, stop 45). */
#define CHUNK_BLOCK XK_SAMPLE_CHUNKS_KERNEL_BLOCK

static int unfiltered(int64_t n, const xopsaot_tensor *temperatures, const xopsaot_tensor *top_ks,
                      const xopsaot_tensor *top_ps, const xopsaot_sample_options *o) {
  if (!temperatures && o->temperature == 0.0f) return 1; /* greedy: top_k and top_p are ignored */
  return !top_ks && !top_ps && (o->top_k == 0 || o->top_k >= n) && o->top_p >= 1.0f;
}

/* At most one row per two multiprocessors, each row at least two chunks long. (A device that cannot be asked says
 * no here, and the row kernel's launch reports why.) */
static int chunked(int64_t rows, int64_t n, int device) {
  int sm_count = 0;
  return xo_device_sm_count(device, &sm_count) == XOPSAOT_SUCCESS && 2 * rows <= sm_count && n > CHUNK_BLOCK;
}

static xopsaot_status launch_chunks(void *logits, int32_t dtype, int64_t stride, int64_t rows, int64_t n,
                                    int64_t first, const xopsaot_tensor *temperatures, const xopsaot_tensor *out,
                                    const xopsaot_sample_options *o, int device, void *stream) {
  const int64_t chunks = (n + CHUNK_BLOCK - 1) / CHUNK_BLOCK;
  void *workspace = NULL; /* float32 scores, then int32 tokens, rows x chunks each */
  XO_TRY(xo_workspace_alloc(device, stream, (uint64_t)(rows * chunks) * 8, &workspace));
  float *scores = workspace;
  int32_t *tokens = (int32_t *)(scores + rows * chunks);
  xk_sample_chunks_kernel_args args = {
      .Logits = logits, .Scores = scores, .Tokens = tokens,
      .Temperatures = temperatures ? (float *)temperatures->data + first : NULL,
      .stride_x = rows > 1 ? stride : n, .n = (int32_t)n, .chunks = (int32_t)chunks,
      .temperature = o->temperature, .per_row_temperature = temperatures != NULL, .seed = o->seed,
      .offset = o->offset, .first_row = (int32_t)first, .n_rows = rows};
  xk_sample_chunks_kernel_keys keys = {.T = dtype};
  xopsaot_status st = xo_launch(&xk_sample_chunks_kernel, &keys.T, &args, device, stream);
  if (!st) {
    xk_sample_pick_kernel_args pick = {.Scores = scores, .Tokens = tokens, .Out = (int64_t *)out->data + first,
                                       .chunks = (int32_t)chunks, .n_rows = rows};
    xk_sample_pick_kernel_keys pick_keys = {.S = XOPSAOT_FLOAT32};
    st = xo_launch(&xk_sample_pick_kernel, &pick_keys.S, &pick, device, stream);
  }
  xo_workspace_free(device, stream, workspace);
  return st;
}

/* The arguments sample_kernel and sample_cluster_kernel share, from launch()'s parameters. */
#define ROW_ARGUMENTS                                                                                                \
  .Logits = logits, .Out = (int64_t *)out->data + first,                                                           \
  .Temperatures = temperatures ? (float *)temperatures->data + first : NULL,                                       \
  .TopKs = top_ks ? (int32_t *)top_ks->data + first : NULL, .TopPs = top_ps ? (float *)top_ps->data + first : NULL, \
  .stride_x = rows > 1 ? stride : n, .n = (int32_t)n, .temperature = o->temperature, .top_k = o->top_k,            \
  .top_p = o->top_p, .per_row_temperature = temperatures != NULL, .per_row_top_k = top_ks != NULL,                 \
  .per_row_top_p = top_ps != NULL, .seed = o->seed, .offset = o->offset, .first_row = (int32_t)first, .n_rows = rows

static xopsaot_status launch(void *logits, int32_t dtype, int64_t stride, int64_t rows, int64_t n, int64_t first,
                             const xopsaot_tensor *temperatures, const xopsaot_tensor *top_ks,
                             const xopsaot_tensor *top_ps, const xopsaot_tensor *out, const xopsaot_sample_options *o,
                             int device, void *stream) {
  if (rows == 0) return XOPSAOT_SUCCESS;
  if (unfiltered(n, temperatures, top_ks, top_ps, o) && chunked(rows, n, device))
    return launch_chunks(logits, dtype, stride, rows, n, first, temperatures, out, o, device, stream);
  xk_sample_kernel_keys keys = {.T = dtype};
  /* Few rows longer than one sample_kernel step (its config's `when`): a thread-block cluster a row holds the row in
   * its programs' registers, and each bisection step sums their counts or masses through a workspace, where one
   * program per row reads the whole row from L2 each step (kernels_src/sampling.py). */
  xk_sample_cluster_kernel_args cluster = {ROW_ARGUMENTS};
  if (xo_can_launch(&xk_sample_cluster_kernel, &keys.T, &cluster, device)) {
    XO_TRY(xo_workspace_alloc(device, stream, (uint64_t)rows * 4 * XK_SAMPLE_CLUSTER_KERNEL_CLUSTER * sizeof(float),
                              &cluster.W));
    xopsaot_status st = xo_launch(&xk_sample_cluster_kernel, &keys.T, &cluster, device, stream);
    xo_workspace_free(device, stream, cluster.W);
    return st;
  }
  xk_sample_kernel_args args = {ROW_ARGUMENTS};
  return xo_launch(&xk_sample_kernel, &keys.T, &args, device, stream);
}

xopsaot_status xopsaot_sample(const xopsaot_tensor *logits, const xopsaot_tensor *temperatures,
                              const xopsaot_tensor *top_ks, const xopsaot_tensor *top_ps, const xopsaot_tensor *out,
                              const xopsaot_sample_options *options, void *stream) {
  static const char op[] = "sample";
  XO_TRY(xo_check_tensor(logits, op, "logits", -1));
  if (logits->ndim < 1) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "sample: logits must have at least 1 dim");
  const int64_t n = logits->shape[logits->ndim - 1];
  XO_TRY(xo_check_vocabulary(n, op, "logits"));
  int64_t rows = 0, stride = 0;
  XO_TRY(xo_rows(logits, op, "logits", &rows, &stride));
  XO_TRY(check_sampling(logits, rows, temperatures, top_ks, top_ps, out, options, op));
  XO_TRY(xo_require_key(&xk_sample_kernel, XK_SAMPLE_KERNEL_KEY_T, logits->dtype, "sample: dtype"));
  return launch(logits->data, logits->dtype, stride, rows, n, 0, temperatures, top_ks, top_ps, out, options,
                logits->device, stream);
}

typedef struct {
  const xopsaot_tensor *temperatures, *top_ks, *top_ps, *out;
  const xopsaot_sample_options *options;
  int32_t dtype;
  int64_t vocab;
  int device;
  void *stream;
} chunk_samples;

static xopsaot_status chunk_sample(void *ctx, void *logits, int64_t first, int64_t rows) {
  const chunk_samples *c = ctx;
  return launch(logits, c->dtype, c->vocab, rows, c->vocab, first, c->temperatures, c->top_ks, c->top_ps, c->out,
                c->options, c->device, c->stream);
}

xopsaot_status xopsaot_linear_sample(const xopsaot_tensor *x, const xopsaot_tensor *weight, const xopsaot_tensor *bias,
                                     const xopsaot_tensor *temperatures, const xopsaot_tensor *top_ks,
                                     const xopsaot_tensor *top_ps, const xopsaot_tensor *out,
                                     const xopsaot_sample_options *options, void *stream) {
  static const char op[] = "linear_sample";
  xo_lm_head h = {.x = x, .weight = weight, .bias = bias};
  XO_TRY(xo_lm_head_check(&h, op));
  XO_TRY(check_sampling(x, h.rows, temperatures, top_ks, top_ps, out, options, op));
  XO_TRY(xo_require_key(&xk_sample_kernel, XK_SAMPLE_KERNEL_KEY_T, x->dtype, "linear_sample: dtype"));
  if (h.rows == 0) return XOPSAOT_SUCCESS;
  chunk_samples c = {.temperatures = temperatures, .top_ks = top_ks, .top_ps = top_ps, .out = out,
                     .options = options, .dtype = x->dtype, .vocab = h.vocab, .device = x->device, .stream = stream};
  void *workspace = NULL;
  xopsaot_status st = xo_lm_head_chunks(&h, 0, 0, &workspace, NULL, chunk_sample, &c, stream);
  xo_workspace_free(x->device, stream, workspace);
  return st;
}
