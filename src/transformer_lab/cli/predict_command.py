"""The commands each task declares to answer lines with a checkpoint (``translate``, ``couplet``, ``classify``).

One command per task with a ``Task.command`` (``tasks/command.py``), in the registry's order:
``transformer-lab NAME --checkpoint DIR [INPUT ...]``. The inputs are the arguments, every
line of ``--input`` or stdin (an empty file or stdin is an error; bad UTF-8 names its line
and byte column; CRLF reads like LF). The task's own options are added as it declares them;
the answers go to stdout, one note a line to stderr, and the exit code is 2 when an input
was refused (the others are still answered). A long input is answered in parts, each part's
answers printed before the next is decoded: output comes as it is made, and a stopped command
has written whole answers to the inputs before the one it names; files (``--output``) are
written whole at the end. A pipe or a terminal is read as its lines come (`decode_options.Inputs`):
each part is what has arrived, checked and answered before the next is read.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from transformer_lab.atomic_files import check_not_an_input, opened_through_temporary
from transformer_lab.cli.bounds import file_path_of, path_of
from transformer_lab.cli.decode_options import STANDARD_STREAM, Inputs, command_inputs
from transformer_lab.cli.device_option import add_device_argument, device_of
from transformer_lab.cli.task_options import add_task_options, given_options
from transformer_lab.data.pair_files import TABLE_SUFFIXES
from transformer_lab.decoding.search_settings import check_no_beam_settings
from transformer_lab.decoding.sentences import cut_note
from transformer_lab.folders import check_file_output, described_refusal
from transformer_lab.one_line import line_break_note
from transformer_lab.setting_error import PhrasedError
from transformer_lab.tasks.command import ANSWERED_AT_ONCE, INPUT_NAMES, INPUTS_BEFORE, Answers, PredictCommand
from transformer_lab.tasks.registry import TASKS
from transformer_lab.tasks.task import Task
from transformer_lab.training.checkpoint import checkpoint_files, resolve_checkpoint
from transformer_lab.training.run.run_folder import check_output_outside_saves
from transformer_lab.training.run.stop_signal import Terminated
from transformer_lab.write_errors import write_standard_output, writes_refused_as

logger = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    for task in TASKS.values():
        if task.command is not None:
            _register_task(subparsers, task)


def _register_task(subparsers: argparse._SubParsersAction, task: Task) -> None:
    command = task.command
    assert command is not None
    parser = subparsers.add_parser(command.name, help=command.help)
    parser.add_argument(
        "inputs",
        nargs="*",
        metavar=command.inputs,
        help=f"{command.inputs} to {command.verb} (none: read stdin, one per line)",
    )
    parser.add_argument(
        "--checkpoint", type=path_of, required=True, help="checkpoint folder, or a run folder (its best/)"
    )
    parser.add_argument(
        "--input", type=file_path_of, default=None, help=f"{command.verb} every line of this UTF-8 file (-: stdin)"
    )
    add_device_argument(parser)
    options = add_task_options(parser, command.options)
    if command.plots_attention:
        parser.add_argument(
            "--plot-attention", type=path_of, default=None, help="write a cross-attention heat map of the first input"
        )
    parser.set_defaults(handler=functools.partial(run, task), task_options=options)


def run(task: Task, arguments: argparse.Namespace) -> int:
    command = task.command
    assert command is not None
    device = device_of(arguments)
    arguments.checkpoint = resolve_checkpoint(arguments.checkpoint, "--checkpoint")  # named as typed
    inputs = command_inputs(arguments.inputs, arguments.input, purpose=command.verb)
    if arguments.input not in (None, STANDARD_STREAM) and Path(arguments.input).suffix.lower() in TABLE_SUFFIXES:
        # Each line is one input, whole: a table's header, labels, quotes and second column are read as text.
        logger.warning(
            "--input %s: read as plain text, each line one input to %s whole (a table's header and columns too); "
            "give a file of the inputs alone, or score a labelled or paired file with transformer-lab evaluate",
            arguments.input,
            command.verb,
        )
    options = given_options(arguments, arguments.task_options)
    if options.get("--beam") == 1:  # greedy whatever the checkpoint says: beam search's own settings go unused
        check_no_beam_settings(True, 1, options.get("--length-penalty"), options.get("--beam-stop"))
    plot_path = getattr(arguments, "plot_attention", None)
    # Every path option of these commands names a file they write: neither a file the command
    # reads, nor another output of the same command.
    read = None if arguments.input == STANDARD_STREAM else arguments.input
    taken: dict[str, object] = {"--input": read, **checkpoint_files(arguments.checkpoint)}
    for flag, value in {**options, "--plot-attention": plot_path}.items():
        if isinstance(value, Path):
            if value == STANDARD_STREAM:  # else a file named "-" appears beside the user's
                raise ValueError(
                    f"{flag}: expected a file to write, got '-'; the answers go to the standard output without "
                    f"{flag} (a file named '-' is ./-)"
                )
            if flag != "--plot-attention":  # which check_image_path below refuses in its own words
                check_file_output(value, flag)  # before any work, not after every line is answered
            check_not_an_input(flag, value, taken)
            taken[flag] = value
    if plot_path is not None:
        # Before any work: a bad name would otherwise be refused after the answers are printed.
        from transformer_lab.lab.plotting import check_image_path

        check_image_path(plot_path, name="--plot-attention")  # a path the system refuses too, before the answers
        check_output_outside_saves("--plot-attention", plot_path, "file")  # a checkpoint's next save would delete it
        if inputs.whole is not None:
            _check_drawable(inputs.whole[0], inputs.name(0))
    predictor = task.predictor_for(arguments.checkpoint, device)
    if command.opened is not None:
        predictor = command.opened(predictor, options)
    if command.check is not None and inputs.whole is not None:
        command.check(predictor, inputs.whole, {**options, INPUT_NAMES: inputs.names(0, len(inputs.whole))})
    flags = {value: flag for flag, value in options.items() if isinstance(value, Path)}
    # Each --output file, written a part at a time into a temporary file beside it and renamed into place
    # when the block ends (`_output_file`): an endless stream is never held whole, and a stop or a
    # refusal removes it.
    with contextlib.ExitStack() as outputs:
        done = _answer(command, predictor, inputs, options, flags, plot_path, outputs)
    if plot_path is not None and done.first is not None:
        _plot_attention(predictor, done.first, inputs.name(0), plot_path, options)
    if done.closed:
        raise BrokenPipeError(errno.EPIPE, "the standard output was closed")  # exit 141, as a shell reports it
    return done.code


@dataclass(frozen=True)
class _Answered:
    """How answering ended: the exit code, the first input (which --plot-attention draws), stdout closed early."""

    code: int
    first: str | None
    closed: bool


def _answer(
    command: PredictCommand,
    predictor: object,
    inputs: Inputs,
    options: dict[str, Any],
    flags: dict[Path, str],
    plot_path: Path | None,
    outputs: contextlib.ExitStack,
) -> _Answered:
    """Answer ``inputs`` a part at a time, printing each part's answers; their files are opened in ``outputs``."""
    answered = Answers(lines=[])  # the parts' refusals and line-break counts, summed
    files: dict[Path, BinaryIO] = {}
    printed = 0  # the inputs whose answers reached stdout
    first: str | None = None  # the first input, which --plot-attention draws
    start = 0  # the inputs answered so far
    closed = False  # stdout closed by its reader
    parts = _parts(inputs)
    while True:
        try:
            # A stream's part is read here: a stop while it waits for its next line is a stop between parts.
            part = next(parts, None)
            if part is None:
                break
            names = inputs.names(start, len(part))
            if first is None:
                first = part[0]
                if plot_path is not None:
                    _check_drawable(first, names[0])
            if command.check is not None and inputs.whole is None:  # a stream's lines are checked as they come
                command.check(predictor, part, {**options, INPUT_NAMES: names})
            answers = command.answer(predictor, part, {**options, INPUT_NAMES: names, INPUTS_BEFORE: start})
        except (KeyboardInterrupt, Terminated, ValueError):
            # A stop, or a stream's later line refused: the parts answered so far, and what they did not write.
            if start:
                unwritten = [f"{flags.get(path, 'the output')} {path}" for path in files]
                if plot_path is not None:
                    unwritten.append(f"--plot-attention {plot_path}")
                total = None if inputs.whole is None else len(inputs.whole)
                print(_stopped_note(command, start, total, inputs.name(start), printed, unwritten), file=sys.stderr)
            raise
        if not closed:
            try:
                _print_answers(answers.lines, names[0])
            except BrokenPipeError:
                if not files and not answers.files and plot_path is None:
                    raise  # nothing else asked for: stop, as a closed pipe stops a shell's commands
                closed = True  # `--output F | head -1`: the files asked for are still written whole
        if answers.lines and not closed:
            printed = start + len(part)
        for note in answers.notes:
            print(f"transformer-lab {command.name}: {note}", file=sys.stderr)
        answered.add(answers)
        for path, text in answers.files.items():
            if path not in files:
                files[path] = outputs.enter_context(_output_file(path, flags.get(path)))
            with writes_refused_as(path, "nothing was written", name=flags.get(path)):
                files[path].write(text.encode("utf-8"))
                files[path].flush()  # on disk a part at a time
        start += len(part)
    if answered.first_cut is not None:
        print(
            f"transformer-lab {command.name}: {cut_note(answered.cut, answered.searched, answered.first_cut)}",
            file=sys.stderr,
        )
    for what, (held, total_texts) in answered.line_breaks.items():
        if held:
            print(f"transformer-lab {command.name}: {line_break_note(held, total_texts, what)}", file=sys.stderr)
    return _Answered(2 if answered.refused else 0, first, closed)


