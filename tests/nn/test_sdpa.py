"""Every attention call goes through nn/sdpa.py, which keeps CUDA off cuDNN attention and leaves the CPU alone.

cuDNN attention plans per input shape, and decoding has a new key length at every step.
Without a GPU the CUDA branch is taken by declaring the CPU a device that plans per shape
(``plans_per_shape``), and the backend flag is read at the moment the attention runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from transformer_lab.nn import MultiheadAttention, sdpa


def qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 2, length, 8, generator=generator) for length in (3, 5, 5))  # type: ignore[return-value]


def flag_at_call(
    monkeypatch: pytest.MonkeyPatch, flag: Callable[[], bool] = torch.backends.cuda.cudnn_sdp_enabled
) -> list[bool]:
    """Record a backend ``flag`` of torch's (cuDNN attention's) each time SDPA itself runs (through nn/sdpa.py)."""
    seen: list[bool] = []
    original = F.scaled_dot_product_attention

    def recording(*arguments, **keywords):  # type: ignore[no-untyped-def]
        seen.append(flag())
        return original(*arguments, **keywords)

    monkeypatch.setattr(sdpa.F, "scaled_dot_product_attention", recording)
    return seen


def test_cpu_calls_go_straight_through_and_equal_torch() -> None:
    q, k, v = qkv()
    mask = torch.ones(2, 1, 3, 5, dtype=torch.bool)
    mask[0, :, :, 3:] = False
    assert not sdpa.plans_per_shape(q.device)
    assert torch.equal(
        sdpa.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
    )


def test_where_backends_plan_per_shape_cudnn_is_off_during_the_call_and_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q, k, v = qkv()
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    monkeypatch.setattr(sdpa, "plans_per_shape", lambda device: True)
    seen = flag_at_call(monkeypatch)  # patches torch.nn.functional itself: no direct call below
    assert torch.backends.cuda.cudnn_sdp_enabled()
    assert torch.equal(sdpa.scaled_dot_product_attention(q, k, v, is_causal=True), expected)
    assert seen == [False]
    assert torch.backends.cuda.cudnn_sdp_enabled()  # put back for everyone else


def test_a_user_who_switched_cudnn_off_keeps_it_off_and_an_error_restores_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sdpa, "plans_per_shape", lambda device: True)
    q, k, v = qkv()
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        sdpa.scaled_dot_product_attention(q, k, v)
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)
    with pytest.raises(RuntimeError):
        sdpa.scaled_dot_product_attention(q, k[..., :4], v)  # head sizes disagree
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_the_attention_module_fast_path_runs_under_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdpa, "plans_per_shape", lambda device: True)
    seen = flag_at_call(monkeypatch)
    attention = MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(2, 4, 16)
    padding = torch.tensor([[False, False, True, True], [False] * 4])
    with torch.no_grad():
        attention(x, x, x, key_padding_mask=padding, need_weights=False)
    assert seen == [False]


def test_where_cpu_flash_attention_would_fail_it_is_off_for_the_call_and_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q, k, v = (tensor.bfloat16() for tensor in qkv())
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    monkeypatch.setattr(sdpa, "cpu_flash_fails", lambda: True)
    seen = flag_at_call(monkeypatch, torch.backends.cuda.flash_sdp_enabled)
    context = sdpa.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(context.float(), expected, atol=2e-2, rtol=2e-2)  # bf16's rounding
    # fp32 never takes the packed path, so it keeps flash attention.
    sdpa.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert seen == [False, True]
    assert torch.backends.cuda.flash_sdp_enabled()


def test_bf16_attention_runs_on_avx2_kernels_whatever_the_cpu(tmp_path: Path) -> None:
    # On a CPU with AMX, torch's bf16 flash attention raised under ATEN_CPU_CAPABILITY=avx2
    # from 64 positions on; elsewhere this checks the same call still agrees with fp32.
    script = """
import torch
from transformer_lab.nn import sdpa
generator = torch.Generator().manual_seed(0)
query = torch.randn(8, 4, 64, 32, generator=generator)
mask = torch.rand(8, 1, 1, 64, generator=generator) > 0.2
mask[..., 0] = True
expected = torch.nn.functional.scaled_dot_product_attention(query, query, query, attn_mask=mask)
reduced = query.bfloat16().requires_grad_(True)
context = sdpa.scaled_dot_product_attention(reduced, reduced, reduced, attn_mask=mask)
context.float().sum().backward()
assert reduced.grad is not None and bool(torch.isfinite(reduced.grad).all())
print(float((context.float() - expected).abs().max()))
"""
    environment = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environment, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout) < 0.05  # bf16's rounding of values of order 1
