"""The CTranslate2 export computes our model's function: same greedy and beam outputs, id for id.

A small model is really trained (the reverse task, 300 steps, about 10 s on one thread; the
fixture in conftest.py, shared with the ONNX tests) so that its outputs depend on the
source, the positions and the cross-attention; an exporter
that got any of them wrong (the position table, the final norms, the fused projections)
changes them. Random-weight translation checkpoints with a real BPE tokenizer cover the
checkpoint path, the tokenizer's token strings and the other layouts (pre-norm, gelu,
untied), by the teacher-forced log-probabilities CTranslate2's ``score_batch`` gives.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
import torch

ctranslate2 = pytest.importorskip("ctranslate2", reason='ctranslate2 is not installed (pip install -e ".[deploy]")')

from tests.export.layouts import LAYOUT_NAMES, LAYOUTS  # noqa: E402
from tests.reliability.builders import (  # noqa: E402
    SENTENCES,
    train_classification_checkpoint,
    write_translation_checkpoint,
)
from tests.tasks.couplet_fixture import TINY_OVERRIDES as COUPLET_OVERRIDES  # noqa: E402
from tests.tasks.couplet_fixture import write_couplet_folder  # noqa: E402
from transformer_lab.cli import export_command, main  # noqa: E402
from transformer_lab.data import BOS_ID, EOS_ID, PAD_ID  # noqa: E402
from transformer_lab.decoding import beam_search, greedy_search  # noqa: E402
from transformer_lab.export import export_checkpoint, export_model  # noqa: E402
from transformer_lab.models import Seq2SeqTransformer  # noqa: E402
from transformer_lab.tasks.couplet import train as couplet_train  # noqa: E402
from transformer_lab.tasks.registry import load_trained  # noqa: E402
from transformer_lab.training import apply_overrides  # noqa: E402

MAX_LEN = 12  # new tokens: the reverse task's sequences have at most 8 symbols plus eos
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]


@pytest.fixture(scope="module")
def reverse(reverse_training: dict) -> dict:
    """The trained reverse-task model (tests/export/conftest.py) exported to CTranslate2, with its translator."""
    root, model = reverse_training["root"], reverse_training["model"]
    sources, targets = reverse_training["sources"], reverse_training["targets"]
    # Separate strings per side, so the export writes a source and a target vocabulary.
    vocab_size = model.src_vocab_size
    source_tokens = SPECIALS + [f"s{symbol}" for symbol in range(4, vocab_size)]
    target_tokens = SPECIALS + [f"t{symbol}" for symbol in range(4, vocab_size)]
    out_dir = export_model(model, source_tokens, target_tokens, root / "ct2")
    return {
        "model": model,
        "run": reverse_training["run"],
        "sources": sources,
        "targets": targets,
        "source_tokens": source_tokens,
        "target_tokens": target_tokens,
        "out_dir": out_dir,
        "translator": ctranslate2.Translator(str(out_dir), device="cpu", intra_threads=1),
    }


def padded(sources: list[list[int]]) -> torch.Tensor:
    """Shape: B lists -> LongTensor[B, S], right-padded with pad as our batches are."""
    width = max(len(source) for source in sources)
    return torch.tensor([source + [PAD_ID] * (width - len(source)) for source in sources], dtype=torch.long)


def ct2_decode(
    translator, sources, source_tokens, target_tokens, beam_size: int, max_len: int
) -> list[tuple[list[int], float]]:
    """CTranslate2's best hypothesis of each source, as our ids (eos included when reached) and its log-prob."""
    ids_of = {token: token_id for token_id, token in enumerate(target_tokens)}
    results = translator.translate_batch(
        [[source_tokens[token_id] for token_id in source] for source in sources],
        beam_size=beam_size,
        length_penalty=0.0,  # rank by raw log-prob, as ours with length_penalty=0
        max_decoding_length=max_len,
        min_decoding_length=0,  # its default 1 would forbid eos at the first step; ours does not
        return_end_token=True,
        return_scores=True,
    )
    return [([ids_of[token] for token in result.hypotheses[0]], result.scores[0]) for result in results]


def test_export_writes_the_model_directory(reverse: dict) -> None:
    out_dir = reverse["out_dir"]
    assert sorted(path.name for path in out_dir.iterdir()) == [
        "config.json",
        "model.bin",
        "source_vocabulary.json",
        "target_vocabulary.json",
    ]
    config = json.loads((out_dir / "config.json").read_text())
    assert (config["bos_token"], config["eos_token"], config["unk_token"]) == ("<bos>", "<eos>", "<unk>")
    assert config["decoder_start_token"] == "<bos>"
    assert not config["add_source_bos"] and not config["add_source_eos"]
    assert json.loads((out_dir / "source_vocabulary.json").read_text()) == reverse["source_tokens"]
    assert json.loads((out_dir / "target_vocabulary.json").read_text()) == reverse["target_tokens"]
    # The atomic write leaves no partial folder behind.
    assert [path.name for path in out_dir.parent.iterdir() if "partial" in path.name] == []