@contextlib.contextmanager
def _output_file(path: Path, name: str | None) -> Iterator[BinaryIO]:
    """``path`` opened through a temporary file, renamed into place at the end; a disk's refusal names ``name``."""
    with writes_refused_as(path, "nothing was written", name=name):
        path.parent.mkdir(parents=True, exist_ok=True)
        with opened_through_temporary(path) as file:
            yield file


def _print_answers(lines: list[str], first_name: str) -> None:
    """Write ``lines`` to stdout now; ``first_name``: what messages call the first input these answer (lost with
    them if a full disk or device refuses the write)."""
    write_standard_output("".join(line + "\n" for line in lines), f"the answers from {first_name} on were not written")


def _parts(inputs: Inputs) -> Iterator[list[str]]:
    """The inputs in parts of at most `ANSWERED_AT_ONCE`: a stream's as its lines come."""
    if inputs.whole is not None:
        for start in range(0, len(inputs.whole), ANSWERED_AT_ONCE):
            yield inputs.whole[start : start + ANSWERED_AT_ONCE]
        return
    assert inputs.stream is not None
    for lines in inputs.stream:
        for start in range(0, len(lines), ANSWERED_AT_ONCE):
            yield lines[start : start + ANSWERED_AT_ONCE]


def _check_drawable(text: str, name: str) -> None:
    """Refuse a blank first input for --plot-attention, before any is answered."""
    if not text.strip():
        # Drawn after every line is answered, it failed then, naming the library's keyword (sentence).
        raise ValueError(
            f"--plot-attention: expected a first input to draw, got a blank one ({name}); put the one to draw first"
        )


