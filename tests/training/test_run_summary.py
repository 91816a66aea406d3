"""The summary `train` prints: rounded, in words, naming the step and metric of best/."""

from __future__ import annotations

from transformer_lab.training.run_summary import format_duration, summary_lines

SUMMARY = {
    "steps": 1200,
    "epochs_completed": 1,
    "stopped_by": "epochs",
    "final_train_loss": 2.1345678912345,
    "final_metrics": {"val_loss": 2.4567891234567, "val_bleu": 12.3456789012345},
    "best_metric": "val_bleu",
    "best_value": 13.0123456789012,
    "best_step": 1000,
    "wall_seconds": 303.456789,
}


def test_the_summary_is_rounded_and_names_the_best_step_and_metric() -> None:
    assert summary_lines(SUMMARY) == [
        "trained 1,200 steps (1 epoch completed, stopped by epochs) in 5 min 03 s",
        "last training loss: 2.135",
        "validation at step 1,200: val_loss 2.457, val_bleu 12.35",
        "best/: step 1,000, val_bleu 13.01",
    ]


def test_a_run_without_validation_or_with_a_time_budget_says_so() -> None:
    lines = summary_lines(
        {
            **SUMMARY,
            "epochs_completed": 0,
            "final_metrics": {},
            "best_value": None,
            "best_step": None,
            "time_budget_plan": {"budget_seconds": 5400.0, "total_steps": 4321},
        }
    )
    assert lines[0].startswith("trained 1,200 steps (0 epochs completed,")
    assert lines[2:] == ["best/: none (no validation)", "time budget: budget_seconds 5400, total_steps 4,321"]


def test_a_resumed_run_says_its_time_in_all_and_this_sittings_steps() -> None:
    resumed = {**SUMMARY, "first_step": 1000, "training_seconds": 5228.4}
    assert summary_lines(resumed)[0] == (
        "trained 1,200 steps (1 epoch completed, stopped by epochs) in 1 h 27 min in all; "
        "this sitting trained steps 1,001-1,200 in 5 min 03 s"
    )
    finished = {**resumed, "first_step": 1200}
    assert summary_lines(finished)[0].endswith(
        "in 1 h 27 min in all; this sitting trained no step (the run had already reached its end)"
    )


def test_durations_read_at_each_scale() -> None:
    assert [format_duration(seconds) for seconds in (4.26, 59.94, 60.2, 3599.4, 3600, 7620.7)] == [
        "4.3 s",
        "59.9 s",
        "1 min 00 s",
        "59 min 59 s",
        "1 h 00 min",
        "2 h 07 min",
    ]
