/* The attention family: dense, varlen and KV-cache forward on one kernel (kernels_src/attention.py), with
 * split-KV partials merged by attn_combine and new cache entries written by kv_append. */
#include <math.h>
#include <string.h>

#include "xk_kernels.h"

#define UNLIMITED_WINDOW (1 << 30)
#define MAX_SEQLEN (1 << 28) /* keeps diagonal +- window arithmetic inside int32 */
#define MAX_SPLITS XK_ATTN_COMBINE_MAX_SPLITS /* the most slices attn_combine merges */
#define MAX_HEAD_DIM 256

/* One attention problem in the kernel's terms. Sequence tensors are described by strides (batch, seq, head);
 * packed (varlen) tensors have batch stride 0. */
typedef struct attn_problem {
  const char *op;
  const xopsaot_tensor *q, *k, *v, *out, *lse, *alibi;
  const xopsaot_tensor *cu_q, *cu_k, *seqused_k, *block_table;
  int64_t q_strides[3], k_strides[3], v_strides[3], o_strides[3], lse_strides[3]; /* (batch, seq, head) */
  int64_t batch, seqlen_q, seqlen_k, heads, heads_k, head_dim;
  int64_t page_size, n_pages, max_pages, seqlen_k_new;
  int varlen, kvcache; /* kvcache: flash_attn_with_kvcache's call */
} attn_problem;

/* A tensor the kernels read: ndim dims of `dtype`, on q's device, last dim contiguous, other strides multiples of
 * 8 elements, data 16-byte aligned. q is checked first, so p->q is valid by the time others are compared with it. */
static xopsaot_status check_layout(const attn_problem *p, const xopsaot_tensor *t, const char *name, int ndim,
                                   int32_t dtype) {
  XO_TRY(xo_check_tensor(t, p->op, name, ndim));
  XO_TRY(xo_check_last_dim_contiguous(t, p->op, name));
  XO_TRY(xo_check_dtype(t, dtype, p->op, name));
  XO_TRY(xo_check_same_device(p->q, t, p->op, "q", name));
  for (int i = 0; i < ndim - 1; ++i)
    if (t->strides[i] % 8 || t->strides[i] < 0)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                     "%s: %s.stride(%d) is %lld; strides must be non-negative multiples of 8 elements", p->op, name,
                     i, (long long)t->strides[i]);
  if ((uintptr_t)t->data % 16)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s's data must be 16-byte aligned", p->op, name);
  return XOPSAOT_SUCCESS;
}

/* q, k, v, out: q's dtype (a NULL q fails check_layout's first check). */
static xopsaot_status check_half(const attn_problem *p, const xopsaot_tensor *t, const char *name, int ndim) {
  return check_layout(p, t, name, ndim, p->q ? p->q->dtype : 0);
}

/* A cache holds q's dtype or fp8 e4m3; k_cache and v_cache agree. */
static xopsaot_status check_cache(const attn_problem *p, const xopsaot_tensor *t, const char *name) {
  const int fp8 = t && t->dtype == XOPSAOT_FLOAT8_E4M3;
  return check_layout(p, t, name, 4, fp8 ? XOPSAOT_FLOAT8_E4M3 : p->q->dtype);
}

/* The scales of an fp8 cache (0 reads as 1); a 16-bit cache takes none. */
static xopsaot_status cache_scales(const attn_problem *p, const xopsaot_attention_options *o, float *k_scale,
                                   float *v_scale) {
  *k_scale = o->k_scale == 0 ? 1.0f : o->k_scale;
  *v_scale = o->v_scale == 0 ? 1.0f : o->v_scale;
  if (!(*k_scale > 0) || !(*v_scale > 0) || !isfinite(*k_scale) || !isfinite(*v_scale))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: k_scale and v_scale must be finite and > 0, got %g and %g",
                   p->op, o->k_scale, o->v_scale);
  if (p->k->dtype != XOPSAOT_FLOAT8_E4M3 && (*k_scale != 1.0f || *v_scale != 1.0f))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: k_scale and v_scale apply to an fp8 cache, not to %s", p->op,
                   xo_dtype_name(p->k->dtype));
  return XOPSAOT_SUCCESS;
}

static xopsaot_status check_int32(const attn_problem *p, const xopsaot_tensor *t, const char *name, int ndim) {
  XO_TRY(xo_check_tensor(t, p->op, name, ndim));
  XO_TRY(xo_check_dtype(t, XOPSAOT_INT32, p->op, name));
  XO_TRY(xo_check_same_device(p->q, t, p->op, "q", name));
  if (t->strides[ndim - 1] != 1 && t->shape[ndim - 1] > 1)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s must be contiguous in its last dim", p->op, name);
  return XOPSAOT_SUCCESS;
}

static xopsaot_status check_dims(const attn_problem *p) {
  if (p->head_dim % 8 || p->head_dim > MAX_HEAD_DIM || p->head_dim == 0)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: headdim is %lld; supported: multiples of 8 up to %d", p->op,
                   (long long)p->head_dim, MAX_HEAD_DIM);
  if (p->heads_k == 0 || p->heads % p->heads_k)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                   "%s: the heads of q (%lld) must be a multiple of the heads of k and v (%lld)", p->op,
                   (long long)p->heads, (long long)p->heads_k);
  if (p->seqlen_q >= MAX_SEQLEN || p->seqlen_k >= MAX_SEQLEN)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: sequence lengths must be below 2^28", p->op);
  if (p->heads > 65535 || p->batch > 65535)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: batch and heads must each be at most 65535", p->op);
  return XOPSAOT_SUCCESS;
}

static xopsaot_status check_extras(attn_problem *p) {
  if (p->alibi) {
    XO_TRY(xo_check_tensor(p->alibi, p->op, "alibi_slopes", -1));
    XO_TRY(xo_check_dtype(p->alibi, XOPSAOT_FLOAT32, p->op, "alibi_slopes"));
    XO_TRY(xo_check_same_device(p->q, p->alibi, p->op, "q", "alibi_slopes"));
    const xopsaot_tensor *a = p->alibi;
    int ok = (a->ndim == 1 && a->shape[0] == p->heads) ||
             (a->ndim == 2 && a->shape[0] == p->batch && a->shape[1] == p->heads && a->strides[0] <= INT32_MAX);
    if (!ok || a->strides[a->ndim - 1] != 1)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                     "%s: alibi_slopes must be (heads,) = (%lld,) or (batch, heads) = (%lld, %lld), contiguous",
                     p->op, (long long)p->heads, (long long)p->batch, (long long)p->heads);
  }
  if (p->lse) {
    int ndim = p->varlen ? 2 : 3;
    XO_TRY(xo_check_tensor(p->lse, p->op, "lse", ndim));
    XO_TRY(xo_check_dtype(p->lse, XOPSAOT_FLOAT32, p->op, "lse"));
    XO_TRY(xo_check_same_device(p->q, p->lse, p->op, "q", "lse"));
    const int64_t *s = p->lse->shape, *st = p->lse->strides;
    int ok = p->varlen ? s[0] == p->heads && s[1] == p->q->shape[0]
                       : s[0] == p->batch && s[1] == p->heads && s[2] == p->seqlen_q;
    if (!ok)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: lse must be %s", p->op,
                     p->varlen ? "(heads, total_q)" : "(batch, heads, seqlen_q)");
    p->lse_strides[0] = p->varlen ? 0 : st[0];
    p->lse_strides[1] = p->varlen ? st[1] : st[2]; /* sequence */
    p->lse_strides[2] = p->varlen ? st[0] : st[1]; /* head */
  }
  return XOPSAOT_SUCCESS;
}