def _stopped_note(
    command: PredictCommand, answered: int, total: int | None, next_name: str, printed: int, unwritten: list[str]
) -> str:
    """What a command stopped between two parts says: how far it got, where those answers are, where to go on.

    ``printed``: how many of the ``answered`` inputs had their answers reach stdout (its reader may have closed).
    """
    of = "" if total is None else f" of {total:,}"  # a stream's total is not known
    said = f"transformer-lab {command.name}: stopped after the first {answered:,}{of} {command.inputs}"
    if printed == answered:
        said += ", whose answers were written"
    elif printed:
        said += f", the answers to the first {printed:,} written (the standard output's reader closed then)"
    for output in unwritten:  # files are written whole, once every input is answered: never a part of one
        said += f"; {output} was not written (it is written whole, at the end)"
    return f"{said}; {next_name} was the next"


def _plot_attention(predictor: object, text: str, name: str, path: Path, options: dict[str, object]) -> None:
    # Drawing sits here, a layer above the tasks; the predictor reads the weights (its attention_map).
    from transformer_lab.lab.figures import plot_attention_map
    from transformer_lab.tasks.evaluation import search_keywords

    try:
        # An input the task refuses is named as the user gave it (input 1, F: line 1), not by the API's keyword.
        written = plot_attention_map(predictor, text, path, name=name, **search_keywords(options))
    except PhrasedError:
        raise  # it names settings, which the command line says as its options
    except ValueError as error:  # the answers are printed, the refused input's among them: only the figure failed
        raise ValueError(f"--plot-attention: {error}") from None
    except OSError as error:  # the answers are printed: only the figure is missing
        raise OSError(f"--plot-attention: {described_refusal(error, path)}") from error
    print(f"attention heat map: {written}", file=sys.stderr)
