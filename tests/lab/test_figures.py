"""Every figure is a non-empty PNG of exactly figsize * dpi pixels, from the CLI and from Python."""

from __future__ import annotations

import errno
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import matplotlib
import matplotlib.image
import matplotlib.text
import pytest
import torch
from matplotlib.figure import Figure

from tests.reliability.builders import tiny_tokenizer, train_couplet_checkpoint, write_translation_checkpoint
from transformer_lab.api import CoupletWriter
from transformer_lab.cli import main
from transformer_lab.data import BOS_ID, Vocabulary
from transformer_lab.data.subword import token_labels
from transformer_lab.folders import FolderWriteError
from transformer_lab.lab import figures, result_plots
from transformer_lab.lab.checkpoints import checkpoint_attention, load_seq2seq_checkpoint, sentence_attention
from transformer_lab.models.attention_maps import attention_maps
from transformer_lab.training import noam_lr
from transformer_lab.training.metrics_log import read_metrics

DPI = 40  # small images keep the tests fast


def _pixels(path: Path) -> tuple[int, int]:
    """(height, width) of a PNG, read back with matplotlib."""
    assert path.is_file() and path.stat().st_size > 0
    image = matplotlib.image.imread(path)
    assert image.std() > 0  # something was drawn
    return image.shape[0], image.shape[1]


def _write_metrics(path: Path) -> Path:
    rows = [
        {"event": "train", "step": step, "epoch": 0, "train_loss": 3.0 / step, "lr": 1e-3 * step}
        for step in range(1, 11)
    ]
    rows.append({"event": "eval", "step": 5, "epoch": 0, "val_loss": 0.8, "val_exact_match": 0.2})
    rows.append({"event": "eval", "step": 10, "epoch": 1, "val_loss": 0.5, "val_exact_match": 0.6})
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("arguments", "inches"),
    [
        (["masks", "--length", "5", "--real-length", "3"], (12.0, 3.6)),
        (["positions", "--max-len", "20", "--d-model", "16"], (10.0, 4.0)),
        (["lr-schedule", "--steps", "200", "--settings", "512:40,256:80"], (7.0, 4.0)),
        (["masks", "--width", "6", "--height", "2"], (6.0, 2.0)),
    ],
)
def test_plot_command_writes_a_png_of_the_expected_size(
    tmp_path: Path, arguments: list[str], inches: tuple[float, float]
) -> None:
    out = tmp_path / "figure.png"
    assert main(["plot", *arguments, "--out", str(out), "--dpi", str(DPI)]) == 0
    assert _pixels(out) == (round(inches[1] * DPI), round(inches[0] * DPI))


def _drawn_lines(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[list[float], list[float]]]]:
    """Each figure's lines as saved, (x, y) each: what the figures module drew, not what it says it drew."""
    saved: list[list[tuple[list[float], list[float]]]] = []
    save_png = figures.save_png

    def recording(figure: Figure, path: Path, dpi: int) -> Path:
        lines = [line for axes in figure.axes for line in axes.get_lines()]
        saved.append([(list(map(float, line.get_xdata())), list(map(float, line.get_ydata()))) for line in lines])
        return save_png(figure, path, dpi)

    monkeypatch.setattr(figures, "save_png", recording)
    return saved


def test_the_lr_schedule_draws_the_schedules_values_every_step_of_a_short_run_and_a_sample_of_a_long_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = _drawn_lines(monkeypatch)
    settings = [(512, 40), (256, 80)]
    figures.plot_lr_schedule(tmp_path / "short.png", settings=settings, total_steps=200, factor=2.0, dpi=DPI)
    for (d_model, warmup_steps), (steps, rates) in zip(settings, saved[-1], strict=True):
        assert steps == list(range(1, 201))  # a short run: every step, the curve as it always was
        assert rates == pytest.approx([noam_lr(int(step), d_model, warmup_steps, 2.0) for step in steps], rel=1e-12)

    # Ten million steps (it computed each in Python: minutes) by the command line, in one figure's width of points.
    started = time.perf_counter()
    assert main(["plot", "lr-schedule", "--steps", "10000000", "--out", str(tmp_path / "long.png")]) == 0
    assert time.perf_counter() - started < 60
    width = 7 * 100  # the command's default figure: 7 inches at 100 dots per inch
    for (d_model, warmup_steps), (steps, rates) in zip(figures.DEFAULT_LR_SETTINGS, saved[-1], strict=True):
        assert len(steps) <= figures.POINTS_PER_PIXEL * width + len(figures.DEFAULT_LR_SETTINGS)
        assert steps[0] == 1 and steps[-1] == 10_000_000 and all(a < b for a, b in zip(steps, steps[1:]))
        assert all(step == int(step) for step in steps)
        # Each warm-up's last step is drawn: the curve's peak is not cut off between two samples.
        assert {4000, 8000} <= set(steps)
        assert max(rates) == pytest.approx((d_model * warmup_steps) ** -0.5, rel=1e-12)
        assert rates == pytest.approx([noam_lr(int(step), d_model, warmup_steps) for step in steps], rel=1e-12)


