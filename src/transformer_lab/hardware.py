"""What this machine computes fast: the CPU by name, its bf16 support, its physical cores.

``precision="auto"`` (the presets' default, for training and decoding) resolves here to
``"bf16"`` where bfloat16 matrix products are fast and to ``"fp32"`` elsewhere, because the
difference is not a few percent: on a CPU with AVX512-BF16 (AMD Zen 4, Intel Cooper Lake and
later) a bf16 matrix product ran 2.2x the fp32 speed, while on an AVX2-only CPU (AMD Zen 3)
torch falls back to a reference kernel some 20x slower than fp32 (19-23x in our probe;
docs/results.md#precision).

The rule, by device:

- CUDA: native bf16, the device's compute capability 8.0 or later (Ampere, Hopper, ...); an
  older GPU only emulates bf16, slower than fp32, so auto gives fp32 there.
- x86 CPU: AVX512-BF16 or AMX tiles, as torch's own CPU feature detection reports them.
- any other CPU (ARM, ...): a measured probe, bf16 against fp32 on one small matrix product.
- any other device: fp32.

Also: :func:`machine_summary`, the lines every benchmark prints at the top of its report, and
:func:`physical_cores`, the CLI's default thread count.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import platform
import time
from pathlib import Path
from typing import Literal

import torch

__all__ = [
    "INFERENCE_PRECISIONS",
    "PRECISIONS",
    "Bf16Support",
    "autocast",
    "bf16_support",
    "cpu_model_name",
    "machine_summary",
    "measure_bf16_speed",
    "physical_cores",
    "resolve_inference_precision",
    "resolve_precision",
]

logger = logging.getLogger(__name__)

# "auto" picks one of the other two for the device at hand.
PRECISIONS = ("auto", "fp32", "bf16")
# What a command decodes or classifies at: int8 is no autocast precision but a converted
# copy of the model (models.quantization), in fp32 arithmetic around its int8 layers.
INFERENCE_PRECISIONS = (*PRECISIONS, "int8")
_CPUINFO = Path("/proc/cpuinfo")
_X86_MACHINES = ("x86_64", "amd64", "i386", "i686", "x86")
# Messages already logged, so that a choice or a warning is said once per process, not at
# every decode call.
_said: set[str] = set()


@dataclasses.dataclass(frozen=True)
class Bf16Support:
    """Whether bf16 matrix products are fast on a device, and why, in words for a log line."""

    fast: bool
    reason: str


def _cpuinfo_blocks() -> list[dict[str, str]]:
    """/proc/cpuinfo as one {key: value} dict per logical CPU; [] where there is no such file."""
    try:
        text = _CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    blocks: list[dict[str, str]] = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        if fields:
            blocks.append(fields)
    return blocks


def cpu_model_name() -> str:
    """The CPU's name with its x86 family and model ("AMD EPYC (family 25, model 1)").

    A virtual machine often shows a bare "AMD EPYC" for CPUs two generations apart (Zen 3
    is family 25 model 1, Zen 4 family 25 model 17), so the numbers are part of the name.
    """
    blocks = _cpuinfo_blocks()
    fields = blocks[0] if blocks else {}  # the first processor's block is enough
    name = fields.get("model name") or fields.get("Model") or fields.get("Hardware")
    if not name:
        return platform.processor() or platform.machine() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def _cpu_flags() -> set[str]:
    for fields in _cpuinfo_blocks()[:1]:
        return set((fields.get("flags") or fields.get("Features") or "").split())
    return set()


def _torch_cpu_feature(name: str) -> bool | None:
    """One of torch's private CPU feature probes (``torch.cpu._is_avx512_bf16_supported``), None if absent."""
    probe = getattr(torch.cpu, name, None)
    if probe is None:
        return None
    try:
        return bool(probe())
    except RuntimeError:
        return None


def _is_x86() -> bool:
    return platform.machine().lower() in _X86_MACHINES


def _x86_bf16_features() -> tuple[bool, bool]:
    """(AVX512-BF16, AMX tiles): torch's detection where it has one, else /proc/cpuinfo's flags."""
    flags = _cpu_flags()
    avx512_bf16 = _torch_cpu_feature("_is_avx512_bf16_supported")
    amx = _torch_cpu_feature("_is_amx_tile_supported")
    if avx512_bf16 is None:
        avx512_bf16 = "avx512_bf16" in flags
    if amx is None:
        amx = "amx_bf16" in flags
    return avx512_bf16, amx


