"""``evaluate translation``: sacreBLEU (BLEU with the target language's tokenizer) and chrF++ of a checkpoint.

On a Multi30k split (default test_2016_flickr) or on any ``--source`` / ``--reference``
pair of files; the hypotheses are written beside the checkpoint (named, as the card's scores, by the
split or by the file's name and a digest of its path) or to ``--output``, one per line.
``--bleu-flavour papers`` reports BLEU as the Multi30k papers did (lowercased,
Moses-tokenized; ``evaluation/bleu_flavour.py``) instead of sacreBLEU's cased and
lowercased ``13a`` figures; every BLEU line carries its signature.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from transformer_lab.data import read_multi30k
from transformer_lab.data.multi30k import resolve_multi30k_dir
from transformer_lab.data.parallel_text import read_parallel_text
from transformer_lab.decoding.ensemble import Ensemble
from transformer_lab.evaluation import (
    BLEU_FLAVOURS,
    BleuResult,
    bleu_tokenizer_for,
    check_bleu_flavour,
    check_bleu_tokenizer,
    papers_bleu,
)
from transformer_lab.evaluation.bleu_flavour import PAPERS_FLAVOUR, SACREBLEU_FLAVOUR, check_papers_flavour
from transformer_lab.evaluation.translation_bleu import evaluate_bleu
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks.evaluation import (
    TRAINED_ON,
    EvaluationOptions,
    EvaluationReport,
    TaskOption,
    search_for,
    stream_unrecorded,
    trained_files,
    warn_if_seen,
)
from transformer_lab.tasks.translation.predict import ENSEMBLE
from transformer_lab.tasks.translation.train import load_ensemble, load_translator
from transformer_lab.training.checkpoint import checkpoint_files, resolve_checkpoint
from transformer_lab.training.model_card import file_test_name

DEFAULT_SPLIT = "test_2016_flickr"  # the split `evaluate translation` scores when none is named
# sacreBLEU's tokenizers (ja-mecab and ko-mecab need sacrebleu's extras).
BLEU_TOKENIZERS = ("13a", "intl", "zh", "char", "ja-mecab", "ko-mecab", "flores101", "flores200", "none")
# What `evaluate translation` reads beyond the search settings.
OPTIONS = (
    TaskOption(
        "--source",
        "score the translations of this file's lines (with --reference) instead of a --split",
        Path,
        metavar="FILE",
    ),
    TaskOption("--reference", "the reference of each --source line", Path, metavar="FILE"),
    TaskOption(
        "--bleu-tokenize",
        "sacreBLEU's tokenizer (default: zh for a Chinese target, ja-mecab (else char) for Japanese, 13a otherwise)",
        choices=BLEU_TOKENIZERS,
    ),
    ENSEMBLE,
    TaskOption(
        "--bleu-flavour",
        "which BLEU to report (default: sacrebleu, cased 13a as sacreBLEU scores; papers: lowercased and "
        "Moses-tokenized, as the Multi30k papers report, needs the moses extra)",
        choices=BLEU_FLAVOURS,
    ),
)


def evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    """Translate a split's (or ``--source``'s) sentences and score them against their references."""
    source, reference = options.option("--source"), options.option("--reference")
    if (source is None) != (reference is None):
        given, missing = ("--source", "--reference") if reference is None else ("--reference", "--source")
        raise ValueError(
            f"--source and --reference: expected both (the sentences and their references), got {given} "
            f"without {missing}"
        )
    if source is not None and split is not None:
        raise ValueError("--split and --source: expected one test set, got both")
    if source is not None and options.data_dir is not None:
        raise ValueError(
            "--data-dir: expected it only with --split (--source and --reference name the files), got it too"
        )
    flavour = check_bleu_flavour(options.option("--bleu-flavour") or SACREBLEU_FLAVOUR)
    if flavour == PAPERS_FLAVOUR and options.option("--bleu-tokenize") is not None:
        raise ValueError(
            "--bleu-tokenize and --bleu-flavour papers: expected one way to find the words "
            "(the papers flavour tokenizes as Moses does), got both"
        )
    if options.option("--bleu-tokenize") is not None:  # before the test set is translated, not after
        check_bleu_tokenizer(options.option("--bleu-tokenize"), "--bleu-tokenize")
    split = split or DEFAULT_SPLIT
    checkpoint = resolve_checkpoint(checkpoint)
    single, tokenizer, config = load_translator(checkpoint)
    members = options.option(ENSEMBLE.flag) or []
    model: Seq2SeqTransformer | Ensemble = single
    if members:
        model = load_ensemble(single, tokenizer, config, members, ENSEMBLE.flag)
    if flavour == PAPERS_FLAVOUR:
        check_papers_flavour(config.data.target_language)  # before the decoding, not after it
    model, search = search_for(model, config.decode, options)
    # The split's files and the members' (the options' files, --checkpoint's, are checked by the registry).
    read: dict[str, object] = {
        f"the {ENSEMBLE.flag} {member} checkpoint's file": list(checkpoint_files(member).values()) for member in members
    }
    languages = (config.data.source_language, config.data.target_language)

    def multi30k_training() -> list[Path]:
        folder = resolve_multi30k_dir(config.data.data_dir)
        return [folder / f"train.{language}" for language in languages]

    seen = read[TRAINED_ON] = trained_files(config.data, multi30k_training)
    if source is not None:
        warn_if_seen("--source", [source], seen)
        # Strict, as every reader: misaligned files, empty lines and bad UTF-8 name file and line.
        pairs = read_parallel_text(source, reference, skip_option=None).pairs  # evaluate has no option to skip
        source_path = Path(source)
        # Its name and place: a file named like a split keeps its own hypotheses and card row.
        name, shown = file_test_name(source), str(source)
        dataset: str | None = Path(source).name  # the card row's dataset: the file scored
    else:
        data_dir = options.data_folder(config.data.data_dir)
        text = read_multi30k(split, data_dir, *languages, skip_option=None)  # evaluate has no option to skip
        pairs, source_path = text.pairs, text.source_path
        read |= {f"the {split} split's sources": text.source_path, f"the {split} split's references": text.target_path}
        name = shown = split
        # Multi30k's split, which the card of a run on files of one's own would give those files' name.
        dataset = "multi30k" if config.data.train_files or config.data.prepared_dir else None
    # An ensemble's outputs and scores are not the checkpoint's own: named apart, kept off its card.
    search_name = search.name + (f", ensemble of {len(members) + 1}" if members else "")
    label = search.file_label + (f"ensemble{len(members) + 1}.{_members_digest(members)}" if members else "")
    output = options.output_file(checkpoint / f"hypotheses.{name}.{label}.txt", read)
    default_tokenize = bleu_tokenizer_for(config.data.target_language)
    tokenize = options.option("--bleu-tokenize") or default_tokenize
    # Pair i is line i + 1 of the source file (no line is skipped): a sentence too long is named by both.
    names = [f"{source_path}: line {number}" for number in range(1, len(pairs) + 1)]
    report = evaluate_bleu(model, tokenizer, pairs, search.decode_config, tokenize, names=names)
    written = options.write_output(output, "".join(line + "\n" for line in report.hypotheses))
    bleu: dict[str, BleuResult]
    labels = {"bleu_papers": "BLEU (papers)"}
    if flavour == PAPERS_FLAVOUR:
        references = [target for _, target in pairs]
        bleu = {"bleu_papers": papers_bleu(report.hypotheses, references, config.data.target_language)}
    else:
        # Another tokenizer's BLEU is another figure: the card keeps it under its own name
        # (bleu_char), beside the default tokenizer's, not in its place.
        suffix = "" if tokenize == default_tokenize else "_" + tokenize.replace("-", "_")
        bleu = {f"bleu{suffix}": report.cased, f"bleu_lowercased{suffix}": report.lowercased}
        labels.update({f"bleu{suffix}": "BLEU (cased)", f"bleu_lowercased{suffix}": "BLEU (lowercased)"})
    return EvaluationReport(
        lines=[
            f"{shown}, {len(pairs)} sentences, {search_name}",
            *(f"{labels[key]:17} {result.score:.2f}  {result.signature}" for key, result in bleu.items()),
            f"chrF++            {report.chrf.score:.2f}  {report.chrf.signature}",
            f"hypotheses: {written}",
            *report.notes,
        ],
        files={"hypotheses": output},
        checkpoint=checkpoint,
        name=name,
        search=search_name,
        scores={**{key: result.score for key, result in bleu.items()}, "chrf": report.chrf.score},
        dataset=dataset,
        unrecorded=f"{search_name}: the scores are not the checkpoint's own"
        if members
        else stream_unrecorded(name, source),
    )


def _members_digest(members: Sequence[str | os.PathLike[str]]) -> str:
    """8 hex digits of the members' resolved folders: another ensemble of as many writes its own file."""
    folders = "\n".join(str(resolve_checkpoint(member).resolve()) for member in members)
    return hashlib.sha256(os.fsencode(folders)).hexdigest()[:8]
