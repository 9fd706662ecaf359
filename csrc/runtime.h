/* Internal interface between the generated variant tables (aot/codegen.py), the op layer (csrc/ops) and the
 * runtime (csrc/runtime.c). Not installed; the public ABI is include/xopsaot.h. */
#ifndef XOPSAOT_RUNTIME_H
#define XOPSAOT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "xopsaot.h"

#define XO_INTERNAL __attribute__((visibility("hidden")))

enum { XO_ARG_PTR = 0, XO_ARG_I32 = 1, XO_ARG_I64 = 2, XO_ARG_F32 = 3, XO_ARG_TMA = 4 };
enum { XO_BACKEND_CUDA = 0, XO_BACKEND_HIP = 1 };
#define XO_MAX_ARGS 64
#define XO_MAX_KEYS 16
#define XO_MAX_TMA_ARGS 4
#define XO_MAX_TMA_RANK 5

/* What an op fills for a host TMA descriptor argument (aot.spec.tensor_desc): a tensor's base address, and its
 * dims and strides in elements, outermost first (the last stride 1). The launcher encodes it. */
typedef struct xo_tma_desc {
  void *base;
  int32_t rank;
  int64_t shape[XO_MAX_TMA_RANK];
  int64_t strides[XO_MAX_TMA_RANK];
} xo_tma_desc;

/* The first dim of d that TMA cannot take (a size outside [1, 2^31), a stride that is negative or not a whole
 * number of 16-byte units, the last one not 1), d->rank if its base is not 16-byte aligned, or -1 if it takes d. */
int xo_tma_unfit(const xo_tma_desc *d, int64_t elem_size) XO_INTERNAL;
/* Whether an op's kernel may take d: TMA must (xo_tma_unfit; an empty dim, as in a batch without keys, it cannot),
 * and each dim must lie clear of the next one's rows (no overlapping or broadcast views). */
int xo_tma_takes(const xo_tma_desc *d, int64_t elem_size) XO_INTERNAL;

/* How a variant's descriptor argument is encoded, from the compiled kernel's metadata (tensordesc_meta). */
typedef struct xo_tma_meta {
  uint8_t elem_type; /* CUtensorMapDataType */
  uint8_t elem_size; /* bytes */
  uint8_t swizzle;   /* CUtensorMapSwizzle */
  uint8_t rank;
  uint32_t box[XO_MAX_TMA_RANK]; /* elements, outermost first */
} xo_tma_meta;

/* One runtime argument of a kernel: where it sits in the kernel's generated args struct. */
typedef struct xo_arg {
  const char *name;
  uint32_t offset;
  uint8_t kind;
  uint8_t divisor; /* what an aligned variant's hint promises: the value is a multiple of it */
} xo_arg;

typedef struct xo_kernel xo_kernel;

/* One compiled binary and what launching it needs. */
typedef struct xo_variant {
  const xo_kernel *kernel;
  const char *label;      /* readable: kernel/arch/dtypes/keys/config */
  const char *symbol;     /* function name inside the binary */
  const char *arch_name;  /* "sm_90a", "gfx942" */
  uint64_t blob_offset;   /* where the binary sits in xo_blob */
  uint64_t blob_size;
  const int32_t *keys;    /* kernel->n_keys selection values */
  const int64_t *consts;  /* kernel->n_consts integer constexprs, for grid and predicates */
  int (*when)(const void *args, const int64_t *consts, int64_t num_sms); /* NULL: always */
  const char *when_text;  /* the predicate's source ("" for none): with the label, names a bucket on disk */
  uint64_t aligned_mask;  /* bit i: runtime argument i must be a multiple of args[i].divisor */
  uint32_t arch;          /* CUDA: 10 * major + minor of the target */
  uint8_t backend;        /* XO_BACKEND_* */
  uint8_t arch_exact;     /* runs only on exactly this arch (sm_90a and later) */
  uint8_t cooperative;
  uint8_t pdl;
  uint16_t num_warps;
  uint16_t num_ctas;
  uint32_t shared;        /* dynamic shared memory, bytes */
  uint32_t global_scratch_size, global_scratch_align;
  uint32_t profile_scratch_size, profile_scratch_align;
  uint32_t index;         /* position in xo_variants: the module-cache slot */
  uint32_t primary;       /* index of the variant this one is an autotuning alternate to (itself if none) */
  const xo_tma_meta *tma; /* one per XO_ARG_TMA argument, in order (NULL if none) */
} xo_variant;

