/* The runtime: errors, devices, the per-context module cache, variant selection and launch.
 *
 * Variants are chosen from the generated tables (xk_kernels.c) by the device's binary arch, the key values
 * the op passes (dtype, head dim, flags), the alignment hints each variant was compiled with, and each
 * config's predicate. Modules are loaded lazily per (context, variant) behind the context's lock, with a
 * lock-free fast path; xopsaot_preload loads them all before CUDA graph capture. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <math.h>

#include "driver.h"

/* ---- errors ---- */

static _Thread_local char message[1024];
static _Thread_local int recent_variants[XOPSAOT_RECENT_VARIANTS]; /* a ring: the last variants selected */
static _Thread_local uint64_t n_selected;

xopsaot_status xo_fail(xopsaot_status status, const char *fmt, ...) {
  char buffer[sizeof message];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buffer, sizeof buffer, fmt, ap); /* fmt's arguments may point into `message` */
  va_end(ap);
  memcpy(message, buffer, sizeof message);
  return status;
}

const char *xopsaot_last_error(void) { return message; }
int xopsaot_abi_version(void) { return XOPSAOT_ABI_VERSION; }
const char *xopsaot_built_archs(void) { return xo_built_archs; }
int xopsaot_variant_count(void) { return xo_n_variants; }
int xopsaot_last_variant(void) {
  return n_selected ? recent_variants[(n_selected - 1) % XOPSAOT_RECENT_VARIANTS] : -1;
}

int xopsaot_recent_variants(int *indices, int capacity) {
  int n = n_selected < XOPSAOT_RECENT_VARIANTS ? (int)n_selected : XOPSAOT_RECENT_VARIANTS;
  if (!indices || capacity < 0) return 0;
  if (n > capacity) n = capacity;
  for (int i = 0; i < n; ++i) /* newest first */
    indices[i] = recent_variants[(n_selected - 1 - (uint64_t)i) % XOPSAOT_RECENT_VARIANTS];
  return n;
}

xopsaot_status xopsaot_variant_binary(int index, const void **data, uint64_t *size) {
  if (index < 0 || index >= xo_n_variants || !data || !size)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "variant %d does not exist (%d variants)", index, xo_n_variants);
  *data = xo_blob + xo_variants[index].blob_offset;
  *size = xo_variants[index].blob_size;
  return XOPSAOT_SUCCESS;
}

/* ---- driver and devices ---- */

static const xo_driver *const drv = &xo_cuda_driver;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static xopsaot_status init_status;
static char init_message[1024];
static int n_devices;

typedef struct xo_device {
  pthread_mutex_t lock;
  int ready;
  xo_device_props props;
  uint32_t binary_arch; /* arch of the binaries that serve this device; 0: none */
  /* XOPSAOT_AUTOTUNE: per primary variant, 1 + the index of the variant chosen for it (0: not yet) */
  pthread_mutex_t tune_lock;
  int32_t *tuned;
  int tune_cache_read;
} xo_device;

static xo_device *devices;

static void init_driver(void) {
  init_status = drv->init(&n_devices);
  if (!init_status && !(devices = calloc((size_t)n_devices, sizeof *devices)))
    init_status = xo_fail(XOPSAOT_ERROR_OUT_OF_MEMORY, "out of host memory");
  if (init_status) {
    snprintf(init_message, sizeof init_message, "%s", message);
    return;
  }
  for (int i = 0; i < n_devices; ++i) {
    pthread_mutex_init(&devices[i].lock, NULL);
    pthread_mutex_init(&devices[i].tune_lock, NULL);
  }
}

static xopsaot_status driver_ready(void) {
  pthread_once(&init_once, init_driver);
  return init_status ? xo_fail(init_status, "%s", init_message) : XOPSAOT_SUCCESS;
}

/* The binaries that run on `arch`: an exact match, else the newest of the same major version built without
 * arch-specific features (sm_80 serves every 8.x GPU; sm_90a serves only 9.0). */
