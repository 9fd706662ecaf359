/* xops-aot: ahead-of-time compiled GPU operators, stable C ABI.
 *
 * Every function returns an xopsaot_status; on failure xopsaot_last_error() gives a readable message for the
 * calling thread. The library never prints and never exits. It needs no CUDA library at link time: the
 * driver (libcuda.so.1) is loaded on first use, so the library loads on machines without a GPU.
 *
 * Tensors are described by xopsaot_tensor (device pointer, shape, strides in elements, dtype, device
 * ordinal). Kernels are launched on `stream` (a CUstream; NULL is the legacy default stream) in the
 * context current on the calling thread when it belongs to the tensors' device, else in that device's
 * primary context. Outputs are written, inputs never modified.
 */
#ifndef XOPSAOT_H
#define XOPSAOT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 3 added the norms, activations and softmax family; 4 the rotary embeddings; 5 the elementwise ops, dropout and
 * scans; 6 the fused matmul forms, cross entropy and sampling */
#define XOPSAOT_ABI_VERSION 6
#define XOPSAOT_MAX_NDIM 8

#if defined(XOPSAOT_BUILDING)
#define XOPSAOT_API __attribute__((visibility("default")))
#else
#define XOPSAOT_API
#endif

typedef enum xopsaot_status {
  XOPSAOT_SUCCESS = 0,
  XOPSAOT_ERROR_INVALID_ARGUMENT = 1, /* bad shape, stride, dtype, pointer or value */
  XOPSAOT_ERROR_UNSUPPORTED = 2,      /* valid request with no compiled variant (e.g. a head dim) */
  XOPSAOT_ERROR_NO_DRIVER = 3,        /* libcuda.so.1 not loadable, cuInit failed, or no device */
  XOPSAOT_ERROR_NO_BINARY = 4,        /* no binary for this GPU's architecture */
  XOPSAOT_ERROR_DRIVER = 5,           /* a driver call failed (message names it and its error) */
  XOPSAOT_ERROR_CAPTURE = 6,          /* a module had to be loaded while the stream is capturing */
  XOPSAOT_ERROR_OUT_OF_MEMORY = 7
} xopsaot_status;

typedef enum xopsaot_dtype {
  XOPSAOT_FLOAT16 = 1,
  XOPSAOT_BFLOAT16 = 2,
  XOPSAOT_FLOAT32 = 3,
  XOPSAOT_FLOAT64 = 4,
  XOPSAOT_INT8 = 5,
  XOPSAOT_INT16 = 6,
  XOPSAOT_INT32 = 7,
  XOPSAOT_INT64 = 8,
  XOPSAOT_UINT8 = 9,
  XOPSAOT_BOOL = 10,
  XOPSAOT_FLOAT8_E4M3 = 11,
  XOPSAOT_FLOAT8_E5M2 = 12
} xopsaot_dtype;

typedef struct xopsaot_tensor {
  void *data;                         /* device pointer to element [0, ..., 0] */
  int64_t shape[XOPSAOT_MAX_NDIM];
  int64_t strides[XOPSAOT_MAX_NDIM];  /* in elements */
  int32_t ndim;
  int32_t dtype;                      /* xopsaot_dtype */
  int32_t device;                     /* CUDA device ordinal */
  int32_t reserved;                   /* 0 */
} xopsaot_tensor;

/* Fill `t` as a contiguous (row-major) tensor. Returns t. */
static inline xopsaot_tensor *xopsaot_tensor_contiguous(xopsaot_tensor *t, void *data, int32_t ndim,
                                                        const int64_t *shape, int32_t dtype, int32_t device) {
  int64_t stride = 1;
  int32_t i;
  t->data = data;
  t->ndim = ndim;
  t->dtype = dtype;
  t->device = device;
  t->reserved = 0;
  for (i = XOPSAOT_MAX_NDIM - 1; i >= 0; --i) {
    t->shape[i] = i < ndim ? shape[i] : 1;
    t->strides[i] = i < ndim ? stride : 0;
    if (i < ndim) stride *= shape[i];
  }
  return t;
}

