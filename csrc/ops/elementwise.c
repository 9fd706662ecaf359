/* Elementwise ops with NumPy/torch broadcasting: the checks, the dims merged across operands, and the choice
 * between the flat kernel (contiguous out, inputs contiguous / one element / a row or column vector / a scalar
 * value, 16-byte aligned) and the strided kernel (anything else, up to 4 merged dims per launch). */
#include <stdint.h>
#include <string.h>

#include "xk_kernels.h"

enum { KIND_FLOAT = 1, KIND_INT = 2, KIND_BOOL = 4, KIND_ALL = 7 };
enum { X, Y, OUT, OPERANDS };
enum { MODE_CONTIGUOUS, MODE_ONE, MODE_ROW, MODE_COLUMN, MODE_SCALAR }; /* elementwise_kernel's operand modes */
#define FLAT_BLOCK XK_ELEMENTWISE_KERNEL_BLOCK /* inner must stay below 2**31 - BLOCK (int32 column math) */
#define STRIDED_DIMS 4

typedef struct {
  const char *name;
  int kinds;    /* the input dtypes it takes */
  int bool_out; /* out is bool */
  int binary;
  int math; /* the flat kernel's variant: 0 the light ops (OPS 1), 1 binary math (OPS 2), 2 unary math (OPS 3) */
} op_info;

static const op_info OPS[] = {
    [XOPSAOT_EW_ADD] = {"add", KIND_ALL, 0, 1},
    [XOPSAOT_EW_MUL] = {"mul", KIND_ALL, 0, 1},
    [XOPSAOT_EW_DIV] = {"div", KIND_FLOAT, 0, 1, 1},
    [XOPSAOT_EW_DIV_TRUNC] = {"div (trunc)", KIND_FLOAT | KIND_INT, 0, 1, 1},
    [XOPSAOT_EW_DIV_FLOOR] = {"div (floor)", KIND_FLOAT | KIND_INT, 0, 1, 1},
    [XOPSAOT_EW_POW] = {"pow", KIND_FLOAT | KIND_INT, 0, 1, 1},
    [XOPSAOT_EW_BITWISE_AND] = {"bitwise_and", KIND_INT | KIND_BOOL, 0, 1},
    [XOPSAOT_EW_BITWISE_OR] = {"bitwise_or", KIND_INT | KIND_BOOL, 0, 1},
    [XOPSAOT_EW_MAXIMUM] = {"maximum", KIND_ALL, 0, 1},
    [XOPSAOT_EW_MINIMUM] = {"minimum", KIND_ALL, 0, 1},
    [XOPSAOT_EW_EQ] = {"eq", KIND_ALL, 1, 1},
    [XOPSAOT_EW_NE] = {"ne", KIND_ALL, 1, 1},
    [XOPSAOT_EW_LT] = {"lt", KIND_ALL, 1, 1},
    [XOPSAOT_EW_LE] = {"le", KIND_ALL, 1, 1},
    [XOPSAOT_EW_GT] = {"gt", KIND_ALL, 1, 1},
    [XOPSAOT_EW_GE] = {"ge", KIND_ALL, 1, 1},
    [XOPSAOT_EW_NEG] = {"neg", KIND_FLOAT | KIND_INT, 0, 0},
    [XOPSAOT_EW_ABS] = {"abs", KIND_FLOAT | KIND_INT, 0, 0},
    [XOPSAOT_EW_EXP] = {"exp", KIND_FLOAT, 0, 0, 2},
    [XOPSAOT_EW_RSQRT] = {"rsqrt", KIND_FLOAT, 0, 0, 2},
    [XOPSAOT_EW_SIN] = {"sin", KIND_FLOAT, 0, 0, 2},
    [XOPSAOT_EW_COS] = {"cos", KIND_FLOAT, 0, 0, 2},
    [XOPSAOT_EW_ISINF] = {"isinf", KIND_ALL, 1, 0},
    [XOPSAOT_EW_ISNAN] = {"isnan", KIND_ALL, 1, 0},
    [XOPSAOT_EW_BITWISE_NOT] = {"bitwise_not", KIND_INT | KIND_BOOL, 0, 0},
    [XOPSAOT_EW_CLAMP] = {"clamp", KIND_FLOAT | KIND_INT, 0, 0},
    [XOPSAOT_EW_SUB] = {"sub", KIND_FLOAT | KIND_INT, 0, 1},
};
#define N_OPS ((int)(sizeof OPS / sizeof *OPS))