static uint32_t binary_arch_for(int backend, uint32_t arch) {
  uint32_t best = 0;
  for (int i = 0; i < xo_n_variants; ++i) {
    const xo_variant *v = &xo_variants[i];
    if (v->backend != backend) continue;
    if (v->arch == arch) return arch;
    if (!v->arch_exact && v->arch / 10 == arch / 10 && v->arch < arch && v->arch > best) best = v->arch;
  }
  return best;
}

static xopsaot_status get_device(int device, xo_device **out) {
  xopsaot_status st = driver_ready();
  if (st) return st;
  if (device < 0 || device >= n_devices)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "device %d does not exist (%d %s devices)", device, n_devices,
                   drv->name);
  xo_device *d = &devices[device];
  if (!__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&d->lock);
    if (!d->ready) {
      st = drv->device_props(device, &d->props);
      if (!st) {
        d->binary_arch = binary_arch_for(drv->backend, (uint32_t)d->props.arch);
        __atomic_store_n(&d->ready, 1, __ATOMIC_RELEASE);
      }
    }
    pthread_mutex_unlock(&d->lock);
    if (st) return st;
  }
  *out = d;
  return XOPSAOT_SUCCESS;
}

static xopsaot_status require_binary(int device, const xo_device *d) {
  if (d->binary_arch) return XOPSAOT_SUCCESS;
  return xo_fail(XOPSAOT_ERROR_NO_BINARY, "no binary for sm_%d (device %d, %s); this build has %s", d->props.arch,
                 device, d->props.name, xo_built_archs);
}

static xopsaot_status get_served_device(int device, xo_device **out) {
  xopsaot_status st = get_device(device, out);
  return st ? st : require_binary(device, *out);
}

/* Can variant v run on device d: its binaries, and shared memory within what the device allows (8.x GPUs other
 * than 8.0 allow less than an A100). Selection and preload both go by this. */
static int variant_serves(const xo_variant *v, const xo_device *d) {
  return v->backend == drv->backend && v->arch == d->binary_arch && v->shared <= (uint32_t)d->props.smem_optin;
}

xopsaot_status xopsaot_device_count(int *count) {
  if (!count) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "count is NULL");
  *count = 0;
  xopsaot_status st = driver_ready();
  if (!st) *count = n_devices;
  return st;
}

xopsaot_status xopsaot_device_arch(int device, int *arch) {
  xo_device *d;
  if (!arch) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "arch is NULL");
  xopsaot_status st = get_device(device, &d);
  if (st) return st;
  *arch = d->props.arch;
  return require_binary(device, d);
}

xopsaot_status xopsaot_device_name(int device, char *name, int size) {
  xo_device *d;
  if (!name || size <= 0) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "name buffer is empty");
  xopsaot_status st = get_device(device, &d);
  if (!st) snprintf(name, (size_t)size, "%s", d->props.name);
  return st;
}

/* ---- per-context module cache ---- */

#define XO_MAX_CONTEXTS 256

typedef struct xo_context {
  uint64_t id;
  pthread_mutex_t lock;
  void **functions; /* per variant; NULL until loaded */
  void **modules;
} xo_context;

static xo_context *contexts[XO_MAX_CONTEXTS];
static int n_contexts;
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;

static xo_context *find_context(uint64_t id, int n) {
  for (int i = 0; i < n; ++i)
    if (contexts[i]->id == id) return contexts[i];
  return NULL;
}