/* Library and devices */
XOPSAOT_API int xopsaot_abi_version(void);
XOPSAOT_API const char *xopsaot_last_error(void);    /* this thread's last failure message */
XOPSAOT_API const char *xopsaot_built_archs(void);   /* "sm_80, sm_90a, ..." */
XOPSAOT_API xopsaot_status xopsaot_device_count(int *count);
/* Compute capability (10 * major + minor); fails with NO_BINARY if no binary serves the device. */
XOPSAOT_API xopsaot_status xopsaot_device_arch(int device, int *arch);
XOPSAOT_API xopsaot_status xopsaot_device_name(int device, char *name, int size);
/* Peak memory bandwidth in GB/s from the memory's clock and bus width (0 where the driver does not report them).
 * Some dispatch rules depend on it (flash_attn_with_kvcache's decode kernel). */
XOPSAOT_API xopsaot_status xopsaot_device_memory_gbps(int device, int *gbps);
/* Wait for the work queued on `stream` (a stream of `device`). */
XOPSAOT_API xopsaot_status xopsaot_stream_synchronize(int device, void *stream);
/* Load every binary for `device` now (e.g. before CUDA graph capture). */
XOPSAOT_API xopsaot_status xopsaot_preload(int device);
/* Introspection: the binary of variant `index` (see manifest.json). */
XOPSAOT_API int xopsaot_variant_count(void);
/* The variant the calling thread's last op selected (-1: none yet), e.g. to see which kernel ran. */
XOPSAOT_API int xopsaot_last_variant(void);
/* The variants the calling thread's last launches selected, newest first (ops such as linear_cross_entropy launch
 * several kernels): fills up to `capacity` (at most XOPSAOT_RECENT_VARIANTS) indices and returns how many. */
#define XOPSAOT_RECENT_VARIANTS 16
XOPSAOT_API int xopsaot_recent_variants(int *indices, int capacity);
XOPSAOT_API xopsaot_status xopsaot_variant_binary(int index, const void **data, uint64_t *size);
/* XOPSAOT_AUTOTUNE=1 (read at first use): the file that remembers the configs timed per device and bucket; NULL
 * when autotuning is off or no cache directory can be named. */
XOPSAOT_API const char *xopsaot_autotune_cache(void);

/* Ops. Shapes follow torch / flash-attn conventions; see the README for each op's contract. */

/* out = a + b, all the same shape, dtype (float16, bfloat16, float32) and device, contiguous. (xopsaot_elementwise
 * with XOPSAOT_EW_ADD, kept for ABI 1 callers.) */
XOPSAOT_API xopsaot_status xopsaot_add(const xopsaot_tensor *a, const xopsaot_tensor *b, const xopsaot_tensor *out,
                                       void *stream);

/* Elementwise ops. Binary: out = f(x, y); unary: out = f(x) (y NULL). */
typedef enum {
  XOPSAOT_EW_ADD = 0,         /* x + alpha * y */
  XOPSAOT_EW_MUL = 1,
  XOPSAOT_EW_DIV = 2,         /* true division: float dtypes only */
  XOPSAOT_EW_DIV_TRUNC = 3,   /* rounded toward zero; integer division by zero gives an unspecified value */
  XOPSAOT_EW_DIV_FLOOR = 4,   /* rounded down (Python's //) */
  XOPSAOT_EW_POW = 5,         /* integers: a negative exponent gives 1 for x = 1, +-1 for x = -1, else 0 */
  XOPSAOT_EW_BITWISE_AND = 6, /* integers and bool */
  XOPSAOT_EW_BITWISE_OR = 7,
  XOPSAOT_EW_MAXIMUM = 8, /* NaN propagates */
  XOPSAOT_EW_MINIMUM = 9,
  XOPSAOT_EW_EQ = 10, /* comparisons: out is bool */
  XOPSAOT_EW_NE = 11,
  XOPSAOT_EW_LT = 12,
  XOPSAOT_EW_LE = 13,
  XOPSAOT_EW_GT = 14,
  XOPSAOT_EW_GE = 15,
  XOPSAOT_EW_NEG = 16, /* unary from here */
  XOPSAOT_EW_ABS = 17,
  XOPSAOT_EW_EXP = 18, /* exp, rsqrt, sin, cos: float dtypes only */
  XOPSAOT_EW_RSQRT = 19,
  XOPSAOT_EW_SIN = 20,
  XOPSAOT_EW_COS = 21,
  XOPSAOT_EW_ISINF = 22, /* out is bool; false for integers and bool */
  XOPSAOT_EW_ISNAN = 23,
  XOPSAOT_EW_BITWISE_NOT = 24, /* integers and bool */
  XOPSAOT_EW_CLAMP = 25,       /* min(max(x, min), max); NaN propagates */
  XOPSAOT_EW_SUB = 26          /* x - alpha * y */
} xopsaot_elementwise_op;

