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
from ._ops.dropout import dropout
from ._ops.elementwise import (
    abs,
    add,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    clamp,
    cos,
    div,
    eq,
    exp,
    ge,
    gt,
    isinf,
    isnan,
    le,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    neg,
    pow,
    rsqrt,
    sin,
    sub,
)
from ._ops.loss import cross_entropy, linear_cross_entropy
from ._ops.matmul import addmm, bmm, gate_linear, linear, matmul, mm
from ._ops.norm import group_norm, layer_norm, norm_gate, rms_norm
from ._ops.rotary import apply_rotary, lrpe_cosine, rotary_qk
from ._ops.sampling import linear_sample, sample
from ._ops.scan import cumsum, logcumsumexp
from ._ops.softmax import log_softmax, logsumexp, softmax
from ._registry import dispatch, ops

__all__ = [
    "XopsaotError",
    "abs",
    "add",
    "addmm",
    "apply_rotary",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bmm",
    "clamp",
    "cos",
    "cross_entropy",
    "cumsum",
    "dispatch",
    "div",
    "dropout",
    "eq",
    "exp",
    "flash_attn",
    "flash_attn_varlen",
    "flash_attn_with_kvcache",
    "gate_linear",
    "ge",
    "gelu",
    "gelu_and_mul",
    "group_norm",
    "gt",
    "info",
    "isinf",
    "isnan",
    "layer_norm",
    "le",
    "linear",
    "linear_cross_entropy",
    "linear_sample",
    "log_softmax",
    "logcumsumexp",
    "logsumexp",
    "lrpe_cosine",
    "lt",
    "matmul",
    "maximum",
    "minimum",
    "mm",
    "mul",
    "ne",
    "neg",
    "norm_gate",
    "ops",
    "pow",
    "preload",
    "relu",
    "rms_norm",
    "rotary_qk",
    "rsqrt",
    "sample",
    "sigmoid",
    "silu",
    "silu_and_mul",
    "sin",
    "softmax",
    "sub",
    "tanh",
]
