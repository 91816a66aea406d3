"""Write a trained model as ONNX graphs for onnxruntime (``transformer-lab export --format onnx``).

An encoder-decoder becomes two graphs, as Hugging Face's optimum
exports its encoder-decoders: the encoder runs once per batch, the decoder once per
generated token with the key/value cache passed in and out, so that a step costs one
position's work as in our own :mod:`transformer_lab.decoding`. A classifier becomes one
graph. Beside the graphs: the files of the task's vocabulary, as its checkpoints hold them, and
``config.json`` (the special ids, the sizes, every graph's input and output names).

``encoder.onnx``
    inputs ``src_ids`` int64 ``[B, S]`` and ``src_padding_mask`` bool ``[B, S]`` (True =
    padding, the PyTorch polarity used everywhere in this project; our model derives it
    as ``src_ids == pad_id``, and so should a caller); outputs ``memory`` ``[B, S, D]``
    and, for every decoder layer ``i``, its cross-attention keys and values
    ``cross_key_i`` / ``cross_value_i`` ``[B, H, S, Dh]``. They depend on the source only,
    so they are projected here once instead of at every decoder step (what our
    ``DecoderCache`` keeps as its static part).
``decoder.onnx``
    one step: inputs ``tgt_ids`` int64 ``[B, T]`` (the tokens not yet cached: ``<bos>``
    at the first step, then the last chosen token; several at once are decoded
    causally), ``src_padding_mask``, ``memory`` (only for a model with
    ``aligned_decoder_input``), ``cross_key_i`` / ``cross_value_i`` from the encoder and
    ``past_key_i`` / ``past_value_i`` ``[B, H, P, Dh]`` (P = 0 at the first step: arrays
    with an empty third axis); outputs ``log_probs`` float32 ``[B, V]`` (the next token's,
    after the last of ``tgt_ids``) and ``present_key_i`` / ``present_value_i``
    ``[B, H, P + T, Dh]``, the next step's ``past_*``. The new tokens take positions
    ``P .. P+T-1``; positions past the table (``max_len``) are an onnxruntime error.
``classifier.onnx``
    inputs ``token_ids`` int64 ``[B, S]`` and ``padding_mask`` bool ``[B, S]``; output
    ``logits`` ``[B, C]``. A row of padding only has no mean (NaN): our model refuses it
    with a ValueError, a graph cannot, so do not send one.

Batch, source, target and past lengths are dynamic axes. The graphs are float32 and
compute our model's function (the tests hold greedy outputs equal token for token and
log-probabilities within 1e-4) with the modules' own pieces: each layer's residual wiring
(:func:`~transformer_lab.nn.residual.residual_sublayers`, shared with the layers and with
the single-position :class:`~transformer_lab.nn.decoder_step.DecoderStep`), the attention's
projections and head split (:class:`~transformer_lab.nn.MultiheadAttention`), its explicit
path (:func:`~transformer_lab.nn.attention.explicit_attention`) and the mask helpers. What
is the graphs' own is only how state comes in and goes out: the past keys and values as
inputs, concatenated with the new ones, rather than ``DecoderCache``, whose buffers grow in
place and whose input checks (``int(ids.max())``, ``hidden_rows.any()``) a tracer would
freeze into constants for the example batch. ``DecoderStep`` itself is not traced: it takes
one new position after a filled cache and leaves a source of padding only to the modules,
while the decoder graph takes several new tokens, the first step included, and gives such
a source a zero mixture, as :mod:`transformer_lab.nn.attention` does, never NaN.

The exporter is torch's TorchScript-based one (``torch.onnx.export(..., dynamo=False)``):
it traces this code's dynamic shapes (the cache's growing axis, the positions offset by
it) from ``dynamic_axes``, needs no package beyond ``onnx`` (for the checker), and writes
both graphs of the tests' reverse-task model in 0.5 s (2 s for the first export of a
process). The ``torch.export``-based exporter (``dynamo=True``, torch's default since 2.9)
exports the same modules too, with the same tokens, but it needs ``onnxscript``,
``dynamic_shapes`` instead of ``dynamic_axes`` (it cannot convert them for the decoder's
``*state`` inputs), and took 40-70 s per graph of a d_model=16 model on one core (torch
2.13). torch calls the TorchScript exporter deprecated; :func:`export_graph` silences that
warning, and is the one place to change when a torch drops it.

``onnx`` and ``onnxruntime`` are optional dependencies (``pip install -e ".[deploy]"``
in a clone); ``onnx`` is imported only when a model is exported.
:mod:`transformer_lab.export.onnx_runtime` runs the exported folder with numpy and
onnxruntime alone (greedy search).

Shape legend: B batch, S source length, T new target tokens, P cached target positions,
D d_model, H heads, Dh head size, V target vocabulary, C classes.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from transformer_lab.data.vocabulary import UNK_ID
from transformer_lab.export.model_parts import seq2seq_stacks, typed_layers
from transformer_lab.extras import require_extra
from transformer_lab.folders import check_new_folder, write_folder
from transformer_lab.models import Seq2SeqTransformer, SinusoidalPositionalEncoding, TransformerClassifier
from transformer_lab.nn import (
    MultiheadAttention,
    TransformerDecoderLayer,
    TransformerEncoderLayer,
    masks,
)
from transformer_lab.nn.attention import explicit_attention, merge_heads
from transformer_lab.nn.residual import Sublayer, residual_sublayers
from transformer_lab.tasks.registry import load_trained, tasks_offering

__all__ = [
    "CLASSIFIER_FILE",
    "CONFIG_FILE",
    "DECODER_FILE",
    "ENCODER_FILE",
    "OPSET_VERSION",
    "ClassifierGraph",
    "DecoderStepGraph",
    "EncoderGraph",
    "export_checkpoint",
    "export_classifier",
    "export_graph",
    "export_seq2seq",
]

# 17 has LayerNormalization as one operator; onnxruntime has run it since 1.14.
OPSET_VERSION = 17
ENCODER_FILE = "encoder.onnx"
DECODER_FILE = "decoder.onnx"
CLASSIFIER_FILE = "classifier.onnx"
CONFIG_FILE = "config.json"


def _import_onnx() -> Any:
    """The ``onnx`` module, or a MissingExtraError that says how to install it."""
    return require_extra("onnx", "exporting to ONNX")


# ------------------------------------------------------------------------------------
# Checkpoints
# ------------------------------------------------------------------------------------
def export_checkpoint(checkpoint: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Export a checkpoint (or run folder) of a task offering ``onnx`` to the new folder ``out_dir``.

    An encoder-decoder becomes two graphs, a classifier one; beside them go the files of
    the task's vocabulary (``Task.vocabulary``). Raises ``ValueError`` for a checkpoint of
    another task or of another model kind, or an ``out_dir`` that exists; returns ``out_dir``.
    """
    out_dir = check_new_folder(out_dir)
    _import_onnx()  # before the checkpoint is loaded: fail fast without the package
    trained = load_trained(checkpoint, tasks=tasks_offering("onnx"))
    model = trained.model
    try:
        files = trained.vocabulary_functions().files(trained.vocabulary)
        if isinstance(model, TransformerClassifier):
            # A classifier's config names its classes (None: the export names none).
            class_names = getattr(trained.config, "class_names", None)
            return export_classifier(model, out_dir, files, class_names, task=trained.task)
        if isinstance(model, Seq2SeqTransformer):
            return export_seq2seq(model, out_dir, vocabulary_files=files, task=trained.task)
        raise ValueError(
            f"task {trained.task!r}: expected a Seq2SeqTransformer or a TransformerClassifier (what ONNX export "
            f"writes), got a {type(model).__name__}"
        )
    except ValueError as error:
        raise ValueError(f"checkpoint {str(trained.folder)!r}: {error}") from None