typedef struct {
  int op;             /* xopsaot_elementwise_op */
  int scalar_operand; /* 0: none; 1: x is the scalar below (x may be NULL); 2: y is */
  double scalar;      /* the scalar operand for float dtypes (used as float32) ... */
  int64_t scalar_int; /* ... and for integers and bool (wrapped to the dtype, as torch does) */
  double alpha;       /* add and sub, float dtypes */
  int64_t alpha_int;  /* add and sub, integers and bool */
  double min, max;    /* clamp bounds, float dtypes (+-inf: none) */
  int64_t min_int, max_int; /* clamp bounds, integers (INT64_MIN / INT64_MAX: none) */
} xopsaot_elementwise_options;

/* x and y share one dtype: float16, bfloat16, float32, int32, int64 or bool (promote first); out has that dtype,
 * or bool for the comparisons and isinf/isnan; float16/bfloat16 compute in float32. x and y broadcast to out's
 * shape as in NumPy (missing leading dims or dims of 1; stride 0 works too) and may have any strides; out may have
 * any strides without overlapping itself, and may be x or y itself (in place) but not overlap them otherwise. */
XOPSAOT_API xopsaot_status xopsaot_elementwise(const xopsaot_tensor *x, const xopsaot_tensor *y,
                                               const xopsaot_tensor *out, const xopsaot_elementwise_options *options,
                                               void *stream);

/* Dropout: out = x * keep / (1 - p), x and out contiguous, of one shape and dtype (float16, bfloat16, float32).
 * Element i is kept when the uniform value of Philox4x32-10 output i % 4, counter offset + i // 4 (low word, high
 * word, 0, 0), key seed (low word, high word), top 24 bits scaled by 2^-24, is at least p. Calls that share a seed
 * draw independent masks when their offsets are at least ceil(numel / 4) apart. p in [0, 1]; offset >= 0. */
XOPSAOT_API xopsaot_status xopsaot_dropout(const xopsaot_tensor *x, const xopsaot_tensor *out, float p, int64_t seed,
                                           int64_t offset, void *stream);

/* Scans along dim: XOPSAOT_SCAN_CUMSUM (reverse: from the end) and XOPSAOT_SCAN_LOGCUMSUMEXP. x and out contiguous,
 * of one shape; out is x's dtype for float16/bfloat16/float32 and int64 for int32/int64/bool (cumsum only), as in
 * torch. cu_seqlens (optional, int32 (batch + 1,), dim 0 only): the scan restarts at each sequence start, and the
 * tokens after cu_seqlens[batch] are scanned as one more sequence. */
enum { XOPSAOT_SCAN_CUMSUM = 0, XOPSAOT_SCAN_LOGCUMSUMEXP = 1 };
XOPSAOT_API xopsaot_status xopsaot_scan(const xopsaot_tensor *x, const xopsaot_tensor *out,
                                        const xopsaot_tensor *cu_seqlens, int dim, int op, int reverse, void *stream);

/* RMS norm over the last dim (xopsaot_norm with the rms kind): out = x / sqrt(mean(x^2) + eps) * weight. With
 * residual (not NULL):
 * h = x + residual is written to residual_out and out = rms_norm(h). x, residual, out and residual_out are
 * (rows..., n) with a contiguous last dim; weight is (n,). */
