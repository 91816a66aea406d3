"""Optimizer and schedule factories: the Trainer uses what it is given, and Adam + Noam without them."""

import dataclasses

import pytest
import torch
from torch import nn

from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import TrainConfig, Trainer, label_smoothed_cross_entropy, load_trainer_state, noam_lr
from transformer_lab.training.optimization import build_optimization, scaled_to_run
from transformer_lab.training.schedule import cooldown_multiplier

D_MODEL = 8
VOCABULARY_SIZE = 7


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(VOCABULARY_SIZE, D_MODEL), nn.Linear(D_MODEL, VOCABULARY_SIZE))


BATCH = torch.tensor([[1, 2, 3, 4], [4, 5, 6, 1]])


def loss_fn(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    return label_smoothed_cross_entropy(model(batch), batch % (VOCABULARY_SIZE - 1) + 1, smoothing=0.1, ignore_index=0)


def config(**changes) -> TrainConfig:
    # One step on one batch, no clipping: the update is the optimizer's alone.
    settings = dict(
        max_steps=1, epochs=0, warmup_steps=4, clip_grad_norm=0.0, keep_last=0, log_every_steps=1, progress_bar=False
    )
    settings.update(changes)
    return TrainConfig(**settings)


def sgd(parameters):
    return torch.optim.SGD(parameters, lr=0.1)


def constant_rate(optimizer):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda completed_steps: 1.0)


def one_step(tmp_path, name, **factories) -> tuple[nn.Module, Trainer]:
    model = make_model()
    trainer = Trainer(model, config(), tmp_path / name, loss_fn, lambda epoch: [BATCH], d_model=D_MODEL, **factories)
    trainer.fit()
    return model, trainer


def gradient_at_start() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    model = make_model()
    loss_fn(model, BATCH).backward()
    return [parameter.detach().clone() for parameter in model.parameters()], [
        parameter.grad for parameter in model.parameters()
    ]


def test_an_sgd_factory_is_used_and_steps_as_sgd_not_adam(tmp_path):
    weights, gradients = gradient_at_start()
    sgd_model, trainer = one_step(tmp_path, "sgd", optimizer_factory=sgd, schedule_factory=constant_rate)
    assert type(trainer.optimizer) is torch.optim.SGD
    saved_groups = load_trainer_state(tmp_path / "sgd" / "last")["optimizer"]["param_groups"]
    assert "momentum" in saved_groups[0] and "betas" not in saved_groups[0]  # an SGD's state went to disk
    # Plain SGD with the constant rate 0.1: w - 0.1 * grad, exactly what torch's SGD computes.
    for weight, gradient, trained in zip(weights, gradients, sgd_model.parameters()):
        torch.testing.assert_close(trained, weight - 0.1 * gradient)

    adam_model, adam_trainer = one_step(tmp_path, "adam")
    assert type(adam_trainer.optimizer) is torch.optim.Adam
    assert "betas" in load_trainer_state(tmp_path / "adam" / "last")["optimizer"]["param_groups"][0]
    # Adam's first step moves every weight with a gradient by about the rate, whatever the gradient's size.
    rate = noam_lr(1, D_MODEL, 4)
    output_change = (adam_model[1].weight - weights[1]).abs()
    assert torch.allclose(output_change, torch.full_like(output_change, rate), rtol=1e-3)
    assert not torch.allclose(sgd_model[1].weight, adam_model[1].weight)


def test_a_custom_optimizer_under_the_default_noam_schedule(tmp_path):
    weights, gradients = gradient_at_start()
    model, trainer = one_step(tmp_path, "sgd-noam", optimizer_factory=sgd)
    rate = noam_lr(1, D_MODEL, 4)  # the schedule sets the base rate to 1.0, whatever the factory's 0.1
    assert trainer.scheduler.get_last_lr()[0] == pytest.approx(noam_lr(2, D_MODEL, 4))
    for weight, gradient, trained in zip(weights, gradients, model.parameters()):
        torch.testing.assert_close(trained, weight - rate * gradient)