def export_seq2seq(
    model: Seq2SeqTransformer,
    out_dir: str | os.PathLike[str],
    vocabulary_files: Mapping[str, str] | None = None,
    *,
    task: str,
) -> Path:
    """Write ``encoder.onnx``, ``decoder.onnx``, ``config.json`` and ``vocabulary_files`` (name -> text) to ``out_dir``.

    ``config.json`` records ``task``, the name of the task the model is for.
    The folder appears complete or not at all (written under a temporary name, then renamed).
    """
    out_dir = check_new_folder(out_dir)
    _check_seq2seq(model)
    _check_file_names(vocabulary_files or {}, (ENCODER_FILE, DECODER_FILE, CONFIG_FILE))
    model = _float32_copy(model)
    encoder, decoder = EncoderGraph(model), DecoderStepGraph(model)
    config = seq2seq_config(model, task, sorted(vocabulary_files or {}))

    def write(folder: Path) -> None:
        _export_graph_module(encoder, folder / ENCODER_FILE)
        _export_graph_module(decoder, folder / DECODER_FILE)
        _write_files(folder, config, vocabulary_files or {})

    return write_folder(out_dir, write)


def export_classifier(
    model: TransformerClassifier,
    out_dir: str | os.PathLike[str],
    vocabulary_files: Mapping[str, str] | None = None,
    class_names: Sequence[str] | None = None,
    *,
    task: str,
) -> Path:
    """Write ``classifier.onnx``, ``config.json`` and ``vocabulary_files`` to the new folder ``out_dir``.

    ``vocabulary_files`` maps a file name to its text; ``config.json`` records ``task``.
    """
    out_dir = check_new_folder(out_dir)
    if not isinstance(model, TransformerClassifier):
        raise ValueError(f"model: expected a TransformerClassifier, got {type(model).__name__}")
    _check_attention_modules(model.encoder)
    if class_names is not None and len(class_names) != model.num_classes:
        raise ValueError(
            f"class_names: expected {model.num_classes} names (the model's classes), got {len(class_names)}"
        )
    _check_file_names(vocabulary_files or {}, (CLASSIFIER_FILE, CONFIG_FILE))
    model = _float32_copy(model)
    graph = ClassifierGraph(model)
    config = classifier_config(
        model, list(class_names) if class_names is not None else None, sorted(vocabulary_files or {}), task
    )

    def write(folder: Path) -> None:
        _export_graph_module(graph, folder / CLASSIFIER_FILE)
        _write_files(folder, config, vocabulary_files or {})

    return write_folder(out_dir, write)


