"""Run an exported ONNX folder with numpy and onnxruntime alone: greedy search and classification.

This module imports neither torch nor the rest of this package, so it can be copied
beside an exported folder onto a machine that has only ``numpy`` and ``onnxruntime``.
The greedy search is ours (:func:`transformer_lab.decoding.greedy_search`) step for
step: the encoder runs once, then the decoder once per token with the key/value cache
fed back; a row that has emitted eos keeps emitting pad (adding nothing to its score),
and the loop stops when every row has finished or after ``max_len`` tokens (at most
the positional table's ``max_len``). The exported graphs are described in
:mod:`transformer_lab.export.onnx`.

Shape legend: B batch, S source length, H heads, Dh head size, V vocabulary, C classes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from transformer_lab.extras import require_extra

__all__ = ["OnnxClassifier", "OnnxSeq2Seq", "greedy_decode", "load_classifier", "load_seq2seq"]


def _session(path: Path, threads: int) -> Any:
    onnxruntime = require_extra("onnxruntime", "running an ONNX export")
    if not path.is_file():
        raise FileNotFoundError(f"path: expected an exported graph, got {str(path)!r} which does not exist")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _read_config(folder: Path, graphs: tuple[str, ...], kind: str) -> dict[str, Any]:
    """The export's config.json, refused unless it is an ONNX export holding ``graphs`` (``kind`` names them)."""
    path = folder / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"folder: expected an ONNX export with config.json, got {str(folder)!r} without it")
    config = json.loads(path.read_text(encoding="utf-8"))
    held = config.get("graphs") if isinstance(config.get("graphs"), dict) else {}
    if config.get("format") != "onnx" or any(graph not in held for graph in graphs):
        raise ValueError(
            f"{path}: expected an ONNX export of {kind} (graphs {', '.join(graphs)}), "
            f"got format {config.get('format')!r}, task {config.get('task')!r}"
        )
    return config


@dataclass(frozen=True)
class OnnxSeq2Seq:
    """The two sessions of an exported encoder-decoder and its ``config.json``."""

    encoder: Any  # onnxruntime.InferenceSession of encoder.onnx
    decoder: Any  # onnxruntime.InferenceSession of decoder.onnx
    config: dict[str, Any]


@dataclass(frozen=True)
class OnnxClassifier:
    """The session of an exported classifier and its ``config.json``."""

    session: Any  # onnxruntime.InferenceSession of classifier.onnx
    config: dict[str, Any]

    def logits(self, token_ids: np.ndarray) -> np.ndarray:
        """Class logits of a right-padded batch; the padding mask is derived from ``pad_id`` as our model does.

        Shape: token_ids int ``[B, S]`` -> ``[B, C]`` float32.
        """
        token_ids = _check_ids(token_ids, "token_ids")
        padding_mask = token_ids == self.config["pad_id"]  # [B, S]
        return self.session.run(["logits"], {"token_ids": token_ids, "padding_mask": padding_mask})[0]


def load_seq2seq(folder: str | os.PathLike[str], threads: int = 1) -> OnnxSeq2Seq:
    """Open an exported translation or couplet folder with ``threads`` threads per graph."""
    folder = Path(folder)
    config = _read_config(folder, ("encoder", "decoder"), "an encoder-decoder")
    graphs = config["graphs"]
    return OnnxSeq2Seq(
        encoder=_session(folder / graphs["encoder"]["file"], threads),
        decoder=_session(folder / graphs["decoder"]["file"], threads),
        config=config,
    )


def load_classifier(folder: str | os.PathLike[str], threads: int = 1) -> OnnxClassifier:
    """Open an exported classification folder with ``threads`` threads."""
    folder = Path(folder)
    config = _read_config(folder, ("classifier",), "a classifier")
    return OnnxClassifier(session=_session(folder / config["graphs"]["classifier"]["file"], threads), config=config)


def greedy_decode(model: OnnxSeq2Seq, src_ids: np.ndarray, max_len: int) -> list[tuple[list[int], float]]:
    """Each source's greedy output ids (its eos included when reached) and their summed log-probability.

    ``src_ids`` is a right-padded batch (pad = ``config["pad_id"]``), as our batches are.

    Shape: src_ids int ``[B, S]`` -> B pairs (ids of length <= max_len, float).
    """
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len: expected an int >= 1, got {max_len!r}")
    src_ids = _check_ids(src_ids, "src_ids")
    config = model.config
    pad_id, bos_id, eos_id = config["pad_id"], config["bos_id"], config["eos_id"]
    # As our searches: the last token is chosen at position max_len - 1 and never fed back.
    max_len = min(max_len, config["max_len"])
    batch_size = src_ids.shape[0]
    layers = config["num_decoder_layers"]
    src_padding_mask = src_ids == pad_id  # [B, S]
    memory, *cross = model.encoder.run(None, {"src_ids": src_ids, "src_padding_mask": src_padding_mask})
    static: dict[str, np.ndarray] = {"src_padding_mask": src_padding_mask}
    if config["aligned_decoder_input"]:
        static["memory"] = memory  # [B, S, D]
    for index in range(layers):
        static[f"cross_key_{index}"], static[f"cross_value_{index}"] = cross[2 * index], cross[2 * index + 1]
    empty = np.zeros((batch_size, config["nhead"], 0, config["head_dim"]), dtype=np.float32)  # [B, H, 0, Dh]
    past = {name: empty for index in range(layers) for name in (f"past_key_{index}", f"past_value_{index}")}

    next_ids = np.full(batch_size, bos_id, dtype=np.int64)  # [B]
    outputs: list[list[int]] = [[] for _ in range(batch_size)]
    scores = np.zeros(batch_size, dtype=np.float64)  # [B]
    finished = np.zeros(batch_size, dtype=bool)  # [B]
    for _ in range(max_len):
        log_probs, *present = model.decoder.run(None, {"tgt_ids": next_ids[:, None], **static, **past})  # [B, V], ...
        chosen = log_probs.argmax(axis=-1)  # [B]
        chosen_log_probs = np.take_along_axis(log_probs, chosen[:, None], axis=1)[:, 0]  # [B]
        # Finished rows still run (this reference loop keeps the batch whole; our own
        # greedy_search drops them); their choice becomes pad, not written out, adding nothing.
        for row in np.flatnonzero(~finished):
            outputs[row].append(int(chosen[row]))
            scores[row] += float(chosen_log_probs[row])
        next_ids = np.where(finished, pad_id, chosen).astype(np.int64)  # [B]
        finished |= next_ids == eos_id
        if finished.all():
            break
        past = {
            name: present[2 * index + offset]
            for index in range(layers)
            for offset, name in enumerate((f"past_key_{index}", f"past_value_{index}"))
        }
    return [(ids, float(score)) for ids, score in zip(outputs, scores)]


def _check_ids(token_ids: Any, name: str) -> np.ndarray:
    array = np.asarray(token_ids)
    if array.ndim != 2 or array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(
            f"{name}: expected a non-empty integer array [batch, length], got {array.dtype} of shape {array.shape}"
        )
    return array.astype(np.int64, copy=False)
