"""Write a trained Seq2SeqTransformer as a CTranslate2 model directory (``model.bin``, config, vocabulary).

CTranslate2 is a C++ inference engine for Transformers; its ``Translator`` reads a folder
holding the weights laid out as its ``TransformerSpec`` declares them, ``config.json`` (the
special tokens, the layer-norm epsilon) and the vocabulary (``shared_vocabulary.json``
when both sides use one, else ``source_vocabulary.json`` and ``target_vocabulary.json``).
The export is exact, not approximate: CTranslate2 in float32 computes the same function
as our model, up to rounding, because of the following choices.

- Token ids. The vocabulary lists our token strings in id order, so a CTranslate2 token
  id is our id; ``<bos>`` is the decoder's start token, ``<eos>`` its end, ``<unk>`` the
  unknown token. A vocabulary whose strings repeat (two ids, one string) is refused: the
  engine maps strings to ids and could not tell them apart.
- Positions. CTranslate2's built-in sinusoid puts all the sines first and then all the
  cosines; the paper's table (ours) interleaves them (sin on even dimensions, cos on odd
  ones). Our own table is stored as the spec's position encodings, so the engine adds
  exactly ours. Like ours, it reads no position past the table (``model.max_len``), but
  where our searches stop at the table's end, CTranslate2 raises a RuntimeError: keep its
  ``max_decoding_length`` (and the source length) at most ``model.max_len``.
- Norms. Our ``nn.Transformer`` twin ends each stack with a LayerNorm (``encoder.norm``,
  ``decoder.norm``) in the post-norm layout too, as torch's does. The spec declares that
  final norm only for pre-norm models, while the runtime applies it whenever its weights
  exist; the spec is therefore built with the final norm and then marked post-norm.
- Embeddings are multiplied by sqrt(d_model) on both sides (the spec's
  ``scale_embeddings``, our ``TokenEmbedding``). Tied matrices are stored once (CTranslate2
  aliases equal variables).
- Attention. Self-attention takes the fused q|k|v projection ([3D, D], our
  ``in_proj_weight`` as it is); cross-attention takes q, then the fused k|v.

What CTranslate2 cannot express is refused with a ``ValueError`` saying why: a couplet
model with ``aligned_decoder_input`` (the encoder's output added to the decoder's input
position by position), checkpoints of tasks that do not offer ``ctranslate2``, and
activations other than relu and gelu.

``ctranslate2`` is an optional dependency (``pip install -e ".[deploy]"``); it
is imported only when a model is exported.

Shape legend: D d_model, F dim_feedforward, V vocabulary, P positions (``max_len``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab.data.vocabulary import UNK_ID
from transformer_lab.export.model_parts import seq2seq_stacks, typed_layers
from transformer_lab.extras import require_extra
from transformer_lab.folders import check_new_folder, write_folder
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.nn import (
    MultiheadAttention,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from transformer_lab.tasks.registry import load_trained, tasks_offering

__all__ = [
    "QUANTIZATIONS",
    "build_spec",
    "export_checkpoint",
    "export_model",
]

# Weight types CTranslate2 can store (its ACCEPTED_MODEL_TYPES); None keeps float32. A
# float32 export can still run as int8: Translator(..., compute_type="int8") converts on load.
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32")


def _import_ctranslate2() -> Any:
    """The ``ctranslate2`` module, or a MissingExtraError that says how to install it."""
    return require_extra("ctranslate2", "exporting to CTranslate2")


def export_checkpoint(
    checkpoint: str | os.PathLike[str], out_dir: str | os.PathLike[str], quantization: str | None = None
) -> Path:
    """Export a checkpoint (or run folder) of a task offering ``ctranslate2`` to the new folder ``out_dir``.

    The vocabulary's token strings come from the task (``Task.vocabulary``). Raises
    ``ValueError`` for a checkpoint of another task or model kind, a model with
    ``aligned_decoder_input``, or an ``out_dir`` that exists; returns ``out_dir``.
    """
    out_dir = check_new_folder(out_dir)
    _import_ctranslate2()  # before the checkpoint is loaded: fail fast without the package
    trained = load_trained(checkpoint, tasks=tasks_offering("ctranslate2"))
    model = trained.model
    if not isinstance(model, Seq2SeqTransformer):
        raise ValueError(
            f"checkpoint {str(trained.folder)!r}: task {trained.task!r}: expected a Seq2SeqTransformer (what "
            f"CTranslate2 writes), got a {type(model).__name__}"
        )
    try:
        source_tokens, target_tokens = trained.vocabulary_functions().tokens(trained.vocabulary)
        _check_tokens(source_tokens, model.src_vocab_size, "source vocabulary")
        _check_tokens(target_tokens, model.tgt_vocab_size, "target vocabulary")
        return export_model(model, source_tokens, target_tokens, out_dir, quantization=quantization)
    except ValueError as error:
        raise ValueError(f"checkpoint {str(trained.folder)!r}: {error}") from None


def export_model(
    model: Seq2SeqTransformer,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    out_dir: str | os.PathLike[str],
    quantization: str | None = None,
) -> Path:
    """Write ``model`` as a CTranslate2 model directory at the new folder ``out_dir``; return it.

    ``source_tokens[i]`` / ``target_tokens[i]`` is the string of id ``i`` on each side.
    The folder appears complete or not at all: it is written beside ``out_dir`` under a
    temporary name and renamed into place.
    """
    out_dir = check_new_folder(out_dir)
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization: expected None or one of {QUANTIZATIONS}, got {quantization!r}")
    spec = build_spec(model, source_tokens, target_tokens)
    spec.validate()
    spec.optimize(quantization=quantization)
    return write_folder(out_dir, lambda folder: spec.save(str(folder)))


def build_spec(model: Seq2SeqTransformer, source_tokens: Sequence[str], target_tokens: Sequence[str]) -> Any:
    """The ``ctranslate2.specs.TransformerSpec`` holding ``model``'s weights and both vocabularies.

    Not yet validated nor saved: ``export_model`` does both.
    """
    ctranslate2 = _import_ctranslate2()
    specs = ctranslate2.specs
    _check_model(model)
    _check_tokens(source_tokens, model.src_vocab_size, "source_tokens")
    _check_tokens(target_tokens, model.tgt_vocab_size, "target_tokens")
    if UNK_ID >= len(source_tokens):
        raise ValueError(
            f"source_tokens: expected the unknown token at id {UNK_ID}, got only {len(source_tokens)} tokens"
        )

    encoder, decoder = seq2seq_stacks(model)
    encoder_layers = typed_layers(encoder, TransformerEncoderLayer, "transformer.encoder")
    decoder_layers = typed_layers(decoder, TransformerDecoderLayer, "transformer.decoder")
    first_layer = encoder_layers[0]
    pre_norm = bool(first_layer.norm_first)
    activation = _activation(first_layer, specs.common_spec.Activation)
    encoder_norm = _final_norm(encoder, "transformer.encoder")
    decoder_norm = _final_norm(decoder, "transformer.decoder")

    # pre_norm=True makes the spec declare the final norms (it declares them for pre-norm
    # only); the flag is set to the model's layout afterwards, before anything is written.
    encoder_spec = specs.TransformerEncoderSpec(
        len(encoder_layers),
        first_layer.self_attn.num_heads,
        pre_norm=True,
        no_final_norm=encoder_norm is None,
        activation=activation,
    )
    decoder_spec = specs.TransformerDecoderSpec(
        len(decoder_layers),
        decoder_layers[0].self_attn.num_heads,
        pre_norm=True,
        no_final_norm=decoder_norm is None,
        activation=activation,
    )
    encoder_spec.pre_norm = pre_norm
    decoder_spec.pre_norm = pre_norm

    positions = _array(model.positional_encoding.table)  # [P, D]
    encoder_spec.embeddings[0].weight = _array(model.src_embedding.weight)  # [V_src, D]
    encoder_spec.scale_embeddings = True
    encoder_spec.position_encodings.encodings = positions
    if encoder_norm is not None:
        _set_layer_norm(encoder_spec.layer_norm, encoder_norm)
    for layer_spec, layer in zip(encoder_spec.layer, encoder_layers):
        _set_self_attention(layer_spec.self_attention, layer.self_attn, layer.norm1)
        _set_feed_forward(layer_spec.ffn, layer, layer.norm2)

    decoder_spec.embeddings.weight = _array(model.tgt_embedding.weight)  # [V_tgt, D]
    decoder_spec.scale_embeddings = True
    decoder_spec.position_encodings.encodings = positions
    if decoder_norm is not None:
        _set_layer_norm(decoder_spec.layer_norm, decoder_norm)
    for layer_spec, decoder_layer in zip(decoder_spec.layer, decoder_layers):
        _set_self_attention(layer_spec.self_attention, decoder_layer.self_attn, decoder_layer.norm1)
        _set_cross_attention(layer_spec.attention, decoder_layer.multihead_attn, decoder_layer.norm2)
        _set_feed_forward(layer_spec.ffn, decoder_layer, decoder_layer.norm3)
    _set_linear(decoder_spec.projection, model.generator.weight, model.generator.bias)  # [V_tgt, D]

    spec = specs.TransformerSpec(encoder_spec, decoder_spec)
    config = spec.config
    config.unk_token = source_tokens[UNK_ID]
    config.bos_token = target_tokens[model.bos_id]
    config.eos_token = target_tokens[model.eos_id]
    config.decoder_start_token = target_tokens[model.bos_id]
    # Our sources carry no bos/eos; the engine must not add them either.
    config.add_source_bos = False
    config.add_source_eos = False
    config.layer_norm_epsilon = float(first_layer.norm1.eps)
    spec.register_source_vocabulary(list(source_tokens))
    spec.register_target_vocabulary(list(target_tokens))
    return spec


def _check_model(model: object) -> None:
    """Refuse what the TransformerSpec cannot express, saying why."""
    if not isinstance(model, Seq2SeqTransformer):
        raise ValueError(f"model: expected a Seq2SeqTransformer, got {type(model).__name__}")
    if model.aligned_decoder_input:
        raise ValueError(
            "model: aligned_decoder_input=True adds the encoder's output to the decoder's input position by "
            "position, which CTranslate2's Transformer cannot express (its decoder reads the encoder only "
            "through cross-attention); train with --set model.aligned_decoder_input=false to export"
        )
    layer_eps = {float(module.eps) for module in model.transformer.modules() if isinstance(module, nn.LayerNorm)}
    if len(layer_eps) > 1:
        raise ValueError(
            f"model: expected one LayerNorm epsilon throughout (CTranslate2 has one), got {sorted(layer_eps)}"
        )
    for name, module in model.transformer.named_modules():
        if isinstance(module, MultiheadAttention):
            if not module._qkv_same_embed_dim or module.bias_k is not None or module.add_zero_attn:
                raise ValueError(
                    f"model: {name}: expected plain attention (one fused projection, no bias_k/bias_v, "
                    "no add_zero_attn), which is all CTranslate2 expresses"
                )


def _final_norm(stack: TransformerEncoder | TransformerDecoder, name: str) -> nn.LayerNorm | None:
    """The stack's final norm (None if it has none), or a ValueError if it is not a LayerNorm."""
    norm = stack.norm
    if norm is not None and not isinstance(norm, nn.LayerNorm):
        raise ValueError(f"model: {name}.norm: expected a LayerNorm or None, got {type(norm).__name__}")
    return norm