static void seq_strides(const xopsaot_tensor *t, int packed, int64_t s[3]) {
  s[0] = packed ? 0 : t->strides[0];
  s[1] = t->strides[packed ? 0 : 1];
  s[2] = t->strides[packed ? 1 : 2];
}

static int32_t block_d_for(int64_t head_dim) { return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256; }

/* Decode programs per slice: batch x heads_k x query blocks (of 128 rows). */
static int64_t programs_per_slice(const attn_problem *p) {
  const int64_t rows = p->seqlen_q * (p->heads / p->heads_k);
  return p->batch * p->heads_k * ((rows + 127) / 128);
}

/* A slice count within bounds: at least 256 keys a slice, at most MAX_SPLITS slices, at least one. */
static int bounded_splits(const attn_problem *p, int64_t splits) {
  const int64_t by_keys = (p->seqlen_k + p->seqlen_k_new + 255) / 256;
  if (splits > by_keys) splits = by_keys;
  if (splits > MAX_SPLITS) splits = MAX_SPLITS;
  return splits < 1 ? 1 : (int)splits;
}

/* A decode step (at most 16 query rows per key head, the table's decode tiles) from a 16-bit cache of head dim 128 on
 * memory as fast as an H200's: where the H200's rules below differ from the H100's. */
#define FAST_MEMORY_GBPS XK_ATTN_FWD_FAST_MEMORY_GBPS /* between the H100's 3352 GB/s peak and the H200's 4814 */
static int fast_memory_decode(const attn_problem *p, int memory_gbps) {
  return memory_gbps >= FAST_MEMORY_GBPS && p->kvcache && p->k->dtype != XOPSAOT_FLOAT8_E4M3 && p->head_dim == 128 &&
         p->seqlen_q * (p->heads / p->heads_k) <= 16;
}

/* Split-KV slices: only when batch x heads_k x query blocks leaves the GPU's multiprocessors idle, as many
 * slices as keep the programs within two per multiprocessor (rounding down: a sweep on the H100 found the best
 * count at or just under 2 x SMs programs, e.g. 2 slices, not 3, for 128 programs), each with at least 256 keys.
 * An fp8 cache of head dim 64 or 128, whose e4m3 decode wants more warps in flight than its configs' two per
 * program, takes four per multiprocessor: on an H100 5-25% faster at batch 1-32 for a contiguous cache
 * (benchmarks/experiments/fp8_splits.py), 7-37% for a paged one (benchmarks/experiments/fp8_paged.py; head dim
 * 128 on the table's fp8 config for it). Head dim 256, whose configs run four warps, read 5-10% slower so and keeps
 * two (stop 30 in h100-2026-11-26-experiments.md).
 *
 * Memory as fast as an H200's wants more bytes in flight: a 16-bit cache of head dim 128 takes three per
 * multiprocessor there, which splits batches of one to one and a half waves in two. On an H200 (GQA 32:8, bf16, TB/s
 * in CUDA graphs, benchmarks/split_sweep.py, stop 50), 2 -> 3 per SM: 17 x 4k 3.06 -> 3.75 (1 -> 2 slices), 20 x 4k
 * 3.51 -> 3.97, 24 x 4k 3.99 -> 4.13, 24 x 8k 4.09 -> 4.38, 12 x 8k 3.86 -> 4.13 (2 -> 4 slices); 10 x 8k 4.08 ->
 * 4.03 (3 -> 4), 6 x 32k 4.34 -> 4.28 (5 -> 8); 28 x 4k, 33 x 4k and 48 x 4k, unsplit either way, were best so.
 * Paged caches lost 7-12% so on their split config ([16, 128, 4, 2]: 17 x 4k, pages of 16, 2.99 -> 2.79; 24 x 8k
 * 4.01 -> 3.66) and gained on its alternate [16, 64, 2, 3], which the table's fast_memory bucket gives their split
 * steps there (XOPSAOT_AUTOTUNE's pick in benchmarks/experiments/decode_waves.py, stop 50; pages of 16 / 128): 17 x 4k
 * 3.00 / 3.05 -> 3.25 / 3.33, 20 x 4k 3.38 / 3.44 -> 3.63 / 3.68, 24 x 8k 3.97 / 4.03 -> 4.12 / 4.19, 18 x 16k 3.29 /
 * 3.34 -> 3.82 / 3.90. Other caches, and prefill, keep two: no sweep measured them. */
static int choose_splits(const attn_problem *p, int sm_count, int memory_gbps) {
  const int64_t per_sm = p->k->dtype == XOPSAOT_FLOAT8_E4M3 && block_d_for(p->head_dim) <= 128 ? 4
                         : fast_memory_decode(p, memory_gbps)                                   ? 3
                                                                                                : 2;
  const int64_t programs = programs_per_slice(p);
  if (2 * programs >= per_sm * sm_count || programs == 0) return 1;
  return bounded_splits(p, per_sm * sm_count / programs);
}

/* The slices that make one wave of programs, at most one per multiprocessor (1 where the batch fills the GPU):
 * what the tuning table's ONE_WAVE buckets are for. */
static int one_wave_splits(const attn_problem *p, int sm_count) {
  const int64_t programs = programs_per_slice(p);
  if (programs >= sm_count || programs == 0) return 1;
  return bounded_splits(p, (int64_t)sm_count / programs);
}

/* Whether the problem fits attn_fwd_ws (Hopper, prefill): dense or packed q/k/v whose heads sit side by side
 * (2-D views of tokens x heads * headdim), headdim equal to a tile width, no paged cache, softcap or ALiBi. */
