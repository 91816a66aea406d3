"""``evaluate translation``: sacreBLEU (BLEU with the target language's tokenizer) and chrF++ of a checkpoint.

On a Multi30k split (default test_2016_flickr) or on any ``--source`` / ``--reference``
pair of files; the hypotheses are written beside the checkpoint (or to ``--output``).
"""

from __future__ import annotations

from pathlib import Path

from transformer_lab.data import load_multi30k
from transformer_lab.data.parallel_text import read_parallel_text
from transformer_lab.evaluation import bleu_tokenizer_for
from transformer_lab.tasks import translation
from transformer_lab.tasks.evaluation import EvaluationOptions, EvaluationReport, search_for
from transformer_lab.training.checkpoint import resolve_checkpoint


def evaluate(checkpoint: Path, split: str | None, options: EvaluationOptions) -> EvaluationReport:
    """Translate a split's (or ``--source``'s) sentences and score them against their references."""
    source, reference = options.option("--source"), options.option("--reference")
    if (source is None) != (reference is None):
        raise ValueError("--source and --reference: expected both (the sentences and their references), got one")
    if source is not None and split is not None:
        raise ValueError("--split and --source: expected one test set, got both")
    split = split or str(translation.TASK.evaluation_split)
    checkpoint = resolve_checkpoint(checkpoint)
    model, tokenizer, config = translation.load_translator(checkpoint)
    model, search = search_for(model, config.decode, options)
    if source is not None:
        # Strict, as every reader: misaligned files, empty lines and bad UTF-8 name file and line.
        pairs = read_parallel_text(source, reference).pairs
        name = Path(source).name
    else:
        data_dir = options.data_dir if options.data_dir is not None else config.data.data_dir
        pairs = load_multi30k(
            split, data_dir, source_language=config.data.source_language, target_language=config.data.target_language
        )
        name = split
    tokenize = options.option("--bleu-tokenize") or bleu_tokenizer_for(config.data.target_language)
    report = translation.evaluate_bleu(model, tokenizer, pairs, search.decode_config, tokenize)
    output = options.output or checkpoint / f"hypotheses.{name}.{search.name.replace(' ', '')}.txt"
    output.write_text("".join(line + "\n" for line in report.hypotheses), encoding="utf-8")
    return EvaluationReport(
        lines=[
            f"{name}, {len(pairs)} sentences, {search.name}",
            f"BLEU (cased)      {report.cased.score:.2f}  {report.cased.signature}",
            f"BLEU (lowercased) {report.lowercased.score:.2f}  {report.lowercased.signature}",
            f"chrF++            {report.chrf.score:.2f}  {report.chrf.signature}",
            f"hypotheses: {output}",
        ],
        files={"hypotheses": output},
        checkpoint=checkpoint,
        name=name,
        search=search.name,
        scores={"bleu": report.cased.score, "bleu_lowercased": report.lowercased.score, "chrf": report.chrf.score},
    )