struct xo_kernel {
  const char *name;
  const char *op;
  const char *const *key_names;
  const uint8_t *key_is_dtype; /* dtype keys hold xopsaot_dtype values */
  int n_keys;
  const char *const *const_names;
  int n_consts;
  const xo_arg *args;
  int n_args;
  const xo_variant *variants;
  int n_variants;
  void (*grid)(const void *args, const int64_t *consts, int64_t num_sms, int64_t grid[3]);
};

/* Generated (xk_kernels.c) */
extern const xo_variant xo_variants[] XO_INTERNAL;
extern const int xo_n_variants XO_INTERNAL;
extern const unsigned char xo_blob[] XO_INTERNAL;     /* .incbin'd binaries (xk_blob.S) */
extern const char xo_built_archs[] XO_INTERNAL;       /* "sm_80, sm_90a, ..." */

/* Errors: every failing path formats a thread-local message and returns its status. */
xopsaot_status xo_fail(xopsaot_status status, const char *fmt, ...) XO_INTERNAL
    __attribute__((format(printf, 2, 3)));

#define XO_TRY(expr)                     \
  do {                                   \
    xopsaot_status xo_status_ = (expr);  \
    if (xo_status_) return xo_status_;   \
  } while (0)

/* Whether `kernel` has a variant with exactly these key values on any target. */
int xo_has_keys(const xo_kernel *kernel, const int32_t *keys) XO_INTERNAL;

/* Is value compiled for key `key` of `kernel` on any target? If not, fails with a message naming `what`
 * and listing the compiled values. */
xopsaot_status xo_require_key(const xo_kernel *kernel, int key, int32_t value, const char *what) XO_INTERNAL;

/* Select a variant for keys/args on `device`, compute its grid, load its module if needed, launch on
 * `stream`. `args` points at the kernel's generated args struct. */
xopsaot_status xo_launch(const xo_kernel *kernel, const int32_t *keys, const void *args, int device,
                         void *stream) XO_INTERNAL;

/* Whether xo_launch would find a variant for these keys and arguments on `device` (for ops with a fast path). */
int xo_can_launch(const xo_kernel *kernel, const int32_t *keys, const void *args, int device) XO_INTERNAL;
/* The integer constexpr `name` of the variant xo_launch would pick for these arguments (`otherwise` if none would,
 * or it has none): what the tuning table says about a call, read before a launch parameter is fixed. */
int64_t xo_selected_const(const xo_kernel *kernel, const int32_t *keys, const void *args, int device,
                          const char *name, int64_t otherwise) XO_INTERNAL;

/* n rounded up to a multiple of m (both positive). */
static inline int64_t xo_round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

/* The multiprocessor count of `device`, for ops that size their work to the GPU. */
xopsaot_status xo_device_sm_count(int device, int *sm_count) XO_INTERNAL;
/* Its peak memory bandwidth in GB/s (0: the driver does not say), for rules that depend on how fast memory is. */
xopsaot_status xo_device_memory_gbps(int device, int *gbps) XO_INTERNAL;
/* Stream-ordered workspace (cuMemAllocAsync; capturable into graphs), freed after the launches that use it. */
xopsaot_status xo_workspace_alloc(int device, void *stream, uint64_t bytes, void **ptr) XO_INTERNAL;
void xo_workspace_free(int device, void *stream, void *ptr) XO_INTERNAL;

/* Tensor checks shared by the ops (csrc/tensor.c). */
const char *xo_dtype_name(int32_t dtype) XO_INTERNAL;
int64_t xo_dtype_size(int32_t dtype) XO_INTERNAL; /* bytes per element */
int64_t xo_numel(const xopsaot_tensor *t) XO_INTERNAL;
int xo_is_contiguous(const xopsaot_tensor *t) XO_INTERNAL;
xopsaot_status xo_check_tensor(const xopsaot_tensor *t, const char *op, const char *name, int ndim) XO_INTERNAL;
xopsaot_status xo_check_same_shape(const xopsaot_tensor *a, const xopsaot_tensor *b, const char *op,
                                   const char *na, const char *nb) XO_INTERNAL;
xopsaot_status xo_check_same_device(const xopsaot_tensor *a, const xopsaot_tensor *b, const char *op,
                                    const char *na, const char *nb) XO_INTERNAL;
xopsaot_status xo_check_dtype(const xopsaot_tensor *t, int32_t dtype, const char *op, const char *name) XO_INTERNAL;
xopsaot_status xo_check_last_dim_contiguous(const xopsaot_tensor *t, const char *op, const char *name) XO_INTERNAL;
/* Read t (..., n) as (rows, n) with one row stride; fails if the leading dims do not collapse. */
xopsaot_status xo_rows(const xopsaot_tensor *t, const char *op, const char *name, int64_t *rows,
                       int64_t *stride) XO_INTERNAL;

#endif