static int fits_tma_path(const attn_problem *p, const xopsaot_attention_options *o) {
  if (p->block_table || p->seqused_k || p->alibi || o->softcap > 0 || (p->head_dim != 64 && p->head_dim != 128) ||
      p->k->dtype != p->q->dtype || !(o->softmax_scale > 0)) /* the kernel folds a positive scale into exp2 */
    return 0;
  const xopsaot_tensor *all[] = {p->q, p->k, p->v};
  const int64_t seqlen[] = {p->seqlen_q, p->seqlen_k, p->seqlen_k};
  for (int i = 0; i < 3; ++i) {
    const xopsaot_tensor *t = all[i];
    if (t->strides[t->ndim - 2] != p->head_dim) return 0;
    if ((p->varlen ? t->shape[0] : p->batch * seqlen[i]) > INT32_MAX) return 0;
  }
  return 1;
}

/* t (batch, seqlen, heads, head_dim) as a 3-D descriptor over (batch, seqlen, heads x head_dim). */
static int dense_view(const xopsaot_tensor *t, xo_tma_desc *d) {
  const int64_t rows = t->shape[1];
  *d = (xo_tma_desc){.base = t->data, .rank = 3, .shape = {t->shape[0], rows, t->shape[2] * t->shape[3]}};
  d->strides[0] = t->shape[0] > 1 ? t->strides[0] : rows * t->strides[1]; /* a lone batch element's is unused */
  d->strides[1] = t->strides[1];
  d->strides[2] = 1;
  return xo_tma_takes(d, xo_dtype_size(t->dtype));
}

/* Dense batches: attn_fwd_ws_dense, whose descriptors the launcher makes on the host. */
static int run_tma_dense(const attn_problem *p, const xopsaot_attention_options *o, int32_t window_left,
                         int32_t window_right, xopsaot_status *st, void *stream) {
  xk_attn_fwd_ws_dense_args a = {
      .Out = p->out->data, .Lse = p->lse ? p->lse->data : NULL,
      .stride_ob = p->o_strides[0], .stride_os = p->o_strides[1], .stride_oh = p->o_strides[2],
      .stride_lb = p->lse_strides[0], .stride_lh = p->lse_strides[2], .stride_ls = p->lse_strides[1],
      .seqlen_q = (int32_t)p->seqlen_q, .seqlen_k = (int32_t)p->seqlen_k,
      .heads = (int32_t)p->heads, .heads_k = (int32_t)p->heads_k,
      .window_left = window_left, .window_right = window_right, .write_lse = p->lse != NULL,
      .qk_scale = o->softmax_scale * 1.4426950408889634f,
      .batch = (int32_t)p->batch,
  };
  if (!dense_view(p->q, &a.desc_q) || !dense_view(p->k, &a.desc_k) || !dense_view(p->v, &a.desc_v)) return 0;
  xk_attn_fwd_ws_dense_keys keys = {p->q->dtype, (int32_t)p->head_dim};
  if (!xo_can_launch(&xk_attn_fwd_ws_dense, &keys.T, &a, p->q->device)) return 0;
  *st = xo_launch(&xk_attn_fwd_ws_dense, &keys.T, &a, p->q->device, stream);
  return 1;
}

/* Whether t's rows are tokens one after the other: packed (varlen) tensors, or dense batch elements that follow
 * each other. */
static int stacked(const xopsaot_tensor *t, int packed) {
  return packed || t->shape[0] == 1 || t->strides[0] == t->shape[1] * t->strides[1];
}

/* t's (tokens, heads x head_dim) rows as a 2-D descriptor. */
static int token_rows(const xopsaot_tensor *t, int packed, xo_tma_desc *d) {
  const int s = packed ? 0 : 1; /* the sequence dim */
  if (!stacked(t, packed)) return 0;
  const int64_t rows = packed ? t->shape[0] : t->shape[0] * t->shape[1];
  *d = (xo_tma_desc){.base = t->data, .rank = 2, .shape = {rows, t->shape[s + 1] * t->shape[s + 2]},
                     .strides = {t->strides[s], 1}};
  return xo_tma_takes(d, xo_dtype_size(t->dtype));
}

static xopsaot_status run_tma(const attn_problem *p, const xopsaot_attention_options *o, int32_t window_left,
                              int32_t window_right, int *launched, void *stream) {
  xopsaot_status st = XOPSAOT_SUCCESS;
  if (!p->varlen && (*launched = run_tma_dense(p, o, window_left, window_right, &st, stream))) return st;
  xk_attn_fwd_ws_args a = {
      .V = p->v->data, .Out = p->out->data,
      .Lse = p->lse ? p->lse->data : NULL,
      .CuSeqlensQ = p->cu_q ? p->cu_q->data : NULL, .CuSeqlensK = p->cu_k ? p->cu_k->data : NULL,
      .stride_vs = p->v->strides[p->varlen ? 0 : 1],
      .stride_ob = p->o_strides[0], .stride_os = p->o_strides[1], .stride_oh = p->o_strides[2],
      .stride_lb = p->lse_strides[0], .stride_lh = p->lse_strides[2], .stride_ls = p->lse_strides[1],
      .seqlen_q = (int32_t)p->seqlen_q, .seqlen_k = (int32_t)p->seqlen_k,
      .heads = (int32_t)p->heads, .heads_k = (int32_t)p->heads_k,
      .varlen_q = p->cu_q != NULL, .varlen_k = p->cu_k != NULL,
      .window_left = window_left, .window_right = window_right, .write_lse = p->lse != NULL,
      .qk_scale = o->softmax_scale * 1.4426950408889634f,
      .batch = (int32_t)p->batch,
  };
  xk_attn_fwd_ws_keys keys = {p->q->dtype, (int32_t)p->head_dim};
  *launched = token_rows(p->q, p->varlen, &a.desc_q) && token_rows(p->k, p->varlen, &a.desc_k) &&
              stacked(p->v, p->varlen) &&
              xo_can_launch(&xk_attn_fwd_ws, &keys.T, &a, p->q->device);
  return *launched ? xo_launch(&xk_attn_fwd_ws, &keys.T, &a, p->q->device, stream) : XOPSAOT_SUCCESS;
}

/* Paged prefill on Hopper: the pool's pages copied to packed rows (kv_gather) so that attn_fwd_ws, which loads keys by
 * TMA from packed rows, takes the call, where attn_fwd reads pages at about 55% of its TFLOP/s (12 sequences of
 * 100-8192 tokens, benchmarks/experiments/varlen_paged.py). The copy reads and writes the keys and values once more:
 * per key, 8 x heads_k x headdim bytes of traffic against 4 x rows x headdim FLOPs that run faster (rows: queries x
 * group, the query rows per key head), so it pays from a few hundred rows per key head on; decode steps keep reading
 * the pool in place. Taken for flash_attn_varlen's paged form when the sequences average at least GATHER_MIN_ROWS
 * query rows per key head, the caches are q's dtype with each token's heads contiguous, the call fits attn_fwd_ws,
 * and the copy fits GATHER_MAX_BYTES (its rows are sized by batch x max_seqlen_k, as the host knows no more). */
#define GATHER_MIN_ROWS 512
#define GATHER_MAX_BYTES (1ull << 30)

