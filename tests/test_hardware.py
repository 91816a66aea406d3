"""precision="auto": bf16 where the device runs it fast, fp32 elsewhere, said once; the machine summary."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from transformer_lab import hardware
from transformer_lab.cli import main
from transformer_lab.training import TrainConfig, Trainer, config_to_dict


@pytest.fixture(autouse=True)
def fresh_detection():
    """Each test sees its own (patched) hardware: no cached answer, no message said yet."""
    hardware._bf16_support.cache_clear()
    hardware._measured_bf16_speed.cache_clear()
    hardware._said.clear()
    yield
    hardware._bf16_support.cache_clear()
    hardware._measured_bf16_speed.cache_clear()
    hardware._said.clear()


def fake_x86(monkeypatch: pytest.MonkeyPatch, avx512_bf16: bool, amx: bool = False) -> None:
    monkeypatch.setattr(hardware, "_is_x86", lambda: True)
    monkeypatch.setattr(hardware, "_x86_bf16_features", lambda: (avx512_bf16, amx))


@pytest.mark.parametrize(
    ("avx512_bf16", "amx", "expected", "reason"),
    [
        (True, False, "bf16", "AVX512-BF16"),
        (False, True, "bf16", "AMX"),
        (False, False, "fp32", "no bf16 matrix instructions"),
    ],
)
def test_auto_on_the_cpu_follows_its_bf16_instructions(monkeypatch, caplog, avx512_bf16, amx, expected, reason) -> None:
    fake_x86(monkeypatch, avx512_bf16, amx)
    with caplog.at_level(logging.INFO, logger="transformer_lab.hardware"):
        assert hardware.resolve_precision("auto", "cpu") == expected
        assert hardware.resolve_precision("auto", torch.device("cpu")) == expected
    said = [record.getMessage() for record in caplog.records]
    # The choice and its reason, once however often it is asked.
    assert len(said) == 1
    assert said[0].startswith(f"precision auto -> {expected}: ") and reason in said[0]
    assert torch.backends.cpu.get_cpu_capability() in said[0]


@pytest.mark.parametrize(("speed", "expected"), [(2.2, "bf16"), (0.01, "fp32")])
def test_auto_on_a_cpu_without_x86_flags_measures(monkeypatch, speed, expected) -> None:
    monkeypatch.setattr(hardware, "_is_x86", lambda: False)
    monkeypatch.setattr(hardware, "measure_bf16_speed", lambda: speed)
    assert hardware.resolve_precision("auto", "cpu") == expected
    assert f"{speed:.2f}x the fp32 speed" in hardware.bf16_support("cpu").reason


@pytest.mark.parametrize(("capability", "expected"), [((8, 0), "bf16"), ((9, 0), "bf16"), ((7, 5), "fp32")])
def test_auto_on_a_faked_cuda_device_asks_cuda(monkeypatch, capability, expected) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *args, **kwargs: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args, **kwargs: "Fake GPU")
    assert hardware.resolve_precision("auto", "cuda") == expected
    assert hardware.resolve_precision("auto", "cuda:1") == expected
    assert hardware.bf16_support("cuda").reason.startswith("Fake GPU ")


def test_auto_on_a_gpu_that_only_emulates_bf16_is_fp32(monkeypatch) -> None:
    # Before compute capability 8.0 torch can make bf16 tensors (emulation), slower than fp32.
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *args, **kwargs: (7, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args, **kwargs: "Older GPU")
    assert hardware.resolve_precision("auto", "cuda") == "fp32"
    assert hardware.resolve_inference_precision("auto", "fp32", "cuda") == "fp32"
    assert hardware.bf16_support("cuda").reason == "Older GPU has no native bf16"


def test_each_gpu_is_asked_for_its_own_bf16(monkeypatch) -> None:
    # Was torch.cuda.is_bf16_supported(), which asks the current GPU: on cuda:1 of a mixed machine, GPU 0's answer.
    monkeypatch.setattr(
        torch.cuda, "get_device_capability", lambda device=None: (8, 0) if torch.device(device).index == 1 else (7, 5)
    )
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args, **kwargs: "Fake GPU")
    assert hardware.resolve_precision("auto", "cuda:1") == "bf16"
    assert hardware.resolve_precision("auto", "cuda:0") == "fp32"


def test_a_checkpoints_int8_decodes_at_auto_on_a_gpu_and_an_asked_one_is_refused(monkeypatch, caplog) -> None:
    # Was refused whatever asked for it: every default decoding of an int8 checkpoint stopped on a GPU machine.
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *args, **kwargs: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args, **kwargs: "Fake GPU")
    with caplog.at_level("WARNING"):
        assert hardware.resolve_inference_precision(None, "int8", "cuda", name="--precision") == "bf16"
    assert "the checkpoint decodes at int8, which runs on the CPU only: on cuda it decodes at auto" in caplog.text
    with pytest.raises(ValueError, match=r"--precision int8: expected a model on the CPU"):
        hardware.resolve_inference_precision("int8", "auto", "cuda", name="--precision")
    assert hardware.resolve_inference_precision(None, "int8", "cpu") == "int8"


@pytest.mark.parametrize(("avx512_bf16", "auto"), [(True, "bf16"), (False, "fp32")])
def test_a_commands_precision_is_the_given_one_else_the_default_resolved_once(monkeypatch, avx512_bf16, auto) -> None:
    fake_x86(monkeypatch, avx512_bf16=avx512_bf16)
    resolve = hardware.resolve_inference_precision
    assert resolve(None, "auto", "cpu") == auto  # the checkpoint's "auto", resolved for this CPU
    assert resolve("auto", "fp32", "cpu") == auto
    assert resolve(None, "fp32", "cpu") == "fp32"
    assert resolve("int8", "auto", "cpu") == "int8"  # a converted copy, not an autocast precision
    with pytest.raises(ValueError, match=r"--precision int8: expected a model on the CPU .* got cuda"):
        resolve("int8", "auto", "cuda", name="--precision")
    # A classifier has no int8 copy: the option's message says why, and names no None, which no option takes
    # (was: "--precision: expected one of ('auto', 'fp32', 'bf16') or None (the default, 'auto'), got 'int8'").
    with pytest.raises(ValueError) as refused:
        resolve("int8", "auto", "cpu", name="--precision", int8=False)
    assert str(refused.value) == (
        "--precision: expected one of auto, fp32, bf16 (int8 quantizes a decoder's search: a model that does not "
        "decode has no int8 copy), got 'int8'"
    )
    # The Python keyword takes None for the default.
    with pytest.raises(ValueError) as refused:
        resolve("fp16", "auto", "cpu")
    assert (
        str(refused.value)
        == "precision: expected one of auto, fp32, bf16, int8 or None (the default, 'auto'), got 'fp16'"
    )


def test_fp32_is_never_changed_and_a_bad_name_is_refused(monkeypatch) -> None:
    fake_x86(monkeypatch, avx512_bf16=True)
    assert hardware.resolve_precision("fp32", "cpu") == "fp32"
    with pytest.raises(ValueError, match=r"precision: expected one of \('auto', 'fp32', 'bf16'\), got 'fp16'"):
        hardware.resolve_precision("fp16", "cpu")


def test_explicit_bf16_on_a_cpu_without_it_runs_and_warns_once(monkeypatch, caplog) -> None:
    fake_x86(monkeypatch, avx512_bf16=False)
    # Measured once: measured at each call, the warning was said again with another factor.
    speeds = iter([0.01, 0.02, 0.03])
    monkeypatch.setattr(hardware, "measure_bf16_speed", lambda: next(speeds))
    with caplog.at_level(logging.INFO, logger="transformer_lab.hardware"):
        for _ in range(3):
            assert hardware.resolve_precision("bf16", "cpu") == "bf16"
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert torch.backends.cpu.get_cpu_capability() in message
    assert "100.0x slower than fp32" in message
    assert hardware.cpu_model_name() in message


def test_explicit_bf16_where_it_is_fast_says_nothing(monkeypatch, caplog) -> None:
    fake_x86(monkeypatch, avx512_bf16=True)
    with caplog.at_level(logging.INFO, logger="transformer_lab.hardware"):
        assert hardware.resolve_precision("bf16", "cpu") == "bf16"
    assert caplog.records == []


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 4)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.layer(inputs)


@pytest.mark.parametrize(("avx512_bf16", "expected"), [(True, "bf16"), (False, "fp32")])
def test_the_trainer_resolves_auto_and_the_checkpoint_records_the_result(
    monkeypatch, tmp_path: Path, avx512_bf16: bool, expected: str
) -> None:
    fake_x86(monkeypatch, avx512_bf16)
    seen = []

    def loss_fn(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        output = model(batch)
        seen.append(output.dtype)
        return output.float().pow(2).mean()

    config = TrainConfig(max_steps=2, epochs=0, warmup_steps=1, precision="auto", keep_last=0, progress_bar=False)
    trainer = Trainer(
        Linear(),
        config,
        tmp_path,
        loss_fn,
        lambda epoch: [torch.ones(2, 4)] * 3,
        d_model=4,
        checkpoint_config={"task": "test", "train": config_to_dict(config)},
    )
    assert trainer.config.precision == expected
    trainer.fit()
    saved = json.loads((tmp_path / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["train"]["precision"] == expected
    assert set(seen) == {torch.bfloat16 if expected == "bf16" else torch.float32}


def test_the_presets_default_to_auto() -> None:
    from transformer_lab.tasks.classification import train as classification_train
    from transformer_lab.tasks.couplet import train as couplet_train
    from transformer_lab.tasks.translation import train as translation_train

    assert translation_train.default_config().train.precision == "auto"
    assert translation_train.default_config().decode.precision == "auto"
    assert couplet_train.default_config().train.precision == "auto"
    assert couplet_train.default_config().decode.precision == "auto"
    assert classification_train.default_config().train.precision == "auto"


def test_the_machine_summary_names_cpu_capability_bf16_threads_and_torch() -> None:
    lines = hardware.machine_summary()
    text = "\n".join(lines)
    assert hardware.cpu_model_name() in lines[0]
    assert torch.backends.cpu.get_cpu_capability() in lines[0]
    assert "AVX512-BF16" in lines[0] or "probe" in lines[0]
    assert f"{torch.get_num_threads()} of {hardware.physical_cores()} physical cores" in text
    assert torch.__version__ in text
    assert 1 <= hardware.physical_cores() <= (torch.multiprocessing.cpu_count() or 1)


def test_cpu_model_name_carries_the_x86_family_and_model(monkeypatch, tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
        "model name\t: AMD EPYC\nflags\t\t: fpu avx2\ncore id\t\t: 0\n\n"
        "processor\t: 1\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\ncore id\t\t: 1\n\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(hardware, "_CPUINFO", cpuinfo)
    assert hardware.cpu_model_name() == "AMD EPYC (family 25, model 1)"
    assert hardware._cpu_flags() == {"fpu", "avx2"}


def test_the_bf16_probe_measures_a_ratio() -> None:
    speed = hardware.measure_bf16_speed(size=32, repeats=1)
    assert 0.0 < speed < 1000.0


def _openmp_refuses(value: str) -> bool:
    """Whether torch's OpenMP runtime warns that ``value`` of OMP_NUM_THREADS is invalid (the oracle)."""
    environment = {**os.environ, "OMP_NUM_THREADS": value}
    probe = subprocess.run(
        [sys.executable, "-c", "import torch; torch.get_num_threads()"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return "OMP_NUM_THREADS" in probe.stderr


@pytest.mark.parametrize("value", ["+3", " +2 ", "3,+2"])
def test_an_omp_num_threads_that_openmp_reads_is_accepted(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not _openmp_refuses(value)
    threads = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    try:
        assert main(["explain"]) == 0  # was: refused as no int, though the runtime had read it
    finally:
        torch.set_num_threads(threads)
    capsys.readouterr()


# "٣" (Arabic-Indic), "２" (full-width) and "³": digits to Python, none to libgomp.
@pytest.mark.parametrize("value", ["0", "abc", "-2", "1.5", "++3", "\u0663", "\uff12", "\u00b3", "4,\uff12"])
def test_an_invalid_omp_num_threads_is_refused_naming_it(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _openmp_refuses(value)
    threads = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    try:
        assert main(["explain"]) == 2  # was: ignored, the machine's threads used and the variable named as the source
    finally:
        torch.set_num_threads(threads)
    error = capsys.readouterr().err
    assert (
        error.strip()
        == f"transformer-lab explain: error: OMP_NUM_THREADS: expected an int >= 1 (or unset), got {value!r}"
    )