def test_greedy_output_equals_ours_token_for_token(reverse: dict) -> None:
    model, sources = reverse["model"], reverse["sources"]
    ours = greedy_search(model, padded(sources), MAX_LEN)
    theirs = ct2_decode(reverse["translator"], sources, reverse["source_tokens"], reverse["target_tokens"], 1, MAX_LEN)
    our_ids = [sentence[0].ids for sentence in ours.hypotheses]
    assert [ids for ids, _ in theirs] == our_ids
    for sentence, (_, score) in zip(ours.hypotheses, theirs):
        assert score == pytest.approx(sentence[0].log_prob, abs=1e-3, rel=1e-4)
    # The comparison means something only if the outputs do: the model has learnt to
    # reverse (so they follow the source and the positions) and they vary in length.
    reversed_right = sum(ids == target + [EOS_ID] for ids, target in zip(our_ids, reverse["targets"]))
    assert reversed_right >= 8, f"only {reversed_right} of 20 reversed: the model did not learn"
    assert len({len(ids) for ids in our_ids}) >= 3


def test_beam_output_equals_ours(reverse: dict) -> None:
    model, sources = reverse["model"], reverse["sources"]
    ours = beam_search(model, padded(sources), 4, MAX_LEN, length_penalty=0.0)
    theirs = ct2_decode(reverse["translator"], sources, reverse["source_tokens"], reverse["target_tokens"], 4, MAX_LEN)
    assert [ids for ids, _ in theirs] == [sentence[0].ids for sentence in ours.hypotheses]
    for sentence, (_, score) in zip(ours.hypotheses, theirs):
        assert score == pytest.approx(sentence[0].log_prob, abs=1e-3, rel=1e-4)


def teacher_forced_log_probs(model: Seq2SeqTransformer, source: list[int], target: list[int]) -> list[float]:
    """Our log-prob of each token of ``target`` and then eos, given bos and the tokens before it."""
    target_in = torch.tensor([[BOS_ID] + target])  # [1, T]
    with torch.no_grad():
        log_probs = torch.log_softmax(model(torch.tensor([source]), target_in), dim=-1)[0]  # [T, V]
    return log_probs.gather(1, torch.tensor(target + [EOS_ID]).unsqueeze(1)).squeeze(1).tolist()


def assert_scores_match(translator, model, sources, targets, source_tokens, target_tokens) -> None:
    results = translator.score_batch(
        [[source_tokens[token_id] for token_id in source] for source in sources],
        [[target_tokens[token_id] for token_id in target] for target in targets],
    )
    for source, target, result in zip(sources, targets, results):
        assert result.log_probs == pytest.approx(teacher_forced_log_probs(model, source, target), abs=1e-4)


def test_teacher_forced_log_probs_equal_ours(reverse: dict) -> None:
    assert_scores_match(
        reverse["translator"],
        reverse["model"],
        reverse["sources"],
        reverse["targets"],
        reverse["source_tokens"],
        reverse["target_tokens"],
    )


@pytest.mark.parametrize("overrides", LAYOUTS, ids=LAYOUT_NAMES)
def test_translation_checkpoint_exports_exactly(tmp_path: Path, overrides: list[str]) -> None:
    checkpoint = write_translation_checkpoint(
        tmp_path / "checkpoint", ["model.d_model=32", "model.nhead=4", *overrides]
    )
    out_dir = export_checkpoint(checkpoint, tmp_path / "ct2")
    trained = load_trained(checkpoint)
    model, tokenizer = trained.model, trained.vocabulary.source
    tokens = [tokenizer.id_to_token(token_id) for token_id in range(tokenizer.vocab_size)]
    # One joint BPE: one shared vocabulary, the tokenizer's own strings in id order.
    assert json.loads((out_dir / "shared_vocabulary.json").read_text()) == tokens
    sources = [tokenizer.encode(german) for german, _ in SENTENCES]
    targets = [tokenizer.encode(english) for _, english in SENTENCES]
    translator = ctranslate2.Translator(str(out_dir), device="cpu", intra_threads=1)
    assert_scores_match(translator, model, sources, targets, tokens, tokens)
    ours = greedy_search(model, padded(sources), 8)
    assert [ids for ids, _ in ct2_decode(translator, sources, tokens, tokens, 1, 8)] == [
        sentence[0].ids for sentence in ours.hypotheses
    ]


def train_couplet(root: Path, overrides: list[str]) -> Path:
    """Two steps of ``couplet.train`` on made-up couplets; returns the run's ``last/``."""
    data_dir = write_couplet_folder(root / "data", num_train=60, num_test=5)
    run_overrides = [f"data.data_dir={data_dir}", *COUPLET_OVERRIDES, "train.max_steps=2", "data.num_validation=4"]
    couplet_train.train(apply_overrides(couplet_train.default_config(), [*run_overrides, *overrides]), root / "run")
    return root / "run" / "last"