def test_resuming_with_another_kind_of_optimizer_is_refused_naming_the_file(tmp_path):
    one_step(tmp_path, "run")  # Adam
    with pytest.raises(
        ValueError, match=r"trainer_state\.pt: optimizer: expected an optimizer state of type SGD .*'betas'"
    ):
        Trainer(
            make_model(),
            config(max_steps=2),
            tmp_path / "run",
            loss_fn,
            lambda epoch: [BATCH],
            optimizer_factory=sgd,
            schedule_factory=constant_rate,
            resume=True,
        )
    # The same kind resumes.
    resumed = Trainer(
        make_model(),
        config(max_steps=2),
        tmp_path / "run",
        loss_fn,
        lambda epoch: [BATCH],
        d_model=D_MODEL,
        resume=True,
    )
    assert resumed.fit()["steps"] == 2


def test_bad_factories_and_arguments_are_named():
    parameters = list(make_model().parameters())
    with pytest.raises(ValueError, match="d_model: expected the model width for the default Noam schedule"):
        build_optimization(parameters, config(), lambda epoch: [BATCH], d_model=None)
    with pytest.raises(ValueError, match="cooldown_steps: expected 0 with a schedule_factory"):
        build_optimization(
            parameters,
            config(max_steps=5, cooldown_steps=2),
            lambda epoch: [BATCH],
            d_model=None,
            schedule_factory=constant_rate,
        )
    with pytest.raises(ValueError, match="optimizer_factory: expected a torch.optim.Optimizer, got list"):
        build_optimization(
            parameters,
            config(),
            lambda epoch: [BATCH],
            d_model=D_MODEL,
            optimizer_factory=lambda parameters: list(parameters),
        )
    with pytest.raises(ValueError, match="schedule_factory: expected a schedule of the optimizer it was given"):
        build_optimization(
            parameters,
            config(),
            lambda epoch: [BATCH],
            d_model=None,
            schedule_factory=lambda optimizer: constant_rate(sgd(parameters)),
        )
    with pytest.raises(
        ValueError, match="schedule_factory: expected a torch.optim.lr_scheduler.LRScheduler, got float"
    ):
        build_optimization(
            parameters, config(), lambda epoch: [BATCH], d_model=None, schedule_factory=lambda optimizer: 1.0
        )


def scheduled_rates(train_config: TrainConfig, batches, steps: int) -> list[float]:
    """The learning rate of each of the first ``steps`` optimizer steps under the default schedule."""
    model = make_model()
    optimizer, scheduler = build_optimization(list(model.parameters()), train_config, batches, d_model=D_MODEL)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def test_max_steps_before_the_epochs_end_keeps_the_warm_up_and_ends_on_a_shortened_cool_down():
    batches = lambda epoch: [BATCH] * 10  # noqa: E731  (10 steps an epoch: 100 configured)
    configured = config(epochs=10, max_steps=0, warmup_steps=40, cooldown_steps=40)
    stopped = dataclasses.replace(configured, max_steps=60)
    # 40 x 60 / 100 = 24 cool-down steps would reach into the warm-up: the 20 after it.
    full, short = scheduled_rates(configured, batches, 100), scheduled_rates(stopped, batches, 60)
    assert short[:40] == pytest.approx(full[:40])
    assert short == pytest.approx(
        [noam_lr(step, D_MODEL, 40) * cooldown_multiplier(step, 60, 20) for step in range(1, 61)]
    )
    assert short[-1] < full[59] / 10
    # Stopped inside the warm-up: no cool-down (decaying a rate that has not peaked), not an error.
    early = dataclasses.replace(configured, max_steps=30)
    assert scheduled_rates(early, batches, 30) == pytest.approx(full[:30])
    # Without epochs, or with max_steps past them, the configured cool-down stands.
    assert scheduled_rates(dataclasses.replace(configured, max_steps=100), batches, 100) == pytest.approx(full)
    alone = config(epochs=0, max_steps=60, warmup_steps=40, cooldown_steps=30)
    assert scheduled_rates(alone, batches, 60)[-1] == pytest.approx(noam_lr(60, D_MODEL, 40) / 31)