XOPSAOT_API xopsaot_status xopsaot_rms_norm(const xopsaot_tensor *x, const xopsaot_tensor *weight,
                                            const xopsaot_tensor *residual, const xopsaot_tensor *out,
                                            const xopsaot_tensor *residual_out, float eps, void *stream);

/* Norms over the last dim through one kernel: rms (x / sqrt(mean(x^2) + eps)) or layer ((x - mean) /
 * sqrt(var + eps)), then * (weight_offset + weight) when weight is given, + bias when given. With residual:
 * h = x + residual is written to residual_out and normalized. With gate (a tensor of x's shape): gate_pre = 1
 * normalizes x * act(gate), gate_pre = 0 multiplies the result by act(gate); a gate and a residual do not
 * combine. x, residual, gate, out and residual_out are (rows..., n) with a contiguous last dim; weight and bias
 * are (n,). out and residual_out must not overlap the inputs or each other (on Hopper, programs that share a long
 * row exchange their partial sums through out before writing it). */
typedef enum { XOPSAOT_NORM_RMS = 0, XOPSAOT_NORM_LAYER = 1 } xopsaot_norm_kind;
typedef enum { XOPSAOT_GATE_SILU = 0, XOPSAOT_GATE_SIGMOID = 1 } xopsaot_gate_act;
typedef struct {
  int norm;            /* xopsaot_norm_kind */
  float eps;           /* finite, >= 0 */
  float weight_offset; /* 1 gives the (1 + weight) form; 0 the plain weight */
  int gate_act;        /* with a gate: xopsaot_gate_act */
  int gate_pre;        /* with a gate: 1 = norm(x * act(gate)), 0 = norm(x) * act(gate) */
} xopsaot_norm_options;
XOPSAOT_API xopsaot_status xopsaot_norm(const xopsaot_tensor *x, const xopsaot_tensor *weight,
                                        const xopsaot_tensor *bias, const xopsaot_tensor *residual,
                                        const xopsaot_tensor *gate, const xopsaot_tensor *out,
                                        const xopsaot_tensor *residual_out, const xopsaot_norm_options *options,
                                        void *stream);

/* torch's group_norm: x (N, C, *) contiguous, num_groups dividing C; each sample's group of C / num_groups
 * channels is normalized over its channels and positions, then * weight[c] + bias[c] (each (C,), optional). */
XOPSAOT_API xopsaot_status xopsaot_group_norm(const xopsaot_tensor *x, const xopsaot_tensor *weight,
                                              const xopsaot_tensor *bias, const xopsaot_tensor *out,
                                              int64_t num_groups, float eps, void *stream);

/* Activations, computed in float32. xopsaot_activation: out = act(x), x and out contiguous, of one shape.
 * xopsaot_gated_activation: x (rows..., 2d) with a contiguous last dim, out (rows..., d):
 * out = act(x[..., :d]) * x[..., d:] (silu_and_mul, gelu_and_mul). */
typedef enum {
  XOPSAOT_ACT_RELU = 0,
  XOPSAOT_ACT_GELU = 1,      /* x * Phi(x), with erf */
  XOPSAOT_ACT_GELU_TANH = 2, /* torch's gelu(approximate="tanh") */
  XOPSAOT_ACT_SILU = 3,
  XOPSAOT_ACT_SIGMOID = 4,
  XOPSAOT_ACT_TANH = 5
} xopsaot_act;
XOPSAOT_API xopsaot_status xopsaot_activation(const xopsaot_tensor *x, const xopsaot_tensor *out, int act,
                                              void *stream);
XOPSAOT_API xopsaot_status xopsaot_gated_activation(const xopsaot_tensor *x, const xopsaot_tensor *out, int act,
                                                    void *stream);

/* Softmax over the last dim (n up to 2^31 - 65536). x and out: (rows..., n) with a contiguous last dim. */
XOPSAOT_API xopsaot_status xopsaot_softmax(const xopsaot_tensor *x, const xopsaot_tensor *out, void *stream);

/* The softmax family over the last dim, computed in float32: softmax and log_softmax write out of x's shape
 * (rows..., n with a contiguous last dim); logsumexp writes one value per row to a contiguous out of shape
 * (rows...) or (rows..., 1), -inf for rows of no elements or all -inf. Rows hold at most 2^31 - 65536 elements
 * (the looping kernel's 32-bit offsets reach two steps past a row's end); longer is XOPSAOT_ERROR_INVALID_ARGUMENT. */