static int kind_of(int32_t dtype) {
  switch (dtype) {
    case XOPSAOT_FLOAT16:
    case XOPSAOT_BFLOAT16:
    case XOPSAOT_FLOAT32:
      return KIND_FLOAT;
    case XOPSAOT_INT32:
    case XOPSAOT_INT64:
      return KIND_INT;
    case XOPSAOT_BOOL:
      return KIND_BOOL;
    default:
      return 0;
  }
}

/* The operands over out's dims: shape and per-operand strides in elements (0 where an input broadcasts). */
typedef struct {
  int nd;
  int64_t shape[XOPSAOT_MAX_NDIM];
  int64_t stride[OPERANDS][XOPSAOT_MAX_NDIM];
  int scalar[OPERANDS];
} layout;

static xopsaot_status broadcast_into(layout *l, int which, const xopsaot_tensor *t, const xopsaot_tensor *out,
                                     const char *op, const char *name) {
  if (t->ndim > out->ndim)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s has %d dims but out has %d", op, name, t->ndim,
                   out->ndim);
  const int lead = out->ndim - t->ndim;
  for (int i = 0; i < out->ndim; ++i) {
    if (i < lead) {
      l->stride[which][i] = 0;
      continue;
    }
    const int64_t n = t->shape[i - lead];
    if (n != out->shape[i] && n != 1)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                     "%s: %s's dim %d has size %lld, which does not broadcast to out's %lld", op, name, i - lead,
                     (long long)n, (long long)out->shape[i]);
    l->stride[which][i] = n == 1 ? 0 : t->strides[i - lead];
  }
  return XOPSAOT_SUCCESS;
}

/* Drops dims of size 1 and merges neighbours every operand steps through as one dim. */
static void merge_dims(layout *l) {
  int nd = 0;
  for (int i = 0; i < l->nd; ++i) {
    if (l->shape[i] == 1) continue;
    int merge = nd > 0;
    for (int k = 0; k < OPERANDS && merge; ++k) merge = l->stride[k][nd - 1] == l->stride[k][i] * l->shape[i];
    if (merge) {
      l->shape[nd - 1] *= l->shape[i];
      for (int k = 0; k < OPERANDS; ++k) l->stride[k][nd - 1] = l->stride[k][i];
      continue;
    }
    l->shape[nd] = l->shape[i];
    for (int k = 0; k < OPERANDS; ++k) l->stride[k][nd] = l->stride[k][i];
    ++nd;
  }
  l->nd = nd;
}

/* Byte range [lo, hi) a tensor's elements occupy (0, 0 when empty). */
static void extent(const xopsaot_tensor *t, uintptr_t *lo, uintptr_t *hi) {
  int64_t low = 0, high = 0;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] == 0) {
      *lo = *hi = 0;
      return;
    }
    const int64_t span = (t->shape[i] - 1) * t->strides[i];
    if (span < 0) low += span;
    else high += span;
  }
  const int64_t size = xo_dtype_size(t->dtype);
  *lo = (uintptr_t)t->data + (uintptr_t)(low * size);
  *hi = (uintptr_t)t->data + (uintptr_t)(high * size + size);
}

/* out must not write one element twice: sorted by stride, each dim must step past everything before it. */
static xopsaot_status check_no_self_overlap(const xopsaot_tensor *out, const char *op) {
  int64_t strides[XOPSAOT_MAX_NDIM], sizes[XOPSAOT_MAX_NDIM];
  int n = 0;
  for (int i = 0; i < out->ndim; ++i) {
    if (out->shape[i] <= 1) continue;
    int64_t s = out->strides[i] < 0 ? -out->strides[i] : out->strides[i];
    int j = n++;
    for (; j > 0 && strides[j - 1] > s; --j) {
      strides[j] = strides[j - 1];
      sizes[j] = sizes[j - 1];
    }
    strides[j] = s;
    sizes[j] = out->shape[i];
  }
  int64_t reach = 0; /* the largest offset the dims so far reach */
  for (int j = 0; j < n; ++j) {
    if (strides[j] <= reach)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                     "%s: out has overlapping elements (a stride of %lld); write into a tensor without them", op,
                     (long long)strides[j]);
    reach += strides[j] * (sizes[j] - 1);
  }
  return XOPSAOT_SUCCESS;
}

