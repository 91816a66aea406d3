"""The ONNX export computes our model's function: onnxruntime's greedy tokens are ours, id for id.

The reverse-task model of conftest.py (really trained, so that its outputs depend on the
source, the positions and the cross-attention) is exported once; greedy search through
:mod:`transformer_lab.export.onnx_runtime` (numpy and onnxruntime only) must give our
tokens and scores, and every decoder step's log-probabilities must be ours within 1e-4.
Random-weight translation checkpoints cover the checkpoint path and the other layouts
(pre-norm with gelu, untied); couplet checkpoints the aligned decoder input; a trained
classification checkpoint and hand-built classifiers the classifier graph.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx", reason='onnx is not installed (pip install -e ".[deploy]")')
onnxruntime = pytest.importorskip("onnxruntime", reason='onnxruntime is not installed (pip install -e ".[deploy]")')

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
from transformer_lab.decoding import greedy_search  # noqa: E402
from transformer_lab.export.onnx import export_checkpoint, export_classifier, export_seq2seq  # noqa: E402
from transformer_lab.export.onnx_runtime import OnnxSeq2Seq, greedy_decode, load_classifier, load_seq2seq  # noqa: E402
from transformer_lab.models import Seq2SeqTransformer, TransformerClassifier  # noqa: E402
from transformer_lab.tasks.couplet import train as couplet_train  # noqa: E402
from transformer_lab.tasks.registry import load_trained  # noqa: E402
from transformer_lab.training import apply_overrides  # noqa: E402
from transformer_lab.training.checkpoint import resolve_checkpoint  # noqa: E402

MAX_LEN = 12  # new tokens: the reverse task's sequences have at most 8 symbols plus eos


@pytest.fixture(scope="module")
def reverse(reverse_training: dict) -> dict:
    """The trained reverse-task model (conftest.py) exported to ONNX, and its onnxruntime sessions."""
    out_dir = export_seq2seq(reverse_training["model"], reverse_training["root"] / "onnx", task="translation")
    return {**reverse_training, "out_dir": out_dir, "sessions": load_seq2seq(out_dir)}


def padded(sources: list[list[int]]) -> torch.Tensor:
    """Shape: B lists -> LongTensor[B, S], right-padded with pad as our batches are."""
    width = max(len(source) for source in sources)
    return torch.tensor([source + [PAD_ID] * (width - len(source)) for source in sources], dtype=torch.long)


def assert_greedy_equal(
    model: Seq2SeqTransformer, sessions: OnnxSeq2Seq, src_ids: torch.Tensor, max_len: int
) -> list[list[int]]:
    """onnxruntime's greedy ids are ours, and each sentence's summed log-prob is ours within 1e-4; returns the ids."""
    ours = greedy_search(model, src_ids, max_len)
    theirs = greedy_decode(sessions, src_ids.numpy(), max_len)
    our_ids = [sentence[0].ids for sentence in ours.hypotheses]
    assert [ids for ids, _ in theirs] == our_ids
    for sentence, (_, score) in zip(ours.hypotheses, theirs):
        assert score == pytest.approx(sentence[0].log_prob, abs=1e-4)
    return our_ids


def assert_steps_equal(
    model: Seq2SeqTransformer, sessions: OnnxSeq2Seq, src_ids: torch.Tensor, tgt_ids: torch.Tensor
) -> None:
    """Teacher forcing through both: the memory and every step's log-probs ``[B, V]`` within 1e-4.

    The steps after the first feed two tokens at once, so the graph's causal mask over new
    tokens and its position offset by the cache are held to ours too.
    """
    config = sessions.config
    src = src_ids.numpy()
    memory, *cross = sessions.encoder.run(None, {"src_ids": src, "src_padding_mask": src == PAD_ID})
    with torch.no_grad():
        our_memory = model.encode(src_ids)  # [B, S, D]
    np.testing.assert_allclose(memory, our_memory.numpy(), atol=1e-4)
    static = {"src_padding_mask": src == PAD_ID}
    if config["aligned_decoder_input"]:
        static["memory"] = memory
    layers = config["num_decoder_layers"]
    for index in range(layers):
        static[f"cross_key_{index}"], static[f"cross_value_{index}"] = cross[2 * index], cross[2 * index + 1]
    empty = np.zeros((src.shape[0], config["nhead"], 0, config["head_dim"]), dtype=np.float32)
    past = {f"past_{kind}_{index}": empty for index in range(layers) for kind in ("key", "value")}
    cache = model.new_cache()
    start, length = 0, tgt_ids.shape[1]
    while start < length:
        stop = min(length, start + (1 if start == 0 else 2))
        log_probs, *present = sessions.decoder.run(None, {"tgt_ids": tgt_ids[:, start:stop].numpy(), **static, **past})
        with torch.no_grad():
            ours = torch.log_softmax(model.decode_step(tgt_ids[:, :stop], our_memory, src_ids, cache), dim=-1)  # [B, V]
        np.testing.assert_allclose(log_probs, ours.numpy(), atol=1e-4)
        assert present[0].shape[2] == stop  # the cache grew by the tokens fed
        past = {
            f"past_{kind}_{index}": present[2 * index + offset]
            for index in range(layers)
            for offset, kind in enumerate(("key", "value"))
        }
        start = stop


def test_export_writes_the_graphs_and_config(reverse: dict) -> None:
    out_dir, model = reverse["out_dir"], reverse["model"]
    assert sorted(path.name for path in out_dir.iterdir()) == ["config.json", "decoder.onnx", "encoder.onnx"]
    config = json.loads((out_dir / "config.json").read_text())
    assert (config["pad_id"], config["bos_id"], config["eos_id"]) == (PAD_ID, BOS_ID, EOS_ID)
    assert (config["d_model"], config["nhead"], config["head_dim"]) == (32, 4, 8)
    assert (config["num_encoder_layers"], config["num_decoder_layers"]) == (2, 2)
    assert config["tgt_vocab_size"] == model.tgt_vocab_size and config["max_len"] == model.max_len
    assert config["aligned_decoder_input"] is False
    sessions = reverse["sessions"]
    for graph, session in (("encoder", sessions.encoder), ("decoder", sessions.decoder)):
        assert [node.name for node in session.get_inputs()] == config["graphs"][graph]["inputs"]
        assert [node.name for node in session.get_outputs()] == config["graphs"][graph]["outputs"]
    decoder_inputs = {node.name: node for node in sessions.decoder.get_inputs()}
    assert "memory" not in decoder_inputs  # only the aligned decoder input reads it
    # Batch and lengths are dynamic axes, the heads and sizes fixed.
    assert decoder_inputs["past_key_0"].shape == ["batch", 4, "past_len", 8]
    assert decoder_inputs["cross_value_1"].shape == ["batch", 4, "src_len", 8]
    assert decoder_inputs["tgt_ids"].shape == ["batch", "new_len"]
    # The atomic write leaves no partial folder behind.
    assert [path.name for path in out_dir.parent.iterdir() if "partial" in path.name] == []


def test_greedy_output_equals_ours_token_for_token(reverse: dict) -> None:
    model, sources = reverse["model"], reverse["sources"]
    our_ids = assert_greedy_equal(model, reverse["sessions"], padded(sources), MAX_LEN)
    # The comparison means something only if the outputs do: the model has learnt to
    # reverse (so they follow the source and the positions) and they vary in length.
    reversed_right = sum(ids == target + [EOS_ID] for ids, target in zip(our_ids, reverse["targets"]))
    assert reversed_right >= 8, f"only {reversed_right} of 20 reversed: the model did not learn"
    assert len({len(ids) for ids in our_ids}) >= 3
    # Other batch sizes and lengths through the same graphs (dynamic axes): one sentence alone.
    assert_greedy_equal(model, reverse["sessions"], padded(sources[3:4]), MAX_LEN)


def test_every_step_log_probs_equal_ours(reverse: dict) -> None:
    model, sources, targets = reverse["model"], reverse["sources"][:8], reverse["targets"][:8]
    # A source of padding only: every key hidden, a zero mixture in ours and in the graph, not NaN.
    src_ids = padded([*sources, [PAD_ID] * 3])
    tgt_ids = padded([[BOS_ID] + target for target in [*targets, [4, 5]]])
    assert_steps_equal(model, reverse["sessions"], src_ids, tgt_ids)


def test_a_position_past_the_table_is_an_error(reverse: dict) -> None:
    sessions, positions = reverse["sessions"], reverse["model"].max_len
    config = sessions.config
    src = np.array([[5, 6, 7]])
    _, *cross = sessions.encoder.run(None, {"src_ids": src, "src_padding_mask": src == PAD_ID})
    names = [f"cross_{kind}_{index}" for index in range(2) for kind in ("key", "value")]
    full = np.zeros((1, config["nhead"], positions, config["head_dim"]), dtype=np.float32)
    feeds = {"tgt_ids": np.array([[5]]), "src_padding_mask": src == PAD_ID, **dict(zip(names, cross))}
    feeds.update({f"past_{kind}_{index}": full for index in range(2) for kind in ("key", "value")})
    with pytest.raises(Exception, match="out of data bounds"):
        sessions.decoder.run(["log_probs"], feeds)
    # Our greedy search stops at the table's end, and so does the runtime's loop.
    assert all(len(ids) <= positions for ids, _ in greedy_decode(sessions, src, positions + 5))


@pytest.mark.parametrize("overrides", LAYOUTS, ids=LAYOUT_NAMES)
def test_translation_checkpoint_exports_exactly(tmp_path: Path, overrides: list[str]) -> None:
    checkpoint = write_translation_checkpoint(
        tmp_path / "checkpoint", ["model.d_model=32", "model.nhead=4", *overrides]
    )
    out_dir = export_checkpoint(checkpoint, tmp_path / "onnx")
    trained = load_trained(checkpoint)
    # The checkpoint's tokenizer, unchanged, beside the graphs.
    assert (out_dir / "tokenizer.json").read_text() == (checkpoint / "tokenizer.json").read_text()
    assert json.loads((out_dir / "config.json").read_text())["vocabulary_files"] == ["tokenizer.json"]
    tokenizer = trained.vocabulary.source
    sources = [tokenizer.encode(german) for german, _ in SENTENCES]
    targets = [[BOS_ID] + tokenizer.encode(english) for _, english in SENTENCES]
    sessions = load_seq2seq(out_dir)
    assert_steps_equal(trained.model, sessions, padded(sources), padded(targets))
    assert_greedy_equal(trained.model, sessions, padded(sources), 8)


@pytest.mark.parametrize("max_len", [1, 3, 6])
def test_a_positional_table_shorter_than_the_tracing_examples_exports_exactly(tmp_path: Path, max_len: int) -> None:
    # The graphs are traced on 5 source positions and 3 new after 4 cached: a model of a
    # shorter table is traced on examples that fit it, and computes ours at every length.
    checkpoint = write_translation_checkpoint(
        tmp_path / "checkpoint", ["model.d_model=32", "model.nhead=4", f"model.max_len={max_len}", "decode.max_len=1"]
    )
    trained = load_trained(checkpoint)
    sessions = load_seq2seq(export_checkpoint(checkpoint, tmp_path / "onnx"))
    tokenizer = trained.vocabulary.source
    sources = [tokenizer.encode(german)[: max_len - index % 2 or 1] for index, (german, _) in enumerate(SENTENCES)]
    targets = [([BOS_ID] + tokenizer.encode(english))[:max_len] for _, english in SENTENCES]
    assert_steps_equal(trained.model, sessions, padded(sources), padded(targets))
    assert_greedy_equal(trained.model, sessions, padded(sources), max_len)
    classifier = TransformerClassifier(
        40, 3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32, dropout=0.0, max_len=max_len
    )
    out_dir = export_classifier(classifier.eval(), tmp_path / "classifier", task="classification")
    token_ids = padded([[5, 9, 12, 30, 4, 7][:max_len], [39]])  # [2, min(6, max_len)]
    theirs = load_classifier(out_dir).logits(token_ids.numpy())
    np.testing.assert_allclose(theirs, our_logits(classifier, token_ids), atol=1e-4)


def train_couplet(root: Path, overrides: list[str]) -> Path:
    """Two steps of ``couplet.train`` on made-up couplets; returns the run's ``last/``."""
    data_dir = write_couplet_folder(root / "data", num_train=60, num_test=5)
    run_overrides = [f"data.data_dir={data_dir}", *COUPLET_OVERRIDES, "train.max_steps=2", "data.num_validation=4"]
    couplet_train.train(apply_overrides(couplet_train.default_config(), [*run_overrides, *overrides]), root / "run")
    return root / "run" / "last"


