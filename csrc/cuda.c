/* The CUDA driver, loaded with dlopen on first use: the library has no link-time dependency on libcuda, so it
 * loads (and reports why not) on machines without a GPU. cuda.h supplies types and constants only. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* The entry points used, resolved by their exported (versioned) names. */
static struct {
  CUresult (*init)(unsigned int);
  CUresult (*get_error_name)(CUresult, const char **);
  CUresult (*get_error_string)(CUresult, const char **);
  CUresult (*device_get_count)(int *);
  CUresult (*device_get)(CUdevice *, int);
  CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*device_get_name)(char *, int, CUdevice);
  CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
  CUresult (*ctx_get_current)(CUcontext *);
  CUresult (*ctx_get_device)(CUdevice *);
  CUresult (*ctx_get_id)(CUcontext, unsigned long long *); /* optional (CUDA 12.0) */
  CUresult (*ctx_push)(CUcontext);
  CUresult (*ctx_pop)(CUcontext *);
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus *);
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*module_load_data)(CUmodule *, const void *);
  CUresult (*module_unload)(CUmodule);
  CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
  CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*func_load)(CUfunction); /* optional (CUDA 12.4): load now rather than at first launch */
  CUresult (*mem_alloc_async)(CUdeviceptr *, size_t, CUstream); /* optional (11.2) */
  CUresult (*mem_free_async)(CUdeviceptr, CUstream);
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            CUstream, void **, void **);
  CUresult (*launch_kernel_ex)(const CUlaunchConfig *, CUfunction, void **, void **); /* optional (11.8) */
  CUresult (*event_create)(CUevent *, unsigned int);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_synchronize)(CUevent);
  CUresult (*event_elapsed_time)(float *, CUevent, CUevent);
  CUresult (*event_destroy)(CUevent);
  CUresult (*driver_get_version)(int *);
  CUresult (*tensor_map_encode_tiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                      const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                      CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                      CUtensorMapFloatOOBfill); /* optional (12.0) */
} cu;

static CUdevice *device_handles;
static CUcontext *primary_contexts;
static uint64_t *primary_ids;

static xopsaot_status fail_cuda(CUresult r, const char *what) {
  const char *name = "unknown error", *text = "";
  if (cu.get_error_name) cu.get_error_name(r, &name);
  if (cu.get_error_string) cu.get_error_string(r, &text);
  xopsaot_status status = r == CUDA_ERROR_OUT_OF_MEMORY ? XOPSAOT_ERROR_OUT_OF_MEMORY : XOPSAOT_ERROR_DRIVER;
  return xo_fail(status, "%s failed: %s (%s)", what, name, text);
}

#define CHECK(call, what)                 \
  do {                                    \
    CUresult r_ = (call);                 \
    if (r_ != CUDA_SUCCESS) return fail_cuda(r_, what); \
  } while (0)

/* Programmatic dependent launch for the variants compiled for it (their kernels wait for their predecessor first):
 * on unless XOPSAOT_PDL=0, and only where the driver has cuLaunchKernelEx (without the attribute the wait is a
 * no-op, so the plain launch stays correct). */
static int use_pdl;

