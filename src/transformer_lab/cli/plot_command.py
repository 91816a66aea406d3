"""``transformer-lab plot FIGURE --out FILE.png``: the tutorials' figures, drawn from the library.

Figures: ``masks``, ``positions``, ``lr-schedule``, ``attention`` (needs ``--checkpoint``;
``--source`` is text for a translation or couplet checkpoint),
each a function of :mod:`transformer_lab.lab.figures`, and ``training-curve`` (needs
``--metrics``), of :mod:`transformer_lab.lab.result_plots`.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from transformer_lab.cli.bounds import checked_text, file_path_of, float_in, int_in, path_of
from transformer_lab.data._checks import ANY_COUNT
from transformer_lab.folders import FolderWriteError
from transformer_lab.models.config import MAX_WIDTH
from transformer_lab.setting_error import SettingError
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.run.run_folder import check_output_outside_saves

# A figure's canvas, 4 bytes a pixel: each option's own bound still lets --width 54
# --height 54 --dpi 1200 ask for 17 GB. The figures' default sizes stay far below at any --dpi.
MAX_PIXELS = 100_000_000
# Curves that `plot lr-schedule` tells apart: matplotlib's cycle has 10 colours (the 11th curve
# took the first's), and more legend lines leave the default figure no room to draw the curves.
MAX_SCHEDULE_CURVES = 10
# `plot attention`'s options for the keywords of checkpoint_attention that it spells otherwise.
# The library's keywords spelled otherwise here (the others are "--" + the keyword, dashed).
_FLAGS = {
    "source_vocabulary": "--source-vocab",
    "target_vocabulary": "--target-vocab",
    "figsize": "--width and --height",
}


def _figures() -> ModuleType:
    # Imported when a figure is drawn: matplotlib is the plots extra, not needed to list the commands.
    from transformer_lab.lab import figures

    return figures


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot",
        help="draw a figure (masks, positions, lr-schedule, attention, training-curve) as a PNG",
        description="Draw one of the tutorials' figures from the library's own masks, tables and models.",
    )
    figures_parsers = parser.add_subparsers(dest="figure", required=True, metavar="FIGURE")

    masks_parser = figures_parsers.add_parser("masks", help="causal mask, padding mask, both, rows and columns")
    masks_parser.add_argument("--length", type=int_in(1, 256), default=6, help="positions in the sequence (default 6)")
    masks_parser.add_argument(
        "--real-length", type=int_in(0, 256), default=4, help="real (non-pad) positions (default 4)"
    )
    _add_output_arguments(masks_parser, (12.0, 3.6))
    masks_parser.set_defaults(handler=_run_masks)

    positions_parser = figures_parsers.add_parser("positions", help="the sinusoidal positional encoding table")
    positions_parser.add_argument(
        "--max-len", type=int_in(1, 10_000), default=100, help="positions drawn (default 100)"
    )
    positions_parser.add_argument("--d-model", type=int_in(2, 2048), default=128, help="d_model (default 128)")
    _add_output_arguments(positions_parser, (10.0, 4.0))
    positions_parser.set_defaults(handler=_run_positions)

    schedule_parser = figures_parsers.add_parser("lr-schedule", help="the warm-up / inverse-square-root learning rate")
    schedule_parser.add_argument(
        "--settings",
        default="512:4000,512:8000,256:4000",
        help="comma-separated d_model:warmup pairs, one curve each (default 512:4000,512:8000,256:4000)",
    )
    schedule_parser.add_argument(
        "--steps", type=int_in(2, 10_000_000), default=20000, help="steps drawn (default 20000)"
    )
    schedule_parser.add_argument(
        "--factor", type=float_in(0.0, 1e6), default=1.0, help="the schedule's factor (default 1.0)"
    )
    _add_output_arguments(schedule_parser, (7.0, 4.0))
    schedule_parser.set_defaults(handler=_run_lr_schedule)

    attention_parser = figures_parsers.add_parser(
        "attention", help="every head of every layer for one sentence, from a checkpoint"
    )
    attention_parser.add_argument("--checkpoint", type=path_of, required=True, help="a Seq2Seq checkpoint folder")
    attention_parser.add_argument(
        "--source",
        default=None,
        help="the source sentence: text for a translation or couplet checkpoint (required there); for a "
        "synthetic task token ids separated by spaces, or tokens with --source-vocab (default: 6 synthetic symbols)",
    )
    attention_parser.add_argument(
        "--target", default=None, help="the target sentence, as --source (default: the model's greedy output)"
    )
    attention_parser.add_argument("--source-vocab", default=None, help="source vocabulary file (one token per line)")
    attention_parser.add_argument("--target-vocab", default=None, help="target vocabulary file (one token per line)")
    _add_output_arguments(attention_parser, None)
    attention_parser.set_defaults(handler=_run_attention)

    curve_parser = figures_parsers.add_parser(
        "training-curve", help="loss, learning rate and metrics from metrics.jsonl"
    )
    curve_parser.add_argument("--metrics", required=True, help="a Trainer's metrics.jsonl")
    _add_output_arguments(curve_parser, (10.0, 4.0))
    curve_parser.set_defaults(handler=_run_training_curve)


def _add_output_arguments(parser: argparse.ArgumentParser, default_size: tuple[float, float] | None) -> None:
    """--out, --width, --height and --dpi; ``default_size`` is the figure function's own, for the help."""
    # A file's path as typed: "x.png/" names a folder, "" the current one; both refused, not written as x.png.
    parser.add_argument("--out", type=checked_text(file_path_of), required=True, help="the PNG file to write")
    size_words = f"{default_size[0]:g} x {default_size[1]:g}" if default_size else "2.2 per panel"
    parser.add_argument("--width", type=float_in(0, 100), default=None, help=f"width in inches (default: {size_words})")
    parser.add_argument("--height", type=float_in(0, 100), default=None, help="height in inches (default: see --width)")
    # From 10, as every figure function takes it (check_figure_size).
    parser.add_argument("--dpi", type=int_in(10, 1200), default=100, help="pixels per inch (default 100)")


