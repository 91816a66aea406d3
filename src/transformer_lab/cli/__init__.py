"""The ``transformer-lab`` console script: parses arguments, calls library functions, prints.

Each subcommand lives in its own module with ``register(subparsers)`` that adds its parser
and sets ``handler``. No traceback reaches the user for anything but a bug; each failure is
one line on stderr and an exit code:

- 2: bad input: a ValueError (wrong value, malformed or truncated file, refused checkpoint),
  a missing or unreadable file or folder, a command line argparse rejects, or a checkpoint
  the system refused to write (a full disk, a quota, a read-only or failing file system;
  the message names the folder and the errno's meaning, and says the previous one is intact);
- 1: the run failed: training diverged (non-finite losses), or another write failed;
- 130 / 143: interrupted by Ctrl-C (SIGINT) / SIGTERM; during training, after the step in
  progress and a save of ``last/`` (``--resume`` continues), a second signal stops at once.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import re
import sys
from pathlib import Path
from typing import Sequence

import torch
import torch.distributed as dist

from transformer_lab.allocator import keep_freed_memory
from transformer_lab.cli import (
    average_command,
    config_command,
    demo_command,
    download_command,
    evaluate_command,
    explain_command,
    export_command,
    lab_command,
    plot_command,
    predict_command,
    prepare_command,
    serve_command,
    train_command,
)
from transformer_lab.cli.bounds import max_threads, thread_count
from transformer_lab.extras import MissingExtraError
from transformer_lab.folders import FolderWriteError, describe_os_error
from transformer_lab.hardware import physical_cores
from transformer_lab.setting_error import SettingError
from transformer_lab.shortened import shortened
from transformer_lab.training import (
    ProcessLostError,
    Terminated,
    TrainingDivergedError,
    TrainingInterrupted,
    exit_leaving_the_process_group,
    is_main_process,
    launch_from_environment,
    raise_on_sigterm,
)

_COMMAND_MODULES = [
    demo_command,
    download_command,
    prepare_command,
    train_command,
    predict_command,  # each task's own: translate, couplet, classify
    evaluate_command,
    config_command,
    average_command,
    export_command,
    explain_command,
    lab_command,
    plot_command,
    serve_command,
]


# Errors about the input itself, as opposed to the system failing under a correct command.
_BAD_INPUT_ERRORS = (ValueError, FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


class _OneLineParser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line (the usage is one --help away)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n" if _says_why_it_stops() else None)


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="transformer-lab",
        description="The Transformer of 'Attention Is All You Need', from scratch: learn, train, use.",
    )
    parser.add_argument("--verbose", action="store_true", help="show debug logging")
    parser.add_argument(
        "--threads",
        type=thread_count,
        default=None,
        help="torch's intra-op threads (default: $OMP_NUM_THREADS if set, else the physical cores its affinity allows)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments, unrecognized = parser.parse_known_args(argv)
    if unrecognized:
        # Said by the command's own parser, whose --help lists its options (argparse's parse_args has
        # the top one say it: "transformer-lab: error: ... (see transformer-lab --help)").
        _command_parser(parser, arguments).error(f"unrecognized arguments: {' '.join(unrecognized)}")
    _check_given_once(_command_parser(parser, arguments), sys.argv[1:] if argv is None else list(argv))
    level = logging.DEBUG if arguments.verbose else logging.INFO
    # Under torchrun only rank 0 reports; the other ranks still show warnings and errors.
    logging.basicConfig(level=level if _reports() else logging.WARNING, format="%(message)s")
    prefix = f"transformer-lab {arguments.command}"
    try:
        set_threads(arguments.threads)
        # Decoding steps reallocate the same large tensors; glibc would map them afresh
        # every time (src/transformer_lab/allocator.py).
        keep_freed_memory()
        # SIGTERM then unwinds like Ctrl-C: a folder being written is removed, not left half done.
        with raise_on_sigterm():
            return int(arguments.handler(arguments) or 0)
    except BrokenPipeError:
        # The reader stopped early (`config translation | head`): not a failure; quiet, as shells' commands are.
        with contextlib.suppress(OSError):  # a stdout with no descriptor (a test's capture) needs no redirection
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command a pipe closed
    except (FileExistsError, NotADirectoryError) as error:
        # A folder to be made where a file is (an output path under a file) is bad input.
        in_the_way = _file_in_the_way(error)
        if in_the_way is None and isinstance(error, FileExistsError):
            print(f"{prefix}: failed: {_one_line(error)}", file=sys.stderr)
            return 1
        message = _one_line(error) if in_the_way is None else _folder_expected(error, in_the_way)
        if _says_why_it_stops():
            print(f"{prefix}: error: {message}", file=sys.stderr)
        return 2
    except (*_BAD_INPUT_ERRORS, FolderWriteError) as error:
        if _says_why_it_stops():
            print(f"{prefix}: error: {_one_line(error)}", file=sys.stderr)
        return 2
    except TrainingInterrupted as interrupted:
        # Under torchrun every rank stops after the same step with the same line: rank 0 says it.
        if is_main_process():
            print(f"{prefix}: {interrupted}", file=sys.stderr)
        return interrupted.exit_code
    except (TrainingDivergedError, ProcessLostError, OSError, MissingExtraError) as error:
        if isinstance(error, OSError) and error.errno == errno.ENAMETOOLONG and error.filename is not None:
            # A path typed with a name longer than the file system takes: bad input, not the system failing.
            if _says_why_it_stops():
                name = shortened(os.fsdecode(error.filename), 120)
                print(
                    f"{prefix}: error: {name}: expected a path whose names the file system takes, got one with "
                    f"a name too long ({describe_os_error(error)})",
                    file=sys.stderr,
                )
            return 2
        print(f"{prefix}: failed: {_one_line(error)}", file=sys.stderr)
        if isinstance(error, ProcessLostError):
            exit_leaving_the_process_group(1)
        return 1
    except KeyboardInterrupt:
        if _says_why_it_stops():
            print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    except Terminated as terminated:
        if _says_why_it_stops():
            print(f"{prefix}: {terminated}", file=sys.stderr)
        return terminated.exit_code


def _reports() -> bool:
    """Whether this process logs at info level: rank 0, or not under torchrun.

    A launch environment torchrun would not set (RANK alone) counts as one process here: a command
    that does not train ignores it, and the Trainer refuses it in one line, naming the variables.
    """
    try:
        return is_main_process()
    except ValueError:
        return True


def _says_why_it_stops() -> bool:
    """Whether this process says its bad input or its stop: all but a later one of a torchrun machine not yet joined.

    Until the processes join (the Trainer's process group), each checks the same command line
    and files, and a stop reaches them all (Ctrl-C; torchrun's SIGTERM once one of them failed):
    the machine's first process (LOCAL_RANK 0: rank 0 on one machine) says it for them, and
    each still exits with its code. Once joined, a fault may be one process's own: each says its own.
    """
    try:
        launch = launch_from_environment()  # the one reader of torchrun's variables
    except ValueError:
        return True  # no launch torchrun makes: one process, which says its own
    if launch is None or launch.local_rank == 0:
        return True
    return dist.is_available() and dist.is_initialized()


# The options of one value, which argparse replaces when given again (--config, --set and --ensemble add up
# instead, and a switch given twice says the same twice).
_SINGLE_VALUE_ACTIONS = (argparse._StoreAction,)


def _check_given_once(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse an option of one value given twice: argparse keeps the last, and the first was dropped without a word
    (``--train a.de a.en --train b.de b.en`` trained on b alone; ``--out A --out B`` wrote B)."""
    tokens = argv[: argv.index("--")] if "--" in argv else argv
    for action in parser._actions:
        if type(action) not in _SINGLE_VALUE_ACTIONS or not action.option_strings:
            continue
        given = [
            token for token in tokens for flag in action.option_strings if token == flag or token.startswith(flag + "=")
        ]
        if len(given) > 1:
            flag = action.option_strings[-1]
            parser.error(f"{flag}: expected once, got it {len(given)} times (the last would replace the others)")


def _command_parser(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``arguments`` chose, the deepest one: ``plot masks``'s, not ``plot``'s."""
    while True:
        commands = next((action for action in parser._actions if isinstance(action, argparse._SubParsersAction)), None)
        chosen = None if commands is None else getattr(arguments, commands.dest, None)
        if commands is None or chosen not in commands.choices:
            return parser
        parser = commands.choices[chosen]


def _file_in_the_way(error: OSError) -> Path | None:
    """The file standing where a folder was to be made (an output path under a file), or None."""
    if error.filename is None:
        return None
    path = Path(os.fsdecode(error.filename))
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):  # a link to nothing stands in the way as a file does
            return None if candidate.is_dir() else candidate
    return None


def _folder_expected(error: OSError, in_the_way: Path) -> str:
    path = Path(os.fsdecode(error.filename))
    if in_the_way.is_symlink():  # a link to a folder is no obstacle: this one points nowhere
        link = f"a symbolic link to {os.readlink(in_the_way)!r}, which points nowhere"
        if path == in_the_way:
            return f"{path}: expected a folder there (or nothing), got {link}"
        return f"{path}: expected a path through folders, got one through {in_the_way}, {link}"
    if path == in_the_way:
        return f"{path}: expected a folder there (or nothing), got a file"
    return f"{path}: expected a path through folders, got one through the file {in_the_way}"


def set_threads(threads: int | None) -> int:
    """Set torch's intra-op threads: ``threads``, else $OMP_NUM_THREADS, else the physical cores; say which.

    torchrun sets OMP_NUM_THREADS=1 for each process it starts (unless it is set already),
    so under torchrun the default is one thread per process, not the cores.
    """
    if threads is not None:
        if not 1 <= threads <= max_threads():
            raise ValueError(f"--threads: expected an int in [1, {max_threads():,}], got {threads}")
        source = "--threads"
    elif variable := os.environ.get("OMP_NUM_THREADS", "").strip():
        # torch has read it already; an invalid one it ignored (libgomp says so in its own words).
        # OpenMP also takes a list, one count per nesting level ("4,2"). ASCII digits only: int()
        # reads "٣" and "２" too, and str.isdigit passes "³", but libgomp reads none of them.
        if not all(_is_count(part.strip()) for part in variable.split(",")):
            raise ValueError(f"OMP_NUM_THREADS: expected an int >= 1 (or unset), got {variable!r}")
        threads, source = torch.get_num_threads(), "OMP_NUM_THREADS"
    else:
        source = "the physical cores its affinity allows; --threads or OMP_NUM_THREADS to change"
        threads = physical_cores()
    torch.set_num_threads(threads)
    # Debug only: a bad command line must stay one line on stderr. The Trainer says the
    # thread count when training starts.
    logging.getLogger("transformer_lab.cli").debug("using %d thread(s) (%s)", threads, source)
    return threads


def _is_count(text: str) -> bool:
    """Whether ``text`` is a count >= 1 in ASCII digits, as the OpenMP runtime reads one (strtoul: one "+" allowed)."""
    digits = text[1:] if text.startswith("+") else text
    return digits.isascii() and digits.isdigit() and int(digits) >= 1


# The longest run of characters without a space an error line shows: a path fits, a pasted corpus does not.
LONGEST_QUOTED_RUN = 300
_LONG_RUN = re.compile(rf"\S{{{LONGEST_QUOTED_RUN + 1},}}")


def _one_line(error: BaseException) -> str:
    # A setting the Python API refuses is named as the option that gave it (beam: --beam).
    text = error.phrased(_option_name) if isinstance(error, SettingError) else str(error)
    # Some messages (torch's, safetensors') span lines; the user gets one. Spaces inside a line
    # stay: a quoted value ('sci  tech', a label) is shown as it is.
    line = " ".join(line.strip() for line in text.splitlines() if line.strip()) or type(error).__name__
    # A value quoted whole, however long the user gave it (a million letters in a --config): one bound for
    # every message, where each quote site would need its own.
    return _LONG_RUN.sub(lambda run: shortened(run.group(0), LONGEST_QUOTED_RUN), line)


def _option_name(setting: str) -> str:
    return "--" + setting.replace("_", "-")


if __name__ == "__main__":
    sys.exit(main())