@pytest.mark.parametrize("aligned", [True, False], ids=["aligned-input", "plain-input"])
def test_couplet_checkpoint_exports_exactly(tmp_path: Path, aligned: bool) -> None:
    checkpoint = train_couplet(tmp_path, [] if aligned else ["model.aligned_decoder_input=false"])
    trained = load_trained(checkpoint)
    assert trained.model.aligned_decoder_input is aligned  # the couplet preset has it on
    out_dir = export_checkpoint(checkpoint, tmp_path / "onnx")
    assert (out_dir / "vocabulary.txt").read_text() == (checkpoint / "vocabulary.txt").read_text()
    sessions = load_seq2seq(out_dir)
    assert sessions.config["aligned_decoder_input"] is aligned and sessions.config["task"] == "couplet"
    assert ("memory" in [node.name for node in sessions.decoder.get_inputs()]) is aligned
    vocabulary = trained.vocabulary
    # The first line is longer than the second: the target runs past the second's source,
    # where the aligned input adds nothing.
    upper = [vocabulary.encode(list(line)) for line in ("山水，云天江", "春风花")]
    lower = [[BOS_ID] + vocabulary.encode(list(line)) for line in ("海林，雾地湖", "秋雨草星海")]
    assert_steps_equal(trained.model, sessions, padded(upper), padded(lower))
    assert_greedy_equal(trained.model, sessions, padded(upper), 8)