static int gathers(const attn_problem *p, const xopsaot_attention_options *o) {
  if (!p->block_table || p->kvcache || p->k->dtype != p->q->dtype || p->k->strides[2] != p->head_dim ||
      p->v->strides[2] != p->head_dim || p->q->shape[0] * (p->heads / p->heads_k) < GATHER_MIN_ROWS * p->batch)
    return 0;
  /* keys and values: batch x max_seqlen_k rows of heads_k x headdim each (divided, not multiplied: no overflow) */
  const uint64_t row_bytes = 2ull * (uint64_t)(p->heads_k * p->head_dim) * (uint64_t)xo_dtype_size(p->k->dtype);
  attn_problem packed = *p;
  packed.block_table = NULL; /* what fits_tma_path sees once the keys are packed */
  return (uint64_t)(p->batch * p->seqlen_k) <= GATHER_MAX_BYTES / row_bytes && fits_tma_path(&packed, o);
}

/* Copy the pool's pages of k (or v) to packed rows at `packed` (kv_gather). */
static xopsaot_status gather(const attn_problem *p, const xopsaot_tensor *pool, void *packed, void *stream) {
  xk_kv_gather_args a = {
      .Cache = pool->data, .Packed = packed, .CuSeqlensK = p->cu_k->data, .BlockTable = p->block_table->data,
      .stride_p = pool->strides[0], .stride_s = pool->strides[1], .stride_btb = p->block_table->strides[0],
      .row_width = (int32_t)(p->heads_k * p->head_dim), .page_size = (int32_t)p->page_size,
      .n_pages = (int32_t)p->n_pages, .max_pages = (int32_t)p->max_pages,
      .max_seqlen_k = (int32_t)p->seqlen_k, .batch = (int32_t)p->batch,
  };
  xk_kv_gather_keys keys = {pool->dtype};
  return xo_launch(&xk_kv_gather, &keys.T, &a, p->q->device, stream);
}

/* gathers()'s calls: the keys and values packed into a stream-ordered workspace, then attn_fwd_ws on them. */
static xopsaot_status run_gathered(const attn_problem *p, const xopsaot_attention_options *o, int32_t window_left,
                                   int32_t window_right, int *launched, void *stream) {
  const int64_t rows = p->batch * p->seqlen_k, shape[3] = {rows, p->heads_k, p->head_dim};
  const uint64_t bytes = (uint64_t)(rows * p->heads_k * p->head_dim) * (uint64_t)xo_dtype_size(p->k->dtype);
  xopsaot_tensor k, v;
  xk_kv_gather_keys keys = {p->k->dtype};
  xk_kv_gather_args probe = {.max_seqlen_k = (int32_t)p->seqlen_k, .batch = (int32_t)p->batch};
  *launched = 0;
  if (rows == 0 || !xo_can_launch(&xk_kv_gather, &keys.T, &probe, p->q->device)) return XOPSAOT_SUCCESS;
  void *workspace = NULL;
  XO_TRY(xo_workspace_alloc(p->q->device, stream, 2 * bytes, &workspace));
  xopsaot_tensor_contiguous(&k, workspace, 3, shape, p->k->dtype, p->q->device);
  xopsaot_tensor_contiguous(&v, (char *)workspace + bytes, 3, shape, p->k->dtype, p->q->device);
  attn_problem packed = *p;
  packed.k = &k, packed.v = &v, packed.block_table = NULL;
  seq_strides(&k, 1, packed.k_strides), seq_strides(&v, 1, packed.v_strides);
  xopsaot_status st = gather(p, p->k, k.data, stream);
  if (!st) st = gather(p, p->v, v.data, stream);
  if (!st) st = run_tma(&packed, o, window_left, window_right, launched, stream);
  xo_workspace_free(p->q->device, stream, workspace);
  /* not launched (no attn_fwd_ws variant took it): the general kernel then reads the pool, the copy wasted */
  return st;
}

/* A cache as TMA sees it in attn_decode_tma: (pages x page_size, heads_k x head_dim) rows, a contiguous cache's
 * sequences as its pages; which holds when pages (sequences), positions and heads follow each other without gaps. */
static int cache_rows(const attn_problem *p, const xopsaot_tensor *t, xo_tma_desc *d) {
  if (t->strides[0] != t->shape[1] * t->strides[1] || t->strides[2] != p->head_dim) return 0;
  *d = (xo_tma_desc){.base = t->data, .rank = 2, .shape = {t->shape[0] * t->shape[1], p->heads_k * p->head_dim},
                     .strides = {t->strides[1], 1}};
  return xo_tma_takes(d, xo_dtype_size(t->dtype));
}

/* Whether a decode step's programs (batch x key heads) fill at most a quarter of the multiprocessors, where
 * attn_decode_tma gains on an H100 (GQA 32:8, head dim 128, bf16, TB/s: pages of 16 and 128 shuffled, 1 x 8k to
 * 4 x 2k 2.38-2.48 -> 2.83-2.92, 1 x 32k pages of 128 2.48 -> 2.62-2.65; contiguous 1 x 8k to 4 x 2k 2.59-2.67 ->
 * 2.88-2.93, 1 x 2k 0.75-0.78 -> 0.96-0.99, 1 x 32k level, 1 x 128k 3.02 -> 2.97); from 64 programs on, attn_fwd
 * held its own or led by 1-4% (benchmarks/experiments/decode_paged_tma.py, h100-2026-11-26-experiments.md, stop
 * 36). */
static int few_programs(const attn_problem *p, int sm_count) { return 4 * programs_per_slice(p) <= sm_count; }