def _output_options(arguments: argparse.Namespace) -> dict[str, Any]:
    """``dpi``, and ``figsize`` where --width and --height are given (else the figure function's default).

    --out is checked here, before anything is drawn: the library's own check names its ``path``.
    """
    out = Path(arguments.out)
    if out.is_dir():
        raise ValueError(
            f"--out: expected a .png file, got the folder {arguments.out!r}; name a file in it, such as "
            f"{str(out / (arguments.figure + '.png'))!r}"
        )
    if out.suffix.lower() != ".png":
        raise ValueError(f"--out: expected a file name ending in .png, got {arguments.out!r}")
    check_output_outside_saves("--out", out, "file")  # a checkpoint's next save would delete it
    if arguments.width is None and arguments.height is None:
        return {"dpi": arguments.dpi}
    if arguments.width is None or arguments.height is None:
        raise ValueError(
            f"--width and --height: expected both or neither, got width={arguments.width}, height={arguments.height}"
        )
    if min(arguments.width, arguments.height) * arguments.dpi < 1:  # matplotlib cannot write an empty image
        raise ValueError(
            f"--width, --height and --dpi: expected a figure of at least 1 pixel each way (width x dpi by height "
            f"x dpi), got {arguments.width * arguments.dpi:g} by {arguments.height * arguments.dpi:g}; make them larger"
        )
    pixels = round(arguments.width * arguments.dpi) * round(arguments.height * arguments.dpi)
    if pixels > MAX_PIXELS:  # before matplotlib allocates the canvas
        raise ValueError(
            f"--width, --height and --dpi: expected a figure of at most {MAX_PIXELS:,} pixels "
            f"(width x dpi by height x dpi), got {pixels:,}; make one of them smaller"
        )
    return {"figsize": (arguments.width, arguments.height), "dpi": arguments.dpi}


