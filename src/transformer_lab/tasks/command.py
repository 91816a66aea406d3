"""A task's own command, ``transformer-lab NAME --checkpoint DIR INPUT...``: its inputs answered by its predictor.

A task that answers lines of text (translate, couplet, classify) declares a `PredictCommand`
as ``Task.command``: the command's name, what its inputs are, the options it reads (as
`TaskOption` s, with no argparse) and ``answer(predictor, inputs, options)``, which returns
`Answers`. The command line adds the positional inputs, ``--checkpoint``, ``--input`` and
``--device`` to every such command, and ``--plot-attention`` where the predictor draws one;
it prints the answers and writes their files, so that no command module names a task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformer_lab.decoding.sources import Candidate
from transformer_lab.one_line import line_break_count
from transformer_lab.tasks.evaluation import TaskOption

# Beside the flags in ``options``: what an error or a note calls each input, as the user gave it
# ("F: line 3" of --input, "stdin: line 3", "input 3" for an argument).
INPUT_NAMES = "input names"
# Beside the flags in ``options``: how many inputs the command answered before these (it answers a
# long input in parts, and prints each part's answers as they come).
INPUTS_BEFORE = "inputs before"


def input_name(options: Mapping[str, Any], index: int) -> str:
    """What the command's messages call input ``index`` (from 0): its :data:`INPUT_NAMES` entry, else "input N"."""
    names = options.get(INPUT_NAMES)
    return names[index] if names else f"input {options.get(INPUTS_BEFORE, 0) + index + 1}"


# Inputs answered together: their answers are printed before the next part is read by the model, so
# output comes as it is made and an interrupted command has written every part it finished.
ANSWERED_AT_ONCE = 1024


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
    # What the written texts are ("translations") -> (how many held a line break or a tab, how many
    # there were): the command sums the parts of a long input and says it once (one_line.line_break_note).
    line_breaks: dict[str, tuple[int, int]] = field(default_factory=dict)
    # How many answers the search cut at its length limit, the first's (input name, tokens), and how many
    # answers it searched: summed over the parts and said once (decoding.sentences.cut_note).
    cut: int = 0
    first_cut: tuple[str, int] | None = None
    searched: int = 0

    def count_cut(self, best: Sequence[Candidate | None], names: Sequence[str]) -> None:
        """Count the best translations (None: a blank input) and those cut at the length limit."""
        cut = [(name, len(found.ids)) for found, name in zip(best, names) if found is not None and found.cut]
        self._add_cut(len(cut), cut[0] if cut else None, sum(1 for found in best if found is not None))

    def _add_cut(self, count: int, first: tuple[str, int] | None, searched: int) -> None:
        self.cut += count
        self.first_cut = self.first_cut or first
        self.searched += searched

    def count_line_breaks(self, texts: Sequence[str], what: str) -> None:
        """Count, under ``what``, the ``texts`` written through `one_line` and those it changed."""
        self._count(what, line_break_count(texts), len(texts))

    def add(self, part: Answers) -> None:
        """Add the refusals and line-break counts of a later ``part`` to these (its files are the caller's to join)."""
        self.refused += part.refused
        self._add_cut(part.cut, part.first_cut, part.searched)
        for what, (held, total) in part.line_breaks.items():
            self._count(what, held, total)

    def _count(self, what: str, held: int, total: int) -> None:
        before = self.line_breaks.get(what, (0, 0))
        self.line_breaks[what] = (before[0] + held, before[1] + total)


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
    The command answers a long input in parts of `ANSWERED_AT_ONCE`, printing each part's answers
    as they come: ``options`` holds, under :data:`INPUTS_BEFORE`, how many came before the part.
    ``check(predictor, inputs, options)``, where given, runs over every input before the first part
    is answered: an input that stops ``answer`` (rather than being refused alone) stops the command
    before any work, whichever part it lies in (a pipe's inputs, read as they come, part by part).
    """

    name: str
    help: str
    inputs: str
    verb: str
    answer: Callable[[Any, list[str], Mapping[str, Any]], Answers]
    options: tuple[TaskOption, ...] = ()
    plots_attention: bool = False
    opened: Callable[[Any, Mapping[str, Any]], Any] | None = None
    check: Callable[[Any, list[str], Mapping[str, Any]], None] | None = None
