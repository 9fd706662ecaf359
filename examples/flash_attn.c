/* Calling xops-aot from C, without Python: causal GQA flash attention on the GPU, checked against a reference.
 *
 * Build against an installed wheel (the package folder holds libxopsaot.so and include/xopsaot.h):
 *   PKG=$(python -c "import xopsaot, os; print(os.path.dirname(xopsaot.__file__))")
 *   cc -O2 -I$PKG/include examples/flash_attn.c -L$PKG -lxopsaot -Wl,-rpath,$PKG -ldl -lm -o flash_attn
 *
 * A server already holds device pointers and a stream; this example makes its own with the CUDA driver API,
 * loaded with dlopen so that it builds without the CUDA toolkit. Exit codes: 0 correct, 1 wrong result,
 * 2 no usable GPU (the library's message says why), 3 an error. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xopsaot.h"

enum { BATCH = 2, SEQ_Q = 100, SEQ_K = 130, HEADS = 8, HEADS_K = 2, DIM = 64 };

/* ---- the few driver calls the example needs for memory ---- */
typedef unsigned long long devptr;
static struct {
  int (*init)(unsigned);
  int (*device_get)(int *, int);
  int (*primary_ctx_retain)(void **, int);
  int (*ctx_set_current)(void *);
  int (*mem_alloc)(devptr *, size_t);
  int (*memcpy_htod)(devptr, const void *, size_t);
  int (*memcpy_dtoh)(void *, devptr, size_t);
  int (*ctx_synchronize)(void);
} cu;

static int load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return -1;
  *(void **)&cu.init = dlsym(lib, "cuInit");
  *(void **)&cu.device_get = dlsym(lib, "cuDeviceGet");
  *(void **)&cu.primary_ctx_retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  *(void **)&cu.ctx_set_current = dlsym(lib, "cuCtxSetCurrent");
  *(void **)&cu.mem_alloc = dlsym(lib, "cuMemAlloc_v2");
  *(void **)&cu.memcpy_htod = dlsym(lib, "cuMemcpyHtoD_v2");
  *(void **)&cu.memcpy_dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
  *(void **)&cu.ctx_synchronize = dlsym(lib, "cuCtxSynchronize");
  int device;
  void *ctx;
  if (cu.init(0) || cu.device_get(&device, 0) || cu.primary_ctx_retain(&ctx, device) || cu.ctx_set_current(ctx))
    return -1;
  return 0;
}

/* ---- IEEE half precision ---- */
static uint16_t to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, mantissa = x & 0x7fffff;
  int exponent = (int)((x >> 23) & 0xff) - 127 + 15;
  if (exponent <= 0) return (uint16_t)sign; /* tiny values flush to zero; the example's data never gets there */
  if (exponent >= 31) return (uint16_t)(sign | 0x7c00);
  uint32_t h = sign | ((uint32_t)exponent << 10) | (mantissa >> 13);
  if ((mantissa & 0x1fff) > 0x1000 || ((mantissa & 0x1fff) == 0x1000 && (h & 1))) ++h; /* round to nearest even */
  return (uint16_t)h;
}

static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, x;
  if (exponent == 0) {
    float f = ldexpf((float)mantissa, -24);
    return sign ? -f : f;
  }
  x = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static devptr upload(const uint16_t *host, size_t count) {
  devptr p;
  if (cu.mem_alloc(&p, count * 2) || cu.memcpy_htod(p, host, count * 2)) return 0;
  return p;
}