def measure_bf16_speed(size: int = 192, repeats: int = 3) -> float:
    """bf16 matrix-product speed over fp32's on the CPU (2.2 = bf16 twice as fast; 0.01 = 100x slower).

    One ``size`` x ``size`` product each, the fastest of ``repeats``; a few milliseconds where
    bf16 is fast, about 0.1 s where it falls back to the reference kernel.
    """
    generator = torch.Generator().manual_seed(0)
    left = torch.randn(size, size, generator=generator)
    right = torch.randn(size, size, generator=generator)

    def fastest(a: torch.Tensor, b: torch.Tensor) -> float:
        torch.mm(a, b)  # warm-up: first calls pick kernels and allocate
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            torch.mm(a, b)
            times.append(time.perf_counter() - start)
        return max(min(times), 1e-9)

    fp32_seconds = fastest(left, right)
    bf16_seconds = fastest(left.to(torch.bfloat16), right.to(torch.bfloat16))
    return fp32_seconds / bf16_seconds


@functools.lru_cache(maxsize=None)
def _measured_bf16_speed() -> float:
    # Once per process: measured again, the warning said twice, with two factors (the once-only
    # saying keys on the text).
    return measure_bf16_speed()


@functools.lru_cache(maxsize=None)
def _bf16_support(device_type: str, device_index: int | None) -> Bf16Support:
    if device_type == "cuda":
        device = torch.device("cuda", device_index) if device_index is not None else torch.device("cuda")
        # Native bf16 from compute capability 8 (Ampere) on, of this device: is_bf16_supported asks the current one.
        fast = torch.cuda.get_device_capability(device)[0] >= 8
        name = torch.cuda.get_device_name(device)
        return Bf16Support(fast, f"{name} {'supports' if fast else 'has no native'} bf16")
    if device_type != "cpu":
        return Bf16Support(False, f"no bf16 rule for device type {device_type!r}, so fp32")
    capability = torch.backends.cpu.get_cpu_capability()
    if _is_x86():
        avx512_bf16, amx = _x86_bf16_features()
        if amx:
            return Bf16Support(True, f"this CPU has AMX bf16 tiles ({capability})")
        if avx512_bf16:
            return Bf16Support(True, f"this CPU has bf16 matrix instructions (AVX512-BF16, {capability})")
        return Bf16Support(False, f"this CPU has no bf16 matrix instructions ({capability})")
    speed = _measured_bf16_speed()
    # Under 1.2x the casts autocast adds eat the gain (measured on the copy model, 0.9x).
    fast = speed >= 1.2
    return Bf16Support(fast, f"a measured bf16 matrix product ran {speed:.2f}x the fp32 speed ({capability})")


def bf16_support(device: torch.device | str) -> Bf16Support:
    """Whether bf16 autocast pays on ``device`` (cached per device; see the module docstring)."""
    device = torch.device(device)
    return _bf16_support(device.type, device.index)


def _say_once(level: int, message: str) -> None:
    # Keyed with the level: a choice said at DEBUG (decoding) is said again at INFO (training).
    key = f"{level} {message}"
    if key not in _said:
        _said.add(key)
        logger.log(level, message)