def _check_tokens(tokens: Sequence[str], size: int, name: str) -> None:
    if len(tokens) != size:
        raise ValueError(f"{name}: expected {size} tokens (the model's embedding rows), got {len(tokens)}")
    seen: dict[str, int] = {}
    for token_id, token in enumerate(tokens):
        if not isinstance(token, str) or not token:
            raise ValueError(f"{name}: expected a non-empty string for id {token_id}, got {token!r}")
        if token in seen:
            raise ValueError(
                f"{name}: expected one id per token string, got {token!r} at ids {seen[token]} and {token_id}"
            )
        seen[token] = token_id


def _activation(layer: TransformerEncoderLayer, kinds: Any) -> Any:
    # torch's F.gelu is the exact (erf) GELU: CTranslate2's GELU, not its GELUTanh.
    if layer.activation is F.relu:
        return kinds.RELU
    if layer.activation is F.gelu:
        return kinds.GELU
    raise ValueError(
        f"model: expected the activation relu or gelu (all CTranslate2 maps exactly), got {layer.activation!r}"
    )


def _array(tensor: Tensor) -> np.ndarray:
    """A float32 copy (the spec must not alias the live model's memory). Shape: unchanged."""
    return tensor.detach().to(device="cpu", dtype=torch.float32).numpy().copy()


