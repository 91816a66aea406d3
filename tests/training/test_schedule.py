"""The Noam schedule: values at known steps, peak at warm-up, and the LambdaLR wiring."""

import math
from collections.abc import Callable

import pytest
import torch

from transformer_lab.training import build_noam_scheduler, build_optimizer, cooldown_multiplier, noam_lr
from transformer_lab.training.schedule import noam_lrs


def test_known_values():
    # lr(step) = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    assert noam_lr(1, d_model=512, warmup_steps=4000) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert noam_lr(4000, 512, 4000) == pytest.approx(1 / math.sqrt(512 * 4000))
    assert noam_lr(16000, 512, 4000) == pytest.approx(512**-0.5 / 126.49110640673517)
    assert noam_lr(100, 64, 10, factor=2.0) == pytest.approx(2.0 / 8.0 / 10.0)
    # Linear during warm-up.
    assert noam_lr(20, 512, 4000) == pytest.approx(2 * noam_lr(10, 512, 4000))


def test_peak_is_at_warmup():
    rates = [noam_lr(step, 32, 50) for step in range(1, 300)]
    assert rates.index(max(rates)) + 1 == 50


def test_the_rates_of_many_steps_at_once_are_each_steps_rate():
    steps = torch.tensor([1, 2, 49, 50, 51, 299, 10**7, 2**40])
    rates = noam_lrs(steps, 32, 50, factor=1.5)
    assert rates.dtype == torch.float64 and rates.shape == steps.shape
    assert rates.tolist() == pytest.approx([noam_lr(int(step), 32, 50, 1.5) for step in steps], rel=1e-12)
    with pytest.raises(ValueError, match=r"^steps: expected steps >= 1 \(steps are counted from 1\), got 0$"):
        noam_lrs(torch.tensor([3, 0]), 32, 50)
    with pytest.raises(ValueError, match="warmup_steps"):
        noam_lrs(steps, 32, 0)


def test_scheduler_gives_noam_rate_to_each_step():
    parameter = torch.nn.Parameter(torch.zeros(3))
    optimizer = build_optimizer([parameter], lr=123.0)
    assert optimizer.defaults["betas"] == (0.9, 0.98) and optimizer.defaults["eps"] == 1e-9
    scheduler = build_noam_scheduler(optimizer, d_model=16, warmup_steps=4, factor=2.0)
    for step in range(1, 10):
        # The rate in effect at optimizer step `step` (counted from 1).
        assert optimizer.param_groups[0]["lr"] == pytest.approx(noam_lr(step, 16, 4, 2.0))
        parameter.grad = torch.ones(3)
        optimizer.step()
        scheduler.step()


def test_errors():
    with pytest.raises(ValueError, match="step"):
        noam_lr(0, 512, 4000)
    with pytest.raises(ValueError, match="warmup_steps"):
        noam_lr(1, 512, 0)
    with pytest.raises(ValueError, match="d_model"):
        noam_lr(1, 0, 10)
    with pytest.raises(ValueError, match="factor"):
        noam_lr(1, 16, 10, factor=0.0)


def test_cooldown_falls_linearly_and_never_reaches_zero():
    assert cooldown_multiplier(5, total_steps=10, cooldown_steps=0) == 1.0
    # Steps 1..6 untouched, then 4/5, 3/5, 2/5, 1/5 on steps 7..10, and 1/5 past the end.
    factors = [cooldown_multiplier(step, 10, 4) for step in range(1, 12)]
    assert factors == pytest.approx([1, 1, 1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2, 0.2])
    with pytest.raises(ValueError, match="cooldown_steps"):
        cooldown_multiplier(1, 10, 11)
    with pytest.raises(ValueError, match="cooldown_steps"):
        cooldown_multiplier(1, 10, -1)


def test_scheduler_applies_the_cooldown():
    parameter = torch.nn.Parameter(torch.zeros(3))
    optimizer = build_optimizer([parameter])
    scheduler = build_noam_scheduler(optimizer, 16, 4, 2.0, total_steps=12, cooldown_steps=5)
    for step in range(1, 13):
        expected = noam_lr(step, 16, 4, 2.0) * cooldown_multiplier(step, 12, 5)
        assert optimizer.param_groups[0]["lr"] == pytest.approx(expected)
        parameter.grad = torch.ones(3)
        optimizer.step()
        scheduler.step()
    with pytest.raises(ValueError, match="cooldown_steps"):
        build_noam_scheduler(build_optimizer([parameter]), 16, 4, total_steps=3, cooldown_steps=5)


def test_adam_is_fused_only_where_every_parameter_is_on_cuda():
    cpu_parameters = [torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(2))]
    assert not build_optimizer(cpu_parameters).defaults["fused"]
    # Parameter groups, one given as a generator, are read for the check and still reach Adam whole.
    groups = [{"params": (parameter for parameter in cpu_parameters[:1])}, {"params": cpu_parameters[1], "lr": 2.0}]
    optimizer = build_optimizer(groups)
    assert [len(group["params"]) for group in optimizer.param_groups] == [1, 1]
    assert optimizer.param_groups[1]["lr"] == 2.0


@pytest.mark.cuda
def test_adam_on_cuda_is_fused_and_steps_as_the_plain_one():
    torch.manual_seed(0)
    weights = torch.randn(64, 32)
    gradient = torch.randn(64, 32)
    results = []
    for device in ("cpu", "cuda"):
        parameter = torch.nn.Parameter(weights.to(device))
        optimizer = build_optimizer([parameter], lr=1e-3)
        assert bool(optimizer.defaults["fused"]) == (device == "cuda")
        for _ in range(3):
            parameter.grad = gradient.to(device)
            optimizer.step()
        results.append(parameter.detach().cpu())
    torch.testing.assert_close(results[0], results[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: noam_lr(1, 256, 10**400), "warmup_steps"),
        (lambda: noam_lr(10**30, 256, 4000), "step"),
        (lambda: noam_lr(1, 10**400, 4000), "d_model"),
        (lambda: noam_lrs(torch.tensor([1.0, 2.0]), 256, 10**400), "warmup_steps"),
    ],
)
def test_a_schedule_argument_past_64_bits_is_one_line_naming_it(call: Callable[[], object], name: str) -> None:
    # As a config bounds them: a float power of such an int raised an OverflowError naming nothing.
    with pytest.raises(ValueError, match=rf"^{name}: expected an int in \[1, 9,223,372,036,854,775,807\], got "):
        call()