/* An input sharing memory with out must be out itself, element for element (an in-place op). */
static xopsaot_status check_alias(const layout *l, int which, const xopsaot_tensor *t, const xopsaot_tensor *out,
                                  const char *op, const char *name) {
  uintptr_t lo, hi, out_lo, out_hi;
  extent(t, &lo, &hi);
  extent(out, &out_lo, &out_hi);
  if (hi <= out_lo || out_hi <= lo) return XOPSAOT_SUCCESS;
  int same = t->data == out->data;
  for (int i = 0; same && i < l->nd; ++i) same = l->shape[i] == 1 || l->stride[which][i] == l->stride[OUT][i];
  if (same) return XOPSAOT_SUCCESS;
  return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                 "%s: %s and out share memory but are not the same elements; out may be %s itself (in place) or "
                 "separate memory",
                 op, name, name);
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* The flat kernel's mode of an operand over the merged dims, or -1 when it needs the strided kernel. */
static int flat_mode(const layout *l, int which) {
  if (l->scalar[which]) return MODE_SCALAR;
  const int64_t *s = l->stride[which];
  if (l->nd == 1) return s[0] == 1 ? MODE_CONTIGUOUS : s[0] == 0 ? MODE_ONE : -1;
  if (s[0] == l->shape[1] && s[1] == 1) return MODE_CONTIGUOUS;
  if (s[0] == 0 && s[1] == 0) return MODE_ONE;
  if (s[0] == 0 && s[1] == 1) return MODE_ROW;
  if (s[0] == 1 && s[1] == 0) return MODE_COLUMN;
  return -1;
}

typedef struct {
  float fa, fb, fs;
  int64_t ia, ib, is;
} scalars;

static xopsaot_status launch_flat(const layout *l, const void *data[OPERANDS], int32_t op, const scalars *sc,
                                  const xk_elementwise_kernel_keys *keys, int device, void *stream, int *done) {
  *done = 0;
  if (l->nd > 2 || (l->nd == 2 && l->stride[OUT][0] != l->shape[1]) || l->stride[OUT][l->nd - 1] != 1) return 0;
  const int mode_x = flat_mode(l, X), mode_y = flat_mode(l, Y);
  if (mode_x < 0 || mode_y < 0) return 0;
  for (int k = 0; k < OPERANDS; ++k)
    if (!aligned16(data[k])) return 0;
  const int64_t inner = l->nd == 2 ? l->shape[1] : 16; /* only the row and column modes read it */
  if (inner % 16 || inner >= INT32_MAX - FLAT_BLOCK) return 0;
  int64_t n = 1;
  for (int i = 0; i < l->nd; ++i) n *= l->shape[i];
  xk_elementwise_kernel_args args = {.X = (void *)data[X], .Y = (void *)data[Y], .OUT = (void *)data[OUT],
                                     .n = n, .inner = inner, .op = op, .mode_x = mode_x, .mode_y = mode_y,
                                     .fa = sc->fa, .fb = sc->fb, .ia = sc->ia, .ib = sc->ib, .fs = sc->fs,
                                     .is_ = sc->is};
  *done = 1;
  return xo_launch(&xk_elementwise_kernel, &keys->T, &args, device, stream);
}

static int multiple_of_16(int64_t v) { return v % 16 == 0; }

/* The strided kernel's aligned config may serve the launch: d3 and every operand's strides are multiples of 16 (so
 * of 16 bytes), but for one unit stride in dim 3 (or dim 2, a transposed operand) that the kernel reads along, and
 * every pointer it dereferences is 16-byte aligned. Operands with no unit stride in dims 2 and 3 are read element by
 * element and need neither. The shape and strides are checked once per call, the pointers once per launch. */
static int vector_operand(const int64_t s[STRIDED_DIMS], int scalar) { return !scalar && (s[3] == 1 || s[2] == 1); }

static int strides_aligned(const int64_t stride[OPERANDS][STRIDED_DIMS], int64_t d3, const int scalar[OPERANDS]) {
  if (!multiple_of_16(d3)) return 0;
  for (int k = 0; k < OPERANDS; ++k) {
    const int64_t *s = stride[k];
    const int64_t other = s[3] == 1 ? s[2] : s[3];
    if (vector_operand(s, scalar[k]) && (!multiple_of_16(s[0]) || !multiple_of_16(s[1]) || !multiple_of_16(other)))
      return 0;
  }
  return 1;
}

static int pointers_aligned(void *const ptrs[OPERANDS], const int64_t stride[OPERANDS][STRIDED_DIMS],
                            const int scalar[OPERANDS]) {
  for (int k = 0; k < OPERANDS; ++k)
    if (vector_operand(stride[k], scalar[k]) && !aligned16(ptrs[k])) return 0;
  return 1;
}

