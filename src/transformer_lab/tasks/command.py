"""A task's own command, ``transformer-lab NAME --checkpoint DIR INPUT...``: its inputs answered by its predictor.

A task that answers lines of text (translate, couplet, classify) declares a `PredictCommand`
as ``Task.command``: the command's name, what its inputs are, the options it reads (as
`TaskOption` s, with no argparse) and ``answer(predictor, inputs, options)``, which returns
`Answers`. The command line adds the positional inputs, ``--checkpoint``, ``--input`` and
``--device`` to every such command, and ``--plot-attention`` where the predictor draws one;
it prints the answers and writes their files, so that no command module names a task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformer_lab.tasks.evaluation import TaskOption

# Beside the flags in ``options``: what an error or a note calls each input, as the user gave it
# ("F: line 3" of --input, "stdin: line 3", "input 3" for an argument).
INPUT_NAMES = "input names"


def input_name(options: Mapping[str, Any], index: int) -> str:
    """What the command's messages call input ``index`` (from 0): its :data:`INPUT_NAMES` entry, else "input N"."""
    names = options.get(INPUT_NAMES)
    return names[index] if names else f"input {index + 1}"


@dataclass
class Answers:
    """What a command answered: stdout ``lines``, stderr ``notes``, how many inputs it ``refused``, its ``files``.

    A note is one line a person reads beside the output ("input 3: the text is empty"), naming
    the input by :func:`input_name`;
    the command prefixes it with its name. ``refused`` > 0 makes the exit code 2 (the other
    inputs were still answered). ``files`` maps a path given by an option to its text.
    """

    lines: list[str]
    notes: list[str] = field(default_factory=list)
    refused: int = 0
    files: dict[Path, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PredictCommand:
    """How ``transformer-lab NAME`` answers lines with one of the task's checkpoints.

    ``name`` is the command, ``help`` its line in ``transformer-lab --help``, ``inputs`` what
    its positional arguments are ("sentences") and ``verb`` what it does to each
    ("translate"), for its help and errors. ``options``: what it reads beyond the inputs,
    the checkpoint and the device, given to ``answer`` as flag -> value (only those given).
    ``answer(predictor, inputs, options)`` answers every input with ``Task.predictor``'s
    object; ``options`` also holds, under :data:`INPUT_NAMES`, what an error calls each input.
    ``plots_attention``: the predictor has ``attention_map(text, name=..., **search settings)``
    (a `models.attention_maps.AttentionMap`; ``name``, the input's, in its errors), so the
    command offers ``--plot-attention``.
    ``opened(predictor, options)``: the predictor the options ask for (translate's ``--ensemble``
    adds models), which answers and draws; None keeps the checkpoint's.
    """

    name: str
    help: str
    inputs: str
    verb: str
    answer: Callable[[Any, list[str], Mapping[str, Any]], Answers]
    options: tuple[TaskOption, ...] = ()
    plots_attention: bool = False
    opened: Callable[[Any, Mapping[str, Any]], Any] | None = None
