"""``evaluate copy|reverse|sort``: exact match of a checkpoint on its task's held-out sequences.

The sequences are drawn again from the checkpoint's own data settings (its seed), so the
``test`` split is the one its run held out (no source of it occurs in training), and
``validation`` the one it was validated on. Each output is written beside the checkpoint
(or to ``--output``) as a line ``source<TAB>target<TAB>output`` of space-separated symbol ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from transformer_lab.tasks.evaluation import EvaluateFunction, EvaluationOptions, EvaluationReport, search_for
from transformer_lab.tasks.synthetic.train import build_data, decode_pairs, load
from transformer_lab.training.checkpoint import resolve_checkpoint

DEFAULT_SPLIT = "test"
SPLITS = ("test", "validation")


def _symbols(ids: Sequence[int]) -> str:
    return " ".join(str(symbol) for symbol in ids)


def evaluator(task: str) -> EvaluateFunction:
    """The evaluation of the synthetic task ``task`` ("copy", "reverse" or "sort")."""

    def evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
        split = split or DEFAULT_SPLIT
        checkpoint = resolve_checkpoint(checkpoint)
        model, _, config = load(checkpoint)
        if config.data.task != task:
            raise ValueError(
                f"checkpoint {str(checkpoint)!r}: expected a checkpoint of the {task} task, "
                f"got one trained on {config.data.task}"
            )
        model, search = search_for(model, config.decode, options)
        data = build_data(config.data)
        pairs = data.test if split == "test" else data.validation
        outputs = decode_pairs(model, pairs, search.decode_config)
        matches = sum(output == target for output, (_, target) in zip(outputs, pairs))
        exact_match = matches / len(pairs)
        path = options.output_file(checkpoint / f"outputs.{split}.{search.file_label}.tsv")
        rows = (
            f"{_symbols(source)}\t{_symbols(target)}\t{_symbols(output)}\n"
            for (source, target), output in zip(pairs, outputs)
        )
        written = options.write_output(path, "".join(rows))
        return EvaluationReport(
            lines=[
                f"{split}, {len(pairs)} held-out sequences of the {task} task, {search.name}",
                f"exact match  {exact_match:.1%} ({matches} of {len(pairs)})",
                f"outputs: {written}",
            ],
            files={"outputs": path},
            checkpoint=checkpoint,
            name=split,
            search=search.name,
            scores={"exact_match": exact_match},
        )

    return evaluate
