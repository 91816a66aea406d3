"""``scaled_dot_product_attention`` under a backend choice that never plans per shape.

Every call of ``F.scaled_dot_product_attention`` in this package goes through
:func:`scaled_dot_product_attention` here. On CUDA, PyTorch ranks cuDNN attention first
for bf16 and fp16 on recent GPUs (Hopper and later, torch 2.9 onwards), and cuDNN builds
an execution plan for every new shape of its inputs. Incremental decoding meets a new key
length at every step, so each attention call there paid a fresh plan (milliseconds of CPU
for microseconds of GPU work). The call below therefore runs with cuDNN attention
switched off, which leaves flash, memory-efficient and math attention, in PyTorch's own
order, with the other backends as the process has set them.

Why not ``torch.nn.attention.sdpa_kernel([FLASH, EFFICIENT, MATH])``: it rewrites every
backend flag on entry and exit, about 32 us a call against under 1 us for toggling the one
flag (one AMD EPYC thread), and a decoding step makes two calls per layer; and it would
switch back on a backend the user had switched off. Under ``torch.compile`` it is the form
the compiler understands, so it is used there.

The flag is process-wide, as every SDPA backend setting is: another thread's attention call
that runs at the same moment is also kept off cuDNN.

On any other device the call goes straight through (the CPU has no cuDNN attention), but
for one case: torch's CPU flash attention in bf16 or fp16 packs its operands for AMX tiles
where the CPU has them, and that packing exists only in its AVX-512 kernels. Under
``ATEN_CPU_CAPABILITY=avx2`` on such a CPU every call of 64 or more positions raises
"pack_vnni2 is only supported when avx512 is supported"; there flash attention is switched
off for the call, which leaves the math backend.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

__all__ = ["ALLOWED_CUDA_BACKENDS", "cpu_flash_fails", "plans_per_shape", "scaled_dot_product_attention"]

# The dtypes torch's CPU flash attention packs for AMX.
_PACKED_DTYPES = (torch.bfloat16, torch.float16)

# The backends left on CUDA (the compiled path names them; eager toggles cuDNN alone).
ALLOWED_CUDA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def plans_per_shape(device: torch.device) -> bool:
    """Whether SDPA on ``device`` may pick a backend that plans per shape (cuDNN attention: CUDA only)."""
    return device.type == "cuda"


@functools.cache
def cpu_flash_fails() -> bool:
    """Whether torch's CPU flash attention in bf16 would ask for AVX-512 kernels torch was told not to use.

    True on a CPU with AMX tiles whose torch kernels are held below AVX-512 (``ATEN_CPU_CAPABILITY``).
    """
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return probe is not None and bool(probe()) and torch.backends.cpu.get_cpu_capability() != "AVX512"


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> Tensor:
    """``F.scaled_dot_product_attention`` with cuDNN attention excluded on CUDA (see the module docstring).

    ``attn_mask`` is in SDPA's polarity (True = may attend, or added to the scores).

    Shape:
        query ``[N, H, L, Dh]``, key and value ``[N, H, S, Dh]``, attn_mask broadcastable
        to ``[N, H, L, S]``; returns ``[N, H, L, Dh]``.
    """
    # The dtype first: fp32, the common case, then costs one comparison on this hot path.
    packed_on_cpu = query.dtype in _PACKED_DTYPES and query.device.type == "cpu" and cpu_flash_fails()
    if not plans_per_shape(query.device) and not packed_on_cpu:
        return F.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
        )
    call = functools.partial(
        F.scaled_dot_product_attention, query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
    )
    if packed_on_cpu:
        # One flag for the CPU's flash attention and CUDA's.
        return _with_backend_off(torch.backends.cuda.flash_sdp_enabled, torch.backends.cuda.enable_flash_sdp, call)
    if torch.compiler.is_compiling():
        with sdpa_kernel(ALLOWED_CUDA_BACKENDS):
            return call()
    return _with_backend_off(torch.backends.cuda.cudnn_sdp_enabled, torch.backends.cuda.enable_cudnn_sdp, call)


def _with_backend_off(
    enabled: Callable[[], bool], enable: Callable[[bool], None], call: Callable[[], Tensor]
) -> Tensor:
    """``call()`` with one SDPA backend switched off, and switched on again after it if it was on."""
    was_on = enabled()
    if was_on:
        enable(False)
    try:
        return call()
    finally:
        if was_on:
            enable(True)
