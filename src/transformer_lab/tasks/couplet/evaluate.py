"""``evaluate couplet``: character BLEU-4 and the couplet's form (length, punctuation, tone, repetition, antithesis).

On the test split (default) or the validation pairs the run held out, with the
checkpoint's rules unless the rule options change them; the hypotheses and a Markdown
table of samples are written beside the checkpoint (or beside ``--output``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Sequence

from transformer_lab.data.couplet import check_split_name, load_couplets
from transformer_lab.evaluation.couplet_antithesis import pair_scores
from transformer_lab.evaluation.couplet_metrics import couplet_report
from transformer_lab.one_line import line_break_notes, one_line
from transformer_lab.tasks.couplet.data import (
    CoupletDataConfig,
    load_validation_pairs,
    training_files,
    validation_files,
)
from transformer_lab.tasks.couplet.predict import answer_pairs, with_constraint_options
from transformer_lab.tasks.couplet.train import load
from transformer_lab.tasks.evaluation import (
    TRAINED_ON,
    EvaluationOptions,
    EvaluationReport,
    check_held_out_unchanged,
    search_for,
    trained_files,
)
from transformer_lab.training.checkpoint import resolve_checkpoint

DEFAULT_SPLIT = "test"  # the preset's data.test_split: what `evaluate couplet` scores when none is named
NUM_SAMPLES = 20


def evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    """Answer the upper lines of a split and score the answers against its lower lines."""
    # Checked as given, before the checkpoint is read: an empty name is no default split.
    split = None if split is None else check_split_name(split, "--split", also="validation, ")
    model, vocabulary, config = load(checkpoint)
    split = config.data.test_split if split is None else split  # the run's own (DEFAULT_SPLIT unless set)
    model, search = search_for(model, config.decode, options)
    data_dir = options.data_folder(config.data.data_dir)
    read: dict[str, object] = {}
    if split == "validation":
        # The pairs this run held out of its training split, carved again the same way.
        files = validation_files(config.data, data_dir)
        check_held_out_unchanged(resolve_checkpoint(checkpoint), files, "--split test")
        pairs = load_validation_pairs(config.data, data_dir)
        read = {"the file the validation pairs are read from": files}
    else:
        # The test files are clean; an error here means a damaged file, which should be seen.
        corpus = load_couplets(split, data_dir, skip_option=None)  # evaluate has no option to skip
        _check_not_trained_on(split, corpus.upper_path, config.data)
        pairs = corpus.pairs
        read = {
            f"the {split} split's upper lines": corpus.upper_path,
            f"the {split} split's lower lines": corpus.lower_path,
        }
    read[TRAINED_ON] = trained_files(config.data, lambda: training_files(config.data))
    constraints = with_constraint_options(config.constraints, options.task_options, config.decode)
    # Rules other than the checkpoint's are a search of their own: its files and card row sit beside the default's.
    changed = json.dumps(dataclasses.asdict(constraints), sort_keys=True).encode("utf-8")
    rules = "" if constraints == config.constraints else f" rules {hashlib.sha256(changed).hexdigest()[:6]}"
    stem = f"{split}.{search.file_label}{rules.replace(' ', '')}"
    output = options.output_file(checkpoint / f"hypotheses.{stem}.txt", read)
    answers = answer_pairs(model, vocabulary, pairs, search.decode_config, constraints)
    # Scored as written: a line break or tab in an answer is a space, so each pair keeps its line.
    uppers, references = [upper for upper, _ in pairs], [lower for _, lower in pairs]
    hypotheses = [one_line(text) for text in answers]
    report = couplet_report(uppers, hypotheses, references)
    written = options.write_output(output, "".join(line + "\n" for line in hypotheses))
    # Named after a given --output, so that two evaluations writing into one folder with
    # different options (the same split and search) keep their own samples.
    samples = output.with_name(f"{output.stem}.samples.md" if options.output else f"samples.{stem}.md")
    shown = list(zip(uppers, hypotheses, references))[:NUM_SAMPLES]
    samples_written = options.write_output(samples, couplet_samples_table(shown))
    lines = [f"couplet {split}, {len(pairs)} pairs, {search.name}{rules}, constraints {constraints}"]
    lines += report.lines() + line_break_notes(answers, "lower lines")
    lines.append(f"\n{len(shown)} samples (upper | ours | reference):")  # a split may hold fewer than NUM_SAMPLES
    lines += [f"  {upper} | {ours} | {reference}" for upper, ours, reference in shown]
    lines.append(f"hypotheses: {written}\nsamples: {samples_written}")
    return EvaluationReport(
        lines=lines,
        files={"hypotheses": output, "samples": samples},
        checkpoint=resolve_checkpoint(checkpoint),
        name=split,
        search=search.name + rules,
        scores={"bleu": report.bleu.score},
        # A split of the couplet data folder, which the card of a run on one's own files would give those files' name.
        dataset="couplet" if split != "validation" and (config.data.train_files or config.data.prepared_dir) else None,
    )


def _check_not_trained_on(split: str, upper_path: Path, data: CoupletDataConfig) -> None:
    """Refuse a split read from the files the run trained on: a data folder that is itself a split
    folder (``in.txt`` and ``out.txt``) answers every split name with its own pairs."""
    try:
        trained = {path.resolve() for path in training_files(data)}
    except (OSError, ValueError):
        return  # the run's data is no longer where it was: nothing to compare with
    if upper_path.resolve() in trained:
        raise ValueError(
            f"--split {split}: expected pairs the model did not train on, got {upper_path.parent}, the folder it "
            "trained on (a data folder holding in.txt and out.txt is taken as every split); give --data-dir the "
            "folder of the split to score"
        )


def couplet_samples_table(samples: Sequence[tuple[str, str, str]]) -> str:
    """A Markdown table of (upper line, our lower line, the reference) samples, with their scores."""

    def scores(upper: str, lower: str) -> str:
        # Tone opposition / parts of speech / rhythm of one line, as in the report.
        values = pair_scores(upper, lower)
        shown = [values[name] for name in ("tone_opposition", "part_of_speech_agreement", "rhythm_agreement")]
        return " / ".join("-" if value is None else f"{value:.2f}" for value in shown)

    rows = [
        "| upper line (上联) | ours (下联) | tone / POS / rhythm | reference | tone / POS / rhythm |",
        "|---|---|---|---|---|",
    ]
    for upper, ours, reference in samples:
        rows.append(f"| {upper} | {ours} | {scores(upper, ours)} | {reference} | {scores(upper, reference)} |")
    return "\n".join(rows) + "\n"