static xopsaot_status context_cache(uint64_t id, xo_context **out) {
  if ((*out = find_context(id, __atomic_load_n(&n_contexts, __ATOMIC_ACQUIRE)))) return XOPSAOT_SUCCESS;
  xopsaot_status st = XOPSAOT_SUCCESS;
  pthread_mutex_lock(&contexts_lock);
  if (!(*out = find_context(id, n_contexts))) {
    xo_context *c = n_contexts < XO_MAX_CONTEXTS ? calloc(1, sizeof *c) : NULL;
    if (c) {
      c->functions = calloc((size_t)xo_n_variants + 1, sizeof(void *));
      c->modules = calloc((size_t)xo_n_variants + 1, sizeof(void *));
    }
    if (!c || !c->functions || !c->modules) {
      if (c) {
        free(c->functions);
        free(c->modules);
      }
      free(c);
      st = n_contexts < XO_MAX_CONTEXTS
               ? xo_fail(XOPSAOT_ERROR_OUT_OF_MEMORY, "out of host memory")
               : xo_fail(XOPSAOT_ERROR_UNSUPPORTED, "more than %d GPU contexts used", XO_MAX_CONTEXTS);
    } else {
      c->id = id;
      pthread_mutex_init(&c->lock, NULL);
      contexts[n_contexts] = c;
      __atomic_store_n(&n_contexts, n_contexts + 1, __ATOMIC_RELEASE);
      *out = c;
    }
  }
  pthread_mutex_unlock(&contexts_lock);
  return st;
}

