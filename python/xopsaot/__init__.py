"""xops-aot: Triton GPU operators compiled ahead of time, called through one small C library.

    import xopsaot
    out = xopsaot.flash_attn(q, k, v, causal=True)          # or xopsaot.dispatch("flash_attn", q, k, v, causal=True)
    xopsaot.ops(), xopsaot.info(), xopsaot.preload()

GPU arrays (torch CUDA tensors, CuPy, JAX) run the compiled kernels on the array's device and current stream;
host arrays (NumPy, torch CPU tensors) run the NumPy reference. Results come back as the caller's type.
"""

__version__ = "0.1.0"

from ._info import info, preload
from ._library import XopsaotError
from ._ops.activation import gelu, gelu_and_mul, relu, sigmoid, silu, silu_and_mul, tanh
from ._ops.attention import flash_attn, flash_attn_varlen, flash_attn_with_kvcache
from ._ops.elementwise import add
from ._ops.matmul import matmul
from ._ops.norm import group_norm, layer_norm, norm_gate, rms_norm
from ._ops.rotary import apply_rotary, lrpe_cosine, rotary_qk
from ._ops.softmax import log_softmax, logsumexp, softmax
from ._registry import dispatch, ops

__all__ = [
    "XopsaotError",
    "add",
    "apply_rotary",
    "dispatch",
    "flash_attn",
    "flash_attn_varlen",
    "flash_attn_with_kvcache",
    "gelu",
    "gelu_and_mul",
    "group_norm",
    "info",
    "layer_norm",
    "log_softmax",
    "logsumexp",
    "lrpe_cosine",
    "matmul",
    "norm_gate",
    "ops",
    "preload",
    "relu",
    "rms_norm",
    "rotary_qk",
    "sigmoid",
    "silu",
    "silu_and_mul",
    "softmax",
    "tanh",
]