def test_plot_training_curve_reads_a_metrics_log(tmp_path: Path) -> None:
    metrics = _write_metrics(tmp_path / "metrics.jsonl")
    out = tmp_path / "curve.png"
    assert main(["plot", "training-curve", "--metrics", str(metrics), "--out", str(out), "--dpi", str(DPI)]) == 0
    assert _pixels(out) == (4 * DPI, 10 * DPI)


def test_plot_training_curve_reads_a_log_from_a_pipe(tmp_path: Path) -> None:
    # A named pipe (or `<(zcat metrics.jsonl.gz)`) was "expected a metrics.jsonl file at 'PIPE', which does
    # not exist", under the library's keyword.
    import os
    import threading

    metrics = _write_metrics(tmp_path / "metrics.jsonl")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_bytes(metrics.read_bytes()), daemon=True)
    writer.start()
    out = tmp_path / "curve.png"
    assert main(["plot", "training-curve", "--metrics", str(pipe), "--out", str(out), "--dpi", str(DPI)]) == 0
    writer.join(timeout=10)
    assert _pixels(out) == (4 * DPI, 10 * DPI)


def test_plot_attention_from_a_checkpoint(tmp_path: Path, tiny_checkpoint: Path) -> None:
    out = tmp_path / "attention.png"
    code = main(
        [
            "plot",
            "attention",
            "--checkpoint",
            str(tiny_checkpoint),
            "--source",
            "5 6 7 8",
            "--target",
            "8 7",
            "--out",
            str(out),
            "--dpi",
            str(DPI),
        ]
    )
    assert code == 0
    # 1 encoder + 1 decoder layer: encoder self, decoder self, cross = 3 rows; 2 heads.
    assert _pixels(out) == (round((2.2 * 3 + 0.6) * DPI), round((2.2 * 2 + 0.6) * DPI))


def test_sentence_attention_decodes_greedily_without_a_target(tiny_checkpoint: Path) -> None:
    model = load_seq2seq_checkpoint(tiny_checkpoint)
    attention = sentence_attention(model, [5, 6, 7], max_new_tokens=4)
    assert attention.target_labels[0] == str(model.bos_id)
    assert 1 <= len(attention.target_labels) <= 5
    cross = attention.maps["decoder.layers.0.multihead_attn"]
    assert cross.shape == (1, 2, len(attention.target_labels), 3)
    assert torch.allclose(cross.sum(dim=-1), torch.ones(1, 2, len(attention.target_labels)))


def test_python_functions_write_pngs(tmp_path: Path, tiny_checkpoint: Path) -> None:
    path = figures.plot_masks(tmp_path / "masks.png", length=4, real_length=2, figsize=(4.0, 1.5), dpi=DPI)
    assert _pixels(path) == (60, 160)
    path = figures.plot_checkpoint_attention(tmp_path / "attention.png", tiny_checkpoint, figsize=(5.0, 5.0), dpi=DPI)
    assert _pixels(path) == (200, 200)
    model = load_seq2seq_checkpoint(tiny_checkpoint)
    maps = attention_maps(model, torch.tensor([[5, 6, 7]]), torch.tensor([[2, 7]]))
    path = figures.plot_attention(tmp_path / "maps.png", maps, ["5", "6", "7"], ["<bos>", "7"], dpi=DPI)
    assert _pixels(path)[1] == round((2.2 * 2 + 0.6) * DPI)


