"""``average-checkpoints --best N``: the N step checkpoints that validated best, by the run's own best metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.reliability.builders import write_translation_checkpoint
from transformer_lab.cli import main

# step -> (val_bleu, val_loss) as metrics.jsonl records each step checkpoint's evaluation.
SCORES = {10: (20.0, 3.0), 20: (31.0, 2.5), 30: (25.0, 2.4), 40: (31.0, 2.2), 50: (29.0, 2.1)}


def write_run(run: Path, scores: dict[int, tuple[float, float]] = SCORES, rows: list[dict] | None = None) -> Path:
    """A run folder of step checkpoints (random weights, one seed each) and the log of their evaluations."""
    for step in scores:
        write_translation_checkpoint(run / f"step-{step:06d}", seed=step)
    if rows is None:
        rows = [
            {"event": "eval", "step": step, "epoch": step // 10, "val_bleu": bleu, "val_loss": loss}
            for step, (bleu, loss) in scores.items()
        ]
    train_rows = [{"event": "train", "step": step - 5, "train_loss": 3.0, "lr": 1e-3} for step in scores]
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in train_rows + rows), encoding="utf-8")
    return run


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def mean_of(*folders: Path) -> dict[str, torch.Tensor]:
    loaded = [weights(folder) for folder in folders]
    return {key: torch.stack([state[key].float() for state in loaded]).mean(0) for key in loaded[0]}


def test_the_best_steps_by_the_runs_metric_are_averaged_a_tie_going_to_the_lower_loss(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run")
    out = tmp_path / "best3"
    assert main(["average-checkpoints", "--run", str(run), "--best", "3", "--out", str(out)]) == 0
    # 31.0 at steps 20 and 40, then 29.0 at 50: the translation preset ranks by val_bleu, highest first.
    expected = mean_of(run / "step-000020", run / "step-000040", run / "step-000050")
    averaged = weights(out)
    assert all(torch.allclose(averaged[key].float(), expected[key], atol=1e-6) for key in expected)
    assert capsys.readouterr().out.strip() == (
        f"averaged the 3 best of 5 step checkpoints by validation (step-000020 31, step-000040 31, step-000050 29) "
        f"into {out}"
    )
    # Two of three tied at 31: the lower val_loss (step 40) wins the one place.
    out = tmp_path / "best1"
    assert main(["average-checkpoints", "--run", str(run), "--best", "1", "--out", str(out)]) == 0
    assert all(torch.equal(weights(out)[key], value) for key, value in weights(run / "step-000040").items())


def test_a_step_logged_twice_counts_its_last_evaluation_and_one_never_scored_is_not_ranked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"event": "eval", "step": 10, "val_bleu": 40.0, "val_loss": 1.0},  # before a resume
        {"event": "eval", "step": 10, "val_bleu": 1.0, "val_loss": 5.0},  # the resumed run's own
        {"event": "eval", "step": 20, "val_bleu": 2.0, "val_loss": 4.0},
        {"event": "eval", "step": 30, "val_bleu": float("nan"), "val_loss": 4.0},
    ]
    run = write_run(tmp_path / "run", {10: (0, 0), 20: (0, 0), 30: (0, 0)}, rows)
    out = tmp_path / "best1"
    assert main(["average-checkpoints", "--run", str(run), "--best", "1", "--out", str(out)]) == 0
    assert "(step-000020 2)" in capsys.readouterr().out
    assert main(["average-checkpoints", "--run", str(run), "--best", "3", "--out", str(tmp_path / "best3")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"transformer-lab average-checkpoints: error: --best: expected at least 3 step checkpoints with a finite "
        f"val_bleu in {run / 'metrics.jsonl'}, got 2 (1 of the 3 step checkpoints have none: a run without "
        "validation scores none)"
    )
    assert not (tmp_path / "best3").exists()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--best", "2", "--last", "2"], "--best and --last: expected one of them, got both (--best 2, --last 2)"),
        (["--best", "0"], "--best: expected at least 1, got 0"),
        (["--best", "6"], "--best: expected at most the 5 step checkpoints in {run}, got 6"),
    ],
)
def test_best_is_refused_with_last_or_beyond_the_step_checkpoints(
    options: list[str], error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run")
    out = tmp_path / "averaged"
    assert main(["average-checkpoints", "--run", str(run), *options, "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"transformer-lab average-checkpoints: error: {error.format(run=run)}"
    assert not out.exists()


@pytest.mark.parametrize("found", ["none", "a folder"])
def test_best_without_the_runs_log_names_the_option_and_the_way_without_it(
    found: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run")
    (run / "metrics.jsonl").unlink()
    if found == "a folder":
        (run / "metrics.jsonl").mkdir()
    assert main(["average-checkpoints", "--run", str(run), "--best", "2", "--out", str(tmp_path / "out")]) == 2
    # Was: "metrics: expected a metrics.jsonl file at ...", the library's keyword, no option of this command.
    assert capsys.readouterr().err.strip() == (
        "transformer-lab average-checkpoints: error: --best: expected the run's metrics.jsonl, which ranks the step "
        f"checkpoints by val_bleu, got {found} at {str(run / 'metrics.jsonl')!r}; --last N averages the last N "
        "without it"
    )
    assert main(["average-checkpoints", "--run", str(run), "--last", "2", "--out", str(tmp_path / "out")]) == 0
