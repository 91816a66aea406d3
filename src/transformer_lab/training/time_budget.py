"""Training to a wall-clock budget: measure this machine's speed, then fix the run's length.

``train.time_budget`` ("90m", "1h30m", "5400s", 5400) replaces ``epochs``; a ``max_steps`` still caps
the plan (as it caps epochs), and the budget's plan is never longer.
The run trains for ``MEASUREMENT_SECONDS`` (the measurement, counted within the budget),
then validates and saves once, timing each, and fixes its total optimizer steps ``P``: the
largest for which the steps still to take, at the measured seconds per step, plus the
validations still due, each at the measured seconds of a validation and its checkpoint, fit
in what is left of the budget less ``SAFETY_FRACTION`` of it (logging, the rate's drift).
The checkpoints written there are saved with the plan made before their write was timed;
the plan is then made again with it, and their ``config.json`` rewritten to hold that one.
The budget's clock starts when training starts; reading the data and building the model
before that are not counted.

Where the data is too small for the configured schedule (``fit_schedule_to_run``, and its
epochs shorter than twice the warm-up and cool-down), the schedule is compressed to ``P``
(``schedule.scaled_schedule``), as a run of epochs is compressed to its length: the epochs
are replaced, so ``P`` is the length that counts. Otherwise the configured schedule is
fitted to ``P`` steps (``schedule.fitted_schedule``): the
warm-up and the peak stay as configured, and a ``P`` shorter than the configured run ``L``
(``max_steps``, or ``epochs`` times an epoch's steps) scales its cool-down by ``P / L``, kept
after the warm-up. A short run is thus the configured run stopped early, ending on a linear
decay where it got past its warm-up. Shrinking the warm-up with the run as well (by
``P / L``, the peak kept, or to a quarter of the run with a higher peak) trained far worse:
at 600 of the translation preset's 3,944 steps, validation BLEU 5.4 and 5.8 against 15.8 for
the configured schedule stopped there (docs/results.md#translation-budget). The
measurement's few steps use the configured warm-up like the rest.

The plan (:class:`BudgetPlan`) is logged and written into every checkpoint's
``config.json`` under ``time_budget_plan``; ``--resume`` reads it back and continues the
same schedule to the same ``P``, whatever the clock says then.

The rate is measured once. If the machine slows down afterwards (other jobs on a shared
CPU), the run keeps its plan and ends late; :meth:`TimeBudget.lateness` says so, once, as
soon as the pace since the plan projects an end past the budget.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from .durations import (
    MAX_BUDGET_SECONDS,
    MEASUREMENT_SECONDS,
    budget_seconds,
    check_budget,
    duration_seconds,
)
from .optimization import configured_run_steps, run_too_short_for_schedule
from .schedule import cooldown_multiplier, fitted_schedule, noam_lr, scaled_schedule

if TYPE_CHECKING:
    from .config import TrainConfig

__all__ = [
    "MAX_BUDGET_SECONDS",
    "MEASUREMENT_SECONDS",
    "PLAN_KEY",
    "SAFETY_FRACTION",
    "BudgetPlan",
    "ScheduleShape",
    "TimeBudget",
    "budget_seconds",
    "check_budget",
    "fitted_schedule",
    "duration_seconds",
    "evaluations_due",
    "plan_total_steps",
]

# The share of the budget left unplanned: logging, the speed's drift.
SAFETY_FRACTION = 0.03
# The pace since the plan is judged once it spans this much (a minute, or 5 % of a shorter
# budget): judged from the first step, one slow step warned of an hour's run ending late.
LATENESS_WINDOW_SECONDS = 60.0
LATENESS_WINDOW_FRACTION = 0.05
# The key of config.json holding the plan.
PLAN_KEY = "time_budget_plan"

Result = TypeVar("Result")

logger = logging.getLogger(__name__)


def now() -> float:
    """The budget's clock (seconds, monotonic); one place so that tests can drive it."""
    return time.perf_counter()


def evaluations_due(done_steps: int, total_steps: int, evaluate_every: int) -> int:
    """Validations after step ``done_steps`` up to ``total_steps``: every ``evaluate_every`` steps, and at the end."""
    if total_steps <= done_steps:
        return 0
    periodic = total_steps // evaluate_every - done_steps // evaluate_every
    return periodic + (0 if total_steps % evaluate_every == 0 else 1)


