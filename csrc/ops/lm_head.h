/* The LM head's logits x @ weight^T + bias computed chunk by chunk of rows into one workspace, for the ops that
 * consume logits without keeping them (linear_cross_entropy, linear_sample). */
#ifndef XOPSAOT_LM_HEAD_H
#define XOPSAOT_LM_HEAD_H

#include "runtime.h"

#define XO_LOGITS_CHUNK_BYTES (256ull << 20) /* the default chunk: the most rows whose logits fit here */

typedef struct {
  const xopsaot_tensor *x, *weight, *bias; /* x (rows..., hidden), weight (vocab, hidden), bias (vocab,) or NULL */
  int64_t rows, stride_x, hidden, vocab;   /* filled by xo_lm_head_check */
} xo_lm_head;

/* A row of logits must hold 1 to 2^31-1 entries (`what` names them: "classes", "logits"). */
xopsaot_status xo_check_vocabulary(int64_t n, const char *op, const char *what) XO_INTERNAL;

/* Checks x, weight and bias (dtypes, devices, shapes) and fills the sizes. */
xopsaot_status xo_lm_head_check(xo_lm_head *h, const char *op) XO_INTERNAL;

/* Calls consume(ctx, logits, first, rows) for each chunk of chunk_rows rows (0: the default) in order, logits being
 * the chunk's (rows, vocab) logits, contiguous in x's dtype. The stream-ordered workspace (*workspace, which the
 * caller frees with xo_workspace_free after its last launch that uses it, also on failure) holds one chunk and
 * `extra_bytes` more, 256-byte aligned, at *extra (for the caller's per-row results). */
typedef xopsaot_status (*xo_logits_consumer)(void *ctx, void *logits, int64_t first, int64_t rows);
xopsaot_status xo_lm_head_chunks(const xo_lm_head *h, int64_t chunk_rows, uint64_t extra_bytes, void **workspace,
                                 void **extra, xo_logits_consumer consume, void *ctx, void *stream) XO_INTERNAL;

#endif