/* Whether attn_decode_tma takes a decode step by its programs: where they are few; at any count from an fp8
 * cache but a contiguous one of head dim 64; and up to one wave from a 16-bit paged cache of head dim 128 whose pages
 * divide the kernel's blocks of 128 keys (16 to 128 keys), which its loader reads in the order they lie in the pool.
 * On an H100 (GQA 32:8, bf16 queries, TB/s of the cache's bytes):
 * - fp8: decoding each copied stage in shared memory beat attn_fwd's e4m3 loads from 16 x 4k to 64 x 8k: head dim
 *   128 contiguous 2.16-2.60 -> 2.36-2.77, pages of 16 1.66-2.07 -> 2.21-2.70, chunks of 8-16 queries 0.74-1.12 ->
 *   2.17-2.33; head dim 64 pages of 16 1.33-1.78 -> 1.77-1.96, but contiguous at 64 x 8k 2.34 -> 2.00 (stop 38);
 * - 16-bit pages shuffled through the pool, pages of 16 / 128: 16 x 4k 2.80 / 2.86-2.89 -> 2.89-2.91 / 2.94-2.95
 *   (contiguous 3.02), 8 x 8k 2.76 / 2.76-2.78 -> 2.82-2.83 / 2.87-2.88; 1 x 32k, which took this kernel already, 2.53
 *   / 2.66-2.69 -> 2.66-2.69 / 2.69 with the pool order. Past one wave attn_fwd kept the lead (64 x 8k 3.03 against
 *   2.97-2.99), and with fewer than 8 blocks to sort (1 x 8k, 2 x 4k) the order lost 6-10% (stop 39).
 *
 * With memory as fast as an H200's (FAST_MEMORY_GBPS), it also takes a contiguous 16-bit cache of head dim 128 where
 * its slices make 90-100% of one wave, as attn_fwd's ONE_WAVE config does: that config reads at copy speed on an H100
 * but not there. On an H200 (GQA 32:8, bf16, TB/s in CUDA graphs, benchmarks/experiments/decode_waves.py, two rounds,
 * stop 50): 16 x 4k 4.05-4.08 -> 4.18-4.21, 16 x 8k 4.21-4.23 -> 4.35-4.37, 8 x 16k 4.10-4.11 -> 4.24-4.25 (2
 * slices), 5 x 16k 3.85 -> 3.95 (3), 16 x 2k 3.79-3.80 -> 3.93-3.94; SDPA 4.23-4.24, 4.38-4.39, 4.24, 3.94-4.01,
 * 3.92. Where the wave is not full attn_fwd's split led (12 x 8k, 96 programs: 3.81 against 3.63-3.64 unsplit), and
 * past one wave too (32 x 4k 4.31-4.33 against 4.28, 64 x 8k 4.44 against 4.39). GPUs between the H100 and the
 * H200, unmeasured, keep the H100's rule. */
#define POOL_ORDER_MIN_KEYS 2048 /* caches shorter than this give the loader too few blocks to sort (SORT_MIN_BLOCKS) */
static int decode_tma_programs(const attn_problem *p, int sm_count, int memory_gbps) {
  const int fp8 = p->k->dtype == XOPSAOT_FLOAT8_E4M3;
  const int one_wave_of_long_rows = !fp8 && p->head_dim == 128 && p->seqlen_k >= POOL_ORDER_MIN_KEYS &&
                                    programs_per_slice(p) <= sm_count;
  const int pool_order = one_wave_of_long_rows && p->block_table && 128 % p->page_size == 0;
  const int fast_contiguous = one_wave_of_long_rows && !p->block_table && fast_memory_decode(p, memory_gbps) &&
                              10 * programs_per_slice(p) * one_wave_splits(p, sm_count) >= 9 * (int64_t)sm_count;
  return few_programs(p, sm_count) || (fp8 && (p->head_dim == 128 || p->block_table)) || pool_order ||
         fast_contiguous;
}

/* Hopper's decode from a 16-bit or fp8 KV cache (attn_decode_tma): flash_attn_with_kvcache's call of programs it
 * takes (decode_tma_programs), head_dim a tile width, pages (if paged) of whole 16-key runs, at most 64 rows
 * (seqlen_q x group) per key head, no softcap or ALiBi, caches TMA can take, and a variant for the device. Fills d
 * (all but the partials' pointers) and says whether it serves the call. */
static int decode_tma(const attn_problem *p, const xopsaot_attention_options *o, const xk_attn_decode_tma_keys *keys,
                      float k_scale, float v_scale, int32_t window_left, int32_t window_right, int64_t token_rows,
                      int sm_count, int memory_gbps, xk_attn_decode_tma_args *d) {
  if (!p->kvcache || p->alibi || o->softcap > 0 || !decode_tma_programs(p, sm_count, memory_gbps) ||
      (p->head_dim != 64 && p->head_dim != 128) || (p->block_table && p->page_size % 16) ||
      p->seqlen_q * (p->heads / p->heads_k) > 64)
    return 0;
  *d = (xk_attn_decode_tma_args){
      .Q = p->q->data, .Out = p->out->data, .Lse = p->lse ? p->lse->data : NULL,
      .SequsedK = p->seqused_k ? p->seqused_k->data : NULL,
      .BlockTable = p->block_table ? p->block_table->data : NULL,
      .stride_qb = p->q_strides[0], .stride_qs = p->q_strides[1], .stride_qh = p->q_strides[2],
      .stride_ob = p->o_strides[0], .stride_os = p->o_strides[1], .stride_oh = p->o_strides[2],
      .stride_lb = p->lse_strides[0], .stride_lh = p->lse_strides[2], .stride_ls = p->lse_strides[1],
      .stride_lsplit = token_rows, .stride_psplit = token_rows * block_d_for(p->head_dim), /* attn_fwd's layout */
      .stride_btb = p->block_table ? p->block_table->strides[0] : 0,
      .seqlen_q = (int32_t)p->seqlen_q, .seqlen_k = (int32_t)p->seqlen_k,
      .heads = (int32_t)p->heads, .group = (int32_t)(p->heads / p->heads_k), .num_splits = 1,
      .has_seqused_k = p->seqused_k != NULL, .seqlen_k_new = (int32_t)p->seqlen_k_new,
      /* a contiguous cache: one page per sequence, its capacity long */
      .page_size = (int32_t)p->k->shape[1], .max_pages = p->block_table ? (int32_t)p->max_pages : 1,
      .paged = p->block_table != NULL,
      .window_left = window_left, .window_right = window_right, .write_lse = p->lse != NULL,
      /* the kernel decodes an fp8 cache to its true values; a 16-bit cache's scales are 1 (cache_scales) */
      .qk_scale = o->softmax_scale * 1.4426950408889634f * k_scale, .v_scale = v_scale,
      .heads_k = (int32_t)p->heads_k, .batch = (int32_t)p->batch,
  };
  return cache_rows(p, p->k, &d->desc_k) && cache_rows(p, p->v, &d->desc_v) &&
         xo_can_launch(&xk_attn_decode_tma, &keys->T, d, p->q->device);
}