static xopsaot_status cuda_init(int *device_count) {
  const char *pdl = getenv("XOPSAOT_PDL");
  use_pdl = !(pdl && strcmp(pdl, "0") == 0);
  const char *path = getenv("XOPSAOT_CUDA_DRIVER");
  if (!path || !*path) path = "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return xo_fail(XOPSAOT_ERROR_NO_DRIVER, "the CUDA driver could not be loaded (%s): %s", path, dlerror());
#define REQUIRE(field, symbol)                                                                     \
  if (!(*(void **)&cu.field = dlsym(lib, symbol)))                                                 \
    return xo_fail(XOPSAOT_ERROR_NO_DRIVER, "the CUDA driver %s lacks %s; it is too old", path, symbol);
#define OPTIONAL(field, symbol) *(void **)&cu.field = dlsym(lib, symbol);
  REQUIRE(init, "cuInit");
  REQUIRE(get_error_name, "cuGetErrorName");
  REQUIRE(get_error_string, "cuGetErrorString");
  REQUIRE(device_get_count, "cuDeviceGetCount");
  REQUIRE(device_get, "cuDeviceGet");
  REQUIRE(device_get_attribute, "cuDeviceGetAttribute");
  REQUIRE(device_get_name, "cuDeviceGetName");
  REQUIRE(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  REQUIRE(ctx_get_current, "cuCtxGetCurrent");
  REQUIRE(ctx_get_device, "cuCtxGetDevice");
  REQUIRE(ctx_push, "cuCtxPushCurrent_v2");
  REQUIRE(ctx_pop, "cuCtxPopCurrent_v2");
  REQUIRE(stream_is_capturing, "cuStreamIsCapturing");
  REQUIRE(stream_synchronize, "cuStreamSynchronize");
  REQUIRE(module_load_data, "cuModuleLoadData");
  REQUIRE(module_unload, "cuModuleUnload");
  REQUIRE(module_get_function, "cuModuleGetFunction");
  REQUIRE(func_set_attribute, "cuFuncSetAttribute");
  REQUIRE(launch_kernel, "cuLaunchKernel");
  REQUIRE(event_create, "cuEventCreate");
  REQUIRE(event_record, "cuEventRecord");
  REQUIRE(event_synchronize, "cuEventSynchronize");
  REQUIRE(event_elapsed_time, "cuEventElapsedTime");
  REQUIRE(event_destroy, "cuEventDestroy_v2");
  OPTIONAL(ctx_get_id, "cuCtxGetId");
  OPTIONAL(func_load, "cuFuncLoad");
  OPTIONAL(mem_alloc_async, "cuMemAllocAsync");
  OPTIONAL(mem_free_async, "cuMemFreeAsync");
  OPTIONAL(launch_kernel_ex, "cuLaunchKernelEx");
  OPTIONAL(driver_get_version, "cuDriverGetVersion");
  OPTIONAL(tensor_map_encode_tiled, "cuTensorMapEncodeTiled");
#undef REQUIRE
#undef OPTIONAL
  CUresult r = cu.init(0);
  if (r != CUDA_SUCCESS) {
    const char *name = "unknown error", *text = "";
    cu.get_error_name(r, &name);
    cu.get_error_string(r, &text);
    return xo_fail(XOPSAOT_ERROR_NO_DRIVER, "cuInit failed: %s (%s)", name, text);
  }
  int count = 0;
  CHECK(cu.device_get_count(&count), "cuDeviceGetCount");
  if (count <= 0) return xo_fail(XOPSAOT_ERROR_NO_DRIVER, "the CUDA driver reports no devices");
  device_handles = calloc((size_t)count, sizeof *device_handles);
  primary_contexts = calloc((size_t)count, sizeof *primary_contexts);
  primary_ids = calloc((size_t)count, sizeof *primary_ids);
  if (!device_handles || !primary_contexts || !primary_ids)
    return xo_fail(XOPSAOT_ERROR_OUT_OF_MEMORY, "out of host memory");
  for (int i = 0; i < count; ++i) CHECK(cu.device_get(&device_handles[i], i), "cuDeviceGet");
  *device_count = count;
  return XOPSAOT_SUCCESS;
}

static xopsaot_status cuda_device_props(int device, xo_device_props *p) {
  CUdevice d = device_handles[device];
  int major = 0, minor = 0;
  CHECK(cu.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d), "cuDeviceGetAttribute");
  CHECK(cu.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d), "cuDeviceGetAttribute");
  CHECK(cu.device_get_attribute(&p->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d), "cuDeviceGetAttribute");
  CHECK(cu.device_get_attribute(&p->smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d),
        "cuDeviceGetAttribute");
  CHECK(cu.device_get_name(p->name, (int)sizeof p->name, d), "cuDeviceGetName");
  p->arch = 10 * major + minor;
  /* a tuning hint only: a driver that does not report the memory's clock or width leaves it unknown */
  int clock_khz = 0, bus_bits = 0;
  if (cu.device_get_attribute(&clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, d) != CUDA_SUCCESS ||
      cu.device_get_attribute(&bus_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, d) != CUDA_SUCCESS)
    clock_khz = bus_bits = 0;
  p->memory_gbps = clock_khz > 0 && bus_bits > 0 ? (int)(((int64_t)clock_khz * bus_bits + 2000000) / 4000000) : 0;
  return XOPSAOT_SUCCESS;
}

