/* A fake CUDA driver for testing libxopsaot's launch path on machines without a GPU.
 *
 * It implements the driver entry points the library resolves, keeps per-thread context stacks, checks that
 * every module image is a CUDA ELF whose arch can run on the (fake) device of the current context, refuses
 * module loads while a stream is capturing, checks that launched functions belong to the current context,
 * and records every launch (grid, block, shared memory, stream, the first bytes of each parameter).
 *
 * Configuration (environment): FAKE_CUDA_DEVICES="90,86" compute capabilities (default "90");
 * FAKE_CUDA_SMEM_OPTIN (default 232448); FAKE_CUDA_MEMORY="<clock kHz>:<bus bits>" the memory's clock and width
 * (default unreported: 0); FAKE_CUDA_INIT_ERROR (a CUresult for cuInit);
 * FAKE_CUDA_FAIL=<entry point name> makes that entry point fail with CUDA_ERROR_INVALID_IMAGE (200), or
 * cuTensorMapEncodeTiled with CUDA_ERROR_INVALID_VALUE; FAKE_CUDA_DRIVER_VERSION (default 13000).
 * Events read a fake clock that each launch advances by its module's cost (1 ms unless fake_cuda_set_cost). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum {
  OK = 0,
  ERR_INVALID_VALUE = 1,
  ERR_NOT_INITIALIZED = 3,
  ERR_NO_DEVICE = 100,
  ERR_INVALID_DEVICE = 101,
  ERR_INVALID_IMAGE = 200,
  ERR_INVALID_CONTEXT = 201,
  ERR_NO_BINARY_FOR_GPU = 209,
  ERR_NOT_FOUND = 500,
  ERR_INVALID_HANDLE = 400,
  ERR_CAPTURE_UNSUPPORTED = 900
};

#define MAX_DEVICES 8
#define MAX_PARAMS 64
#define MAX_LAUNCHES 8192

typedef struct fake_ctx {
  int device;
  unsigned long long id;
} fake_ctx;

typedef struct fake_module {
  fake_ctx *ctx;
  const void *image;
} fake_module;

typedef struct fake_function {
  fake_module *module;
  char name[128];
  int max_dynamic_smem;
} fake_function;

typedef struct fake_launch {
  const void *image;
  unsigned long long ctx_id;
  char name[128];
  unsigned grid[3], block[3], smem, cluster, pdl;
  void *stream;
  int nparams;
  unsigned long long params[MAX_PARAMS];
} fake_launch;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int n_devices;
static int archs[MAX_DEVICES];
static int smem_optin = 232448;
static int memory_khz, memory_bits; /* FAKE_CUDA_MEMORY; 0: unreported */
static fake_ctx primaries[MAX_DEVICES];
static unsigned long long next_ctx_id = 100;
static fake_launch launches[MAX_LAUNCHES];
static int n_launches, n_loads, n_allocs, n_frees, n_capture_violations, expected_params;
static void *capturing[16];
static double clock_ms;
static struct { const void *image; double ms; } costs[64];
static int n_costs;
static __thread fake_ctx *stack[16];
static __thread int depth;

static int failing(const char *name) {
  const char *f = getenv("FAKE_CUDA_FAIL");
  return f && strcmp(f, name) == 0;
}

CUresult cuInit(unsigned flags) {
  (void)flags;
  const char *e = getenv("FAKE_CUDA_INIT_ERROR");
  if (e && atoi(e)) return atoi(e);
  const char *spec = getenv("FAKE_CUDA_DEVICES");
  if (!spec) spec = "90";
  const char *o = getenv("FAKE_CUDA_SMEM_OPTIN");
  if (o) smem_optin = atoi(o);
  const char *m = getenv("FAKE_CUDA_MEMORY");
  if (m && strchr(m, ':')) memory_khz = atoi(m), memory_bits = atoi(strchr(m, ':') + 1);
  n_devices = 0;
  while (*spec && n_devices < MAX_DEVICES) {
    archs[n_devices] = atoi(spec);
    primaries[n_devices].device = n_devices;
    primaries[n_devices].id = 1 + (unsigned long long)n_devices;
    ++n_devices;
    spec = strchr(spec, ',');
    if (!spec) break;
    ++spec;
  }
  return OK;
}

CUresult cuGetErrorName(CUresult r, const char **name) {
  switch (r) {
    case ERR_INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
    case ERR_NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case ERR_NO_BINARY_FOR_GPU: *name = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
    case ERR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case ERR_CAPTURE_UNSUPPORTED: *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    default: *name = "CUDA_ERROR_FAKE"; break;
  }
  return OK;
}