def plan_total_steps(
    budget_seconds: float,
    elapsed_seconds: float,
    done_steps: int,
    seconds_per_step: float,
    evaluation_seconds: float,
    evaluate_every: int,
) -> int:
    """The largest total ``P >= done_steps`` whose remaining steps and validations fit the budget.

    The plan fills ``budget_seconds * (1 - SAFETY_FRACTION)``: ``elapsed_seconds`` are spent,
    each further step takes ``seconds_per_step``, each validation (with its checkpoint)
    ``evaluation_seconds``, due as :func:`evaluations_due` counts them.
    """
    available = budget_seconds * (1 - SAFETY_FRACTION) - elapsed_seconds

    def cost(total: int) -> float:
        return (total - done_steps) * seconds_per_step + evaluations_due(
            done_steps, total, evaluate_every
        ) * evaluation_seconds

    if cost(done_steps + 1) > available:
        return done_steps
    # cost() grows with the total, so the answer is found by doubling, then bisection.
    low, high = done_steps + 1, done_steps + 2
    while cost(high) <= available:
        low, high = high, done_steps + 2 * (high - done_steps)
    while high - low > 1:
        middle = (low + high) // 2
        if cost(middle) <= available:
            low = middle
        else:
            high = middle
    return low


@dataclasses.dataclass(frozen=True)
class BudgetPlan:
    """What the measurement found and the schedule it fixed; written into checkpoints."""

    budget_seconds: float
    # Optimizer steps of the measurement and their training seconds (validations excluded).
    measured_steps: int
    measured_seconds: float
    steps_per_second: float
    # One validation and its checkpoint, as timed at the end of the measurement.
    evaluation_seconds: float
    total_steps: int
    warmup_steps: int
    cooldown_steps: int
    lr_factor: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str) -> BudgetPlan:
        """The plan of a checkpoint's ``config.json``; a malformed one is an error naming ``where``."""
        names = [field.name for field in dataclasses.fields(cls)]
        if not isinstance(data, Mapping) or sorted(data) != sorted(names):
            raise ValueError(f"{where}: {PLAN_KEY}: expected a mapping with the keys {names}, got {data!r}")
        counts = ("measured_steps", "total_steps", "warmup_steps", "cooldown_steps")
        for name in names:
            value = data[name]
            is_count = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            is_number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not (is_count if name in counts else is_number):
                kind = "an int >= 0" if name in counts else "a finite number"
                raise ValueError(f"{where}: {PLAN_KEY}.{name}: expected {kind}, got {value!r}")
        return cls(**{name: data[name] for name in names})


@dataclasses.dataclass
class ScheduleShape:
    """The Noam schedule's settings, changed once when the plan is fixed (the schedule reads them)."""

    warmup_steps: int
    lr_factor: float
    total_steps: int = 0
    cooldown_steps: int = 0


def _steps_between_validations(config: TrainConfig, train_batches: Callable[[int], Iterable[Any]]) -> int:
    """``eval_every_steps``, or else an epoch's optimizer steps (validation comes at each epoch's end)."""
    if config.eval_every_steps:
        return config.eval_every_steps
    try:
        batches = len(train_batches(0))  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(
            "time_budget: needs eval_every_steps > 0 or train_batches(epoch) with a len(), to count "
            "the validations it plans for; got neither"
        ) from None
    return math.ceil(batches / config.grad_accum_steps)