typedef enum { XOPSAOT_SOFTMAX = 0, XOPSAOT_LOG_SOFTMAX = 1, XOPSAOT_LOGSUMEXP = 2 } xopsaot_softmax_kind;
XOPSAOT_API xopsaot_status xopsaot_softmax_family(const xopsaot_tensor *x, const xopsaot_tensor *out, int kind,
                                                  void *stream);

/* Rotary embeddings (flash-attn's apply_rotary), computed in float32. x is (batch, seqlen, heads, head_dim), or
 * (total_tokens, heads, head_dim) with cu_seqlens ((batch + 1,) int32 cumulative lengths, then max_seqlen bounds
 * the sequences' lengths); strides are free but the last dim's. cos and sin are (seqlen_ro, rotary_dim / 2) of x's
 * dtype with one row stride, rotary_dim <= head_dim. Token s of sequence b takes table row s + offset, or
 * s + seqlen_offsets[b] when seqlen_offsets ((batch,) int32) is given; a row outside the table leaves the token
 * unrotated. interleaved = 0 rotates halves (i, i + rotary_dim / 2) (GPT-NeoX), 1 pairs (2i, 2i + 1) (GPT-J).
 * out has x's shape: out == x (same data and strides) rotates in place and leaves the columns past rotary_dim as
 * they are; otherwise they are copied, and out must not overlap x. */
XOPSAOT_API xopsaot_status xopsaot_rotary(const xopsaot_tensor *x, const xopsaot_tensor *cos,
                                          const xopsaot_tensor *sin, const xopsaot_tensor *seqlen_offsets,
                                          const xopsaot_tensor *cu_seqlens, const xopsaot_tensor *out,
                                          int64_t offset, int64_t max_seqlen, int interleaved, void *stream);

/* Rotary embeddings as servers apply them: q (tokens..., heads, head_size) and k (tokens..., heads_k, head_size,
 * or NULL) rotated in place in one launch, each token by row positions[token] of cos_sin_cache (max_position,
 * rot_dim) of q's dtype, whose first rot_dim / 2 columns are cos and the rest sin. positions (tokens...) int64,
 * contiguous; the token dims of q and k must collapse to one stride. A position outside the cache leaves its
 * token unrotated. is_neox = 1 rotates halves, 0 interleaved pairs; columns past rot_dim are left as they are. */
XOPSAOT_API xopsaot_status xopsaot_rotary_qk(const xopsaot_tensor *positions, const xopsaot_tensor *q,
                                             const xopsaot_tensor *k, const xopsaot_tensor *cos_sin_cache,
                                             int is_neox, void *stream);

/* Xopes' lrpe_cosine: x (batch, seqlen, heads, head_dim), theta float32 (heads or 1, head_dim or 1), out
 * (batch, seqlen, heads, 2 head_dim): out[..., :d] = x cos(t theta), out[..., d:] = x sin(t theta), t = s + offset,
 * the angle formed and reduced to [-pi, pi] in float64 (so large t loses no accuracy). */
XOPSAOT_API xopsaot_status xopsaot_lrpe_cosine(const xopsaot_tensor *x, const xopsaot_tensor *theta,
                                               const xopsaot_tensor *out, int64_t offset, void *stream);

/* out = a @ b. a (M, K) or (B, M, K), b (K, N) or (B, K, N), out (M, N) or (B, M, N) contiguous; a batch
 * of 1 or a 2-D operand broadcasts. Any strides for a and b. fp16/bf16 on tensor cores, fp32 in fp32. */
XOPSAOT_API xopsaot_status xopsaot_matmul(const xopsaot_tensor *a, const xopsaot_tensor *b, const xopsaot_tensor *out,
                                          void *stream);