static xopsaot_status run(attn_problem *p, const xopsaot_attention_options *o, void *stream) {
  if (!o) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: options is NULL", p->op);
  if (!isfinite(o->softmax_scale))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: softmax_scale must be finite, got %g", p->op,
                   o->softmax_scale);
  if (!(o->softcap >= 0) || !isfinite(o->softcap))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: softcap must be finite and >= 0, got %g", p->op, o->softcap);
  if (o->num_splits < 0 || o->num_splits > MAX_SPLITS)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: num_splits is %d; supported: 0 (automatic) to %d", p->op,
                   o->num_splits, MAX_SPLITS);
  XO_TRY(check_dims(p));
  XO_TRY(check_extras(p));
  XO_TRY(xo_require_key(&xk_attn_fwd, XK_ATTN_FWD_KEY_T, p->q->dtype, "flash_attn: dtype"));
  float k_scale, v_scale;
  XO_TRY(cache_scales(p, o, &k_scale, &v_scale));
  const int fp8 = p->k->dtype == XOPSAOT_FLOAT8_E4M3;
  if (fp8 && o->softcap > 0)
    return xo_fail(XOPSAOT_ERROR_UNSUPPORTED, "%s: softcap with an fp8 cache is not compiled (use a 16-bit cache)",
                   p->op);
  const float fp8_unit = 256.0f; /* the kernel decodes e4m3 as value * 2^-8 (_from_e4m3) */
  if (p->batch == 0 || p->seqlen_q == 0 || p->heads == 0) return XOPSAOT_SUCCESS;

  const int32_t block_d = block_d_for(p->head_dim);
  const int softcap = o->softcap > 0;
  int splits = o->num_splits, sm_count = 0, memory_gbps = 0;
  if (splits == 0 || p->kvcache) {
    XO_TRY(xo_device_sm_count(p->q->device, &sm_count));
    XO_TRY(xo_device_memory_gbps(p->q->device, &memory_gbps));
  }
  if (splits == 0) splits = choose_splits(p, sm_count, memory_gbps);
  const int64_t token_rows = (p->varlen ? p->q->shape[0] : p->batch * p->seqlen_q) * p->heads;
  if (token_rows == 0) return XOPSAOT_SUCCESS;
  int32_t window_left = o->window_left < 0 ? UNLIMITED_WINDOW : o->window_left;
  int32_t window_right = o->causal ? 0 : o->window_right < 0 ? UNLIMITED_WINDOW : o->window_right;
  if (window_left > UNLIMITED_WINDOW) window_left = UNLIMITED_WINDOW;
  if (window_right > UNLIMITED_WINDOW) window_right = UNLIMITED_WINDOW;
  if (splits == 1 && p->seqlen_k_new == 0 && fits_tma_path(p, o)) {
    int launched = 0;
    xopsaot_status st = run_tma(p, o, window_left, window_right, &launched, stream);
    if (st || launched) return st;
  }
  if (splits == 1 && gathers(p, o)) {
    int launched = 0;
    xopsaot_status st = run_gathered(p, o, window_left, window_right, &launched, stream);
    if (st || launched) return st;
  }
  const float log2e = 1.4426950408889634f;
  const int paged = p->block_table != NULL;
  xk_attn_fwd_args a = {
      .Q = p->q->data, .K = p->k->data, .V = p->v->data, .Out = p->out->data,
      .Lse = p->lse ? p->lse->data : NULL, /* split-KV's partials replace it and Opart's NULL below */
      .CuSeqlensQ = p->cu_q ? p->cu_q->data : NULL,
      .CuSeqlensK = p->cu_k ? p->cu_k->data : NULL,
      .SequsedK = p->seqused_k ? p->seqused_k->data : NULL,
      .BlockTable = paged ? p->block_table->data : NULL,
      .AlibiSlopes = p->alibi ? p->alibi->data : NULL,
      .stride_qb = p->q_strides[0], .stride_qs = p->q_strides[1], .stride_qh = p->q_strides[2],
      .stride_kb = p->k_strides[0], .stride_ks = p->k_strides[1], .stride_kh = p->k_strides[2],
      .stride_vb = p->v_strides[0], .stride_vs = p->v_strides[1], .stride_vh = p->v_strides[2],
      .stride_ob = p->o_strides[0], .stride_os = p->o_strides[1], .stride_oh = p->o_strides[2],
      .stride_lb = p->lse_strides[0], .stride_lh = p->lse_strides[2], .stride_ls = p->lse_strides[1],
      .stride_lsplit = token_rows,
      .stride_psplit = token_rows * block_d,
      .stride_btb = paged ? p->block_table->strides[0] : 0,
      .stride_ab = p->alibi && p->alibi->ndim == 2 ? (int32_t)p->alibi->strides[0] : 0,
      .seqlen_q = (int32_t)p->seqlen_q, .seqlen_k = (int32_t)p->seqlen_k,
      .head_dim = (int32_t)p->head_dim, .heads = (int32_t)p->heads,
      .group = (int32_t)(p->heads / p->heads_k), .num_splits = splits,
      .varlen_q = p->cu_q != NULL, .varlen_k = p->cu_k != NULL, .has_seqused_k = p->seqused_k != NULL,
      .seqlen_k_new = (int32_t)p->seqlen_k_new,
      .page_size = (int32_t)p->page_size, .n_pages = (int32_t)p->n_pages, .max_pages = (int32_t)p->max_pages,
      .window_left = window_left, .window_right = window_right,
      .write_lse = p->lse != NULL, .has_alibi = p->alibi != NULL,
      .qk_scale = (softcap ? o->softmax_scale / o->softcap : o->softmax_scale * log2e) *
                  (fp8 ? k_scale * fp8_unit : 1.0f),
      .softcap_log2e = softcap ? o->softcap * log2e : 0.0f,
      .v_scale = fp8 ? v_scale * fp8_unit : 1.0f,
      .batch = (int32_t)p->batch, .heads_k = (int32_t)p->heads_k, .memory_gbps = memory_gbps,
  };
  /* softcap and ALiBi are run-time switches of the MODS variants; plain calls take the variants without them */
  xk_attn_fwd_keys keys = {p->q->dtype, p->k->dtype, block_d, paged, softcap || p->alibi != NULL};
  xk_attn_decode_tma_keys dkeys = {p->q->dtype, p->k->dtype, block_d};
  xk_attn_decode_tma_args d;
  const int tma_decode = decode_tma(p, o, &dkeys, k_scale, v_scale, window_left, window_right, token_rows,
                                    sm_count, memory_gbps, &d);
  if (tma_decode) {
    /* its programs run one to a multiprocessor (their rings fill its shared memory): as many slices as make one
     * wave */
    if (o->num_splits == 0) splits = one_wave_splits(p, sm_count);
    d.num_splits = splits;
  } else if (o->num_splits == 0 && splits > 1) {
    /* the table may hold a config for this step as one wave of programs (a program per multiprocessor, which deep
     * pipelines need): then it runs in the slices that make one wave, unsplit (no partials to merge) where the
     * batch's programs alone fill the GPU */
    const int wave = one_wave_splits(p, sm_count);
    a.num_splits = wave;
    if (xo_selected_const(&xk_attn_fwd, &keys.T, &a, p->q->device, "ONE_WAVE", 0)) splits = wave;
    a.num_splits = splits;
  }
  void *workspace = NULL;
  float *opart = NULL, *lse_part = NULL;
  if (splits > 1) {
    const uint64_t part = (uint64_t)token_rows * (uint64_t)block_d, bytes = (part + (uint64_t)token_rows) * 4;
    XO_TRY(xo_workspace_alloc(p->q->device, stream, bytes * (uint64_t)splits, &workspace));
    opart = workspace;
    lse_part = opart + part * (uint64_t)splits;
    a.Opart = opart, a.Lse = lse_part;
    d.Opart = opart, d.Lse = lse_part;
  }
  xopsaot_status st = tma_decode ? xo_launch(&xk_attn_decode_tma, &dkeys.T, &d, p->q->device, stream)
                                 : xo_launch(&xk_attn_fwd, &keys.T, &a, p->q->device, stream);
  if (!st && splits > 1) {
    xk_attn_combine_args c = {
        .Opart = opart, .LsePart = lse_part, .Out = p->out->data, .Lse = p->lse ? p->lse->data : NULL,
        .stride_psplit = token_rows * block_d, .stride_lsplit = token_rows,
        .stride_ob = p->o_strides[0], .stride_os = p->o_strides[1], .stride_oh = p->o_strides[2],
        .stride_lb = p->lse_strides[0], .stride_lh = p->lse_strides[2], .stride_ls = p->lse_strides[1],
        .seqlen_q = p->varlen ? (1 << 30) : (int32_t)p->seqlen_q, .heads = (int32_t)p->heads,
        .head_dim = (int32_t)p->head_dim, .num_splits = splits, .write_lse = p->lse != NULL,
        .rows = token_rows,
    };
    xk_attn_combine_keys ckeys = {p->q->dtype, block_d};
    st = xo_launch(&xk_attn_combine, &ckeys.T, &c, p->q->device, stream);
  }
  xo_workspace_free(p->q->device, stream, workspace);
  return st;
}

