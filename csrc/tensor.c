/* Checks on xopsaot_tensor shared by the ops: every failure names the op, the argument and the value. */
#include <stdio.h>

#include "runtime.h"

const char *xo_dtype_name(int32_t dtype) {
  static const char *const names[] = {"invalid", "float16", "bfloat16", "float32", "float64", "int8", "int16",
                                      "int32",   "int64",   "uint8",    "bool",    "float8_e4m3", "float8_e5m2"};
  return dtype > 0 && dtype < (int32_t)(sizeof names / sizeof *names) ? names[dtype] : "invalid";
}

int64_t xo_dtype_size(int32_t dtype) {
  switch (dtype) {
    case XOPSAOT_FLOAT16:
    case XOPSAOT_BFLOAT16:
    case XOPSAOT_INT16:
      return 2;
    case XOPSAOT_FLOAT32:
    case XOPSAOT_INT32:
      return 4;
    case XOPSAOT_FLOAT64:
    case XOPSAOT_INT64:
      return 8;
    default: /* int8, uint8, bool, fp8 */
      return 1;
  }
}

int64_t xo_numel(const xopsaot_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

int xo_is_contiguous(const xopsaot_tensor *t) {
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != expected) return 0;
    expected *= t->shape[i];
  }
  return 1;
}

static void format_shape(char *out, size_t size, const xopsaot_tensor *t) {
  size_t used = (size_t)snprintf(out, size, "(");
  for (int i = 0; i < t->ndim && used < size; ++i)
    used += (size_t)snprintf(out + used, size - used, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  if (used < size) snprintf(out + used, size - used, t->ndim == 1 ? ",)" : ")");
}

xopsaot_status xo_check_tensor(const xopsaot_tensor *t, const char *op, const char *name, int ndim) {
  if (!t) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", op, name);
  if (t->ndim < 0 || t->ndim > XOPSAOT_MAX_NDIM)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s has ndim %d; 0 to %d are supported", op, name, t->ndim,
                   XOPSAOT_MAX_NDIM);
  if (ndim >= 0 && t->ndim != ndim)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s must have %d dims, got %d", op, name, ndim, t->ndim);
  for (int i = 0; i < t->ndim; ++i)
    if (t->shape[i] < 0)
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s.shape[%d] is negative (%lld)", op, name, i,
                     (long long)t->shape[i]);
  if (t->dtype < XOPSAOT_FLOAT16 || t->dtype > XOPSAOT_FLOAT8_E5M2)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s has an invalid dtype code %d", op, name, t->dtype);
  if (!t->data && xo_numel(t) > 0) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s.data is NULL", op, name);
  return XOPSAOT_SUCCESS;
}

xopsaot_status xo_check_same_shape(const xopsaot_tensor *a, const xopsaot_tensor *b, const char *op, const char *na,
                                   const char *nb) {
  int same = a->ndim == b->ndim;
  for (int i = 0; same && i < a->ndim; ++i) same = a->shape[i] == b->shape[i];
  if (same) return XOPSAOT_SUCCESS;
  char sa[160], sb[160];
  format_shape(sa, sizeof sa, a);
  format_shape(sb, sizeof sb, b);
  return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s has shape %s but %s has shape %s", op, na, sa, nb, sb);
}

xopsaot_status xo_check_same_device(const xopsaot_tensor *a, const xopsaot_tensor *b, const char *op, const char *na,
                                    const char *nb) {
  if (a->device == b->device) return XOPSAOT_SUCCESS;
  return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s is on device %d but %s is on device %d", op, na, a->device,
                 nb, b->device);
}

xopsaot_status xo_check_dtype(const xopsaot_tensor *t, int32_t dtype, const char *op, const char *name) {
  if (t->dtype == dtype) return XOPSAOT_SUCCESS;
  return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s has dtype %s, expected %s", op, name,
                 xo_dtype_name(t->dtype), xo_dtype_name(dtype));
}

xopsaot_status xo_check_last_dim_contiguous(const xopsaot_tensor *t, const char *op, const char *name) {
  if (t->ndim == 0 || t->strides[t->ndim - 1] == 1 || t->shape[t->ndim - 1] <= 1) return XOPSAOT_SUCCESS;
  return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s must be contiguous in its last dim (stride %lld)", op, name,
                 (long long)t->strides[t->ndim - 1]);
}

xopsaot_status xo_rows(const xopsaot_tensor *t, const char *op, const char *name, int64_t *rows, int64_t *stride) {
  if (t->ndim < 1) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: %s must have at least 1 dim", op, name);
  XO_TRY(xo_check_last_dim_contiguous(t, op, name));
  int64_t n = t->shape[t->ndim - 1];
  *rows = n ? xo_numel(t) / n : 0;
  *stride = t->ndim >= 2 ? t->strides[t->ndim - 2] : n;
  for (int i = 0; i + 2 < t->ndim; ++i)
    if (t->shape[i] != 1 && t->strides[i] != t->strides[i + 1] * t->shape[i + 1])
      return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                     "%s: %s's leading dims cannot be read as rows with one stride (dim %d has stride %lld)", op,
                     name, i, (long long)t->strides[i]);
  if (*rows <= 1) *stride = n; /* a single row: its stride is never used */
  return XOPSAOT_SUCCESS;
}