static xopsaot_status function_for(xo_context *c, const xo_variant *v, void *stream, int check_capture, void **fn) {
  if ((*fn = __atomic_load_n(&c->functions[v->index], __ATOMIC_ACQUIRE))) return XOPSAOT_SUCCESS;
  xopsaot_status st = XOPSAOT_SUCCESS;
  pthread_mutex_lock(&c->lock);
  void *f = c->functions[v->index];
  if (!f) {
    int capturing = 0;
    if (check_capture) st = drv->is_capturing(stream, &capturing);
    if (!st && capturing)
      st = xo_fail(XOPSAOT_ERROR_CAPTURE,
                   "%s is not loaded yet and the stream is capturing a CUDA graph, where loading is not allowed; "
                   "call xopsaot_preload(device) (xopsaot.preload() in Python) before capture",
                   v->label);
    void *module = NULL;
    if (!st) st = drv->load(xo_blob + v->blob_offset, v, &module, &f);
    if (!st) {
      c->modules[v->index] = module;
      __atomic_store_n(&c->functions[v->index], f, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&c->lock);
  *fn = f;
  return st;
}

/* ---- variant selection ---- */

static int hints_hold(const xo_kernel *k, uint64_t mask, const void *args) {
  for (int i = 0; mask; ++i, mask >>= 1) {
    if (!(mask & 1)) continue;
    const char *p = (const char *)args + k->args[i].offset;
    uint64_t value;
    switch (k->args[i].kind) {
      case XO_ARG_PTR: value = (uint64_t)*(const uintptr_t *)p; break;
      case XO_ARG_I32: value = (uint64_t)(int64_t)*(const int32_t *)p; break;
      case XO_ARG_I64: value = (uint64_t)*(const int64_t *)p; break;
      default: continue;
    }
    if (value % k->args[i].divisor) return 0;
  }
  return 1;
}

static int keys_match(const xo_variant *v, const int32_t *keys, int n) {
  return n == 0 || memcmp(v->keys, keys, sizeof(int32_t) * (size_t)n) == 0;
}

/* The first variant, in table order, that serves the device and has these keys, whose hints and predicate hold.
 * Autotuning alternates are never chosen here (see autotuned). */
static const xo_variant *select_variant(const xo_kernel *k, const int32_t *keys, const void *args,
                                        const xo_device *d) {
  for (int i = 0; i < k->n_variants; ++i) {
    const xo_variant *v = &k->variants[i];
    if (v->primary == v->index && variant_serves(v, d) && keys_match(v, keys, k->n_keys) &&
        hints_hold(k, v->aligned_mask, args) &&
        (!v->when || v->when(args, v->consts, d->props.sm_count)))
      return v;
  }
  return NULL;
}

static void format_key(char *out, size_t size, const xo_kernel *k, int key, int32_t value) {
  if (k->key_is_dtype[key])
    snprintf(out, size, "%s", xo_dtype_name(value));
  else
    snprintf(out, size, "%d", value);
}

/* "a, b, c": the distinct values of `key` among variants whose first `key` keys equal `prefix` (any arch when
 * arch is 0). */
static void list_key_values(char *out, size_t size, const xo_kernel *k, int key, const int32_t *prefix,
                            uint32_t arch) {
  int32_t seen[64];
  int n = 0;
  for (int i = 0; i < k->n_variants && n < 64; ++i) {
    const xo_variant *v = &k->variants[i];
    if ((arch && v->arch != arch) || (prefix && !keys_match(v, prefix, key))) continue;
    int j = 0;
    while (j < n && seen[j] != v->keys[key]) ++j;
    if (j == n) seen[n++] = v->keys[key];
  }
  size_t used = 0;
  out[0] = 0;
  for (int j = 0; j < n && used + 1 < size; ++j) {
    char value[32];
    format_key(value, sizeof value, k, key, seen[j]);
    used += (size_t)snprintf(out + used, size - used, "%s%s", j ? ", " : "", value);
  }
}

static xopsaot_status explain_no_variant(const xo_kernel *k, const int32_t *keys, const xo_device *d) {
  char arch_name[32] = "";
  for (int i = 0; i < k->n_variants; ++i)
    if (k->variants[i].arch == d->binary_arch) snprintf(arch_name, sizeof arch_name, "%s", k->variants[i].arch_name);
  if (!arch_name[0])
    return xo_fail(XOPSAOT_ERROR_NO_BINARY, "%s has no binary for sm_%d (%s)", k->name, d->props.arch, d->props.name);
  for (int key = 0; key < k->n_keys; ++key) {
    int found = 0;
    for (int i = 0; i < k->n_variants && !found; ++i)
      found = k->variants[i].arch == d->binary_arch && keys_match(&k->variants[i], keys, key + 1);
    if (!found) {
      char value[32], values[512];
      format_key(value, sizeof value, k, key, keys[key]);
      list_key_values(values, sizeof values, k, key, keys, d->binary_arch);
      return xo_fail(XOPSAOT_ERROR_UNSUPPORTED, "%s has no variant with %s=%s for %s (compiled: %s)", k->name,
                     k->key_names[key], value, arch_name, values);
    }
  }
  return xo_fail(XOPSAOT_ERROR_UNSUPPORTED,
                 "%s: no compiled config of %s accepts these arguments within this GPU's %d bytes of shared memory",
                 k->name, arch_name, d->props.smem_optin);
}

int xo_has_keys(const xo_kernel *k, const int32_t *keys) {
  for (int i = 0; i < k->n_variants; ++i)
    if (keys_match(&k->variants[i], keys, k->n_keys)) return 1;
  return 0;
}

xopsaot_status xo_require_key(const xo_kernel *k, int key, int32_t value, const char *what) {
  for (int i = 0; i < k->n_variants; ++i)
    if (k->variants[i].keys[key] == value) return XOPSAOT_SUCCESS;
  char text[32], values[512];
  format_key(text, sizeof text, k, key, value);
  list_key_values(values, sizeof values, k, key, NULL, 0);
  return xo_fail(XOPSAOT_ERROR_UNSUPPORTED, "%s %s is not compiled (compiled: %s)", what, text, values);
}

/* ---- launch ---- */

/* A host TMA descriptor argument as the kernel takes it: the encoded descriptor, then the dims (int32) and strides
 * (int64) it was made from (Triton's expansion of a tensordesc parameter). */
typedef struct xo_tma_param {
  _Alignas(64) unsigned char map[128];
  int32_t shape[XO_MAX_TMA_RANK];
  int64_t strides[XO_MAX_TMA_RANK];
} xo_tma_param;

#define XO_MAX_PARAMS (XO_MAX_ARGS + 2 * XO_MAX_TMA_ARGS * XO_MAX_TMA_RANK + 3)

int xo_tma_unfit(const xo_tma_desc *d, int64_t elem_size) {
  for (int i = 0; i < d->rank; ++i)
    if (d->shape[i] <= 0 || d->shape[i] > INT32_MAX || d->strides[i] < 0 ||
        (i + 1 < d->rank ? d->strides[i] * elem_size % 16 != 0 : d->strides[i] != 1))
      return i;
  return (uintptr_t)d->base % 16 != 0 ? d->rank : -1;
}

int xo_tma_takes(const xo_tma_desc *d, int64_t elem_size) {
  if (xo_tma_unfit(d, elem_size) >= 0) return 0;
  for (int i = 0; i + 1 < d->rank; ++i)
    if (d->shape[i] > 1 && d->strides[i] < d->shape[i + 1] * d->strides[i + 1]) return 0;
  return 1;
}

static xopsaot_status tma_param(const xo_variant *v, int t, const xo_arg *a, const xo_tma_desc *d, xo_tma_param *p) {
  const xo_tma_meta *m = &v->tma[t];
  if (d->rank != m->rank)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: descriptor %s has rank %d; the kernel takes %d", v->label,
                   a->name, (int)d->rank, (int)m->rank);
  const int unfit = xo_tma_unfit(d, m->elem_size);
  if (unfit == m->rank)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "%s: descriptor %s: base %p is not 16-byte aligned", v->label,
                   a->name, d->base);
  if (unfit >= 0)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                   "%s: descriptor %s: dim %d (size %lld, stride %lld) is not what TMA takes (positive sizes, "
                   "16-byte strides, the last one 1)",
                   v->label, a->name, unfit, (long long)d->shape[unfit], (long long)d->strides[unfit]);
  for (int i = 0; i < m->rank; ++i) {
    p->shape[i] = (int32_t)d->shape[i];
    p->strides[i] = d->strides[i];
  }
  return drv->encode_tma(m, d, p->map);
}