class TimeBudget:
    """The Trainer's side of a budget: its clock, the measurement, the plan and the schedule.

    Built from the run's ``config`` (with a ``time_budget``) and ``train_batches``: its schedule
    is the one the plan compresses, over the configured length ``L`` (0: unknown, nothing
    compressed), with validations every ``eval_every_steps`` or at each epoch's end.
    """

    def __init__(self, config: TrainConfig, train_batches: Callable[[int], Iterable[Any]]) -> None:
        assert config.time_budget is not None
        self.evaluate_every = max(1, _steps_between_validations(config, train_batches))
        # Data too small for the schedule (a preset's on an own corpus): the plan's steps, not the
        # epochs the budget replaces, are the run the schedule is scaled to.
        self.scales_to_plan = run_too_short_for_schedule(config, train_batches) > 0
        self.configured_steps = 0 if self.scales_to_plan else configured_run_steps(config, train_batches)
        self.max_steps = config.max_steps
        self.budget_seconds = check_budget(config.time_budget)
        # What a plan reshapes, kept apart from the shape a plan has already changed.
        self.configured_warmup = config.warmup_steps
        self.configured_cooldown = config.cooldown_steps
        self.configured_lr_factor = config.lr_factor
        self.shape = ScheduleShape(warmup_steps=config.warmup_steps, lr_factor=config.lr_factor)
        self.plan: BudgetPlan | None = None
        self._started_at: float | None = None
        # The step the clock started at: a run resumed during its measurement took the steps
        # before it in another process, whose seconds this clock never saw.
        self._started_step = 0
        # Validation (and checkpoint) seconds within the measurement, left out of the step rate.
        self._evaluation_seconds = 0.0
        self._owns_schedule = False
        # Where the plan was made in this fit (elapsed seconds), to tell when the run falls
        # behind it; None for a plan read back on resume, whose clock restarted.
        self._planned_at: float | None = None
        self._warned_late = False

    def schedule(
        self, config: TrainConfig, d_model: int
    ) -> tuple[TrainConfig, Callable[[torch.optim.Optimizer], torch.optim.lr_scheduler.LambdaLR]]:
        """A Noam schedule that follows :attr:`shape` (fixing the plan reshapes it in place), and its config.

        That config, to build the optimizer with, has no cool-down of its own: the schedule holds it.
        """
        shape = self.shape
        self._owns_schedule = True

        def build(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
            # A plain function (not a callable object), so LambdaLR keeps it out of its state_dict.
            def schedule(completed_steps: int) -> float:
                step = completed_steps + 1
                return noam_lr(step, d_model, shape.warmup_steps, shape.lr_factor) * cooldown_multiplier(
                    step, shape.total_steps, shape.cooldown_steps
                )

            # As build_noam_scheduler: base rate 1.0, so that the schedule's value is the rate.
            for group in optimizer.param_groups:
                group["lr"] = 1.0
                group["initial_lr"] = 1.0
            return torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)

        return dataclasses.replace(config, cooldown_steps=0), build

    @property
    def measuring(self) -> bool:
        return self.plan is None

    def start(self, step: int = 0) -> None:
        """Start the clock at optimizer step ``step`` (when training starts), saying so while measuring."""
        if self._started_at is None:
            self._started_at = now()
            self._started_step = step
        if self.measuring:
            logger.info(
                "time budget %.0f s: measuring this machine's speed for %.0f s first",
                self.budget_seconds,
                MEASUREMENT_SECONDS,
            )

    def finished(self, step: int) -> bool:
        """Whether the plan's steps are done; while measuring, nothing stops the run."""
        return self.plan is not None and step >= self.plan.total_steps

    def recorded(self) -> dict[str, Any]:
        """``{PLAN_KEY: the plan}`` for config.json and the run's summary; {} while measuring."""
        return {PLAN_KEY: self.plan.to_dict()} if self.plan is not None else {}

    def elapsed(self) -> float:
        return 0.0 if self._started_at is None else now() - self._started_at

    def note_evaluation(self, seconds: float) -> None:
        """Count a validation's seconds out of the measured step time."""
        if self.measuring:
            self._evaluation_seconds += seconds

    def measurement_over(self) -> bool:
        return self.measuring and self.elapsed() >= MEASUREMENT_SECONDS

    def make_plan(self, done_steps: int, training_seconds: float, evaluation_seconds: float) -> BudgetPlan:
        """The plan after ``done_steps`` steps, the last ones in ``training_seconds`` (validations excluded) since
        the clock started, and one validation; never more steps than ``max_steps``."""
        timed_steps = done_steps - self._started_step
        seconds_per_step = max(training_seconds, 1e-9) / max(timed_steps, 1)
        total = plan_total_steps(
            self.budget_seconds,
            self.elapsed(),
            done_steps,
            seconds_per_step,
            evaluation_seconds,
            self.evaluate_every,
        )
        if self.max_steps:
            total = min(total, max(self.max_steps, done_steps))
        if self.scales_to_plan:
            warmup, cooldown, factor = scaled_schedule(
                max(total, 1), self.configured_warmup, self.configured_cooldown, self.configured_lr_factor
            )
            cooldown = min(cooldown, max(total - done_steps, 0))  # never back into the steps taken
        else:
            warmup, cooldown, factor = fitted_schedule(
                total,
                self.configured_steps,
                done_steps,
                self.configured_warmup,
                self.configured_cooldown,
                self.configured_lr_factor,
            )
        return BudgetPlan(
            budget_seconds=self.budget_seconds,
            measured_steps=done_steps,
            measured_seconds=training_seconds,
            steps_per_second=timed_steps / max(training_seconds, 1e-9),
            evaluation_seconds=evaluation_seconds,
            total_steps=total,
            warmup_steps=warmup,
            cooldown_steps=cooldown,
            lr_factor=factor,
        )

    def end_measurement(
        self,
        done_steps: int,
        validate: Callable[[], Result],
        save: Callable[[Result], object],
        agree: Callable[[Callable[[], BudgetPlan]], BudgetPlan],
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        record_again: Callable[[], object],
    ) -> Result:
        """Validate, plan, save, plan again with the save's seconds, log; return the validation's result.

        ``save`` records the validation's result and writes the checkpoints, which hold the
        plan; ``record_again`` writes the second plan into them where it differs. ``agree``
        runs the plan's making where every process takes it from (rank 0's plan on every rank
        under DDP), so that all stop at the same step.
        """
        training_seconds = self.elapsed() - self._evaluation_seconds  # validations left out
        started = now()
        metrics = validate()
        validation_seconds = now() - started
        self.apply(agree(lambda: self.make_plan(done_steps, training_seconds, validation_seconds)), scheduler)
        started = now()
        save(metrics)
        # Every validation still due writes checkpoints too: each costs what this pair cost.
        evaluation_seconds = validation_seconds + now() - started
        first = self.plan
        plan = agree(lambda: self.make_plan(done_steps, training_seconds, evaluation_seconds))
        self.apply(plan, scheduler)
        if plan != first:
            record_again()  # a resume from these checkpoints continues this plan, not the first
        logger.info(
            "time budget %.0f s: %.3f steps/s over %d steps, %.1f s a validation: %d steps in all "
            "(warm-up %d, cool-down %d, lr_factor %.4g)",
            plan.budget_seconds,
            plan.steps_per_second,
            plan.measured_steps,
            plan.evaluation_seconds,
            plan.total_steps,
            plan.warmup_steps,
            plan.cooldown_steps,
            plan.lr_factor,
        )
        return metrics

    def resume(self, folder: Path, saved_config: Mapping[str, Any], config_file: str) -> None:
        """Continue the plan in ``folder``'s ``saved_config`` (from ``config_file``), whatever the clock says now."""
        saved = saved_config.get(PLAN_KEY)
        if saved is None:
            train = saved_config.get("train")
            if isinstance(train, Mapping) and train.get("time_budget") is None:
                # A run of epochs or max_steps given a budget on resume: not a measurement cut short.
                logger.info(
                    "%s was trained without a time budget: measuring this machine's speed, then planning "
                    "the rest of the run to end within %.0f s from now",
                    folder,
                    self.budget_seconds,
                )
                return
            logger.warning("%s was saved during the time budget's measurement: measuring again", folder)
            return
        plan = BudgetPlan.from_dict(saved, config_file)
        if plan.budget_seconds != self.budget_seconds:
            logger.warning(
                "time_budget changed from %.0f s to %.0f s since the run started; the run keeps its plan",
                plan.budget_seconds,
                self.budget_seconds,
            )
        self.apply(plan)
        logger.info("time budget: continuing the plan of %d steps", plan.total_steps)

    def lateness(self, step: int) -> str | None:
        """A warning, once, when the steps since the plan run so slowly that the run will end past the budget."""
        plan = self.plan
        if plan is None or self._planned_at is None or self._warned_late or step <= plan.measured_steps:
            return None
        elapsed = self.elapsed()
        window = min(LATENESS_WINDOW_SECONDS, LATENESS_WINDOW_FRACTION * plan.budget_seconds)
        if elapsed - self._planned_at < window:
            return None
        # Validations done since the plan (this step's own, if due, comes after this check).
        periodic = (step - 1) // self.evaluate_every - plan.measured_steps // self.evaluate_every
        seconds_per_step = (elapsed - self._planned_at - periodic * plan.evaluation_seconds) / (
            step - plan.measured_steps
        )
        remaining = (plan.total_steps - step) * seconds_per_step + evaluations_due(
            step, plan.total_steps, self.evaluate_every
        ) * plan.evaluation_seconds
        late = elapsed + remaining - plan.budget_seconds
        if late <= 0:
            return None
        self._warned_late = True
        return (
            f"time budget: the steps since the plan take {seconds_per_step:.2f} s, not the "
            f"{1 / plan.steps_per_second:.2f} s measured (this machine slowed down); at this pace the run "
            f"ends about {late:.0f} s after its {plan.budget_seconds:.0f} s budget"
        )

    def apply(self, plan: BudgetPlan, scheduler: torch.optim.lr_scheduler.LRScheduler | None = None) -> None:
        """Fix ``plan``: the schedule takes its shape from the next step on.

        With ``scheduler`` (this budget's schedule, stepped already for the next step), the
        next step's rate, computed under the old shape, is recomputed under the plan's.
        """
        self.plan = plan
        if self._started_at is not None:
            self._planned_at = self.elapsed()
        self.shape.warmup_steps = plan.warmup_steps
        self.shape.lr_factor = plan.lr_factor
        self.shape.total_steps = plan.total_steps
        self.shape.cooldown_steps = plan.cooldown_steps
        if scheduler is not None and self._owns_schedule and isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR):
            rates = [
                base * schedule(scheduler.last_epoch)
                for schedule, base in zip(scheduler.lr_lambdas, scheduler.base_lrs)
            ]
            for group, rate in zip(scheduler.optimizer.param_groups, rates):
                group["lr"] = rate
            scheduler._last_lr = rates  # what get_last_lr() gives, as a step() would have set it