xopsaot_status xopsaot_flash_attn(const xopsaot_tensor *q, const xopsaot_tensor *k, const xopsaot_tensor *v,
                                  const xopsaot_tensor *out, const xopsaot_tensor *lse,
                                  const xopsaot_tensor *alibi_slopes, const xopsaot_attention_options *options,
                                  void *stream) {
  attn_problem p = {.op = "flash_attn", .q = q, .k = k, .v = v, .out = out, .lse = lse, .alibi = alibi_slopes};
  const xopsaot_tensor *all[] = {k, v, out};
  const char *names[] = {"k", "v", "out"};
  XO_TRY(check_half(&p, q, "q", 4));
  for (int i = 0; i < 3; ++i) XO_TRY(check_half(&p, all[i], names[i], 4));
  XO_TRY(xo_check_same_shape(q, out, p.op, "q", "out"));
  XO_TRY(xo_check_same_shape(k, v, p.op, "k", "v"));
  if (k->shape[0] != q->shape[0] || k->shape[3] != q->shape[3])
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: k is (%lld, _, _, %lld) but q is (%lld, _, _, %lld)", p.op,
                   (long long)k->shape[0], (long long)k->shape[3], (long long)q->shape[0], (long long)q->shape[3]);
  p.batch = q->shape[0], p.seqlen_q = q->shape[1], p.heads = q->shape[2], p.head_dim = q->shape[3];
  p.seqlen_k = k->shape[1], p.heads_k = k->shape[2];
  seq_strides(q, 0, p.q_strides), seq_strides(k, 0, p.k_strides), seq_strides(v, 0, p.v_strides);
  seq_strides(out, 0, p.o_strides);
  return run(&p, options, stream);
}

/* A paged cache's block_table (batch, max_pages) int32 against the batch (which `batch_of` names in the message),
 * and the pool's page_size, n_pages and max_pages set from them, within the kernels' 32-bit page indices. */
static xopsaot_status check_paged_cache(attn_problem *p, const xopsaot_tensor *block_table,
                                        const xopsaot_tensor *cache, const char *batch_of) {
  XO_TRY(check_int32(p, block_table, "block_table", 2));
  if (block_table->shape[0] != p->batch)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: block_table has %lld rows but %s has batch %lld", p->op,
                   (long long)block_table->shape[0], batch_of, (long long)p->batch);
  p->page_size = cache->shape[1], p->n_pages = cache->shape[0], p->max_pages = block_table->shape[1];
  if (p->page_size < 1 || p->n_pages > INT32_MAX || p->max_pages > INT32_MAX)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: the paged cache has %lld pages of %lld tokens", p->op,
                   (long long)p->n_pages, (long long)p->page_size);
  return XOPSAOT_SUCCESS;
}

xopsaot_status xopsaot_flash_attn_varlen(const xopsaot_tensor *q, const xopsaot_tensor *k, const xopsaot_tensor *v,
                                         const xopsaot_tensor *cu_seqlens_q, const xopsaot_tensor *cu_seqlens_k,
                                         const xopsaot_tensor *block_table, const xopsaot_tensor *out,
                                         const xopsaot_tensor *lse, const xopsaot_tensor *alibi_slopes,
                                         int max_seqlen_q, int max_seqlen_k, const xopsaot_attention_options *options,
                                         void *stream) {
  attn_problem p = {.op = "flash_attn_varlen", .q = q, .k = k, .v = v, .out = out, .lse = lse,
                    .alibi = alibi_slopes, .cu_q = cu_seqlens_q, .cu_k = cu_seqlens_k, .block_table = block_table,
                    .varlen = 1};
  XO_TRY(check_half(&p, q, "q", 3));
  XO_TRY(check_half(&p, out, "out", 3));
  XO_TRY(xo_check_same_shape(q, out, p.op, "q", "out"));
  if (block_table) { /* k and v: paged caches, as flash_attn_with_kvcache's */
    XO_TRY(check_cache(&p, k, "k"));
    XO_TRY(check_cache(&p, v, "v"));
    XO_TRY(xo_check_dtype(v, k->dtype, p.op, "v"));
  } else {
    XO_TRY(check_half(&p, k, "k", 3));
    XO_TRY(check_half(&p, v, "v", 3));
  }
  XO_TRY(xo_check_same_shape(k, v, p.op, "k", "v"));
  XO_TRY(check_int32(&p, cu_seqlens_q, "cu_seqlens_q", 1));
  XO_TRY(check_int32(&p, cu_seqlens_k, "cu_seqlens_k", 1));
  if (cu_seqlens_q->shape[0] != cu_seqlens_k->shape[0] || cu_seqlens_q->shape[0] < 1)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                   "%s: cu_seqlens_q and cu_seqlens_k must both be (batch + 1,), got (%lld,) and (%lld,)", p.op,
                   (long long)cu_seqlens_q->shape[0], (long long)cu_seqlens_k->shape[0]);
  if (k->shape[k->ndim - 1] != q->shape[2])
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: k has headdim %lld but q has headdim %lld", p.op,
                   (long long)k->shape[k->ndim - 1], (long long)q->shape[2]);
  if (max_seqlen_q < 0 || max_seqlen_k < 0)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: max_seqlen_q and max_seqlen_k must be >= 0", p.op);
  p.batch = cu_seqlens_q->shape[0] - 1, p.seqlen_q = max_seqlen_q, p.seqlen_k = max_seqlen_k;
  p.heads = q->shape[1], p.heads_k = k->shape[k->ndim - 2], p.head_dim = q->shape[2];
  seq_strides(q, 1, p.q_strides), seq_strides(out, 1, p.o_strides);
  if (block_table) {
    XO_TRY(check_paged_cache(&p, block_table, k, "cu_seqlens_q"));
    if (max_seqlen_k > p.page_size * p.max_pages)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                     "%s: max_seqlen_k is %d but block_table holds %lld pages of %lld tokens a sequence", p.op,
                     max_seqlen_k, (long long)p.max_pages, (long long)p.page_size);
    seq_strides(k, 0, p.k_strides), seq_strides(v, 0, p.v_strides); /* (page, slot, head) */
  } else {
    seq_strides(k, 1, p.k_strides), seq_strides(v, 1, p.v_strides);
  }
  return run(&p, options, stream);
}