CUresult cuGetErrorString(CUresult r, const char **text) {
  (void)r;
  *text = "fake driver error";
  return OK;
}

CUresult cuDeviceGetCount(int *count) {
  *count = n_devices;
  return OK;
}

CUresult cuDeviceGet(int *device, int ordinal) {
  if (ordinal < 0 || ordinal >= n_devices) return ERR_INVALID_DEVICE;
  *device = ordinal;
  return OK;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
  switch (attribute) {
    case 75: *value = archs[device] / 10; break; /* compute capability major */
    case 76: *value = archs[device] % 10; break; /* minor */
    case 16: *value = 132; break;                /* multiprocessors */
    case 97: *value = smem_optin; break;         /* max shared memory per block, opt-in */
    case 36: *value = memory_khz; break;         /* memory clock */
    case 37: *value = memory_bits; break;        /* memory bus width */
    default: *value = 0;
  }
  return OK;
}

CUresult cuDeviceGetName(char *name, int size, int device) {
  const char *base = "Fake GPU ";
  if (size < 16) return ERR_INVALID_VALUE;
  strcpy(name, base);
  name[9] = (char)('0' + device);
  name[10] = 0;
  return OK;
}

CUresult cuDevicePrimaryCtxRetain(fake_ctx **ctx, int device) {
  *ctx = &primaries[device];
  return OK;
}

CUresult cuCtxGetCurrent(fake_ctx **ctx) {
  *ctx = depth ? stack[depth - 1] : NULL;
  return OK;
}

CUresult cuCtxGetDevice(int *device) {
  if (!depth) return ERR_INVALID_CONTEXT;
  *device = stack[depth - 1]->device;
  return OK;
}

CUresult cuCtxGetId(fake_ctx *ctx, unsigned long long *id) {
  *id = ctx->id;
  return OK;
}

CUresult cuCtxPushCurrent_v2(fake_ctx *ctx) {
  if (depth == 16) return ERR_INVALID_VALUE;
  stack[depth++] = ctx;
  return OK;
}

CUresult cuCtxPopCurrent_v2(fake_ctx **ctx) {
  if (!depth) return ERR_INVALID_CONTEXT;
  *ctx = stack[--depth];
  return OK;
}

static int is_capturing(void *stream) {
  for (int i = 0; i < 16; ++i)
    if (capturing[i] && capturing[i] == stream) return 1;
  return 0;
}

static int any_capture(void) {
  for (int i = 0; i < 16; ++i)
    if (capturing[i]) return 1;
  return 0;
}

CUresult cuStreamIsCapturing(void *stream, int *status) {
  *status = is_capturing(stream);
  return OK;
}

CUresult cuStreamSynchronize(void *stream) {
  (void)stream;
  return depth ? OK : ERR_INVALID_CONTEXT;
}

/* The SM version a CUDA ELF was built for; ABI v7 keeps it in the low byte of e_flags, v8 in the next. */
static int image_arch(const unsigned char *image) {
  if (memcmp(image, "\x7f" "ELF", 4) != 0) return -1;
  uint16_t machine;
  uint32_t flags;
  memcpy(&machine, image + 18, 2);
  memcpy(&flags, image + 48, 4);
  if (machine != 190) return -1;
  return image[8] >= 8 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
}

static int runs_on(int binary, int device) {
  if (binary >= 90) return binary == device; /* sm_90a and later: arch-specific */
  return binary / 10 == device / 10 && binary <= device;
}

CUresult cuModuleLoadData(fake_module **module, const void *image) {
  if (failing("cuModuleLoadData")) return ERR_INVALID_IMAGE;
  if (!depth) return ERR_INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  if (any_capture()) { /* a real driver would invalidate the capture */
    ++n_capture_violations;
    pthread_mutex_unlock(&lock);
    return ERR_CAPTURE_UNSUPPORTED;
  }
  pthread_mutex_unlock(&lock);
  int arch = image_arch(image);
  if (arch < 0) return ERR_INVALID_IMAGE;
  if (!runs_on(arch, archs[stack[depth - 1]->device])) return ERR_NO_BINARY_FOR_GPU;
  fake_module *m = calloc(1, sizeof *m);
  m->ctx = stack[depth - 1];
  m->image = image;
  pthread_mutex_lock(&lock);
  ++n_loads;
  pthread_mutex_unlock(&lock);
  *module = m;
  return OK;
}

