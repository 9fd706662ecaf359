/* What the runtime needs from a GPU driver. CUDA implements it (cuda.c); a HIP driver would implement the
 * same table. Every function returns a status and leaves a message through xo_fail on failure. */
#ifndef XOPSAOT_DRIVER_H
#define XOPSAOT_DRIVER_H

#include "runtime.h"

typedef struct xo_device_props {
  int arch;        /* CUDA: 10 * major + minor */
  int sm_count;
  int smem_optin;  /* largest dynamic shared memory a block may opt into */
  int memory_gbps; /* peak memory bandwidth in GB/s (bus width x memory clock, double data rate); 0: unknown */
  char name[128];
} xo_device_props;

/* The context a launch runs in, as entered by xo_driver.enter. */
typedef struct xo_context_ref {
  void *handle;
  uint64_t id;  /* unique for the context's lifetime (cuCtxGetId), else the handle */
  int pushed;   /* enter pushed it; leave pops it */
} xo_context_ref;

typedef struct xo_driver {
  const char *name;
  int backend;
  int warp_size;
  /* Load the driver library and initialize it; called once. */
  xopsaot_status (*init)(int *device_count);
  xopsaot_status (*device_props)(int device, xo_device_props *props);
  /* Make a context of `device` current: the caller's current context if it belongs to the device, else the
   * device's primary context, pushed for the duration of the call. */
  xopsaot_status (*enter)(int device, xo_context_ref *ctx);
  void (*leave)(const xo_context_ref *ctx);
  xopsaot_status (*is_capturing)(void *stream, int *capturing);
  /* Load `image` into the current context and fetch v's symbol, configured for v's dynamic shared memory (the
   * runtime only loads variants that fit the device) and clusters of num_ctas. */
  xopsaot_status (*load)(const void *image, const xo_variant *v, void **module, void **function);
  xopsaot_status (*alloc_async)(uint64_t bytes, void *stream, void **ptr);
  void (*free_async)(void *ptr, void *stream);
  xopsaot_status (*launch)(void *function, const xo_variant *v, const int64_t grid[3], void *stream, void **params);
  /* Encode a host TMA descriptor (128 bytes, 64-byte aligned) for a kernel parameter. */
  xopsaot_status (*encode_tma)(const xo_tma_meta *meta, const xo_tma_desc *desc, void *map);
  xopsaot_status (*synchronize)(void *stream);
  /* Time work on `stream` (XOPSAOT_AUTOTUNE): timer_start records a start event; timer_stop records the end,
   * waits for it and gives the milliseconds between. timer_stop releases the timer whatever it returns. */
  xopsaot_status (*timer_start)(void *stream, void **timer);
  xopsaot_status (*timer_stop)(void *timer, void *stream, float *ms);
} xo_driver;

extern const xo_driver xo_cuda_driver XO_INTERNAL;

#endif