/* The fused 2-D forms of the matmul family (addmm, linear, gate_linear):
 *   out = act(alpha * (a' @ b) + beta * input) + residual,  a' = gate_act(a) * gate when gate is given, else a.
 * a (M, K) with a contiguous last dim; b (K, N) contiguous along one of its dims (a transposed (N, K) weight is
 * contiguous along K); out (M, N) with a contiguous last dim, not overlapping the operands. gate (optional): a's
 * shape and strides; a' is computed by a pass of its own into a stream-ordered workspace, rounded to a's dtype as
 * the unfused sequence stores it. input (optional): broadcasts to (M, N) ((N,) is a bias row, (M, 1) a column; any
 * strides), and is ignored when beta is 0, as in torch's addmm. residual (optional): (M, N) with a contiguous last
 * dim. All operands share a's dtype; fp16/bf16 accumulate in float32 on tensor cores, the epilogue (in two launches
 * with a gate) runs in float32. */
typedef struct {
  float alpha, beta;
  int act;      /* xopsaot_act, or -1: none */
  int gate_act; /* with a gate: xopsaot_act, or -1: none (a * gate) */
} xopsaot_gemm_options;
XOPSAOT_API xopsaot_status xopsaot_gemm(const xopsaot_tensor *a, const xopsaot_tensor *b, const xopsaot_tensor *gate,
                                        const xopsaot_tensor *input, const xopsaot_tensor *residual,
                                        const xopsaot_tensor *out, const xopsaot_gemm_options *options,
                                        void *stream);

/* Cross entropy with class-index targets, as torch's F.cross_entropy: per row, loss = logsumexp(x) -
 * (1 - label_smoothing) x[target] - label_smoothing * mean(x), computed in float32; rows whose target is
 * ignore_index give 0 and are not counted by the mean (a mean over no rows is NaN); a target outside [0, classes)
 * gives NaN (not checked here). logits (rows..., classes) with a contiguous last dim whose leading dims read as rows
 * with one stride; target int32/int64, contiguous, one per row; out in the logits' dtype, contiguous: one element
 * per row for XOPSAOT_REDUCTION_NONE, else one element. */
typedef enum { XOPSAOT_REDUCTION_NONE = 0, XOPSAOT_REDUCTION_MEAN = 1, XOPSAOT_REDUCTION_SUM = 2 } xopsaot_reduction;
typedef struct {
  int64_t ignore_index;  /* torch's default: -100 */
  float label_smoothing; /* in [0, 1] */
  int reduction;         /* xopsaot_reduction */
} xopsaot_cross_entropy_options;
XOPSAOT_API xopsaot_status xopsaot_cross_entropy(const xopsaot_tensor *logits, const xopsaot_tensor *target,
                                                 const xopsaot_tensor *out,
                                                 const xopsaot_cross_entropy_options *options, void *stream);
/* Cross entropy of the logits x @ weight^T + bias, which never exist whole: chunk_rows rows at a time (0 chooses
 * the most whose logits fit in 256 MiB) are computed into a stream-ordered workspace and reduced. x (rows...,
 * hidden) as logits above; weight (vocab, hidden) and bias (vocab,) (optional) in x's dtype, weight's last dim
 * contiguous; target and out as above. The chunk's logits are rounded to x's dtype, as x @ weight^T stores them. */
XOPSAOT_API xopsaot_status xopsaot_linear_cross_entropy(const xopsaot_tensor *x, const xopsaot_tensor *weight,
                                                        const xopsaot_tensor *bias, const xopsaot_tensor *target,
                                                        const xopsaot_tensor *out,
                                                        const xopsaot_cross_entropy_options *options,
                                                        int64_t chunk_rows, void *stream);