static xopsaot_status launch_variant(const xo_variant *v, void *fn, const int64_t grid[3], const void *args,
                                     void *stream) {
  const xo_kernel *k = v->kernel;
  void *params[XO_MAX_PARAMS];
  xo_tma_param tma[XO_MAX_TMA_ARGS];
  void *scratch[2] = {NULL, NULL}; /* Triton's hidden trailing arguments: global and profile scratch */
  int n = 0, t = 0;
  for (int i = 0; i < k->n_args; ++i) {
    const xo_arg *a = &k->args[i];
    void *field = (char *)args + a->offset;
    if (a->kind != XO_ARG_TMA) {
      params[n++] = field;
      continue;
    }
    if (t == XO_MAX_TMA_ARGS || !v->tma)
      return xo_fail(XOPSAOT_ERROR_UNSUPPORTED, "%s: descriptor %s has no encoding", v->label, a->name);
    XO_TRY(tma_param(v, t, a, field, &tma[t]));
    params[n++] = tma[t].map;
    for (int r = 0; r < v->tma[t].rank; ++r) params[n++] = &tma[t].shape[r];
    for (int r = 0; r < v->tma[t].rank; ++r) params[n++] = &tma[t].strides[r];
    ++t;
  }
  params[n] = &scratch[0];
  params[n + 1] = &scratch[1];
  params[n + 2] = NULL; /* the driver reads the kernel's count; the tests' fake driver stops here */
  const uint64_t programs = (uint64_t)grid[0] * (uint64_t)grid[1] * (uint64_t)grid[2] * v->num_ctas;
  const uint32_t sizes[2] = {v->global_scratch_size, v->profile_scratch_size};
  xopsaot_status st = XOPSAOT_SUCCESS;
  for (int j = 0; j < 2 && !st; ++j)
    if (sizes[j]) st = drv->alloc_async(programs * sizes[j], stream, &scratch[j]);
  if (!st) st = drv->launch(fn, v, grid, stream, params);
  for (int j = 0; j < 2; ++j)
    if (scratch[j]) drv->free_async(scratch[j], stream);
  return st;
}