xopsaot_status xopsaot_flash_attn_with_kvcache(const xopsaot_tensor *q, const xopsaot_tensor *k_cache,
                                               const xopsaot_tensor *v_cache, const xopsaot_tensor *k,
                                               const xopsaot_tensor *v, const xopsaot_tensor *cache_seqlens,
                                               const xopsaot_tensor *block_table, const xopsaot_tensor *out,
                                               const xopsaot_tensor *lse, const xopsaot_attention_options *options,
                                               void *stream) {
  attn_problem p = {.op = "flash_attn_with_kvcache", .q = q, .k = k_cache, .v = v_cache, .out = out, .lse = lse,
                    .seqused_k = cache_seqlens, .block_table = block_table, .kvcache = 1};
  XO_TRY(check_half(&p, q, "q", 4));
  XO_TRY(check_cache(&p, k_cache, "k_cache"));
  XO_TRY(check_cache(&p, v_cache, "v_cache"));
  XO_TRY(check_half(&p, out, "out", 4));
  XO_TRY(xo_check_same_shape(q, out, p.op, "q", "out"));
  XO_TRY(xo_check_same_shape(k_cache, v_cache, p.op, "k_cache", "v_cache"));
  XO_TRY(xo_check_dtype(v_cache, k_cache->dtype, p.op, "v_cache"));
  if (!options) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: options is NULL", p.op);
  p.batch = q->shape[0], p.seqlen_q = q->shape[1], p.heads = q->shape[2], p.head_dim = q->shape[3];
  p.heads_k = k_cache->shape[2];
  if (k_cache->shape[3] != p.head_dim)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: k_cache has headdim %lld but q has headdim %lld", p.op,
                   (long long)k_cache->shape[3], (long long)p.head_dim);
  if (block_table) {
    XO_TRY(check_paged_cache(&p, block_table, k_cache, "q"));
    p.seqlen_k = p.page_size * p.max_pages;
  } else {
    if (k_cache->shape[0] != p.batch)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: k_cache has batch %lld but q has batch %lld", p.op,
                     (long long)k_cache->shape[0], (long long)p.batch);
    p.seqlen_k = k_cache->shape[1];
  }
  if (cache_seqlens) {
    XO_TRY(check_int32(&p, cache_seqlens, "cache_seqlens", 1));
    if (cache_seqlens->shape[0] != p.batch)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: cache_seqlens has %lld entries but q has batch %lld", p.op,
                     (long long)cache_seqlens->shape[0], (long long)p.batch);
  }
  if ((k == NULL) != (v == NULL))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: pass both k and v, or neither", p.op);
  seq_strides(q, 0, p.q_strides), seq_strides(k_cache, 0, p.k_strides), seq_strides(v_cache, 0, p.v_strides);
  seq_strides(out, 0, p.o_strides);
  XO_TRY(check_dims(&p));
  if (k) {
    if (!cache_seqlens)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: new k and v need cache_seqlens (where to write them)", p.op);
    XO_TRY(check_half(&p, k, "k", 4));
    XO_TRY(check_half(&p, v, "v", 4));
    XO_TRY(xo_check_same_shape(k, v, p.op, "k", "v"));
    if (k->shape[0] != p.batch || k->shape[2] != p.heads_k || k->shape[3] != p.head_dim)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                     "%s: k must be (batch, seqlen_new, heads_k, headdim) = (%lld, _, %lld, %lld)", p.op,
                     (long long)p.batch, (long long)p.heads_k, (long long)p.head_dim);
    if (k->shape[1] > p.seqlen_k)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: k has %lld new tokens but the cache holds %lld", p.op,
                     (long long)k->shape[1], (long long)p.seqlen_k);
    p.seqlen_k_new = k->shape[1];
    if (p.seqlen_k_new > 0 && p.batch > 0) {
      float k_scale, v_scale;
      XO_TRY(cache_scales(&p, options, &k_scale, &v_scale));
      int64_t ks[3], vs[3];
      seq_strides(k, 0, ks), seq_strides(v, 0, vs);
      xk_kv_append_args a = {
          .KNew = k->data, .VNew = v->data, .KCache = k_cache->data, .VCache = v_cache->data,
          .CacheSeqlens = cache_seqlens->data, .BlockTable = block_table ? block_table->data : NULL,
          .stride_nb = ks[0], .stride_ns = ks[1], .stride_nh = ks[2],
          .stride_vnb = vs[0], .stride_vns = vs[1], .stride_vnh = vs[2],
          .stride_kb = p.k_strides[0], .stride_ks = p.k_strides[1], .stride_kh = p.k_strides[2],
          .stride_vb = p.v_strides[0], .stride_vs = p.v_strides[1], .stride_vh = p.v_strides[2],
          .stride_btb = block_table ? block_table->strides[0] : 0,
          .head_dim = (int32_t)p.head_dim, .paged = block_table != NULL,
          .page_size = (int32_t)p.page_size, .n_pages = (int32_t)p.n_pages, .max_pages = (int32_t)p.max_pages,
          .capacity = p.seqlen_k,
          .k_inv_scale = 1.0f / k_scale, .v_inv_scale = 1.0f / v_scale,
          .seqlen_new = (int32_t)p.seqlen_k_new, .heads_k = (int32_t)p.heads_k, .batch = (int32_t)p.batch,
      };
      xk_kv_append_keys keys = {q->dtype, k_cache->dtype, block_d_for(p.head_dim)};
      XO_TRY(xo_launch(&xk_kv_append, &keys.T, &a, q->device, stream));
    }
  }
  /* without cache_seqlens the whole cache is valid; the kernel's seqlen_k is then its capacity */
  if (!cache_seqlens) p.seqlen_k_new = 0;
  p.seqlen_k -= cache_seqlens ? p.seqlen_k_new : 0; /* the kernel adds seqlen_k_new to cache_seqlens[b] */
  return run(&p, options, stream);
}