def test_bad_figure_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="path must name a .png file"):
        figures.plot_lr_schedule(tmp_path / "schedule.jpg", total_steps=10)
    with pytest.raises(ValueError, match=r"^real_length must be in \[1, length\] \(length is 4\), got 5$"):
        figures.plot_masks(tmp_path / "masks.png", length=4, real_length=5)
    with pytest.raises(ValueError, match=r"^figsize and dpi: expected a figure of at least 1 pixel each way, got 0\.5"):
        figures.plot_positions(tmp_path / "positions.png", figsize=(0.005, 4.0), dpi=100)
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        result_plots.plot_training_curve(tmp_path / "curve.png", tmp_path / "metrics.jsonl")
    (tmp_path / "broken.jsonl").write_text('{"event": "train", "step": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.jsonl: line 2: expected a JSON object"):
        read_metrics(tmp_path / "broken.jsonl")
    assert main(["plot", "lr-schedule", "--settings", "512-4000", "--out", str(tmp_path / "x.png")]) == 2
    assert "--settings: expected d_model:warmup pairs" in capsys.readouterr().err
    assert main(["plot", "masks", "--width", "3", "--out", str(tmp_path / "x.png")]) == 2
    assert "expected both or neither" in capsys.readouterr().err
    maps = {"encoder.layers.0.self_attn": torch.rand(1, 2, 3, 3)}
    with pytest.raises(ValueError, match=r"must have shape \[B, H, 4, 4\] \(source x source\)"):
        figures.plot_attention(tmp_path / "maps.png", maps, ["a"] * 4, ["b"], dpi=DPI)


def test_a_log_whose_last_row_is_being_written_plots_the_rows_before_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A running run (or one killed while it wrote) leaves its last row without its newline.
    rows = [{"event": "train", "step": step, "train_loss": 3.0 / step, "lr": 0.001} for step in (1, 2)]
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps(row) + "\n" for row in rows) + '{"event": "train", "st', encoding="utf-8")
    assert read_metrics(log) == rows
    assert f"{log}: line 3 is cut short" in caplog.text
    assert main(["plot", "training-curve", "--metrics", str(log), "--out", str(tmp_path / "curve.png")]) == 0
    assert (tmp_path / "curve.png").is_file()
    # A line that ends in its newline was written whole: not JSON, it is refused.
    log.write_text(json.dumps(rows[0]) + '\n{"event": "train", "st\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"metrics\.jsonl: line 2: expected a JSON object"):
        read_metrics(log)


def test_non_finite_values_of_a_log_are_named_not_left_out_without_a_word(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # json writes a diverging run's NaN as NaN; matplotlib draws it as a gap in the line.
    rows = [{"event": "train", "step": step, "train_loss": 3.0 / step, "lr": 0.001} for step in range(1, 6)]
    rows[2]["train_loss"] = float("nan")
    rows.append({"event": "eval", "step": 5, "val_loss": float("inf"), "bleu": 1.0})
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert main(["plot", "training-curve", "--metrics", str(log), "--out", str(tmp_path / "curve.png")]) == 0
    assert (tmp_path / "curve.png").is_file()
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert warnings == [
        f"{log}: 2 value(s) not drawn, being NaN or infinite: train_loss NaN at step 3 (line 3), "
        "val_loss inf at step 5 (line 6)"
    ]


def test_a_path_of_bytes_is_a_type_error_naming_the_argument(tmp_path: Path) -> None:
    # pathlib's own TypeError names no argument; every figure takes its path through one check.
    maps = {"encoder.layers.0.self_attn": torch.rand(1, 2, 3, 3)}
    expected = r"^path: expected a str or an os\.PathLike path such as pathlib\.Path, got bytes b'maps\.png'; decode"
    with pytest.raises(TypeError, match=expected):
        figures.plot_attention(b"maps.png", maps, ["a", "b", "c"], ["x"], dpi=DPI)
    with pytest.raises(TypeError, match=r"^path: expected a str or an os\.PathLike path .*, got int$"):
        figures.plot_attention_heatmap(torch.rand(1, 3), ["a", "b", "c"], ["x"], 5)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir()) and not Path("maps.png").exists()


def test_a_path_starting_with_a_tilde_is_under_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The shell leaves --out=~/x as it is: taken literally, it made a folder named "~" in the current one.
    home, here = tmp_path / "home", tmp_path / "here"
    home.mkdir(), here.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(here)
    assert main(["plot", "masks", "--out=~/figures/masks.png"]) == 0
    figures.plot_attention_heatmap(torch.rand(1, 3), ["a", "b", "c"], ["x"], "~/map.png")
    assert sorted(path.name for path in home.iterdir()) == ["figures", "map.png"]
    assert (home / "figures" / "masks.png").is_file() and not any(here.iterdir())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["masks", "--length", "5", "--real-length", "9"],
            "--real-length must be in [1, --length] (--length is 5), got 9",
        ),
        (["positions", "--d-model", "7"], "--d-model must be an even number >= 2 for sin/cos pairs, got 7"),
        (
            ["lr-schedule", "--settings", "0:4000"],
            "--settings: expected d_model:warmup pairs of ints >= 1, got '0:4000'",
        ),
        (
            ["lr-schedule", "--settings", "512:" + "9" * 400],
            "--settings: expected d_model:warmup pairs with d_model in [1, 65,536] and warmup in "
            f"[1, 9,223,372,036,854,775,807], got '512:{'9' * 292}...",  # a run of over 300 characters is cut
        ),
        (
            ["lr-schedule", "--settings", "100000:4000"],
            "--settings: expected d_model:warmup pairs with d_model in [1, 65,536] and warmup in "
            "[1, 9,223,372,036,854,775,807], got '100000:4000'",
        ),
        (
            ["lr-schedule", "--settings", ",".join(["512:4000"] * 11)],
            "--settings: expected at most 10 d_model:warmup pairs (one curve and colour each), got 11",
        ),
        (
            ["lr-schedule", "--settings", "512:4000,"],
            "--settings: expected d_model:warmup pairs such as 512:4000, got an empty pair in '512:4000,'",
        ),
        (
            ["masks", "--width", "0.001", "--height", "2"],
            "--width, --height and --dpi: expected a figure of at least 1 pixel each way (width x dpi by height "
            "x dpi), got 0.1 by 200; make them larger",
        ),
    ],
)
def test_plot_command_names_the_option_of_a_bad_figure_setting(
    tmp_path: Path, arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figure.png"
    assert main(["plot", *arguments, "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"transformer-lab plot: error: {message}"]
    assert not out.exists()


@pytest.mark.parametrize("figure", ["masks", "positions", "lr-schedule"])
def test_a_figure_too_small_for_its_labels_is_refused_in_one_line_and_not_drawn(
    tmp_path: Path, figure: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Drawn with matplotlib's two-line "Tight layout not applied" warning and the labels over each other, exit 0.
    out = tmp_path / "figure.png"
    assert main(["plot", figure, "--width", "1", "--height", "1", "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "transformer-lab plot: error: --width and --height: expected a figure large enough for its labels and "
        "margins, got 1 x 1 inches, which leaves them no room; make it larger"
    ]
    assert not out.exists()
    with pytest.raises(ValueError, match=r"^figsize: expected a figure large enough for its labels"):
        figures.plot_masks(out, figsize=(1.0, 1.0))
    assert not out.exists()
    # The same figures at a size that holds them are drawn without a word.
    assert main(["plot", figure, "--width", "4", "--height", "3", "--out", str(out)]) == 0
    assert capsys.readouterr().err == "" and out.is_file()


def test_plot_command_checks_out_and_metrics_before_drawing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def refused(*arguments: str) -> list[str]:
        assert main(["plot", *arguments]) == 2
        return capsys.readouterr().err.splitlines()

    assert refused("masks", "--out", str(tmp_path / "m.txt")) == [
        f"transformer-lab plot: error: --out: expected a file name ending in .png, got '{tmp_path / 'm.txt'}'"
    ]
    assert refused("masks", "--out", str(tmp_path)) == [
        f"transformer-lab plot: error: --out: expected a .png file, got the folder '{tmp_path}'; name a file in it, "
        f"such as '{tmp_path / 'masks.png'}'"
    ]
    run = tmp_path / "run"
    run.mkdir()
    _write_metrics(run / "metrics.jsonl")
    assert refused("training-curve", "--metrics", str(run), "--out", str(tmp_path / "t.png")) == [
        f"transformer-lab plot: error: --metrics: expected a metrics.jsonl file, got the folder '{run}'; "
        f"the run's file is '{run / 'metrics.jsonl'}'"
    ]
    assert refused("training-curve", "--metrics", str(tmp_path / "absent"), "--out", str(tmp_path / "t.png")) == [
        f"transformer-lab plot: error: --metrics: expected a metrics.jsonl file, got '{tmp_path / 'absent'}', "
        "which does not exist"
    ]
    with pytest.raises(SystemExit) as stopped:  # argparse's own check, which the figure's total_steps needs
        main(["plot", "lr-schedule", "--steps", "1", "--out", str(tmp_path / "l.png")])
    assert stopped.value.code == 2
    assert "argument --steps: expected an int in [2, 10,000,000], got 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # a folder's path, not written as the file m.png
        main(["plot", "masks", "--out", f"{tmp_path / 'm.png'}/"])
    assert stopped.value.code == 2
    assert f"argument --out: expected a file, got '{tmp_path / 'm.png'}/', which ends in '/'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # the figures draw from 10 dpi: refused as the option it is
        main(["plot", "masks", "--dpi", "5", "--out", str(tmp_path / "m.png")])
    assert stopped.value.code == 2
    assert "argument --dpi: expected an int in [10, 1,200], got 5" in capsys.readouterr().err
    assert list(tmp_path.glob("*.png")) == []


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('{"event": "eval", "step": {"a": 1}, "val_loss": 1}', """expected a non-negative int 'step', got {"a": 1}"""),
        ('{"event": "eval", "step": "3", "val_loss": 1}', """expected a non-negative int 'step', got "3\""""),
        ('{"event": "eval", "step": true, "val_loss": 1}', "expected a non-negative int 'step', got true"),
        ('{"event": "eval", "step": null, "val_loss": 1}', "expected a non-negative int 'step', got null"),
        (
            '{"event": "train", "step": 2, "train_loss": 1, "lr": "x"}',
            """expected a number for the train row's 'lr', got "x\"""",
        ),
        (
            '{"event": "eval", "step": 2, "val_bleu": "high"}',
            """expected a number for the eval row's 'val_bleu', got "high\"""",
        ),
    ],
)
def test_plot_training_curve_refuses_a_row_it_cannot_draw_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: str, message: str
) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"event": "train", "step": 1, "train_loss": 2.0, "lr": 0.1}\n' + row + "\n", encoding="utf-8")
    assert main(["plot", "training-curve", "--metrics", str(metrics), "--out", str(tmp_path / "t.png")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"transformer-lab plot: error: {metrics}: line 2: {message}"]
    assert not (tmp_path / "t.png").exists()


@pytest.mark.parametrize(
    ("text", "given"),
    [("", "an empty file"), ('{"event": "start", "step": 0}\n{"event": "stop", "step": 0}\n', "only start, stop rows")],
)
def test_plot_training_curve_names_a_log_without_rows_to_draw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, given: str
) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(text, encoding="utf-8")
    assert main(["plot", "training-curve", "--metrics", str(metrics), "--out", str(tmp_path / "t.png")]) == 2
    expected = f"transformer-lab plot: error: {metrics}: expected 'train' or 'eval' rows to draw, got {given}"
    assert capsys.readouterr().err.splitlines() == [expected]
    assert not (tmp_path / "t.png").exists()


def test_a_log_of_one_train_row_or_of_eval_rows_only_draws_a_point_or_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run between its first and second logged step; one shorter than train.log_every_steps (was: empty panels).
    drawn: list[Figure] = []
    monkeypatch.setattr(result_plots, "save_png", lambda figure, path, dpi: drawn.append(figure) or Path(path))
    one = tmp_path / "one.jsonl"
    one.write_text('{"event": "train", "step": 20, "epoch": 0, "train_loss": 5.79, "lr": 7e-05}\n', encoding="utf-8")
    evals = tmp_path / "evals.jsonl"
    evals.write_text('{"event": "eval", "step": 2, "epoch": 0, "val_loss": 5.7}\n', encoding="utf-8")
    for metrics in (one, evals):
        result_plots.plot_training_curve(tmp_path / "curve.png", metrics)
    training, evaluation = drawn[0].axes[:2]
    assert [line.get_marker() for line in training.lines] == ["o"]
    assert [text.get_text() for text in evaluation.texts] == ["no eval rows yet"]
    training = drawn[1].axes[0]
    assert [text.get_text() for text in training.texts] == ["no train rows\n(one every train.log_every_steps)"]


def test_a_value_too_large_for_an_axis_is_refused_by_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A hand-edited log: was matplotlib's RuntimeWarnings, then "arange: cannot compute length", naming nothing.
    metrics = tmp_path / "metrics.jsonl"
    rows = [
        {"event": "train", "step": 1, "train_loss": 2.5, "lr": 0.1},
        {"event": "train", "step": 2, "train_loss": -1e308, "lr": 0.1},
    ]
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert main(["plot", "training-curve", "--metrics", str(metrics), "--out", str(tmp_path / "t.png")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"transformer-lab plot: error: {metrics}: line 2: expected values an axis can span (at most 1e+300 in size), "
        "got train_loss -1e+308"
    ]
    assert not (tmp_path / "t.png").exists()


def test_plot_attention_reads_tokens_through_vocabulary_files(
    tmp_path: Path, tiny_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformer_lab.data import Vocabulary

    vocabulary_path = tmp_path / "vocab.txt"
    Vocabulary.from_size(14).save(vocabulary_path)
    out = tmp_path / "attention.png"
    common = ["plot", "attention", "--checkpoint", str(tiny_checkpoint), "--out", str(out), "--dpi", str(DPI)]
    vocabularies = ["--source-vocab", str(vocabulary_path), "--target-vocab", str(vocabulary_path)]
    assert main([*common, *vocabularies, "--source", "5 6 7", "--target", "7 6 5"]) == 0
    assert _pixels(out)[0] == round((2.2 * 3 + 0.6) * DPI)
    assert main([*common, "--source", "five six"]) == 2
    assert "--source: expected token ids separated by spaces" in capsys.readouterr().err
    assert main([*common, "--source", "5 6 99"]) == 2  # out of the model's vocabulary
    assert "src_ids must hold token ids in [0, 14), got 99" in capsys.readouterr().err


def test_plot_attention_refuses_the_padding_id_in_a_synthetic_source(
    tmp_path: Path, tiny_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model hides source padding from every query: "5 6 0" was drawn with a blank third column,
    # and "0 0 0" with every weight 0, as if the model attended to nothing.
    from transformer_lab.data import Vocabulary
    from transformer_lab.lab.checkpoints import checkpoint_attention

    out = tmp_path / "attention.png"
    common = ["plot", "attention", "--checkpoint", str(tiny_checkpoint), "--out", str(out), "--dpi", str(DPI)]
    assert main([*common, "--source", "5 6 0"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "transformer-lab plot: error: --source: expected token ids other than the padding id 0 (the model hides "
        "source padding from attention), got it at position 3 of '5 6 0'"
    ]
    vocabulary_path = tmp_path / "vocab.txt"
    Vocabulary.from_size(14).save(vocabulary_path)
    assert main([*common, "--source-vocab", str(vocabulary_path), "--source", "5 <pad> 7"]) == 2
    assert "got it at position 2 of '5 <pad> 7'" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(ValueError, match=r"^source: expected token ids other than the padding id 0 .* of '0 0 0'$"):
        checkpoint_attention(tiny_checkpoint, source="0 0 0")
    # The target may hold it: the decoder reads every target position, none is hidden.
    assert main([*common, "--source", "5 6 7", "--target", "5 0"]) == 0


def test_confusion_matrix_png_and_its_bad_input(tmp_path: Path) -> None:
    names = ["World", "Sports", "Business", "Sci/Tech"]
    confusion = [[50, 1, 2, 3], [0, 55, 1, 0], [4, 0, 40, 9], [2, 1, 6, 47]]
    path = result_plots.plot_confusion_matrix(tmp_path / "confusion.png", confusion, names, figsize=(5.0, 4.0), dpi=DPI)
    assert _pixels(path) == (4.0 * DPI, 5.0 * DPI)
    with pytest.raises(ValueError, match=r"confusion must be 4 rows of 4 counts .* got shape \[2, 2\]"):
        result_plots.plot_confusion_matrix(tmp_path / "x.png", [[1, 0], [0, 1]], names)
    with pytest.raises(ValueError, match="non-negative counts"):
        result_plots.plot_confusion_matrix(tmp_path / "x.png", [[1, -1], [0, 1]], names[:2])
    with pytest.raises(ValueError, match="path must name a .png file"):
        result_plots.plot_confusion_matrix(tmp_path / "x.svg", [[1, 0], [0, 1]], names[:2])


def test_ms_per_step_figure_and_its_bad_input(tmp_path: Path) -> None:
    from transformer_lab.lab.result_plots import plot_ms_per_step

    times = {"ours fp32": [4.2, 6.0, 15.0], "ctranslate2 fp32": [3.0, 4.1, 10.9]}
    path = plot_ms_per_step(tmp_path / "speed.png", [1, 4, 32], times, footnote="a CPU", figsize=(6.0, 4.0), dpi=50)
    assert _pixels(path) == (200, 300)
    with pytest.raises(ValueError, match=r"ms_per_step\['ours fp32'\] must be 2 positive times"):
        plot_ms_per_step(tmp_path / "bad.png", [1, 4], times)
    with pytest.raises(ValueError, match="batch_sizes must be one or more positive sizes"):
        plot_ms_per_step(tmp_path / "bad.png", [0, 4, 32], times)
    assert not (tmp_path / "bad.png").exists()


def test_plot_attention_reads_a_translation_checkpoints_text_with_its_tokenizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "translation" / "last")
    tokenizer = tiny_tokenizer()
    sentence = "Ein Mann fährt Fahrrad."
    attention = checkpoint_attention(checkpoint, sentence, "A man rides a bike.")
    assert attention.source_ids == tokenizer.encode(sentence)
    assert attention.source_labels == token_labels(tokenizer, tokenizer.encode(sentence))
    assert "Mann" in "".join(attention.source_labels) and attention.target_labels[0] == "<bos>"
    assert attention.target_ids[1:] == tokenizer.encode("A man rides a bike.")
    greedy = checkpoint_attention(checkpoint, sentence)  # without a target: the model's own output
    assert greedy.target_ids[0] == BOS_ID and len(greedy.target_labels) == len(greedy.target_ids)

    out = tmp_path / "attention.png"
    common = ["plot", "attention", "--checkpoint", str(checkpoint), "--out", str(out), "--dpi", str(DPI)]
    assert main([*common, "--source", sentence]) == 0 and out.is_file()
    # Without a sentence there is nothing meaningful to draw: the command says what to give.
    assert main(common) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "--source: a translation checkpoint reads text: expected a sentence to draw" in error
    assert "transformer-lab translate --plot-attention" in error


def test_plot_attention_reads_a_couplet_upper_line_as_the_couplet_writer_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = train_couplet_checkpoint(tmp_path / "couplet")
    upper = "春 风，月"  # a space between characters, as the data files write them
    attention = checkpoint_attention(checkpoint, upper, "秋 雨，星")
    # The columns are those the writer answers from: no <unk> column for the space (was: 春 <unk> 风 ， 月).
    assert attention.source_labels == CoupletWriter(checkpoint).attention_map(upper).columns == list("春风，月")
    assert attention.target_labels == ["<bos>", *"秋雨，星"]

    out = tmp_path / "attention.png"
    common = ["plot", "attention", "--checkpoint", str(checkpoint), "--out", str(out)]
    for line, reason in (("abc", "contains Latin letters 'abc'"), ("，，", "is only punctuation")):
        # Was: drawn, exit 0, each letter an <unk> column; the couplet command refuses the line.
        assert main([*common, "--source", line]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and not out.exists()
        assert f"--source: upper line {line!r} {reason}" in error
    with pytest.raises(ValueError, match=r"^source: upper line 'abc' contains Latin letters"):
        checkpoint_attention(checkpoint, "abc")


def test_plot_attention_refuses_vocabularies_with_a_checkpoint_that_reads_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "translation" / "last")
    vocabulary = Vocabulary.from_size(8)
    vocabulary.save(tmp_path / "v.txt")
    out = tmp_path / "attention.png"
    common = ["plot", "attention", "--checkpoint", str(checkpoint), "--out", str(out), "--source", "Ein Hund"]
    for flag in ("--source-vocab", "--target-vocab"):
        # Was: drawn with the checkpoint's tokenizer, exit 0, the vocabulary never used.
        assert main([*common, flag, str(tmp_path / "v.txt")]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and not out.exists()
        assert (
            f"{flag}: expected only with a synthetic-task checkpoint (a translation checkpoint reads text with its "
            "own tokenizer), got it with translation" in error
        )
    # From Python, the keyword is named.
    with pytest.raises(ValueError, match=r"^target_vocabulary: expected only with a synthetic-task checkpoint"):
        checkpoint_attention(checkpoint, "Ein Hund", target_vocabulary=vocabulary)


def test_plot_attention_refuses_a_vocabulary_file_for_a_translation_checkpoint_before_reading_it(
    tmp_path: Path, tiny_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A file that is no vocabulary was parsed first: the user read its format error, not that
    # the option does not go with this checkpoint.
    checkpoint = write_translation_checkpoint(tmp_path / "translation" / "last")
    (tmp_path / "notavocab.txt").write_text("one\n\ntwo\n", encoding="utf-8")
    out = tmp_path / "attention.png"
    common = ["plot", "attention", "--checkpoint", str(checkpoint), "--out", str(out), "--source", "Ein Hund"]
    assert main([*common, "--source-vocab", str(tmp_path / "notavocab.txt")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and not out.exists()
    assert "--source-vocab: expected only with a synthetic-task checkpoint" in error, error
    # The file is still read where it is used: a synthetic-task checkpoint's.
    with pytest.raises(ValueError, match="notavocab.txt"):
        checkpoint_attention(tiny_checkpoint, "3 4", source_vocabulary=tmp_path / "notavocab.txt")


def test_plot_attention_names_a_sentence_longer_than_the_checkpoint_reads(
    tmp_path: Path, tiny_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    translation = write_translation_checkpoint(tmp_path / "translation" / "last")
    out = tmp_path / "attention.png"
    for checkpoint, short, long in ((tiny_checkpoint, "5 6", "5 " * 600), (translation, "Ein Hund", "Ein Hund " * 600)):
        common = ["plot", "attention", "--checkpoint", str(checkpoint), "--out", str(out)]
        for flag, sentences in (("--source", [long, short]), ("--target", [short, long])):
            # Was: "sequence length must be <= max_len=... (the positional table)", naming neither option.
            assert main([*common, "--source", sentences[0], "--target", sentences[1]]) == 2
            error = capsys.readouterr().err
            assert error.count("\n") == 1 and not out.exists()
            assert re.search(rf"{flag}: expected a sentence of at most \d+ tokens \(the checkpoint's max_len\)", error)
    # From Python, the keyword is named.
    with pytest.raises(ValueError, match=r"^source: expected a sentence of at most \d+ tokens"):
        checkpoint_attention(tiny_checkpoint, "5 " * 600)


def _drawn_figure(monkeypatch: pytest.MonkeyPatch, draw: Callable[[], Path]) -> Figure:
    """The figure ``draw`` saves, kept open (the figure functions close theirs after saving)."""
    kept: list[Figure] = []
    close = figures.plt.close
    monkeypatch.setattr(figures.plt, "close", kept.append)
    draw()
    monkeypatch.setattr(figures.plt, "close", close)
    (figure,) = kept
    return figure


def test_a_short_heat_map_keeps_its_title_off_the_colorbar_and_inside_the_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    title = "cross-attention, decoder layer 1 (mean of heads)"
    weights = torch.tensor([[0.6, 0.4], [0.3, 0.7], [0.5, 0.5]])
    figure = _drawn_figure(
        monkeypatch,
        lambda: figures.plot_attention_heatmap(
            weights, ["Ein", "Hund"], ["<bos>", "A", "dog"], tmp_path / "a.png", title
        ),
    )
    renderer = figure.canvas.get_renderer()
    (text,) = [text for text in figure.findobj(matplotlib.text.Text) if text.get_text() == title]
    title_box = text.get_window_extent(renderer)
    colorbar_box = figure.axes[1].get_window_extent(renderer)  # the colorbar's axes, beside the map's
    assert not title_box.overlaps(colorbar_box)
    assert 0 <= title_box.x0 and title_box.x1 <= figure.bbox.width
    figures.plt.close(figure)


def test_a_heat_map_spans_its_own_values_unless_given_a_range(tmp_path: Path) -> None:
    # Attention spread thin (0.10-0.20), as a model early in training: on a fixed 0-1 scale one dark block.
    weights = torch.tensor([[0.10, 0.15, 0.20], [0.20, 0.10, 0.15]])
    viridis = matplotlib.colormaps["viridis"]

    def has_colour(path: Path, value: float) -> bool:
        pixels = matplotlib.image.imread(path)[..., :3]
        return bool((abs(pixels - torch.tensor(viridis(value)[:3]).numpy()).max(axis=-1) < 0.02).any())

    own = figures.plot_attention_heatmap(weights, ["a", "b", "c"], ["x", "y"], tmp_path / "own.png")
    assert has_colour(own, 0.0) and has_colour(own, 1.0)  # the darkest and the brightest both drawn
    fixed = figures.plot_attention_heatmap(
        weights, ["a", "b", "c"], ["x", "y"], tmp_path / "fixed.png", value_range=(0.0, 1.0)
    )
    assert not has_colour(fixed, 1.0)
    with pytest.raises(ValueError, match=r"value_range: expected \(low, high\) with low < high, got \(1.0, 1.0\)"):
        figures.plot_attention_heatmap(weights, ["a", "b", "c"], ["x", "y"], tmp_path / "x.png", value_range=(1.0, 1.0))


@pytest.mark.parametrize("size", [4, 120])
def test_a_confusion_matrix_of_many_classes_is_drawn_without_a_text_per_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    # 160,000 counts of 400 classes took six minutes to draw into one black square; the colours still show.
    names = [f"class{number}" for number in range(size)]
    confusion = [[int(row == column) + (row + column) % 3 for column in range(size)] for row in range(size)]
    path = tmp_path / "c.png"
    figure = _drawn_figure(monkeypatch, lambda: result_plots.plot_confusion_matrix(path, confusion, names))
    texts = [text.get_text() for text in figure.axes[0].texts]
    tick_names = [label.get_text() for label in figure.axes[0].get_yticklabels()]
    if size <= result_plots.MAX_LABELLED_CLASSES:
        assert len(texts) == size * size and tick_names == names
    else:
        assert texts == [] and not set(tick_names) & set(names)
        assert figure.axes[0].get_xlabel() == f"predicted class (of {size}, in the report's order)"
    figures.plt.close(figure)
    assert path.stat().st_size > 0


def test_a_figure_written_on_a_disk_that_fills_leaves_the_earlier_one_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "masks.png"
    assert main(["plot", "masks", "--out", str(out)]) == 0
    earlier = out.read_bytes()
    capsys.readouterr()

    def half_then_full(figure: Figure, target: object, **options: object) -> None:
        # matplotlib writes to a path or a file object; either way the disk fills half way.
        if isinstance(target, (str, os.PathLike)):
            Path(target).write_bytes(b"\x89PNG half a figure")
        else:
            target.write(b"\x89PNG half a figure")  # type: ignore[attr-defined]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", half_then_full)
    assert main(["plot", "masks", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith(f"could not write {str(out)!r} (No space left on device, ENOSPC); nothing was written")
    assert out.read_bytes() == earlier  # not half of the new one
    assert sorted(path.name for path in tmp_path.iterdir()) == ["masks.png"]  # no temporary left
    with pytest.raises(OSError, match="nothing was written"):
        figures.plot_attention_heatmap(torch.rand(2, 3), ["a", "b", "c"], ["x", "y"], tmp_path / "heat.png")
    assert not (tmp_path / "heat.png").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, a folder that takes no new files")
def test_an_out_the_system_will_not_make_is_one_line_naming_the_option_and_the_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Was "[Errno 2] No such file or directory: '/proc/x.png'": the raw errno, naming no option.
    for out in ("/proc/x.png", "/proc/no-folder/x.png"):
        assert main(["plot", "masks", "--out", out]) == 2
        assert capsys.readouterr().err == (
            f"transformer-lab plot: error: --out: could not write {out!r} (No such file or directory, ENOENT); "
            "nothing was written\n"
        )
    # The Python API names the path (its keyword is the path itself).
    refused = r"^could not write '/proc/x\.png' \(No such file or directory, ENOENT\); nothing was written$"
    with pytest.raises(FolderWriteError, match=refused):
        figures.plot_masks("/proc/x.png")


def test_an_out_folder_not_the_users_to_make_is_named_as_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(self: Path, *arguments: object, **options: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))

    monkeypatch.setattr(Path, "mkdir", refused)
    out = tmp_path / "figures" / "masks.png"
    assert main(["plot", "positions", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"transformer-lab plot: error: --out: could not write {str(out)!r} (Permission denied, EACCES); "
        "nothing was written\n"
    )