def _set_linear(spec: Any, weight: Tensor, bias: Tensor | None) -> None:
    """Shape: weight ``[out, in]`` (as nn.Linear keeps it, and as CTranslate2 wants it), bias ``[out]``."""
    spec.weight = _array(weight)
    if bias is not None:
        spec.bias = _array(bias)


def _set_layer_norm(spec: Any, norm: nn.LayerNorm) -> None:
    """Shape: gamma and beta ``[D]``; a LayerNorm without bias gets beta 0."""
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias) if norm.bias is not None else np.zeros(norm.weight.shape, dtype=np.float32)


def _set_self_attention(spec: Any, attention: MultiheadAttention, norm: nn.LayerNorm) -> None:
    """linear[0]: the fused q|k|v ``[3D, D]``, in our order; linear[1]: the output ``[D, D]``."""
    _set_layer_norm(spec.layer_norm, norm)
    _set_linear(spec.linear[0], attention.in_proj_weight, attention.in_proj_bias)
    _set_linear(spec.linear[1], attention.out_proj.weight, attention.out_proj.bias)


def _set_cross_attention(spec: Any, attention: MultiheadAttention, norm: nn.LayerNorm) -> None:
    """linear[0]: q ``[D, D]``; linear[1]: the fused k|v ``[2D, D]`` (of the memory); linear[2]: the output."""
    d_model = attention.embed_dim
    weight, bias = attention.in_proj_weight, attention.in_proj_bias  # [3D, D], [3D]
    _set_layer_norm(spec.layer_norm, norm)
    _set_linear(spec.linear[0], weight[:d_model], None if bias is None else bias[:d_model])
    _set_linear(spec.linear[1], weight[d_model:], None if bias is None else bias[d_model:])
    _set_linear(spec.linear[2], attention.out_proj.weight, attention.out_proj.bias)


def _set_feed_forward(spec: Any, layer: TransformerEncoderLayer | TransformerDecoderLayer, norm: nn.LayerNorm) -> None:
    """linear_0: ``[F, D]`` (then the activation), linear_1: ``[D, F]``."""
    _set_layer_norm(spec.layer_norm, norm)
    _set_linear(spec.linear_0, layer.linear1.weight, layer.linear1.bias)
    _set_linear(spec.linear_1, layer.linear2.weight, layer.linear2.bias)