/* Sampling one token per row (kernels_src/sampling.py): temperature 0 takes the argmax; otherwise the tokens top_k
 * keeps (the logits at or above the k-th largest; 0: all) and then top_p keeps (the fewest highest tokens holding top_p
 * of softmax(logits / temperature) over those, ties kept) compete by Gumbel-max: argmax of logits / temperature + g,
 * g = -log(-log(u)). A NaN logit reads as -inf: never drawn, counted by no filter; a row of nothing above -inf gives
 * token 0. Token i of row r takes output i % 4 of Philox4x32-10 counter (offset + i / 4 (low, high word), r,
 * 0) under key (seed low, high word), u = (top 23 bits + 0.5) / 2^23. No sort of the row: top_k and top_p thresholds
 * are found by bisection over the logits' order (a pass over the row per step, 32 steps at most each; on sm_90, calls
 * of at most three rows per eight multiprocessors, rows of 16385 to 131072 tokens, a multiple of 16, run a thread-block
 * cluster of 8 programs a row, with a workspace of 128 bytes a row from the stream-ordered pool). Calls no filter
 * touches (temperature 0, or top_k 0 or at least the vocabulary and top_p 1, without the per-row arrays top_ks and
 * top_ps) of at most one row per two multiprocessors are split over a program per 4096 tokens, with a workspace of 8
 * bytes a program from the stream-ordered pool. logits (rows..., vocab) with a contiguous last dim, leading dims read
 * with one stride; out int64, contiguous, one per row. temperatures (float32), top_ks (int32) and top_ps (float32),
 * optional, contiguous, one per row, replace the options' scalars; their values are not checked here. */
typedef struct {
  float temperature; /* >= 0 */
  int top_k;         /* >= 0; 0: no limit */
  float top_p;       /* in (0, 1]; 1: no limit */
  int64_t seed;
  int64_t offset; /* >= 0 */
} xopsaot_sample_options;
XOPSAOT_API xopsaot_status xopsaot_sample(const xopsaot_tensor *logits, const xopsaot_tensor *temperatures,
                                          const xopsaot_tensor *top_ks, const xopsaot_tensor *top_ps,
                                          const xopsaot_tensor *out, const xopsaot_sample_options *options,
                                          void *stream);
/* Sampling from the logits x @ weight^T + bias (x, weight and bias as in xopsaot_linear_cross_entropy), computed
 * chunk by chunk of rows (the most whose logits fit in 256 MiB) into a workspace; the same draws as xopsaot_sample
 * on those logits rounded to x's dtype. */
XOPSAOT_API xopsaot_status xopsaot_linear_sample(const xopsaot_tensor *x, const xopsaot_tensor *weight,
                                                 const xopsaot_tensor *bias, const xopsaot_tensor *temperatures,
                                                 const xopsaot_tensor *top_ks, const xopsaot_tensor *top_ps,
                                                 const xopsaot_tensor *out, const xopsaot_sample_options *options,
                                                 void *stream);

/* ---- Attention (forward), flash-attn's layouts and conventions ----
 * Dense: q (batch, seqlen_q, heads, headdim), k and v (batch, seqlen_k, heads_k, headdim), heads % heads_k == 0
 * (GQA/MQA), out like q. Varlen: the same without the batch dim, sequences packed along the first dim and
 * delimited by int32 cumulative lengths (batch + 1,). fp16/bf16; headdim a multiple of 8, at most 256; strides
 * multiples of 8 elements with a contiguous last dim; data 16-byte aligned.
 * Query i sees key j when i + seqlen_k - seqlen_q - window_left <= j <= i + seqlen_k - seqlen_q + window_right
 * (bottom-right alignment; a negative window side is unlimited; causal sets window_right to 0). A row that sees
 * no key gets 0 and lse +inf.
 * lse (optional, NULL to skip): float32 log-sum-exp of the scaled scores, (batch, heads, seqlen_q); varlen
 * (heads, total_q). alibi_slopes (optional): float32 (heads,) or (batch, heads); adds -slope * |i + seqlen_k -
 * seqlen_q - j| to the scores. */
typedef struct xopsaot_attention_options {
  float softmax_scale; /* flash-attn's default is 1 / sqrt(headdim) */
  int causal;
  int window_left, window_right; /* -1: unlimited */
  float softcap;                 /* > 0: scores become softcap * tanh(scores / softcap) */
  int num_splits;                /* split-KV slices: 0 chooses (splits when batch x heads_k cannot fill the GPU:
                                    into the slices that make one wave of programs, none when batch x heads_k fill
                                    90-100% of it, where the tuning table has a config for that; an fp8 cache of
                                    head dim up to 128 splits until there are four programs per multiprocessor;
                                    on Hopper a step from a 16-bit or fp8 cache of at most a quarter of the
                                    multiprocessors' programs runs a TMA kernel, also in the slices that make one
                                    wave, as does an fp8 cache's step of any count at head dim 128, or 64 paged,
                                    and a paged 16-bit cache's of head dim 128 and 2048 keys or more up to one wave
                                    where its pages divide 128 keys) */
  float k_scale, v_scale;        /* an fp8 cache's per-tensor scales (stored = value / scale); 0 reads as 1 */
} xopsaot_attention_options;