def _export_graph_module(graph: EncoderGraph | DecoderStepGraph | ClassifierGraph, path: Path) -> None:
    """:func:`export_graph` of one of this module's graphs, which carry their inputs, names and axes."""
    export_graph(graph, graph.example_inputs(), path, graph.input_names, graph.output_names, graph.dynamic_axes)


def export_graph(
    module: nn.Module,
    example_inputs: tuple[Tensor, ...],
    path: Path,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_axes: Mapping[str, Mapping[int, str]],
) -> None:
    """Trace ``module`` on ``example_inputs`` into the ONNX file ``path`` and check it with ``onnx.checker``.

    Every submodule is left in the mode it was in: the exporter traces in eval mode, then puts
    the whole tree in the mode of ``module`` alone, which would leave the caller's model
    wrapped in one of this module's graphs (new modules, in training mode) with its dropout on.
    """
    onnx = _import_onnx()
    modes = [(submodule, submodule.training) for submodule in module.modules()]
    with torch.no_grad(), warnings.catch_warnings():
        # The deprecation notice of the TorchScript exporter (see the module docstring),
        # and the tracer's notes on Python booleans taken from shapes: the graphs' only
        # such branches are the mask helpers' argument checks, true for every input.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        # torch before 2.5 has only the TorchScript exporter and no ``dynamo`` argument.
        exporter: dict[str, Any] = (
            {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        )
        try:
            torch.onnx.export(
                module,
                example_inputs,
                str(path),
                input_names=list(input_names),
                output_names=list(output_names),
                dynamic_axes={name: dict(name_axes) for name, name_axes in dynamic_axes.items()},
                opset_version=OPSET_VERSION,
                do_constant_folding=True,
                **exporter,
            )
        finally:
            for submodule, training in modes:
                submodule.training = training
    onnx.checker.check_model(str(path))


def seq2seq_config(model: Seq2SeqTransformer, task: str, vocabulary_files: Sequence[str]) -> dict[str, Any]:
    """What ``config.json`` says of an exported encoder-decoder: specials, sizes, graphs and their names."""
    encoder, decoder = EncoderGraph(model), DecoderStepGraph(model)
    encoder_stack, _ = seq2seq_stacks(model)
    return {
        "format": "onnx",
        "task": task,
        "opset": OPSET_VERSION,
        "pad_id": model.pad_id,
        "bos_id": model.bos_id,
        "eos_id": model.eos_id,
        "unk_id": UNK_ID,
        "d_model": decoder.d_model,
        "nhead": decoder.nhead,
        "head_dim": decoder.head_dim,
        "num_encoder_layers": len(encoder_stack.layers),
        "num_decoder_layers": decoder.num_layers,
        "src_vocab_size": model.src_vocab_size,
        "tgt_vocab_size": model.tgt_vocab_size,
        "max_len": model.max_len,
        "aligned_decoder_input": bool(model.aligned_decoder_input),
        "vocabulary_files": list(vocabulary_files),
        "graphs": {
            "encoder": {"file": ENCODER_FILE, "inputs": encoder.input_names, "outputs": encoder.output_names},
            "decoder": {"file": DECODER_FILE, "inputs": decoder.input_names, "outputs": decoder.output_names},
        },
    }


def classifier_config(
    model: TransformerClassifier, class_names: list[str] | None, vocabulary_files: Sequence[str], task: str
) -> dict[str, Any]:
    """What ``config.json`` says of an exported classifier."""
    graph = ClassifierGraph(model)
    first = typed_layers(model.encoder, TransformerEncoderLayer, "encoder")[0].self_attn
    return {
        "format": "onnx",
        "task": task,
        "opset": OPSET_VERSION,
        "pad_id": model.pad_id,
        "unk_id": UNK_ID,
        "d_model": first.embed_dim,
        "nhead": first.num_heads,
        "num_layers": len(model.encoder.layers),
        "vocab_size": model.vocab_size,
        "num_classes": model.num_classes,
        "class_names": class_names,
        "pooling": model.pooling,
        "max_len": model.positional_encoding.max_len,
        "vocabulary_files": list(vocabulary_files),
        "graphs": {"classifier": {"file": CLASSIFIER_FILE, "inputs": graph.input_names, "outputs": graph.output_names}},
    }


def _write_files(folder: Path, config: dict[str, Any], vocabulary_files: Mapping[str, str]) -> None:
    for name, text in vocabulary_files.items():
        (folder / name).write_text(text, encoding="utf-8", newline="")
    (folder / CONFIG_FILE).write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _check_file_names(files: Mapping[str, str], taken: Sequence[str]) -> None:
    for name in files:
        if name in taken or Path(name).name != name or name.startswith("."):
            raise ValueError(f"vocabulary_files: expected plain file names other than {list(taken)}, got {name!r}")


ModelType = TypeVar("ModelType", bound=nn.Module)


def _float32_copy(model: ModelType) -> ModelType:
    """The model itself if all float32, else a float32 copy.

    The graphs are float32; the caller's model stays as it is.
    """
    if all(parameter.dtype == torch.float32 for parameter in model.parameters()):
        return model
    return copy.deepcopy(model).float()


def _check_seq2seq(model: object) -> None:
    if not isinstance(model, Seq2SeqTransformer):
        raise ValueError(f"model: expected a Seq2SeqTransformer, got {type(model).__name__}")
    encoder, decoder = seq2seq_stacks(model)
    typed_layers(encoder, TransformerEncoderLayer, "transformer.encoder")
    typed_layers(decoder, TransformerDecoderLayer, "transformer.decoder")
    _check_attention_modules(model.transformer)


def _check_attention_modules(module: nn.Module) -> None:
    """Refuse attention the graphs do not write out (our models never build it), saying which."""
    for name, child in module.named_modules():
        if isinstance(child, MultiheadAttention):
            if not child._qkv_same_embed_dim or child.bias_k is not None or child.add_zero_attn:
                raise ValueError(
                    f"model: {name}: expected plain attention (one fused projection, no bias_k/bias_v, "
                    "no add_zero_attn), which is all the ONNX graphs write out"
                )


# ------------------------------------------------------------------------------------
# The graphs
# ------------------------------------------------------------------------------------
def _attend(attention: MultiheadAttention, query: Tensor, keys: Tensor, values: Tensor, hidden: Tensor) -> Tensor:
    """The module's explicit attention over projected keys/values, then its output projection.

    A row with every key hidden is unhidden for the softmax and zeroed after
    (:func:`~transformer_lab.nn.attention.explicit_attention`), so it mixes nothing.

    Shape:
        query ``[B, H, L, Dh]``, keys and values ``[B, H, S, Dh]``, hidden bool
        broadcastable to ``[B, H, L, S]`` (True = may not attend) -> ``[B, L, D]``.
    """
    hidden_rows = masks.fully_hidden_rows(hidden)  # [.., L, 1]
    hidden = masks.unhide_rows(hidden, hidden_rows)  # [.., L, S]
    context, _ = explicit_attention(query, keys, values, hidden, hidden_rows)  # [B, H, L, Dh]
    return attention.out_proj(merge_heads(context))  # [B, L, D]


def _self_attention(attention: MultiheadAttention, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The fused q|k|v projection of ``x``. Shape: ``[B, L, D]`` -> three ``[B, H, L, Dh]``."""
    query, key, value = nn.functional.linear(x, attention.in_proj_weight, attention.in_proj_bias).chunk(3, dim=-1)
    return attention.split_heads(query), attention.split_heads(key), attention.split_heads(value)


def _cross_query(attention: MultiheadAttention, x: Tensor) -> Tensor:
    """The query projection alone (cross-attention). Shape: ``[B, T, D]`` -> ``[B, H, T, Dh]``."""
    return attention.split_heads(nn.functional.linear(x, *attention.query_projection()))


def cross_keys_values(attention: MultiheadAttention, memory: Tensor) -> tuple[Tensor, Tensor]:
    """A decoder layer's cross-attention keys and values of ``memory`` (the fused k|v projection).

    Shape: memory ``[B, S, D]`` -> two ``[B, H, S, Dh]``.
    """
    key, value = nn.functional.linear(memory, *attention.key_value_projection()).chunk(2, dim=-1)
    return attention.split_heads(key), attention.split_heads(value)


def _feed_forward(layer: TransformerEncoderLayer | TransformerDecoderLayer) -> Sublayer:
    """The layer's feed-forward without its dropouts (the graphs are for inference). Shape: ``[.., D]``."""
    return lambda x: layer.linear2(layer.activation(layer.linear1(x)))


def _encoder_layer(layer: TransformerEncoderLayer, x: Tensor, padding_hidden: Tensor) -> Tensor:
    """Shape: x ``[B, S, D]``, padding_hidden ``[B, 1, 1, S]`` -> ``[B, S, D]``."""

    def attend(inputs: Tensor) -> Tensor:
        query, key, value = _self_attention(layer.self_attn, inputs)  # three [B, H, S, Dh]
        return _attend(layer.self_attn, query, key, value, padding_hidden)  # [B, S, D]

    return residual_sublayers(x, ((layer.norm1, attend), (layer.norm2, _feed_forward(layer))), layer.norm_first)


def _encode(
    embedding: nn.Module,
    positions: SinusoidalPositionalEncoding,
    layers: Sequence[TransformerEncoderLayer],
    norm: nn.Module | None,
    token_ids: Tensor,
    padding_mask: Tensor,
) -> Tensor:
    """Embeddings x sqrt(D) + positions, the encoder layers, the final norm.

    Shape: token_ids ``[B, S]``, padding_mask ``[B, S]`` bool -> ``[B, S, D]``.
    """
    x = embedding(token_ids)  # [B, S, D], scaled by sqrt(D)
    # A slice past the table's end is shorter than S, and the sum then fails in
    # onnxruntime: too long a source is an error, as in our model, not a wrong answer.
    x = x + positions.table[: token_ids.shape[1]]  # [B, S, D]
    batch_size = token_ids.shape[0]
    padding_hidden = masks.merge_masks(
        None, padding_mask, batch_size=batch_size, num_heads=1, dtype=x.dtype
    )  # [B, 1, 1, S]
    assert padding_hidden is not None  # a mask was given
    for layer in layers:
        x = _encoder_layer(layer, x, padding_hidden)  # [B, S, D]
    return x if norm is None else norm(x)


class EncoderGraph(nn.Module):
    """``encoder.onnx``: the source's memory and every decoder layer's cross-attention keys/values.

    Shape:
        src_ids ``[B, S]`` int64, src_padding_mask ``[B, S]`` bool -> memory ``[B, S, D]``,
        then ``cross_key_i``, ``cross_value_i`` ``[B, H, S, Dh]`` for each decoder layer i.
    """

    def __init__(self, model: Seq2SeqTransformer) -> None:
        super().__init__()
        self.model = model
        layers = len(seq2seq_stacks(model)[1].layers)
        self.input_names = ["src_ids", "src_padding_mask"]
        self.output_names = ["memory"] + [
            name for i in range(layers) for name in (f"cross_key_{i}", f"cross_value_{i}")
        ]
        source_axes = {0: "batch", 1: "src_len"}
        self.dynamic_axes: dict[str, dict[int, str]] = {
            "src_ids": source_axes,
            "src_padding_mask": source_axes,
            "memory": source_axes,
            **{name: {0: "batch", 2: "src_len"} for name in self.output_names[1:]},
        }

    def forward(self, src_ids: Tensor, src_padding_mask: Tensor) -> tuple[Tensor, ...]:
        model = self.model
        encoder, decoder = seq2seq_stacks(model)
        encoder_layers = typed_layers(encoder, TransformerEncoderLayer, "transformer.encoder")
        memory = _encode(
            model.src_embedding, model.positional_encoding, encoder_layers, encoder.norm, src_ids, src_padding_mask
        )  # [B, S, D]
        outputs = [memory]
        for layer in typed_layers(decoder, TransformerDecoderLayer, "transformer.decoder"):
            outputs.extend(cross_keys_values(layer.multihead_attn, memory))  # two [B, H, S, Dh]
        return tuple(outputs)

    def example_inputs(self) -> tuple[Tensor, Tensor]:
        """A batch of 2 sources of 5 positions (fewer for a shorter table), one padded, to trace with."""
        return _padded_example(self.model.src_vocab_size, self.model.pad_id, self.model.positional_encoding.max_len)


class DecoderStepGraph(nn.Module):
    """``decoder.onnx``: the next token's log-probabilities after ``tgt_ids``, and the grown self-attention cache.

    Computes what ``Seq2SeqTransformer.decode_step`` computes with a ``DecoderCache``
    holding ``P`` positions (see the module docstring for the inputs and outputs).

    Shape:
        tgt_ids ``[B, T]``, src_padding_mask ``[B, S]``, (memory ``[B, S, D]``), then per
        layer cross_key, cross_value ``[B, H, S, Dh]``, then per layer past_key,
        past_value ``[B, H, P, Dh]`` -> log_probs ``[B, V]``, then per layer
        present_key, present_value ``[B, H, P + T, Dh]``.
    """

    def __init__(self, model: Seq2SeqTransformer) -> None:
        super().__init__()
        self.model = model
        self.aligned = bool(model.aligned_decoder_input)
        self.layers = typed_layers(seq2seq_stacks(model)[1], TransformerDecoderLayer, "transformer.decoder")
        self.num_layers = len(self.layers)
        attention = self.layers[0].self_attn
        self.d_model, self.nhead, self.head_dim = attention.embed_dim, attention.num_heads, attention.head_dim
        layer_range = range(self.num_layers)
        cross = [name for i in layer_range for name in (f"cross_key_{i}", f"cross_value_{i}")]
        past = [name for i in layer_range for name in (f"past_key_{i}", f"past_value_{i}")]
        present = [name for i in layer_range for name in (f"present_key_{i}", f"present_value_{i}")]
        self.input_names = ["tgt_ids", "src_padding_mask", *(["memory"] if self.aligned else []), *cross, *past]
        self.output_names = ["log_probs", *present]
        source_axes = {0: "batch", 1: "src_len"}
        self.dynamic_axes: dict[str, dict[int, str]] = {
            "tgt_ids": {0: "batch", 1: "new_len"},
            "src_padding_mask": source_axes,
            **({"memory": source_axes} if self.aligned else {}),
            **{name: {0: "batch", 2: "src_len"} for name in cross},
            **{name: {0: "batch", 2: "past_len"} for name in past},
            "log_probs": {0: "batch"},
            **{name: {0: "batch", 2: "total_len"} for name in present},
        }

    def forward(self, tgt_ids: Tensor, src_padding_mask: Tensor, *state: Tensor) -> tuple[Tensor, ...]:
        model = self.model
        memory = state[0] if self.aligned else None
        state = state[1:] if self.aligned else state
        cross, past = state[: 2 * self.num_layers], state[2 * self.num_layers :]
        batch_size, new_len = tgt_ids.shape[0], tgt_ids.shape[1]
        past_len = past[0].shape[2]
        positions = torch.arange(new_len) + past_len  # [T]: the new tokens' positions P .. P+T-1
        x = model.tgt_embedding(tgt_ids)  # [B, T, D], scaled by sqrt(D)
        x = x + model.positional_encoding.table[positions]  # [B, T, D]
        if memory is not None:
            x = x + self._aligned_memory(memory, src_padding_mask, positions)
        # Hidden: the future among the new tokens (nothing when T = 1, as in our step),
        # and the source's padding for cross-attention.
        self_hidden = masks.merge_masks(
            masks.causal_mask(new_len, past_len + new_len), None, batch_size=batch_size, num_heads=1, dtype=x.dtype
        )  # [1, 1, T, P+T]
        cross_hidden = masks.merge_masks(
            None, src_padding_mask, batch_size=batch_size, num_heads=1, dtype=x.dtype
        )  # [B, 1, 1, S]
        assert self_hidden is not None and cross_hidden is not None  # both masks were given
        presents: list[Tensor] = []
        for index, layer in enumerate(self.layers):
            x, keys, values = self._layer(
                layer,
                x,
                past[2 * index],
                past[2 * index + 1],
                cross[2 * index],
                cross[2 * index + 1],
                self_hidden,
                cross_hidden,
            )
            presents.extend((keys, values))
        norm = seq2seq_stacks(model)[1].norm
        if norm is not None:
            x = norm(x)
        logits = model.generator(x[:, -1])  # [B, V]
        return (torch.log_softmax(logits.float(), dim=-1), *presents)

    @staticmethod
    def _layer(
        layer: TransformerDecoderLayer,
        x: Tensor,
        past_key: Tensor,
        past_value: Tensor,
        cross_key: Tensor,
        cross_value: Tensor,
        self_hidden: Tensor,
        cross_hidden: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One decoder layer on the new positions. Shape: x ``[B, T, D]`` -> x, keys, values ``[B, H, P+T, Dh]``."""
        grown: list[Tensor] = []

        def self_attend(inputs: Tensor) -> Tensor:
            query, key, value = _self_attention(layer.self_attn, inputs)  # three [B, H, T, Dh]
            keys = torch.cat([past_key, key], dim=2)  # [B, H, P+T, Dh]
            values = torch.cat([past_value, value], dim=2)  # [B, H, P+T, Dh]
            grown.extend((keys, values))
            return _attend(layer.self_attn, query, keys, values, self_hidden)  # [B, T, D]

        def cross_attend(inputs: Tensor) -> Tensor:
            query = _cross_query(layer.multihead_attn, inputs)  # [B, H, T, Dh]
            return _attend(layer.multihead_attn, query, cross_key, cross_value, cross_hidden)  # [B, T, D]

        blocks = ((layer.norm1, self_attend), (layer.norm2, cross_attend), (layer.norm3, _feed_forward(layer)))
        x = residual_sublayers(x, blocks, layer.norm_first)
        return x, grown[0], grown[1]

    @staticmethod
    def _aligned_memory(memory: Tensor, src_padding_mask: Tensor, positions: Tensor) -> Tensor:
        """``aligned_decoder_input``: target position p gets memory position p, if p is a real source token.

        As ``Seq2SeqTransformer._add_aligned_memory``: positions past the source or facing
        its padding get nothing. Shape: memory ``[B, S, D]``, positions ``[T]`` -> ``[B, T, D]``.
        """
        source_len = memory.shape[1]
        inside = positions < source_len  # [T]
        clamped = torch.minimum(positions, torch.full_like(positions, source_len - 1))  # [T], a valid index
        real = ~src_padding_mask[:, clamped] & inside  # [B, T]
        return memory[:, clamped] * real.unsqueeze(-1).to(memory.dtype)  # [B, T, D]

    def example_inputs(self) -> tuple[Tensor, ...]:
        """Batch 2, 3 new tokens after 4 cached positions, a source of 6: distinct sizes, none 0 or 1, to trace with.

        A table (``max_len``) shorter than 7 positions gets fewer: the new tokens' positions
        must lie in it while tracing, as they must when the graph runs.
        """
        batch, new_len, past_len, source_len = 2, 3, 4, 6
        max_len = self.model.positional_encoding.max_len
        if new_len + past_len > max_len:
            new_len = min(new_len, max(1, max_len - 2))
            past_len = max_len - new_len
        model = self.model
        tgt_ids = torch.full((batch, new_len), model.bos_id, dtype=torch.long)  # [2, 3]
        src_padding_mask = torch.zeros(batch, source_len, dtype=torch.bool)  # [2, 6]
        src_padding_mask[1, 4:] = True
        head_shape = (batch, self.nhead, source_len, self.head_dim)
        cross = [torch.zeros(head_shape) for _ in range(2 * self.num_layers)]
        past = [torch.zeros(batch, self.nhead, past_len, self.head_dim) for _ in range(2 * self.num_layers)]
        memory = [torch.zeros(batch, source_len, self.d_model)] if self.aligned else []
        return (tgt_ids, src_padding_mask, *memory, *cross, *past)


class ClassifierGraph(nn.Module):
    """``classifier.onnx``: :class:`~transformer_lab.models.TransformerClassifier`'s logits.

    Shape: token_ids ``[B, S]`` int64, padding_mask ``[B, S]`` bool -> logits ``[B, C]``.
    """

    def __init__(self, model: TransformerClassifier) -> None:
        super().__init__()
        self.model = model
        self.input_names = ["token_ids", "padding_mask"]
        self.output_names = ["logits"]
        axes = {0: "batch", 1: "seq_len"}
        self.dynamic_axes: dict[str, dict[int, str]] = {"token_ids": axes, "padding_mask": axes, "logits": {0: "batch"}}

    def forward(self, token_ids: Tensor, padding_mask: Tensor) -> Tensor:
        model = self.model
        layers = typed_layers(model.encoder, TransformerEncoderLayer, "encoder")
        hidden = _encode(
            model.embedding, model.positional_encoding, layers, model.encoder.norm, token_ids, padding_mask
        )  # [B, S, D]
        if model.pooling == "first":
            pooled = hidden[:, 0]  # [B, D]
        else:
            real = (~padding_mask).unsqueeze(-1).to(hidden.dtype)  # [B, S, 1]
            pooled = (hidden * real).sum(dim=1) / real.sum(dim=1)  # [B, D], padding excluded
        return model.head(pooled)  # [B, C]

    def example_inputs(self) -> tuple[Tensor, Tensor]:
        """A batch of 2 sequences of 5 positions (fewer for a shorter table), one padded, to trace with."""
        return _padded_example(self.model.vocab_size, self.model.pad_id, self.model.positional_encoding.max_len)


def _padded_example(vocab_size: int, pad_id: int, max_len: int) -> tuple[Tensor, Tensor]:
    """Token ids and their padding mask to trace an encoder with: 2 rows of 5 positions, the second padded.

    A table (``max_len``) shorter than 5 positions gets rows of its length: a longer example
    would read past it while tracing. The second row keeps at least one real token.
    Shape: -> ``[2, L]`` int64, ``[2, L]`` bool, L = min(5, max_len).
    """
    length = min(5, max_len)
    token_ids = torch.full((2, length), 4 % vocab_size, dtype=torch.long)  # [2, L]
    token_ids[1, max(1, length - 2) :] = pad_id
    return token_ids, masks.padding_mask(token_ids, pad_id)  # [2, L]