/* Up to 4 merged dims per launch; more loop over the leading ones on the host. */
static xopsaot_status launch_strided(const layout *l, const void *data[OPERANDS], int32_t op, const scalars *sc,
                                     const xk_elementwise_kernel_keys *keys, int device, void *stream) {
  const int lead = l->nd > STRIDED_DIMS ? l->nd - (STRIDED_DIMS - 1) : 0; /* dims looped over on the host */
  const int first = STRIDED_DIMS - (l->nd - lead);                         /* kernel dims before it are 1 */
  int64_t shape[STRIDED_DIMS], stride[OPERANDS][STRIDED_DIMS];
  for (int i = 0; i < STRIDED_DIMS; ++i) {
    const int src = lead + i - first, real = i >= first;
    shape[i] = real ? l->shape[src] : 1;
    for (int k = 0; k < OPERANDS; ++k) stride[k][i] = real ? l->stride[k][src] : 0;
  }
  xk_elementwise_strided_kernel_args args = {
      .n_rows = shape[0] * shape[1] * shape[2], .d1 = shape[1], .d2 = shape[2], .d3 = shape[3],
      .sx0 = stride[X][0], .sx1 = stride[X][1], .sx2 = stride[X][2], .sx3 = stride[X][3],
      .sy0 = stride[Y][0], .sy1 = stride[Y][1], .sy2 = stride[Y][2], .sy3 = stride[Y][3],
      .so0 = stride[OUT][0], .so1 = stride[OUT][1], .so2 = stride[OUT][2], .so3 = stride[OUT][3],
      .op = op, .scalar_x = l->scalar[X], .scalar_y = l->scalar[Y],
      .fa = sc->fa, .fb = sc->fb, .ia = sc->ia, .ib = sc->ib, .fs = sc->fs, .is_ = sc->is,
      .light = keys->OPS == 1}; /* the tall tile has a variant with the light ops' code alone */
  const xk_elementwise_strided_kernel_keys skeys = {keys->T, keys->O};
  const int aligned_strides = strides_aligned(stride, shape[3], l->scalar);
  int64_t index[XOPSAOT_MAX_NDIM] = {0};
  for (;;) {
    int64_t offset[OPERANDS] = {0, 0, 0};
    for (int i = 0; i < lead; ++i)
      for (int k = 0; k < OPERANDS; ++k) offset[k] += index[i] * l->stride[k][i];
    void **ptrs[OPERANDS] = {&args.X, &args.Y, &args.OUT};
    for (int k = 0; k < OPERANDS; ++k)
      *ptrs[k] = (char *)data[k] + offset[k] * xo_dtype_size(k == OUT ? keys->O : keys->T);
    args.aligned = aligned_strides && pointers_aligned((void *const[]){args.X, args.Y, args.OUT}, stride, l->scalar);
    XO_TRY(xo_launch(&xk_elementwise_strided_kernel, &skeys.T, &args, device, stream));
    int i = lead - 1;
    for (; i >= 0 && ++index[i] == l->shape[i]; --i) index[i] = 0;
    if (i < 0) return XOPSAOT_SUCCESS;
  }
}

static scalars scalar_arguments(const xopsaot_elementwise_options *o, int32_t dtype) {
  scalars sc = {.fa = (float)o->alpha, .ia = o->alpha_int, .fs = (float)o->scalar, .is = o->scalar_int};
  if (o->op == XOPSAOT_EW_SUB) {
    sc.fa = -sc.fa;
    sc.ia = -(int64_t)((uint64_t)sc.ia); /* wraps like the kernel's integer arithmetic */
  }
  if (o->op == XOPSAOT_EW_CLAMP) {
    int64_t lo = o->min_int, hi = o->max_int;
    if (dtype == XOPSAOT_INT32) { /* bounds past int32 bound nothing: saturate before the kernel narrows them */
      lo = lo < INT32_MIN ? INT32_MIN : lo > INT32_MAX ? INT32_MAX : lo;
      hi = hi < INT32_MIN ? INT32_MIN : hi > INT32_MAX ? INT32_MAX : hi;
    }
    sc.fa = (float)o->min;
    sc.fb = (float)o->max;
    sc.ia = lo;
    sc.ib = hi;
  }
  if (dtype == XOPSAOT_BOOL) {
    sc.ia = sc.ia != 0;
    sc.is = sc.is != 0;
  }
  return sc;
}