def our_logits(model: TransformerClassifier, token_ids: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return model(token_ids).numpy()  # [B, C]


def test_classification_checkpoint_exports_exactly(tmp_path: Path) -> None:
    checkpoint = train_classification_checkpoint(tmp_path / "classification")
    trained = load_trained(checkpoint)
    out_dir = export_checkpoint(checkpoint, tmp_path / "onnx")
    assert sorted(path.name for path in out_dir.iterdir()) == ["classifier.onnx", "config.json", "tokenizer.json"]
    classifier = load_classifier(out_dir)
    assert classifier.config["class_names"] == list(trained.config.class_names)
    tokenizer = trained.vocabulary
    texts = ["stocks rallied as markets rose", "the team won the final match", "new chip", "rain"]
    token_ids = padded([tokenizer.encode(text) for text in texts])  # [4, S], three rows padded
    assert int((token_ids == PAD_ID).sum()) > 0
    theirs, ours = classifier.logits(token_ids.numpy()), our_logits(trained.model, token_ids)
    np.testing.assert_allclose(theirs, ours, atol=1e-4)
    assert theirs.argmax(axis=1).tolist() == ours.argmax(axis=1).tolist()


@pytest.mark.parametrize(
    "options",
    [{"pooling": "first", "norm_first": False, "activation": "relu"}, {"pooling": "mean", "norm_first": True}],
    ids=["first-post-norm", "mean-pre-norm"],
)
def test_classifier_layouts_export_exactly(tmp_path: Path, options: dict) -> None:
    model = TransformerClassifier(
        40, 3, d_model=16, nhead=2, num_layers=2, dim_feedforward=32, dropout=0.0, max_len=20, **options
    ).eval()
    out_dir = export_classifier(model, tmp_path / "onnx", class_names=["a", "b", "c"], task="classification")
    token_ids = padded([[5, 9, 12, 30, 4], [7, 8], [39, 4, 4]])  # [3, 5]
    theirs, ours = load_classifier(out_dir).logits(token_ids.numpy()), our_logits(model, token_ids)
    np.testing.assert_allclose(theirs, ours, atol=1e-4)
    assert theirs.argmax(axis=1).tolist() == ours.argmax(axis=1).tolist()


def test_exporting_leaves_the_callers_model_in_its_mode(tmp_path: Path) -> None:
    # The exporter restores the mode of the graph wrapping the model (a new module, in
    # training mode) to the whole tree: an eval model came back with its dropout on.
    seq2seq = Seq2SeqTransformer(30, 30, d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1).eval()
    classifier = TransformerClassifier(30, 2, d_model=16, nhead=2, num_layers=1).eval()
    src_ids = torch.tensor([[5, 6, 7, 8], [9, 10, PAD_ID, PAD_ID]])
    before = greedy_search(seq2seq, src_ids, 6).hypotheses
    export_seq2seq(seq2seq, tmp_path / "seq2seq", task="translation")
    export_classifier(classifier, tmp_path / "classifier", task="classification")
    assert not any(module.training for module in [*seq2seq.modules(), *classifier.modules()])
    assert greedy_search(seq2seq, src_ids, 6).hypotheses == before  # dropout off, as it was
    training = TransformerClassifier(30, 2, d_model=16, nhead=2, num_layers=1).train()
    export_classifier(training, tmp_path / "training", task="classification")
    assert all(module.training for module in training.modules())


def test_other_tasks_are_refused_naming_the_task(reverse: dict, tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match="expected a checkpoint of classification, couplet or translation, got task 'reverse'"
    ):
        export_checkpoint(reverse["run"], tmp_path / "synthetic")
    assert not (tmp_path / "synthetic").exists()


def test_bad_arguments_are_refused_saying_what_was_expected(reverse: dict, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(ValueError, match="out_dir: expected a new folder"):
        export_seq2seq(reverse["model"], tmp_path / "taken", task="translation")
    classifier = TransformerClassifier(20, 2, d_model=16, nhead=2, num_layers=1, dim_feedforward=32)
    with pytest.raises(ValueError, match="model: expected a Seq2SeqTransformer, got TransformerClassifier"):
        export_seq2seq(classifier, tmp_path / "wrong-model", task="translation")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="class_names: expected 2 names .* got 3"):
        export_classifier(classifier, tmp_path / "wrong-names", class_names=["a", "b", "c"], task="classification")
    with pytest.raises(
        ValueError, match="vocabulary_files: expected plain file names other than .* got 'encoder.onnx'"
    ):
        export_seq2seq(reverse["model"], tmp_path / "clash", vocabulary_files={"encoder.onnx": "x"}, task="translation")
    assert not any((tmp_path / name).exists() for name in ("wrong-model", "wrong-names", "clash"))
    export_classifier(classifier, tmp_path / "classifier", task="classification")
    with pytest.raises(
        ValueError,
        match=r"expected an ONNX export of an encoder-decoder \(graphs encoder, decoder\), got format 'onnx', "
        "task 'classification'",
    ):
        load_seq2seq(tmp_path / "classifier")
    with pytest.raises(ValueError, match="max_len: expected an int >= 1, got 0"):
        greedy_decode(reverse["sessions"], np.array([[5, 6]]), 0)


def parse_export(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="transformer-lab")
    export_command.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_the_export_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    arguments = parse_export(
        ["export", "--checkpoint", str(checkpoint), "--format", "onnx", "--out", str(tmp_path / "onnx")]
    )
    assert arguments.handler(arguments) == 0
    printed = capsys.readouterr().out
    assert "exported the translation checkpoint" in printed and "ONNX" in printed
    assert "decoder.onnx" in printed and "encoder.onnx" in printed and "tokenizer.json" in printed
    assert (tmp_path / "onnx" / "decoder.onnx").is_file()
    with pytest.raises(ValueError, match="--out: expected a new folder"):
        arguments.handler(arguments)
    # The export folder given back as a checkpoint is told as what it is, not as a config with unknown keys.
    again = parse_export(
        ["export", "--checkpoint", str(tmp_path / "onnx"), "--format", "onnx", "--out", str(tmp_path / "again")]
    )
    with pytest.raises(ValueError) as exported:
        again.handler(again)
    # Named by the option that gave it (was: "checkpoint ...", as for --init-from too).
    assert str(exported.value).startswith(
        f"--checkpoint {str(tmp_path / 'onnx')!r}: expected a checkpoint folder (model.safetensors and config.json, "
        "as training writes them), got an ONNX export written by `transformer-lab export`"
    )
    with pytest.raises(ValueError, match=r"^--init-from '.*onnx': expected a checkpoint folder"):
        resolve_checkpoint(tmp_path / "onnx", "--init-from")
    quantized = parse_export(
        [
            "export",
            "--checkpoint",
            str(checkpoint),
            "--format",
            "onnx",
            "--out",
            str(tmp_path / "int8"),
            "--quantization",
            "int8",
        ]
    )
    with pytest.raises(
        ValueError, match="--quantization: expected only with --format ctranslate2, got 'int8' with --format onnx"
    ):
        quantized.handler(quantized)
    assert not (tmp_path / "int8").exists()


def test_the_command_without_onnx_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = write_translation_checkpoint(tmp_path / "checkpoint")
    monkeypatch.setitem(sys.modules, "onnx", None)
    assert main(["export", "--checkpoint", str(checkpoint), "--format", "onnx", "--out", str(tmp_path / "onnx")]) == 1
    error = capsys.readouterr().err
    assert (
        error.count("\n") == 1
        and "the onnx package, needed for exporting to ONNX, is not installed" in error
        and 'pip install -e ".[deploy]"' in error
    )
    assert not (tmp_path / "onnx").exists()