def test_a_run_too_short_for_its_schedule_scales_it_in_time_keeping_the_peak(caplog):
    batches = lambda epoch: [BATCH] * 10  # noqa: E731  (10 steps an epoch, 5 epochs: a run of 50)
    as_set = config(epochs=5, max_steps=0, warmup_steps=40, cooldown_steps=40, lr_factor=0.5)
    peak = noam_lr(40, D_MODEL, 40, 0.5)
    # Taken as set, the cool-down starts before the warm-up ends: the rate never gets near its peak.
    assert max(scheduled_rates(as_set, batches, 50)) < 0.7 * peak
    fitted = dataclasses.replace(as_set, fit_schedule_to_run=True)
    with caplog.at_level("INFO", logger="transformer_lab.training.optimization"):
        scaled = scaled_to_run(fitted, batches)
    # 50 / (2 x 80) of each: 12 warm-up and 12 cool-down steps, the factor by sqrt(12 / 40).
    assert (scaled.warmup_steps, scaled.cooldown_steps) == (12, 12)
    assert scaled.lr_factor == pytest.approx(0.5 * (12 / 40) ** 0.5)
    assert "scaled to warm-up 12 and cool-down 12" in caplog.text
    rates = scheduled_rates(scaled, batches, 50)
    assert max(rates) == pytest.approx(peak) and rates.index(max(rates)) == 11
    assert rates == pytest.approx(
        [noam_lr(step, D_MODEL, 12, scaled.lr_factor) * cooldown_multiplier(step, 50, 12) for step in range(1, 51)]
    )
    # A run at least twice warm-up plus cool-down keeps the schedule as set.
    long_enough = dataclasses.replace(fitted, epochs=16)
    assert scaled_to_run(long_enough, batches) == long_enough


def test_the_translation_preset_keeps_its_schedule_on_multi30k_and_scales_it_on_a_small_corpus():
    preset = translation_train.default_config().train
    assert preset.fit_schedule_to_run
    # Multi30k's 29,000 pairs are 116-117 batches an epoch (docs/results.md): 3,944 steps or more.
    for batches_per_epoch in (116, 117):
        assert scaled_to_run(preset, lambda epoch, count=batches_per_epoch: [BATCH] * count) == preset
    # 200 pairs: 3 batches an epoch, 102 steps: the 800 + 800 are scaled to fit.
    small = scaled_to_run(preset, lambda epoch: [BATCH] * 3)
    assert (small.warmup_steps, small.cooldown_steps, small.epochs) == (26, 26, 34)


def test_a_warm_up_longer_than_the_run_is_said(caplog):
    # Was silent (a cool-down that long is refused): the rate rose the whole run and never reached its peak.
    batches = lambda epoch: [BATCH] * 10  # noqa: E731
    with caplog.at_level("WARNING", logger="transformer_lab.training.optimization"):
        rates = scheduled_rates(config(epochs=0, max_steps=30, warmup_steps=120), batches, 30)
    assert caplog.messages == [
        "train.warmup_steps: 120, longer than the run's 30 optimizer steps: the learning rate rises the whole run "
        "and stops at 25% of its peak"
    ]
    assert rates[-1] == pytest.approx(noam_lr(30, D_MODEL, 120)) and rates[-1] < noam_lr(120, D_MODEL, 120) / 3
    caplog.clear()
    with caplog.at_level("WARNING", logger="transformer_lab.training.optimization"):
        scheduled_rates(config(epochs=0, max_steps=30, warmup_steps=30), batches, 30)
    assert caplog.messages == []