CUresult cuModuleUnload(fake_module *module) {
  free(module);
  return OK;
}

CUresult cuModuleGetFunction(fake_function **fn, fake_module *module, const char *name) {
  fake_function *f = calloc(1, sizeof *f);
  f->module = module;
  strncpy(f->name, name, sizeof f->name - 1);
  f->max_dynamic_smem = 48 * 1024;
  *fn = f;
  return OK;
}

CUresult cuFuncSetAttribute(fake_function *fn, int attribute, int value) {
  if (attribute == 8) { /* max dynamic shared memory */
    if (value > smem_optin) return ERR_INVALID_VALUE;
    fn->max_dynamic_smem = value;
  }
  return OK;
}

CUresult cuFuncLoad(fake_function *fn) { return fn ? OK : ERR_INVALID_HANDLE; }

CUresult cuMemAllocAsync(unsigned long long *ptr, size_t size, void *stream) {
  (void)stream;
  *ptr = 0xabc000000ull + size;
  __sync_fetch_and_add(&n_allocs, 1);
  return OK;
}

CUresult cuMemFreeAsync(unsigned long long ptr, void *stream) {
  (void)ptr;
  (void)stream;
  __sync_fetch_and_add(&n_frees, 1);
  return OK;
}

static CUresult record(fake_function *f, const unsigned grid[3], const unsigned block[3], unsigned smem,
                       unsigned cluster, unsigned pdl, void *stream, void **params) {
  if (!depth || f->module->ctx != stack[depth - 1]) return ERR_INVALID_CONTEXT; /* wrong context */
  if ((int)smem > f->max_dynamic_smem) return ERR_INVALID_VALUE;              /* no opt-in */
  pthread_mutex_lock(&lock);
  double cost = 1.0;
  for (int i = 0; i < n_costs; ++i)
    if (costs[i].image == f->module->image) cost = costs[i].ms;
  clock_ms += cost;
  if (n_launches < MAX_LAUNCHES) {
    fake_launch *l = &launches[n_launches++];
    memset(l, 0, sizeof *l);
    l->image = f->module->image;
    l->ctx_id = f->module->ctx->id;
    strcpy(l->name, f->name);
    memcpy(l->grid, grid, sizeof l->grid);
    memcpy(l->block, block, sizeof l->block);
    l->smem = smem;
    l->cluster = cluster;
    l->pdl = pdl;
    l->stream = stream;
    int n = 0; /* the launcher ends the list with NULL: copy up to the expected count or the end */
    for (; n < expected_params && n < MAX_PARAMS && params[n]; ++n) memcpy(&l->params[n], params[n], 8);
    l->nparams = n;
  }
  pthread_mutex_unlock(&lock);
  return OK;
}

CUresult cuLaunchKernel(fake_function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, void *stream, void **params, void **extra) {
  (void)extra;
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return record(f, grid, block, smem, 1, 0, stream, params);
}

/* Only the fields the library sets, in CUlaunchConfig's layout. */
typedef struct {
  unsigned grid[3], block[3], smem;
  void *stream;
  struct { int id; int pad; unsigned value[16]; } *attrs;
  unsigned num_attrs;
} fake_launch_config;

CUresult cuLaunchKernelEx(const fake_launch_config *c, fake_function *f, void **params, void **extra) {
  (void)extra;
  unsigned cluster = 1, pdl = 0;
  for (unsigned i = 0; i < c->num_attrs; ++i) {
    if (c->attrs[i].id == 4) cluster = c->attrs[i].value[0]; /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION */
    if (c->attrs[i].id == 6) pdl = c->attrs[i].value[0];     /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
  }
  return record(f, c->grid, c->block, c->smem, cluster, pdl, c->stream, params);
}

/* cuTensorMapEncodeTiled's arguments, recorded; the map's first word is the address, its second has bit 21 set
 * (the flag the launcher clears on drivers up to 13.1 for tensors spanning under 128 KiB). */
typedef struct fake_tensor_map {
  unsigned long long address, dims[5], strides[5];
  unsigned box[5];
  int dtype, rank, swizzle, oob_fill;
} fake_tensor_map;

static fake_tensor_map maps[256];
static int n_maps;