def resolve_precision(
    precision: str, device: torch.device | str, *, log_level: int = logging.INFO
) -> Literal["fp32", "bf16"]:
    """``"fp32"`` or ``"bf16"`` for ``precision`` ("auto", "fp32" or "bf16") on ``device``.

    "auto" logs its choice and the reason once per process at ``log_level`` (decoding
    passes DEBUG, so that a command's stderr holds only its own messages); an explicit
    "bf16" where bf16 is slow still runs, and warns once with the CPU capability and the
    measured slowdown.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {precision!r}")
    if precision == "fp32":
        return "fp32"
    device = torch.device(device)
    support = bf16_support(device)
    if precision == "auto":
        resolved: Literal["fp32", "bf16"] = "bf16" if support.fast else "fp32"
        _say_once(log_level, f"precision auto -> {resolved}: {support.reason}")
        return resolved
    if not support.fast:
        slowdown = ""
        if device.type == "cpu":
            speed = _measured_bf16_speed()
            slowdown = f"; bf16 matrix products measured {1 / speed:.1f}x slower than fp32 here"
        _say_once(
            logging.WARNING,
            f"precision bf16 on {_device_name(device)}: {support.reason}{slowdown}. "
            "It runs, but precision auto (or fp32) would be faster.",
        )
    return "bf16"


def resolve_inference_precision(
    requested: str | None,
    default: str,
    device: torch.device | str,
    *,
    name: str = "precision",
    int8: bool = True,
) -> Literal["fp32", "bf16", "int8"]:
    """The one precision a command (or the Python API) decodes or classifies at on ``device``.

    ``requested`` (``--precision``; None: ``default``, the checkpoint's) is one of
    :data:`INFERENCE_PRECISIONS`; "auto" resolves as :func:`resolve_precision` says; "int8"
    stays "int8" where ``int8`` allows it, and needs a CPU (PyTorch's int8 kernels). The
    model copy, the decoding config and the report's name all follow from the result.
    Errors name the option ``name``.

    Decoding on CUDA: "auto" is bf16 on a GPU with native bf16, as for training. The bf16
    copy's single-position step (``nn/decoder_step.py``) sends its attention through
    ``scaled_dot_product_attention``, which would pick cuDNN attention on recent GPUs;
    cuDNN plans anew for every shape, a decoding step's key length is new at every step,
    and bf16 decoding was then several times slower than fp32. ``nn/sdpa.py`` therefore
    keeps every call off cuDNN attention (flash or memory-efficient kernels instead), which
    leaves bf16 with its halved weight and cache traffic: it should be the faster of the
    two. ``benchmarks/bench_gpu.py`` decodes at fp32, bf16 and auto side by side to check
    that auto is never the slower one on the GPU at hand.
    """
    choice = default if requested is None else requested
    choices = INFERENCE_PRECISIONS if int8 else PRECISIONS
    if choice not in choices:
        # A command's option is left out for its default; only the Python keyword takes None.
        default_hint = "" if name.startswith("--") else f" or None (the default, {default!r})"
        why = (
            " (int8 quantizes a decoder's search: a model that does not decode has no int8 copy)"
            if choice == "int8"
            else ""
        )
        raise ValueError(f"{name}: expected one of {', '.join(choices)}{default_hint}{why}, got {choice!r}")
    if choice == "int8":
        if torch.device(device).type == "cpu":
            return "int8"
        if requested is not None:
            raise ValueError(f"{name} int8: expected a model on the CPU (PyTorch's int8 kernels), got {device}")
        # The checkpoint's own choice, made for a CPU: refused, it would stop every default decoding on a GPU.
        _say_once(
            logging.WARNING,
            f"the checkpoint decodes at int8, which runs on the CPU only: on {device} it decodes at auto instead "
            f"({name} int8 with a CPU device keeps int8)",
        )
        choice = "auto"
    return resolve_precision(choice, device, log_level=logging.DEBUG)


def _device_name(device: torch.device) -> str:
    if device.type == "cpu":
        return cpu_model_name()
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return str(device)


def physical_cores() -> int:
    """Physical cores this process may run on (hyper-threads not counted, CPU affinity honoured)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    cores = {(fields.get("physical id", ""), fields["core id"]) for fields in _cpuinfo_blocks() if "core id" in fields}
    logical = os.cpu_count() or usable
    if cores and logical:
        # The affinity set is in logical CPUs; scale it by the machine's threads per core.
        threads_per_core = max(1, logical // len(cores))
        return max(1, min(len(cores), usable // threads_per_core))
    return max(1, usable)


def machine_summary(device: torch.device | str = "cpu") -> list[str]:
    """The lines a benchmark report starts with: CPU, capability, bf16/AMX, threads, torch."""
    device = torch.device(device)
    capability = torch.backends.cpu.get_cpu_capability()
    if _is_x86():
        avx512_bf16, amx = _x86_bf16_features()
        features = f"AVX512-BF16 {'yes' if avx512_bf16 else 'no'}, AMX {'yes' if amx else 'no'}"
    else:
        features = "bf16 speed by probe"
    lines = [
        f"cpu: {cpu_model_name()} ({platform.machine()}, torch capability {capability}, {features})",
        f"bf16: {'fast' if bf16_support('cpu').fast else 'slow'} on the CPU ({bf16_support('cpu').reason})",
        f"threads: {torch.get_num_threads()} of {physical_cores()} physical cores; torch {torch.__version__}",
    ]
    if device.type == "cuda":
        lines.append(f"device: {torch.cuda.get_device_name(device)} (bf16 {bf16_support(device).reason})")
    return lines


def autocast(precision: str, device: torch.device | str) -> contextlib.AbstractContextManager:
    """bf16 autocast on ``device`` for a resolved ``precision`` of "bf16"; nothing for "fp32".

    Weights stay float32; autocast's own rules keep softmax, log-softmax and the losses in
    float32.
    """
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision: expected a resolved 'fp32' or 'bf16' (see resolve_precision), got {precision!r}")
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