static uint64_t context_id(CUcontext ctx) {
  unsigned long long id;
  if (cu.ctx_get_id && cu.ctx_get_id(ctx, &id) == CUDA_SUCCESS) return id;
  return (uint64_t)(uintptr_t)ctx;
}

/* Retained once per device, the first time a launch finds no context of that device current. */
static xopsaot_status primary_context(int device, CUcontext *ctx, uint64_t *id) {
  CUcontext c = __atomic_load_n(&primary_contexts[device], __ATOMIC_ACQUIRE);
  if (!c) {
    CHECK(cu.primary_ctx_retain(&c, device_handles[device]), "cuDevicePrimaryCtxRetain");
    __atomic_store_n(&primary_ids[device], context_id(c), __ATOMIC_RELAXED);
    CUcontext expected = NULL;
    if (!__atomic_compare_exchange_n(&primary_contexts[device], &expected, c, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
      c = expected; /* another thread retained it first; the extra reference is harmless */
  }
  *ctx = c;
  *id = __atomic_load_n(&primary_ids[device], __ATOMIC_RELAXED);
  return XOPSAOT_SUCCESS;
}

/* The context this thread last found current, with its device and id: a launch loop asks the driver only
 * for the current context, not for its device and id every time. */
static _Thread_local struct {
  CUcontext handle;
  CUdevice device;
  uint64_t id;
} last_current;

static xopsaot_status cuda_enter(int device, xo_context_ref *ref) {
  CUcontext current = NULL;
  CHECK(cu.ctx_get_current(&current), "cuCtxGetCurrent");
  if (current && current != last_current.handle) {
    CUdevice d;
    last_current.handle = NULL;
    if (cu.ctx_get_device(&d) == CUDA_SUCCESS) {
      last_current.device = d;
      last_current.id = context_id(current);
      last_current.handle = current;
    }
  }
  if (current && current == last_current.handle && last_current.device == device_handles[device]) {
    ref->handle = current; /* the caller's context belongs to the tensors' device: use it */
    ref->id = last_current.id;
    ref->pushed = 0;
    return XOPSAOT_SUCCESS;
  }
  xopsaot_status st = primary_context(device, &current, &ref->id);
  if (st) return st;
  CHECK(cu.ctx_push(current), "cuCtxPushCurrent");
  ref->handle = current;
  ref->pushed = 1;
  return XOPSAOT_SUCCESS;
}

static void cuda_leave(const xo_context_ref *ref) {
  if (ref->pushed) {
    CUcontext popped;
    cu.ctx_pop(&popped);
  }
}

static xopsaot_status cuda_is_capturing(void *stream, int *capturing) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CHECK(cu.stream_is_capturing((CUstream)stream, &status), "cuStreamIsCapturing");
  *capturing = status != CU_STREAM_CAPTURE_STATUS_NONE;
  return XOPSAOT_SUCCESS;
}

static xopsaot_status cuda_load(const void *image, const xo_variant *v, void **module, void **function) {
  CUmodule mod;
  CUfunction fn;
  char what[256];
  snprintf(what, sizeof what, "cuModuleLoadData(%s)", v->label);
  CHECK(cu.module_load_data(&mod, image), what);
  CUresult r = cu.module_get_function(&fn, mod, v->symbol);
  if (r == CUDA_SUCCESS && v->shared > 48 * 1024)
    r = cu.func_set_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)v->shared);
  if (r == CUDA_SUCCESS && v->num_ctas > 8)
    r = cu.func_set_attribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
  if (r == CUDA_SUCCESS && cu.func_load) r = cu.func_load(fn);
  if (r != CUDA_SUCCESS) {
    cu.module_unload(mod);
    snprintf(what, sizeof what, "loading %s from its module", v->label);
    return fail_cuda(r, what);
  }
  *module = mod;
  *function = fn;
  return XOPSAOT_SUCCESS;
}