CUresult cuTensorMapEncodeTiled(void *map, int dtype, unsigned rank, void *address, const unsigned long long *dims,
                                const unsigned long long *strides, const unsigned *box, const unsigned *elem_strides,
                                int interleave, int swizzle, int l2_promotion, int oob_fill) {
  (void)interleave;
  (void)l2_promotion;
  if (failing("cuTensorMapEncodeTiled") || (uintptr_t)map % 64 || (uintptr_t)address % 16 || rank < 1 || rank > 5)
    return ERR_INVALID_VALUE;
  for (unsigned i = 0; i < rank; ++i)
    if (!dims[i] || !box[i] || box[i] > 256 || elem_strides[i] != 1 || (i + 1 < rank && strides[i] % 16))
      return ERR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if (n_maps < 256) {
    fake_tensor_map *m = &maps[n_maps++];
    memset(m, 0, sizeof *m);
    m->address = (unsigned long long)(uintptr_t)address;
    memcpy(m->dims, dims, rank * sizeof *dims);
    memcpy(m->strides, strides, (rank - 1) * sizeof *strides);
    memcpy(m->box, box, rank * sizeof *box);
    m->dtype = dtype;
    m->rank = (int)rank;
    m->swizzle = swizzle;
    m->oob_fill = oob_fill;
  }
  pthread_mutex_unlock(&lock);
  memset(map, 0, 128);
  ((unsigned long long *)map)[0] = (unsigned long long)(uintptr_t)address;
  ((unsigned long long *)map)[1] = 1ull << 21;
  return OK;
}

CUresult cuDriverGetVersion(int *version) {
  const char *v = getenv("FAKE_CUDA_DRIVER_VERSION");
  *version = v ? atoi(v) : 13000;
  return OK;
}

typedef struct fake_event {
  double at;
} fake_event;

CUresult cuEventCreate(fake_event **event, unsigned flags) {
  (void)flags;
  if (failing("cuEventCreate")) return ERR_INVALID_IMAGE;
  *event = calloc(1, sizeof **event);
  return *event ? OK : ERR_INVALID_VALUE;
}

CUresult cuEventRecord(fake_event *event, void *stream) {
  (void)stream;
  if (!depth) return ERR_INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  event->at = clock_ms;
  pthread_mutex_unlock(&lock);
  return OK;
}

CUresult cuEventSynchronize(fake_event *event) { return event ? OK : ERR_INVALID_HANDLE; }

CUresult cuEventElapsedTime(float *ms, fake_event *start, fake_event *end) {
  *ms = (float)(end->at - start->at);
  return OK;
}

CUresult cuEventDestroy_v2(fake_event *event) {
  free(event);
  return OK;
}

/* ---- test controls ---- */
void fake_cuda_set_cost(const void *image, double ms) {
  pthread_mutex_lock(&lock);
  if (n_costs < 64) {
    costs[n_costs].image = image;
    costs[n_costs++].ms = ms;
  }
  pthread_mutex_unlock(&lock);
}
void fake_cuda_expect_params(int n) { expected_params = n; }
void fake_cuda_reset(void) {
  pthread_mutex_lock(&lock);
  n_launches = 0;
  n_maps = 0;
  pthread_mutex_unlock(&lock);
}
int fake_cuda_launch_count(void) { return n_launches; }
int fake_cuda_tensor_map_count(void) { return n_maps; }
const fake_tensor_map *fake_cuda_tensor_map(int i) { return &maps[i]; }
const fake_launch *fake_cuda_launch(int i) { return &launches[i]; }
int fake_cuda_load_count(void) { return n_loads; }
int fake_cuda_alloc_count(void) { return n_allocs; }
int fake_cuda_free_count(void) { return n_frees; }
int fake_cuda_capture_violations(void) { return n_capture_violations; }
int fake_cuda_depth(void) { return depth; }
void fake_cuda_set_capturing(void *stream, int on) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < 16; ++i) {
    if (on && !capturing[i]) {
      capturing[i] = stream;
      break;
    }
    if (!on && capturing[i] == stream) capturing[i] = NULL;
  }
  pthread_mutex_unlock(&lock);
}
/* Make a context current on this thread: the primary context of `device`, or (own != 0) a new one. */
unsigned long long fake_cuda_make_current(int device, int own) {
  fake_ctx *c = &primaries[device];
  if (own) {
    c = calloc(1, sizeof *c);
    c->device = device;
    c->id = __sync_fetch_and_add(&next_ctx_id, 1);
  }
  stack[depth++] = c;
  return c->id;
}
