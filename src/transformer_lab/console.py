"""The ``transformer-lab`` console script's entry point, and ``python -m transformer_lab``'s.

The command line (``transformer_lab.cli``) imports torch, which takes seconds; a Ctrl-C
then arrived before ``cli.main`` could handle it and printed a traceback. Here Ctrl-C at
any moment is one line and exit 130, as the command line contract (docs/reliability.md)
says. This module imports nothing heavy.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what cli.main returns for Ctrl-C too
_INTERRUPTED_LINE = b"transformer-lab: interrupted\n"
_CLOSED_STDOUT_LINE = (
    "transformer-lab: error: stdout: expected an open output for the command's answers or summary, got it "
    "closed; send it to a file or to /dev/null instead\n"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Import the command line and run it on ``argv`` (None: sys.argv); Ctrl-C anywhere is exit 130."""
    if sys.stdout is None:
        # Started with stdout closed (`>&-`): every command writes its answers or its summary there, so it
        # is refused before any work rather than with a traceback after it (a training run's, an hour on).
        if sys.stderr is not None:
            sys.stderr.write(_CLOSED_STDOUT_LINE)
        return 2
    # While the modules import, nothing of ours has started, so Ctrl-C ends the process at once. Raised
    # as KeyboardInterrupt it could land inside a C extension's import, which turns it into an
    # ImportError (numpy's "cannot load module more than once") or swallows it and runs the command.
    # A Ctrl-C the process was started to ignore (SIG_IGN, e.g. `nohup`) stays ignored.
    handles_ctrl_c = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if handles_ctrl_c:
        signal.signal(signal.SIGINT, _exit_interrupted)
    try:
        from transformer_lab.cli import main as command_line
    finally:
        if handles_ctrl_c:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return command_line(argv)
    except KeyboardInterrupt:
        # cli.main says which command was interrupted; this is a Ctrl-C before it knew (or after it answered).
        sys.stderr.write(_INTERRUPTED_LINE.decode())
        return INTERRUPTED_EXIT_CODE
    finally:
        if handles_ctrl_c:
            # The command has ended: a Ctrl-C now would land in the interpreter's shutdown (torch's exit
            # hooks) as a traceback under an exit code of 0; its exit code stands.
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _exit_interrupted(signal_number: int, frame: FrameType | None) -> None:
    os.write(sys.stderr.fileno(), _INTERRUPTED_LINE)
    os._exit(INTERRUPTED_EXIT_CODE)