/* The launch grid of v for args, within the launch limits (a zero dim means there is nothing to compute). */
static xopsaot_status launch_grid(const xo_variant *v, const void *args, const xo_device *d, int64_t grid[3]) {
  v->kernel->grid(args, v->consts, d->props.sm_count, grid);
  if (grid[0] < 0 || grid[1] < 0 || grid[2] < 0 || grid[0] * v->num_ctas > INT32_MAX || grid[1] > 65535 ||
      grid[2] > 65535)
    return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT,
                   "%s: grid (%lld, %lld, %lld) is outside the launch limits (2^31-1, 65535, 65535)", v->kernel->name,
                   (long long)grid[0], (long long)grid[1], (long long)grid[2]);
  return XOPSAOT_SUCCESS;
}

/* ---- XOPSAOT_AUTOTUNE: time a bucket's compiled candidates at its first use, remember the choice on disk ---- */

static int autotune_on(void) {
  static int on = -1;
  int value = __atomic_load_n(&on, __ATOMIC_RELAXED);
  if (value < 0) {
    const char *env = getenv("XOPSAOT_AUTOTUNE");
    value = env && *env && strcmp(env, "0") != 0;
    __atomic_store_n(&on, value, __ATOMIC_RELAXED);
  }
  return value;
}

/* The cache file, named once: $XOPSAOT_AUTOTUNE_CACHE, else $XDG_CACHE_HOME/xopsaot/autotune.tsv, else
 * ~/.cache/xopsaot/autotune.tsv (whose directories a write creates). */
static char tune_path[4096];
static int tune_path_found, tune_path_is_default;

static void name_tune_path(void) {
  const char *explicit_path = getenv("XOPSAOT_AUTOTUNE_CACHE");
  if (explicit_path && *explicit_path) {
    tune_path_found = snprintf(tune_path, sizeof tune_path, "%s", explicit_path) < (int)sizeof tune_path;
    return;
  }
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n = -1;
  if (xdg && *xdg)
    n = snprintf(tune_path, sizeof tune_path, "%s/xopsaot/autotune.tsv", xdg);
  else if (home && *home)
    n = snprintf(tune_path, sizeof tune_path, "%s/.cache/xopsaot/autotune.tsv", home);
  tune_path_found = tune_path_is_default = n > 0 && (size_t)n < sizeof tune_path;
}

static const char *tune_cache_file(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, name_tune_path);
  return tune_path_found ? tune_path : NULL;
}

const char *xopsaot_autotune_cache(void) { return autotune_on() ? tune_cache_file() : NULL; }

/* mkdir -p of the default cache file's directory. */
static void make_tune_dirs(void) {
  char dir[sizeof tune_path];
  memcpy(dir, tune_path, sizeof dir);
  for (char *p = dir + 1; *p; ++p)
    if (*p == '/') {
      *p = 0;
      mkdir(dir, 0755);
      *p = '/';
    }
}

static int find_variant(const char *label, const char *when, uint32_t primary) {
  for (int i = 0; i < xo_n_variants; ++i) {
    const xo_variant *v = &xo_variants[i];
    if ((primary == UINT32_MAX || v->primary == primary) && !strcmp(v->label, label) && !strcmp(v->when_text, when))
      return i;
  }
  return -1;
}

/* Lines: device name, primary label, its predicate, chosen label (tab-separated); later lines win. Entries of
 * other devices or builds are skipped. Called with d->tune_lock held. */
static void read_tune_cache(xo_device *d) {
  char line[2048];
  d->tune_cache_read = 1;
  const char *path = tune_cache_file();
  FILE *f = path ? fopen(path, "r") : NULL;
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *fields[4], *cursor = line;
    int n = 0;
    for (; n < 4 && cursor; ++n) {
      fields[n] = cursor;
      cursor = strchr(cursor, '\t');
      if (cursor) *cursor++ = 0;
    }
    if (n != 4 || cursor || strcmp(fields[0], d->props.name)) continue;
    int primary = find_variant(fields[1], fields[2], UINT32_MAX);
    if (primary < 0 || xo_variants[primary].primary != (uint32_t)primary) continue;
    int chosen = find_variant(fields[3], fields[2], (uint32_t)primary);
    if (chosen >= 0 && variant_serves(&xo_variants[chosen], d)) d->tuned[primary] = chosen + 1;
  }
  fclose(f);
}