static xopsaot_status cuda_alloc_async(uint64_t bytes, void *stream, void **ptr) {
  if (!cu.mem_alloc_async || !cu.mem_free_async)
    return xo_fail(XOPSAOT_ERROR_NO_DRIVER, "this kernel needs cuMemAllocAsync (CUDA 11.2 or later)");
  CUdeviceptr p;
  CHECK(cu.mem_alloc_async(&p, (size_t)bytes, (CUstream)stream), "cuMemAllocAsync (kernel scratch)");
  *ptr = (void *)(uintptr_t)p;
  return XOPSAOT_SUCCESS;
}

static void cuda_free_async(void *ptr, void *stream) {
  if (ptr) cu.mem_free_async((CUdeviceptr)(uintptr_t)ptr, (CUstream)stream);
}

static xopsaot_status cuda_launch(void *function, const xo_variant *v, const int64_t grid[3], void *stream,
                                  void **params) {
  unsigned threads = 32u * v->num_warps;
  const int pdl = v->pdl && use_pdl && cu.launch_kernel_ex;
  if (v->num_ctas == 1 && !v->cooperative && !pdl) {
    CHECK(cu.launch_kernel((CUfunction)function, (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2], threads, 1,
                           1, v->shared, (CUstream)stream, params, NULL),
          "cuLaunchKernel");
    return XOPSAOT_SUCCESS;
  }
  if (!cu.launch_kernel_ex) return xo_fail(XOPSAOT_ERROR_NO_DRIVER, "%s needs cuLaunchKernelEx", v->label);
  CUlaunchAttribute attrs[3];
  unsigned n = 0;
  memset(attrs, 0, sizeof attrs);
  if (v->num_ctas != 1) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = v->num_ctas;
    attrs[n].value.clusterDim.y = 1;
    attrs[n].value.clusterDim.z = 1;
    ++n;
  }
  if (v->cooperative) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n++].value.cooperative = 1;
  }
  if (pdl) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n++].value.programmaticStreamSerializationAllowed = 1;
  }
  CUlaunchConfig config;
  memset(&config, 0, sizeof config);
  config.gridDimX = (unsigned)grid[0] * v->num_ctas;
  config.gridDimY = (unsigned)grid[1];
  config.gridDimZ = (unsigned)grid[2];
  config.blockDimX = threads;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = v->shared;
  config.hStream = (CUstream)stream;
  config.attrs = attrs;
  config.numAttrs = n;
  CHECK(cu.launch_kernel_ex(&config, (CUfunction)function, params, NULL), "cuLaunchKernelEx");
  return XOPSAOT_SUCCESS;
}