XOPSAOT_API xopsaot_status xopsaot_flash_attn(const xopsaot_tensor *q, const xopsaot_tensor *k,
                                              const xopsaot_tensor *v, const xopsaot_tensor *out,
                                              const xopsaot_tensor *lse, const xopsaot_tensor *alibi_slopes,
                                              const xopsaot_attention_options *options, void *stream);

/* Varlen: q (total_q, heads, headdim), k and v (total_k, heads_k, headdim); cu_seqlens_* int32 (batch + 1,),
 * non-decreasing from 0, read on the device (not checked here); max_seqlen_* bound every sequence's length.
 * Zero-length sequences are allowed. With block_table (batch, max_pages) int32 (else NULL), k and v are paged
 * caches (num_pages, page_size, heads_k, headdim), as flash_attn_with_kvcache's (fp8 e4m3 with options' k_scale
 * and v_scale too): sequence b's keys are its first cu_seqlens_k[b + 1] - cu_seqlens_k[b] tokens through
 * block_table[b], and max_seqlen_k may not exceed max_pages x page_size (a table entry outside the cache reads
 * zeros or another page of it, never memory outside it). On Hopper, prefill of 16-bit pools (at least 512 query rows
 * per key head a sequence on average) first copies the pages to packed rows of a stream-ordered workspace of up to
 * 1 GiB (batch x max_seqlen_k rows of keys and values), freed after the launch. */
XOPSAOT_API xopsaot_status xopsaot_flash_attn_varlen(const xopsaot_tensor *q, const xopsaot_tensor *k,
                                                     const xopsaot_tensor *v, const xopsaot_tensor *cu_seqlens_q,
                                                     const xopsaot_tensor *cu_seqlens_k,
                                                     const xopsaot_tensor *block_table, const xopsaot_tensor *out,
                                                     const xopsaot_tensor *lse, const xopsaot_tensor *alibi_slopes,
                                                     int max_seqlen_q, int max_seqlen_k,
                                                     const xopsaot_attention_options *options, void *stream);

/* Attention against a KV cache (decode, chunked prefill). q (batch, seqlen_q, heads, headdim). The cache is
 * contiguous (batch, seqlen_cache, heads_k, headdim), or paged (num_pages, page_size, heads_k, headdim) when
 * block_table (batch, max_pages) int32 is given. cache_seqlens (batch,) int32: tokens already in the cache
 * (NULL: the whole cache). k and v (optional, batch, seqlen_new, heads_k, headdim) are first written into the
 * cache in place at cache_seqlens[b] + t; attention then covers cache_seqlens[b] + seqlen_new keys. Indices are
 * read on the device: positions past the cache are not written, and a table entry outside the cache reads zeros or
 * another page of the cache instead (a wrong answer, never a read outside it).
 * The cache may be XOPSAOT_FLOAT8_E4M3 (OCP e4m3, torch.float8_e4m3fn) with q, k, v and out fp16/bf16: a cached
 * entry x means x * k_scale (keys) or x * v_scale (values), and new k/v are stored as k / k_scale rounded to
 * nearest even, saturating at +-448. */
XOPSAOT_API xopsaot_status xopsaot_flash_attn_with_kvcache(
    const xopsaot_tensor *q, const xopsaot_tensor *k_cache, const xopsaot_tensor *v_cache, const xopsaot_tensor *k,
    const xopsaot_tensor *v, const xopsaot_tensor *cache_seqlens, const xopsaot_tensor *block_table,
    const xopsaot_tensor *out, const xopsaot_tensor *lse, const xopsaot_attention_options *options, void *stream);

#ifdef __cplusplus
}
#endif
#endif