static void write_tune_cache(const xo_device *d, const xo_variant *primary, const xo_variant *chosen) {
  char line[2048];
  int n = snprintf(line, sizeof line, "%s\t%s\t%s\t%s\n", d->props.name, primary->label, primary->when_text,
                   chosen->label);
  const char *path = tune_cache_file();
  if (n <= 0 || (size_t)n >= sizeof line || !path) return;
  if (tune_path_is_default) make_tune_dirs();
  FILE *f = fopen(path, "a"); /* one short append per line: concurrent processes do not interleave */
  if (!f) return;             /* a cache that cannot be written only costs a re-tune next time */
  fputs(line, f);
  fclose(f);
}

/* Milliseconds per launch of w (the best of a few timed windows after a warm-up); INFINITY if it fails. */
static float time_variant(xo_context *c, const xo_variant *w, const void *args, const xo_device *d, void *stream) {
  int64_t grid[3];
  void *fn, *timer;
  if (launch_grid(w, args, d, grid) || function_for(c, w, stream, 0, &fn)) return INFINITY;
  if (launch_variant(w, fn, grid, args, stream)) return INFINITY;
  float best = INFINITY;
  for (int window = 0; window < 3; ++window) {
    if (drv->timer_start(stream, &timer)) return INFINITY;
    xopsaot_status st = XOPSAOT_SUCCESS;
    for (int r = 0; r < 4 && !st; ++r) st = launch_variant(w, fn, grid, args, stream);
    float ms = INFINITY;
    if (drv->timer_stop(timer, stream, &ms) || st) return INFINITY;
    if (ms / 4 < best) best = ms / 4;
  }
  return best;
}

/* The variant to launch for primary v: v itself unless it has alternates, else the fastest candidate as timed
 * at the first launch of v's bucket on this device (or as found in the disk cache). During graph capture an
 * untuned bucket launches v and is tuned later. Launches are repeated while timing, so the kernels that declare
 * alternates must not read what they write. */