static xopsaot_status cuda_encode_tma(const xo_tma_meta *m, const xo_tma_desc *d, void *map) {
  if (!cu.tensor_map_encode_tiled)
    return xo_fail(XOPSAOT_ERROR_NO_DRIVER, "host TMA descriptors need cuTensorMapEncodeTiled (CUDA 12.0 or later)");
  /* the driver takes dims innermost first and the byte strides of all but the innermost */
  cuuint64_t dims[XO_MAX_TMA_RANK], strides[XO_MAX_TMA_RANK];
  cuuint32_t box[XO_MAX_TMA_RANK], unit[XO_MAX_TMA_RANK];
  const int rank = m->rank;
  uint64_t span = 0; /* the last byte's offset */
  for (int i = 0; i < rank; ++i) {
    const int j = rank - 1 - i;
    dims[i] = (cuuint64_t)d->shape[j];
    box[i] = m->box[j];
    unit[i] = 1;
    if (i > 0) strides[i - 1] = (cuuint64_t)d->strides[j] * m->elem_size;
    span += (uint64_t)(d->shape[j] - 1) * (uint64_t)d->strides[j] * m->elem_size;
  }
  CHECK(cu.tensor_map_encode_tiled((CUtensorMap *)map, (CUtensorMapDataType)m->elem_type, (cuuint32_t)rank, d->base,
                                   dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                   (CUtensorMapSwizzle)m->swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled");
  /* A workaround Triton 3.9's launcher applies after CUTLASS's, kept as it is: with drivers up to 13.1, a tensor
   * spanning under 128 KiB gets bit 21 of the descriptor's second word cleared. */
  int version = 0;
  if (cu.driver_get_version && cu.driver_get_version(&version) == CUDA_SUCCESS && version <= 13010 &&
      span + 1 < 128 * 1024)
    ((uint64_t *)map)[1] &= ~(1ull << 21);
  return XOPSAOT_SUCCESS;
}

static xopsaot_status cuda_synchronize(void *stream) {
  CHECK(cu.stream_synchronize((CUstream)stream), "cuStreamSynchronize");
  return XOPSAOT_SUCCESS;
}

typedef struct cuda_timer {
  CUevent start, end;
} cuda_timer;

static xopsaot_status cuda_timer_start(void *stream, void **timer) {
  cuda_timer *t = calloc(1, sizeof *t);
  if (!t) return xo_fail(XOPSAOT_ERROR_OUT_OF_MEMORY, "out of host memory");
  CUresult r = cu.event_create(&t->start, CU_EVENT_DEFAULT);
  if (r == CUDA_SUCCESS) r = cu.event_create(&t->end, CU_EVENT_DEFAULT);
  if (r == CUDA_SUCCESS) r = cu.event_record(t->start, (CUstream)stream);
  if (r != CUDA_SUCCESS) {
    if (t->start) cu.event_destroy(t->start);
    if (t->end) cu.event_destroy(t->end);
    free(t);
    return fail_cuda(r, "timing with cuEvent");
  }
  *timer = t;
  return XOPSAOT_SUCCESS;
}

static xopsaot_status cuda_timer_stop(void *timer, void *stream, float *ms) {
  cuda_timer *t = timer;
  CUresult r = cu.event_record(t->end, (CUstream)stream);
  if (r == CUDA_SUCCESS) r = cu.event_synchronize(t->end);
  if (r == CUDA_SUCCESS) r = cu.event_elapsed_time(ms, t->start, t->end);
  cu.event_destroy(t->start);
  cu.event_destroy(t->end);
  free(t);
  return r == CUDA_SUCCESS ? XOPSAOT_SUCCESS : fail_cuda(r, "timing with cuEvent");
}

const xo_driver xo_cuda_driver = {
    .name = "CUDA",
    .backend = XO_BACKEND_CUDA,
    .warp_size = 32,
    .init = cuda_init,
    .device_props = cuda_device_props,
    .enter = cuda_enter,
    .leave = cuda_leave,
    .is_capturing = cuda_is_capturing,
    .load = cuda_load,
    .alloc_async = cuda_alloc_async,
    .free_async = cuda_free_async,
    .launch = cuda_launch,
    .encode_tma = cuda_encode_tma,
    .synchronize = cuda_synchronize,
    .timer_start = cuda_timer_start,
    .timer_stop = cuda_timer_stop,
};