def test_couplet_without_aligned_input_exports_with_its_characters(tmp_path: Path) -> None:
    checkpoint = train_couplet(tmp_path, ["model.aligned_decoder_input=false"])
    out_dir = export_checkpoint(checkpoint, tmp_path / "ct2")
    trained = load_trained(checkpoint)
    tokens = trained.vocabulary.tokens
    assert json.loads((out_dir / "shared_vocabulary.json").read_text()) == tokens
    upper = [trained.vocabulary.encode(list(line)) for line in ("春风花月", "山水，云天江")]
    translator = ctranslate2.Translator(str(out_dir), device="cpu", intra_threads=1)
    assert_scores_match(translator, trained.model, upper, upper, tokens, tokens)


def test_couplet_with_aligned_input_is_refused_saying_why(tmp_path: Path) -> None:
    checkpoint = train_couplet(tmp_path, [])
    assert load_trained(checkpoint).model.aligned_decoder_input  # the couplet preset
    with pytest.raises(ValueError, match="aligned_decoder_input=True adds the encoder's output .* cannot express"):
        export_checkpoint(checkpoint, tmp_path / "ct2")
    assert not (tmp_path / "ct2").exists()


def test_other_tasks_are_refused_naming_the_task(
    reverse: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match="expected a checkpoint of couplet or translation, got task 'reverse'"):
        export_checkpoint(reverse["run"], tmp_path / "synthetic")
    classification = train_classification_checkpoint(tmp_path / "classification")
    with pytest.raises(ValueError, match="got task 'classification'"):
        export_checkpoint(classification, tmp_path / "classification-ct2")
    # The command says which option asked: the format's tasks, before its engine is imported.
    command = ["export", "--checkpoint", str(classification), "--format", "ctranslate2", "--out", str(tmp_path / "o")]
    assert main(command) == 2
    assert capsys.readouterr().err.strip() == (
        "transformer-lab export: error: --format ctranslate2: expected a checkpoint of a task it exports "
        f"(couplet or translation), got the classification checkpoint {classification}"
    )
    assert not (tmp_path / "o").exists()


def test_an_existing_out_dir_is_refused(reverse: dict, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(ValueError, match="out_dir: expected a new folder"):
        export_model(reverse["model"], reverse["source_tokens"], reverse["target_tokens"], tmp_path / "taken")


def test_a_vocabulary_that_repeats_a_string_is_refused(reverse: dict, tmp_path: Path) -> None:
    tokens = list(reverse["source_tokens"])
    tokens[5] = tokens[4]
    with pytest.raises(ValueError, match="expected one id per token string, got 's4' at ids 4 and 5"):
        export_model(reverse["model"], tokens, reverse["target_tokens"], tmp_path / "ct2")


def parse_export(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="transformer-lab")
    export_command.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_the_export_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    arguments = parse_export(
        ["export", "--checkpoint", str(checkpoint), "--format", "ctranslate2", "--out", str(tmp_path / "ct2")]
    )
    assert arguments.handler(arguments) == 0
    printed = capsys.readouterr().out
    assert "exported the translation checkpoint" in printed and "model.bin" in printed
    assert (tmp_path / "ct2" / "model.bin").is_file()
    with pytest.raises(ValueError, match="--out: expected a new folder"):
        arguments.handler(arguments)
    # The export folder given back as a checkpoint is told as what it is, not as a checkpoint of no task.
    again = parse_export(
        ["export", "--checkpoint", str(tmp_path / "ct2"), "--format", "onnx", "--out", str(tmp_path / "again")]
    )
    with pytest.raises(ValueError, match=r"expected a checkpoint folder .*, got a CTranslate2 export written by"):
        again.handler(again)


def test_int8_export_loads_and_mostly_agrees(reverse: dict, tmp_path: Path) -> None:
    """int8 weights are an approximation: they must load and decode, not match exactly."""
    out_dir = export_model(
        reverse["model"], reverse["source_tokens"], reverse["target_tokens"], tmp_path / "int8", quantization="int8"
    )
    translator = ctranslate2.Translator(str(out_dir), device="cpu", intra_threads=1, compute_type="int8")
    sources = reverse["sources"]
    theirs = ct2_decode(translator, sources, reverse["source_tokens"], reverse["target_tokens"], 1, MAX_LEN)
    ours = greedy_search(reverse["model"], padded(sources), MAX_LEN)
    agree = sum(ids == sentence[0].ids for (ids, _), sentence in zip(theirs, ours.hypotheses))
    assert agree >= len(sources) // 2
    assert all(math.isfinite(score) for _, score in theirs)