int main(void) {
  int count = 0;
  if (xopsaot_device_count(&count) != XOPSAOT_SUCCESS) {
    printf("no usable GPU: %s\n", xopsaot_last_error());
    return 2;
  }
  int arch;
  if (xopsaot_device_arch(0, &arch) != XOPSAOT_SUCCESS) {
    printf("no usable GPU: %s\n", xopsaot_last_error());
    return 2;
  }
  if (load_driver()) {
    printf("could not set up device memory through the driver\n");
    return 3;
  }
  const size_t nq = (size_t)BATCH * SEQ_Q * HEADS * DIM, nk = (size_t)BATCH * SEQ_K * HEADS_K * DIM;
  uint16_t *q = malloc(nq * 2), *k = malloc(nk * 2), *v = malloc(nk * 2), *o = malloc(nq * 2);
  srand(1234);
  for (size_t i = 0; i < nq; ++i) q[i] = to_half((float)rand() / RAND_MAX * 2 - 1);
  for (size_t i = 0; i < nk; ++i) k[i] = to_half((float)rand() / RAND_MAX * 2 - 1);
  for (size_t i = 0; i < nk; ++i) v[i] = to_half((float)rand() / RAND_MAX * 2 - 1);
  devptr dq = upload(q, nq), dk = upload(k, nk), dv = upload(v, nk), dout;
  if (!dq || !dk || !dv || cu.mem_alloc(&dout, nq * 2)) {
    printf("device allocation failed\n");
    return 3;
  }

  const int64_t q_shape[4] = {BATCH, SEQ_Q, HEADS, DIM}, k_shape[4] = {BATCH, SEQ_K, HEADS_K, DIM};
  xopsaot_tensor tq, tk, tv, tout;
  xopsaot_tensor_contiguous(&tq, (void *)dq, 4, q_shape, XOPSAOT_FLOAT16, 0);
  xopsaot_tensor_contiguous(&tk, (void *)dk, 4, k_shape, XOPSAOT_FLOAT16, 0);
  xopsaot_tensor_contiguous(&tv, (void *)dv, 4, k_shape, XOPSAOT_FLOAT16, 0);
  xopsaot_tensor_contiguous(&tout, (void *)dout, 4, q_shape, XOPSAOT_FLOAT16, 0);
  const float scale = 1.0f / sqrtf((float)DIM);
  const xopsaot_attention_options options = {.softmax_scale = scale, .causal = 1, .window_left = -1,
                                             .window_right = -1, .softcap = 0.0f, .num_splits = 0};
  if (xopsaot_flash_attn(&tq, &tk, &tv, &tout, /*lse=*/NULL, /*alibi_slopes=*/NULL, &options, /*stream=*/NULL) !=
      XOPSAOT_SUCCESS) {
    printf("xopsaot_flash_attn failed: %s\n", xopsaot_last_error());
    return 3;
  }
  if (cu.ctx_synchronize() || cu.memcpy_dtoh(o, dout, nq * 2)) {
    printf("copying the result back failed\n");
    return 3;
  }

  /* reference in double precision: causal aligned bottom-right, GQA */
  double max_error = 0, scores[SEQ_K];
  for (int b = 0; b < BATCH; ++b)
    for (int h = 0; h < HEADS; ++h)
      for (int i = 0; i < SEQ_Q; ++i) {
        const int hk = h / (HEADS / HEADS_K), last = i + SEQ_K - SEQ_Q;
        double top = -INFINITY, total = 0;
        for (int j = 0; j <= last && j < SEQ_K; ++j) {
          double s = 0;
          for (int d = 0; d < DIM; ++d)
            s += (double)from_half(q[(((size_t)b * SEQ_Q + i) * HEADS + h) * DIM + d]) *
                 from_half(k[(((size_t)b * SEQ_K + j) * HEADS_K + hk) * DIM + d]);
          scores[j] = s * scale;
          if (scores[j] > top) top = scores[j];
        }
        for (int j = 0; j <= last && j < SEQ_K; ++j) total += (scores[j] = exp(scores[j] - top));
        for (int d = 0; d < DIM; ++d) {
          double ref = 0;
          for (int j = 0; j <= last && j < SEQ_K; ++j)
            ref += scores[j] / total * from_half(v[(((size_t)b * SEQ_K + j) * HEADS_K + hk) * DIM + d]);
          double got = from_half(o[(((size_t)b * SEQ_Q + i) * HEADS + h) * DIM + d]);
          if (fabs(got - ref) > max_error || got != got) max_error = got != got ? INFINITY : fabs(got - ref);
        }
      }
  printf("flash_attn on sm_%d (%d GPUs): max error %.2e vs a double-precision reference\n", arch, count,
         max_error);
  return max_error < 1e-2 ? 0 : 1;
}