def _out_named(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run``, with a write of the figure that the system refused named as --out (the library names the path),
    and a setting the library refused named by its option."""

    @functools.wraps(run)
    def named(arguments: argparse.Namespace) -> int:
        try:
            return run(arguments)
        except FolderWriteError as error:
            raise FolderWriteError(error.errno, f"--out: {error}") from error
        except SettingError as error:
            raise ValueError(error.phrased(lambda name: _FLAGS.get(name, "--" + name.replace("_", "-")))) from None

    return named


def _report(path: Path) -> int:
    print(f"wrote {path}")
    return 0


@_out_named
def _run_masks(arguments: argparse.Namespace) -> int:
    options = _output_options(arguments)
    path = _figures().plot_masks(arguments.out, length=arguments.length, real_length=arguments.real_length, **options)
    return _report(path)


@_out_named
def _run_positions(arguments: argparse.Namespace) -> int:
    options = _output_options(arguments)
    path = _figures().plot_positions(arguments.out, max_len=arguments.max_len, d_model=arguments.d_model, **options)
    return _report(path)


def _parse_settings(text: str) -> list[tuple[int, int]]:
    pieces = text.split(",")
    if len(pieces) > MAX_SCHEDULE_CURVES:
        raise ValueError(
            f"--settings: expected at most {MAX_SCHEDULE_CURVES} d_model:warmup pairs (one curve and colour "
            f"each), got {len(pieces)}"
        )
    settings = []
    for piece in pieces:
        parts = piece.strip().split(":")
        try:
            d_model, warmup_steps = (int(part) for part in parts)
        except ValueError:
            given = repr(piece.strip()) if piece.strip() else f"an empty pair in {text!r}"
            raise ValueError(f"--settings: expected d_model:warmup pairs such as 512:4000, got {given}") from None
        if d_model < 1 or warmup_steps < 1:
            raise ValueError(f"--settings: expected d_model:warmup pairs of ints >= 1, got {piece.strip()!r}")
        # The rates are floats: a d_model or warm-up of hundreds of digits overflowed in the formula.
        if d_model > MAX_WIDTH or warmup_steps > ANY_COUNT[1]:
            raise ValueError(
                f"--settings: expected d_model:warmup pairs with d_model in [1, {MAX_WIDTH:,}] and warmup in "
                f"[1, {ANY_COUNT[1]:,}], got {piece.strip()!r}"
            )
        settings.append((d_model, warmup_steps))
    return settings


@_out_named
def _run_lr_schedule(arguments: argparse.Namespace) -> int:
    options = _output_options(arguments)
    path = _figures().plot_lr_schedule(
        arguments.out,
        settings=_parse_settings(arguments.settings),
        total_steps=arguments.steps,
        factor=arguments.factor,
        **options,
    )
    return _report(path)


@_out_named
def _run_attention(arguments: argparse.Namespace) -> int:
    checkpoint = resolve_checkpoint(arguments.checkpoint, "--checkpoint")
    path = _figures().plot_checkpoint_attention(
        arguments.out,
        checkpoint,
        source=arguments.source,
        target=arguments.target,
        # The files, read by the library only once the checkpoint is known to take them.
        source_vocabulary=arguments.source_vocab or None,
        target_vocabulary=arguments.target_vocab or None,
        **_output_options(arguments),
    )
    return _report(path)


@_out_named
def _run_training_curve(arguments: argparse.Namespace) -> int:
    options = _output_options(arguments)
    metrics = Path(arguments.metrics)
    # Checked here to name --metrics; the library would say a folder "does not exist".
    if metrics.is_dir():
        inside = metrics / "metrics.jsonl"
        hint = f"; the run's file is {str(inside)!r}" if inside.is_file() else ""
        raise ValueError(f"--metrics: expected a metrics.jsonl file, got the folder {arguments.metrics!r}{hint}")
    if not metrics.exists():
        raise FileNotFoundError(
            f"--metrics: expected a metrics.jsonl file, got {arguments.metrics!r}, which does not exist"
        )
    # Imported here, as the figures are: matplotlib is the plots extra.
    from transformer_lab.lab.result_plots import plot_training_curve

    return _report(plot_training_curve(arguments.out, arguments.metrics, **options))