static const xo_variant *autotuned(xo_context *c, const xo_variant *v, const void *args, xo_device *d,
                                   void *stream) {
  int32_t chosen = d->tuned ? __atomic_load_n(&d->tuned[v->index], __ATOMIC_ACQUIRE) : 0;
  if (chosen) return &xo_variants[chosen - 1];
  pthread_mutex_lock(&d->tune_lock);
  if (!d->tuned) d->tuned = calloc((size_t)xo_n_variants, sizeof *d->tuned);
  if (d->tuned && !d->tune_cache_read) read_tune_cache(d);
  chosen = d->tuned ? d->tuned[v->index] : (int32_t)v->index + 1;
  if (!chosen) {
    const xo_kernel *k = v->kernel;
    int alternates = 0, capturing = 0;
    for (int i = 0; i < k->n_variants; ++i) alternates += k->variants[i].primary == v->index && &k->variants[i] != v;
    if (!alternates) {
      chosen = v->index + 1;
    } else if (drv->is_capturing(stream, &capturing) == XOPSAOT_SUCCESS && !capturing) {
      const xo_variant *best = v;
      float best_ms = time_variant(c, v, args, d, stream);
      for (int i = 0; i < k->n_variants; ++i) {
        const xo_variant *w = &k->variants[i];
        if (w->primary != v->index || w == v || !variant_serves(w, d) || !hints_hold(k, w->aligned_mask, args))
          continue;
        float ms = time_variant(c, w, args, d, stream);
        if (ms < best_ms) best = w, best_ms = ms;
      }
      chosen = (int32_t)best->index + 1;
      if (best_ms < INFINITY) write_tune_cache(d, v, best);
    }
    if (chosen) __atomic_store_n(&d->tuned[v->index], chosen, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&d->tune_lock);
  return chosen ? &xo_variants[chosen - 1] : v;
}

int xo_can_launch(const xo_kernel *k, const int32_t *keys, const void *args, int device) {
  xo_device *d;
  return get_served_device(device, &d) == XOPSAOT_SUCCESS && select_variant(k, keys, args, d) != NULL;
}

int64_t xo_selected_const(const xo_kernel *k, const int32_t *keys, const void *args, int device, const char *name,
                          int64_t otherwise) {
  xo_device *d;
  const xo_variant *v = get_served_device(device, &d) == XOPSAOT_SUCCESS ? select_variant(k, keys, args, d) : NULL;
  for (int i = 0; v && i < k->n_consts; ++i)
    if (!strcmp(k->const_names[i], name)) return v->consts[i];
  return otherwise;
}

xopsaot_status xo_launch(const xo_kernel *k, const int32_t *keys, const void *args, int device, void *stream) {
  xo_device *d;
  xopsaot_status st = get_served_device(device, &d);
  if (st) return st;
  const xo_variant *v = select_variant(k, keys, args, d);
  if (!v) return explain_no_variant(k, keys, d);
  int64_t grid[3];
  if ((st = launch_grid(v, args, d, grid))) return st;
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return XOPSAOT_SUCCESS; /* nothing to compute */
  xo_context_ref ref;
  if ((st = drv->enter(device, &ref))) return st;
  xo_context *c;
  void *fn = NULL;
  st = context_cache(ref.id, &c);
  if (!st && autotune_on()) {
    const xo_variant *chosen = autotuned(c, v, args, d, stream);
    if (chosen != v) st = launch_grid(v = chosen, args, d, grid);
  }
  recent_variants[n_selected++ % XOPSAOT_RECENT_VARIANTS] = (int)v->index;
  if (!st) st = function_for(c, v, stream, 1, &fn);
  if (!st) st = launch_variant(v, fn, grid, args, stream);
  drv->leave(&ref);
  return st;
}

xopsaot_status xopsaot_preload(int device) {
  xo_device *d;
  xopsaot_status st = get_served_device(device, &d);
  if (st) return st;
  xo_context_ref ref;
  if ((st = drv->enter(device, &ref))) return st;
  xo_context *c;
  st = context_cache(ref.id, &c);
  for (int i = 0; i < xo_n_variants && !st; ++i) {
    const xo_variant *v = &xo_variants[i];
    void *fn;
    if (variant_serves(v, d) && (v->primary == v->index || autotune_on())) st = function_for(c, v, NULL, 0, &fn);
  }
  drv->leave(&ref);
  return st;
}

xopsaot_status xopsaot_stream_synchronize(int device, void *stream) {
  xo_device *d;
  xopsaot_status st = get_device(device, &d);
  if (st) return st;
  xo_context_ref ref;
  if ((st = drv->enter(device, &ref))) return st;
  st = drv->synchronize(stream);
  drv->leave(&ref);
  return st;
}

xopsaot_status xo_device_sm_count(int device, int *sm_count) {
  xo_device *d;
  xopsaot_status st = get_device(device, &d);
  if (!st) *sm_count = d->props.sm_count;
  return st;
}

xopsaot_status xo_device_memory_gbps(int device, int *gbps) {
  xo_device *d;
  xopsaot_status st = get_device(device, &d);
  if (!st) *gbps = d->props.memory_gbps;
  return st;
}

xopsaot_status xopsaot_device_memory_gbps(int device, int *gbps) {
  if (!gbps) return xo_fail(XOPSAOT_ERROR_INVALID_ARGUMENT, "gbps is NULL");
  return xo_device_memory_gbps(device, gbps);
}

xopsaot_status xo_workspace_alloc(int device, void *stream, uint64_t bytes, void **ptr) {
  *ptr = NULL;
  xo_context_ref ref;
  xopsaot_status st = drv->enter(device, &ref);
  if (st) return st;
  st = drv->alloc_async(bytes, stream, ptr);
  drv->leave(&ref);
  return st;
}

void xo_workspace_free(int device, void *stream, void *ptr) {
  xo_context_ref ref;
  if (!ptr || drv->enter(device, &ref)) return;
  drv->free_async(ptr, stream);
  drv->leave(&ref);
}