xopsaot_status xopsaot_elementwise(const xopsaot_tensor *x, const xopsaot_tensor *y, const xopsaot_tensor *out,
                                   const xopsaot_elementwise_options *options, void *stream) {
  if (!options) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "elementwise: options is NULL");
  const int32_t code = options->op;
  if (code < 0 || code >= N_OPS)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "elementwise: op is %d; supported: 0 to %d", code, N_OPS - 1);
  const op_info *info = &OPS[code];
  const char *op = info->name;
  const int scalar = options->scalar_operand;
  if (scalar < 0 || scalar > 2 || (scalar && !info->binary))
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: scalar_operand is %d; supported: 0%s", op, scalar,
                   info->binary ? ", 1 (x) or 2 (y)" : " (a unary op)");
  if (!info->binary && y) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: a unary op takes no y", op);
  const xopsaot_tensor *inputs[2] = {scalar == 1 ? NULL : x, scalar == 2 || !info->binary ? NULL : y};
  const char *names[2] = {"x", "y"};
  XO_TRY(xo_check_tensor(out, op, "out", -1));
  const xopsaot_tensor *first = NULL;
  for (int k = 0; k < 2; ++k) {
    if (k == Y && !info->binary) break;
    if (!inputs[k] && !(scalar == k + 1))
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", op, names[k]);
    if (!inputs[k]) continue;
    XO_TRY(xo_check_tensor(inputs[k], op, names[k], -1));
    XO_TRY(xo_check_same_device(inputs[k], out, op, names[k], "out"));
    if (first) XO_TRY(xo_check_dtype(inputs[k], first->dtype, op, names[k]));
    else first = inputs[k];
  }
  const int32_t dtype = first->dtype;
  if (!(kind_of(dtype) & info->kinds)) {
    const int k = info->kinds;
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: dtype %s is not supported; supported: %s%s%s", op,
                   xo_dtype_name(dtype), k & KIND_FLOAT ? "float16, bfloat16, float32" : "",
                   k & KIND_INT ? (k & KIND_FLOAT ? ", int32, int64" : "int32, int64") : "",
                   k & KIND_BOOL ? ", bool" : "");
  }
  XO_TRY(xo_check_dtype(out, info->bool_out ? XOPSAOT_BOOL : dtype, op, "out"));
  XO_TRY(check_no_self_overlap(out, op));

  layout l = {.nd = out->ndim};
  for (int i = 0; i < out->ndim; ++i) {
    l.shape[i] = out->shape[i];
    l.stride[OUT][i] = out->strides[i];
    l.stride[X][i] = l.stride[Y][i] = 0;
  }
  for (int k = 0; k < 2; ++k) {
    l.scalar[k] = inputs[k] == NULL;
    if (inputs[k]) XO_TRY(broadcast_into(&l, k, inputs[k], out, op, names[k]));
  }
  for (int k = 0; k < 2; ++k)
    if (inputs[k]) XO_TRY(check_alias(&l, k, inputs[k], out, op, names[k]));
  if (xo_numel(out) == 0) return XOPSAOT_SUCCESS;
  merge_dims(&l);
  if (l.nd == 0) { /* one element */
    l.nd = 1;
    l.shape[0] = 1;
    for (int k = 0; k < OPERANDS; ++k) l.stride[k][0] = k == OUT ? 1 : 0;
  }
  /* a missing operand (the scalar, or y of a unary op) points at out: valid and aligned like it */
  const void *data[OPERANDS] = {inputs[X] ? inputs[X]->data : out->data, inputs[Y] ? inputs[Y]->data : out->data,
                                out->data};
  const scalars sc = scalar_arguments(options, dtype);
  const int32_t kernel_op = code == XOPSAOT_EW_SUB ? XOPSAOT_EW_ADD : code;
  /* a math op's own flat binary where one is compiled (FIXED_OPS in kernels_src/elementwise.py), else its group's;
   * the light ops, the common calls, skip the search: none has a binary of its own */
  xk_elementwise_kernel_keys keys = {dtype, out->dtype, 1 + info->math, kernel_op};
  if (!info->math || !xo_has_keys(&xk_elementwise_kernel, &keys.T)) keys.FIXED_OP = 0;
  int done;
  xopsaot_status st = launch_flat(&l, data, kernel_op, &sc, &keys, out->device, stream, &done);
  if (done) return st;
  return launch_strided(&l, data, kernel_op, &sc, &keys, out->device, stream);
}

xopsaot_status xopsaot_add(const xopsaot_tensor *a, const xopsaot_tensor *b, const xopsaot_tensor *out,
                           void *stream) {
  XO_TRY(xo_check_tensor(a, "add", "a", -1));
  XO_TRY(xo_check_tensor(b, "add", "b", -1));
  XO_TRY(xo_check_tensor(out, "add", "out", -1));
  XO_TRY(xo_check_same_shape(a, b, "add", "a", "b"));
  XO_TRY(xo_check_same_shape(a, out, "add", "a", "out"));
  const xopsaot_elementwise_options options = {.op = XOPSAOT_EW_ADD, .alpha = 1.0, .alpha_int = 1};
  return xopsaot_elementwise(a, b, out, &options, stream);
}
