"""The tutorials' claims about masks, each checked by running a real model on a real batch.

Four experiments, each a function that returns a :class:`~transformer_lab.lab.mask_results.LabResult`
(measured differences, each with its tolerance and whether it came out as the claim says);
:func:`~transformer_lab.lab.mask_report.format_lab_result` turns one into the table the CLI
prints. This module only measures:

- :func:`tgt_padding_mask_experiment`: the decoder needs no target key padding mask when
  the loss ignores padded positions.
- :func:`encoder_row_mask_experiment`: hiding the padded *rows* (queries) of the encoder's
  self-attention changes nothing that reaches the loss, because the cross-attention hides
  the padded memory positions (``memory_key_padding_mask``).
- :func:`decoder_rows_experiment`: in the decoder, the loss's ``ignore_index`` plays the
  part of hiding padded rows.
- :func:`key_padding_polarity_experiment`: "True = keep" (the Annotated Transformer) and
  "True = padding" (PyTorch, this package) side by side, what mixing them does, and the
  checks that refuse the mix-ups they can see.

Row masking is possible here because a query row whose keys are all hidden gives a zero
mixture in :mod:`transformer_lab.nn` (torch's explicit path gives NaN there, and the loss
would be NaN).

Every comparison runs the model in ``eval`` mode (no dropout), so that the two runs being
compared differ only in the mask. Shape legend: B batch, S source length, T target length,
D d_model, H heads, V vocabulary.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Callable, Literal

import torch
from torch import Tensor

from transformer_lab.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Seq2SeqBatch,
    Vocabulary,
    collate_pairs,
    make_synthetic_pairs,
    read_multi30k,
    resolve_multi30k_dir,
)
from transformer_lab.data.multi30k import MULTI30K_LANGUAGES
from transformer_lab.lab.checkpoints import load_seq2seq_checkpoint

# Also in __all__: callers imported the result types from this module before they moved out.
from transformer_lab.lab.mask_results import Comparison, GuardCheck, LabResult
from transformer_lab.lab.tensor_sizes import MAX_LAB_FLOATS, lab_floats
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.nn import TransformerDecoder, TransformerEncoder, TransformerEncoderLayer, masks
from transformer_lab.nn.tracing import ATTENTION_WEIGHTS, recording_shapes
from transformer_lab.setting_error import SettingError
from transformer_lab.training import label_smoothed_cross_entropy

__all__ = [
    "EXPERIMENTS",
    "Comparison",
    "GuardCheck",
    "LabResult",
    "LabSetup",
    "build_lab_setup",
    "decoder_rows_experiment",
    "encoder_row_mask_experiment",
    "key_padding_polarity_experiment",
    "read_parallel_batch",
    "run_experiment",
    "tgt_padding_mask_experiment",
]

_SMOOTHING = 0.1  # the label smoothing the presets train with: the claims are about that loss
DEFAULT_TOLERANCE = 1e-5  # float32 sums in a different order differ by ~1e-7; this leaves room
_NO_IGNORE_INDEX = -100  # an id no token has: with it, padded positions count in the loss


# ----------------------------------------------------------------------------------------
# The model and the batch
# ----------------------------------------------------------------------------------------
@dataclass
class LabSetup:
    """A model in eval mode and a padded batch of variable-length pairs for it.

    Shape:
        batch.src_ids ``[B, S]``, batch.tgt_in_ids / tgt_out_ids ``[B, T]``.
    """

    model: Seq2SeqTransformer
    batch: Seq2SeqBatch
    description: str


def read_parallel_batch(
    data_dir: str | os.PathLike[str], batch_size: int
) -> tuple[Seq2SeqBatch, Vocabulary, Vocabulary, str]:
    """The first ``batch_size`` Multi30k training pairs as a batch (whitespace tokens).

    The vocabularies are built from those lines only, which is all a randomly initialised
    model needs. Returns the batch, the source and target vocabularies, and a description.

    Shape:
        returns src_ids ``[B, S]``, tgt_in_ids / tgt_out_ids ``[B, T]``.
    """
    # Neither build_lab_setup nor the lab command can skip an empty line: the error offers no option to.
    pairs_text = read_multi30k("train", data_dir, skip_option=None).pairs
    if len(pairs_text) < batch_size:
        raise SettingError(
            "{data_dir}: expected at least {batch_size} {count} training pairs, got {found}",
            ("data_dir", "batch_size"),
            count=batch_size,
            found=len(pairs_text),
        )
    sources = [source.split() for source, _ in pairs_text[:batch_size]]
    targets = [target.split() for _, target in pairs_text[:batch_size]]
    source_vocabulary, target_vocabulary = Vocabulary.build(sources), Vocabulary.build(targets)
    pairs = [
        (source_vocabulary.encode(source), target_vocabulary.encode(target)) for source, target in zip(sources, targets)
    ]
    batch = collate_pairs(pairs, PAD_ID, BOS_ID, EOS_ID)
    description = f"the first {batch_size} Multi30k training pairs from {resolve_multi30k_dir(data_dir)}"
    return batch, source_vocabulary, target_vocabulary, description


def build_lab_setup(
    checkpoint: str | os.PathLike[str] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    batch_size: int = 6,
    min_length: int = 2,
    max_length: int = 9,
    seed: int = 0,
    d_model: int = 32,
    nhead: int = 2,
    num_layers: int = 2,
) -> LabSetup:
    """A real model and a real variable-length batch for the experiments.

    The model is the checkpoint's (``checkpoint``), or a randomly initialised
    :class:`Seq2SeqTransformer` seeded with ``seed`` (sizes ``d_model``, ``nhead``,
    ``num_layers``). The batch is the first ``batch_size`` lines of ``data_dir``
    (``train.de`` / ``train.en``, whitespace tokens; random model only), or else synthetic
    "reverse" pairs of ``min_length..max_length`` symbols over the model's vocabulary.

    Shape:
        batch.src_ids ``[B, S]``, batch.tgt_in_ids / tgt_out_ids ``[B, T]``.
    """
    # SettingErrors: the lab command names its --batch-size, --checkpoint and --data-dir.
    if batch_size < 2:
        raise SettingError(
            "{batch_size}: expected at least 2 (a batch needs sequences of different lengths), got {given}",
            ("batch_size",),
            given=batch_size,
        )
    if checkpoint is not None and data_dir is not None:
        raise SettingError(
            "{checkpoint} and {data_dir}: expected at most one of them (the checkpoint's vocabulary is not rebuilt "
            "from text here), got both ({checkpoint} {given_checkpoint!r}, {data_dir} {given_data_dir!r})",
            ("checkpoint", "data_dir"),
            given_checkpoint=str(checkpoint),
            given_data_dir=str(data_dir),
        )
    torch.manual_seed(seed)
    if data_dir is not None:
        batch, source_vocabulary, target_vocabulary, batch_words = read_parallel_batch(data_dir, batch_size)
        longest = max(batch.src_ids.shape[1], batch.tgt_in_ids.shape[1])
        model = _random_model(
            len(source_vocabulary),
            len(target_vocabulary),
            d_model,
            nhead,
            num_layers,
            batch_size,
            longest,
            _longest_line(batch, data_dir),
        )
        model_words = _model_words(model, f"random (seed {seed})")
    else:
        if checkpoint is not None:
            model = load_seq2seq_checkpoint(checkpoint)
            model_words = _model_words(model, f"from {checkpoint}")
            # Pairs that fit the checkpoint's positional table: a target is bos and the source's length.
            max_length = min(max_length, model.max_len - 1)
            min_length = min(min_length, max_length - 1)
            if min_length < 1:
                raise SettingError(
                    "{checkpoint}: expected a model whose positional table holds at least 3 positions (sequences "
                    "of two lengths, and bos), got max_len {max_len} in {given}",
                    ("checkpoint",),
                    max_len=model.max_len,
                    given=str(checkpoint),
                )
        else:
            vocab_size = 14  # the Annotated Transformer's copy-task size: 4 specials + 10 symbols
            model = _random_model(vocab_size, vocab_size, d_model, nhead, num_layers, batch_size, max_length + 2)
            model_words = _model_words(model, f"random (seed {seed})")
        vocab_size = min(model.src_vocab_size, model.tgt_vocab_size)
        pairs = make_synthetic_pairs("reverse", batch_size, vocab_size, min_length, max_length, seed)
        batch = collate_pairs(pairs, model.pad_id, model.bos_id, model.eos_id)
        batch_words = f"synthetic 'reverse' pairs (seed {seed})"
    model.eval()
    source_lengths = (batch.src_ids != model.pad_id).sum(dim=1).tolist()
    target_lengths = (batch.tgt_out_ids != model.pad_id).sum(dim=1).tolist()
    if len(set(source_lengths)) < 2 or len(set(target_lengths)) < 2:
        raise SettingError(
            "batch: expected sequences of different lengths (so that there is padding to study), "
            "got source lengths {source_lengths} and target lengths {target_lengths}; change {seed} or {batch_size}",
            ("seed", "batch_size"),
            source_lengths=source_lengths,
            target_lengths=target_lengths,
        )
    description = (
        f"{model_words}; {batch_words}: B={batch.batch_size}, source lengths {source_lengths} "
        f"(S={batch.src_ids.shape[1]}), target lengths incl. eos {target_lengths} (T={batch.tgt_in_ids.shape[1]})"
    )
    return LabSetup(model=model, batch=batch, description=description)


def _longest_line(batch: Seq2SeqBatch, data_dir: str | os.PathLike[str]) -> str:
    """Where the batch's longest sentence is: " (line N of FOLDER/train.de, the longest sentence)".

    The batch is the files' first pairs, none skipped, so row k is line k + 1.
    """
    source_lengths = (batch.src_ids != PAD_ID).sum(dim=1)
    target_lengths = (batch.tgt_out_ids != PAD_ID).sum(dim=1) - 1  # its words: eos is no part of the line
    source_side = int(source_lengths.max()) >= int(target_lengths.max())
    lengths = source_lengths if source_side else target_lengths
    language = MULTI30K_LANGUAGES[0 if source_side else 1]
    path = resolve_multi30k_dir(data_dir) / f"train.{language}"
    return f" (line {int(lengths.argmax()) + 1} of {path}, the longest sentence)"


def _random_model(
    src_vocab_size: int,
    tgt_vocab_size: int,
    d_model: int,
    nhead: int,
    num_layers: int,
    batch_size: int,
    longest: int,
    longest_from: str = "",
) -> Seq2SeqTransformer:
    """A random model for batches of ``batch_size`` sequences of at most ``longest`` positions (bos/eos included).

    ``longest_from`` says where the longest sequence comes from (a file's line), for the refusal of sizes
    too large: a sentence of millions of words is what to fix there, not the model's sizes.
    """
    # Named as the caller spells them (the lab command's --d-model); ModelConfig would name its fields.
    if d_model % 2:
        raise SettingError(
            "{d_model}: expected an even int (the positions are sin/cos pairs), got {given}",
            ("d_model",),
            given=d_model,
        )
    if d_model % nhead:
        raise SettingError(
            "{nhead}: expected a divisor of {d_model} {given_d_model} (each head takes d_model / nhead dimensions), "
            "got {given}",
            ("nhead", "d_model"),
            given=nhead,
            given_d_model=d_model,
        )
    floats = lab_floats(d_model, nhead, num_layers, longest, batch_size, src_vocab_size, tgt_vocab_size)
    if floats > MAX_LAB_FLOATS:  # before anything is allocated
        raise SettingError(
            "{d_model}, {nhead}, {num_layers} and {batch_size}: expected sizes whose tensors hold at most "
            "{limit:,} floats together (2 GiB), got about {floats:,} with sequences of up to {longest:,} positions"
            "{longest_from}; make one of them smaller" + (", or that sentence" if longest_from else ""),
            ("d_model", "nhead", "num_layers", "batch_size"),
            limit=MAX_LAB_FLOATS,
            floats=floats,
            longest=longest,
            longest_from=longest_from,
        )
    config = ModelConfig(
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        d_model=d_model,
        nhead=nhead,
        num_encoder_layers=num_layers,
        num_decoder_layers=num_layers,
        dim_feedforward=2 * d_model,
        dropout=0.1,  # kept to show that eval() switches it off; the comparisons need no noise
        max_len=max(64, longest),
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
    )
    return Seq2SeqTransformer.from_config(config)


def _stacks(model: Seq2SeqTransformer) -> tuple[TransformerEncoder, TransformerDecoder]:
    """The encoder and decoder stacks: Seq2SeqTransformer always builds its own (no custom ones)."""
    encoder, decoder = model.transformer.encoder, model.transformer.decoder
    assert isinstance(encoder, TransformerEncoder) and isinstance(decoder, TransformerDecoder), (encoder, decoder)
    return encoder, decoder


def _model_words(model: Seq2SeqTransformer, origin: str) -> str:
    transformer = model.transformer
    encoder, decoder = _stacks(model)
    return (
        f"Seq2SeqTransformer {origin}, d_model={transformer.d_model}, nhead={transformer.nhead}, "
        f"layers={len(encoder.layers)}+{len(decoder.layers)}, "
        f"V={model.src_vocab_size}/{model.tgt_vocab_size}"
    )


# ----------------------------------------------------------------------------------------
# Running the pieces of the model with chosen masks
# ----------------------------------------------------------------------------------------
def _encode(model: Seq2SeqTransformer, src_ids: Tensor, row_mask: Tensor | None = None) -> Tensor:
    """The model's own encoder, optionally with a row mask ``[B*H, S, S]`` (through ``encode``'s seam).

    Shape:
        src_ids ``[B, S]`` -> memory ``[B, S, D]``.
    """
    return model.encode(src_ids, src_mask=row_mask)


def _decode(
    model: Seq2SeqTransformer,
    memory: Tensor,
    src_ids: Tensor,
    tgt_in_ids: Tensor,
    tgt_mask: Tensor | None = None,
    tgt_key_padding_mask: Tensor | None = None,
    hide_padded_memory: bool = True,
) -> Tensor:
    """The model's own decoder logits (aligned decoder input included); ``tgt_mask`` defaults to the causal mask.

    Shape:
        memory ``[B, S, D]``, src_ids ``[B, S]``, tgt_in_ids ``[B, T]`` -> logits ``[B, T, V]``.
    """
    return model.decode(
        tgt_in_ids,
        memory,
        src_ids,
        tgt_mask=tgt_mask,
        tgt_key_padding_mask=tgt_key_padding_mask,
        hide_source_padding=hide_padded_memory,
    )


@dataclass
class _Run:
    """One forward pass, its loss and every parameter's gradient."""

    logits: Tensor  # [B, T, V]
    loss: Tensor  # scalar
    gradients: dict[str, Tensor]
    memory: Tensor | None = None  # [B, S, D]


def _run(
    model: Seq2SeqTransformer,
    forward: Callable[[], tuple[Tensor, Tensor | None]],
    tgt_out_ids: Tensor,
    ignore_index: int,
) -> _Run:
    """Call ``forward`` (-> logits, memory), take the loss and the gradient of every parameter.

    With padding counted (`_NO_IGNORE_INDEX`) the loss is summed, not averaged: a control row measures it, and a mean
    over every position diluted an untrained model's small change at the padded ones below the tolerance.
    """
    logits, memory = forward()
    reduction: Literal["mean", "sum"] = "sum" if ignore_index == _NO_IGNORE_INDEX else "mean"
    loss = label_smoothed_cross_entropy(
        logits, tgt_out_ids, smoothing=_SMOOTHING, ignore_index=ignore_index, reduction=reduction
    )
    named = [(name, parameter) for name, parameter in model.named_parameters() if parameter.requires_grad]
    gradients = torch.autograd.grad(loss, [parameter for _, parameter in named], allow_unused=True)
    return _Run(
        logits=logits.detach(),
        loss=loss.detach(),
        gradients={
            name: torch.zeros_like(parameter) if gradient is None else gradient
            for (name, parameter), gradient in zip(named, gradients)
        },
        memory=None if memory is None else memory.detach(),
    )


def _max_difference(first: Tensor, second: Tensor, where: Tensor | None = None) -> float:
    """Largest ``|first - second|`` over the positions ``where`` (``[B, L]`` bool) or everywhere."""
    difference = (first - second).abs()
    if where is not None:
        difference = difference[where]  # [positions, ...]
    return float(difference.max()) if difference.numel() else 0.0


def _max_gradient_difference(first: _Run, second: _Run) -> float:
    return max(_max_difference(first.gradients[name], second.gradients[name]) for name in first.gradients)


def _real_positions(ids: Tensor, pad_id: int) -> Tensor:
    """Shape: ids ``[B, L]`` -> ``[B, L]`` bool, True at real (non-pad) tokens."""
    return ~masks.padding_mask(ids, pad_id)


def _number_of_heads(model: Seq2SeqTransformer) -> int:
    return model.transformer.nhead


# ----------------------------------------------------------------------------------------
# The experiments
# ----------------------------------------------------------------------------------------
def tgt_padding_mask_experiment(setup: LabSetup, tolerance: float = DEFAULT_TOLERANCE) -> LabResult:
    """The decoder with and without ``tgt_key_padding_mask``, everything else the same.

    Claim: the loss (padding ignored), every parameter's gradient and the logits at real
    target positions are equal; only the logits at padded positions differ, and those are
    never read by the loss. Why: with the causal mask a real query at position t sees keys
    ``0..t``, all real (targets are right-padded), so the key padding mask changes only the
    rows of padded queries.
    """
    model, batch = setup.model, setup.batch
    pad_id = model.pad_id
    target_padding = masks.padding_mask(batch.tgt_in_ids, pad_id)  # [B, T]
    real_targets = ~target_padding  # [B, T]

    def forward(with_mask: bool) -> Callable[[], tuple[Tensor, Tensor | None]]:
        def run() -> tuple[Tensor, Tensor | None]:
            memory = _encode(model, batch.src_ids)
            logits = _decode(
                model,
                memory,
                batch.src_ids,
                batch.tgt_in_ids,
                tgt_key_padding_mask=target_padding if with_mask else None,
            )
            return logits, memory

        return run

    with_mask = _run(model, forward(True), batch.tgt_out_ids, pad_id)
    without_mask = _run(model, forward(False), batch.tgt_out_ids, pad_id)
    counted_with = _run(model, forward(True), batch.tgt_out_ids, _NO_IGNORE_INDEX)
    counted_without = _run(model, forward(False), batch.tgt_out_ids, _NO_IGNORE_INDEX)

    # Where self-attention looks without the mask: the weight real queries give padded keys.
    with torch.no_grad(), recording_shapes(keep_tensors=True) as recorder:
        memory = _encode(model, batch.src_ids)
        _decode(model, memory, batch.src_ids, batch.tgt_in_ids)
    self_attention_weights = [
        record.tensor  # [B, H, T, T]
        for record in recorder.records
        if record.name == ATTENTION_WEIGHTS
        and record.scope.startswith("decoder")
        and record.scope.endswith("self_attn")
        and record.tensor is not None
    ]
    if len(self_attention_weights) != len(_stacks(model)[1].layers):
        leaked = math.inf  # not measured: the row must fail rather than pass with a 0 nobody saw
    else:
        leaked = 0.0
        for weights in self_attention_weights:
            to_padded_keys = (weights * target_padding[:, None, None, :]).sum(dim=-1)  # [B, H, T]
            from_real_queries = to_padded_keys.permute(0, 2, 1)[real_targets]  # [real positions, H]
            leaked = max(leaked, float(from_real_queries.max()))

    comparisons = [
        Comparison("loss (ignore_index = pad)", _max_difference(with_mask.loss, without_mask.loss), tolerance, True),
        Comparison("every parameter's gradient", _max_gradient_difference(with_mask, without_mask), tolerance, True),
        Comparison(
            "logits at real target positions",
            _max_difference(with_mask.logits, without_mask.logits, real_targets),
            tolerance,
            True,
        ),
        Comparison("weight from real queries to padded keys (no mask)", leaked, tolerance, True),
        Comparison(
            "logits at padded target positions",
            _max_difference(with_mask.logits, without_mask.logits, target_padding),
            tolerance,
            False,
        ),
        Comparison(
            "loss summed with padded positions counted",
            _max_difference(counted_with.loss, counted_without.loss),
            tolerance,
            False,
        ),
    ]
    return LabResult(
        name="tgt-padding-mask",
        claim="the decoder needs no target key padding mask when the loss ignores padding",
        setup=setup.description,
        comparisons=comparisons,
        notes=[
            "the causal mask already keeps every real query away from the padded keys (they lie in its future)",
            "the padded positions' logits differ, but ignore_index = pad drops them from the loss; "
            "counted as a class, they would change it (last row)",
        ],
    )


def encoder_row_mask_experiment(setup: LabSetup, tolerance: float = DEFAULT_TOLERANCE) -> LabResult:
    """The encoder with and without a row mask on padded queries (columns hidden in both).

    Claim: nothing that reaches the loss changes (memory at real positions, every logit,
    the loss, every gradient), because every decoder layer's cross-attention hides the
    padded memory positions with ``memory_key_padding_mask``. Without that mask the padded
    memory rows are read, and then the row mask (and the mask itself) does matter.
    """
    model, batch = setup.model, setup.batch
    pad_id = model.pad_id
    source_padding = masks.padding_mask(batch.src_ids, pad_id)  # [B, S]
    row_mask = masks.padded_query_rows_mask(source_padding, _number_of_heads(model))  # [B*H, S, S]
    real_targets = _real_positions(batch.tgt_in_ids, pad_id)  # [B, T]

    def forward(rows_hidden: bool, hide_padded_memory: bool = True) -> Callable[[], tuple[Tensor, Tensor | None]]:
        def run() -> tuple[Tensor, Tensor | None]:
            memory = _encode(model, batch.src_ids, row_mask if rows_hidden else None)  # [B, S, D]
            logits = _decode(model, memory, batch.src_ids, batch.tgt_in_ids, hide_padded_memory=hide_padded_memory)
            return logits, memory

        return run

    columns_only = _run(model, forward(False), batch.tgt_out_ids, pad_id)
    rows_too = _run(model, forward(True), batch.tgt_out_ids, pad_id)
    with torch.no_grad():
        columns_only_open = forward(False, hide_padded_memory=False)()[0]  # [B, T, V]
        rows_too_open = forward(True, hide_padded_memory=False)()[0]  # [B, T, V]
    assert rows_too.memory is not None and columns_only.memory is not None
    non_finite = float((~torch.isfinite(rows_too.memory)).sum())

    comparisons = [
        Comparison(
            "memory at real source positions",
            _max_difference(rows_too.memory, columns_only.memory, ~source_padding),
            tolerance,
            True,
        ),
        Comparison("non-finite memory values with rows hidden", non_finite, tolerance, True),
        Comparison(
            "logits at every target position", _max_difference(rows_too.logits, columns_only.logits), tolerance, True
        ),
        Comparison("loss", _max_difference(rows_too.loss, columns_only.loss), tolerance, True),
        Comparison("every parameter's gradient", _max_gradient_difference(rows_too, columns_only), tolerance, True),
        Comparison(
            "memory at padded source positions",
            _max_difference(rows_too.memory, columns_only.memory, source_padding),
            tolerance,
            False,
        ),
        Comparison(
            "logits without memory_key_padding_mask vs with",
            _max_difference(columns_only_open, columns_only.logits, real_targets),
            tolerance,
            False,
        ),
        Comparison(
            "without memory_key_padding_mask: rows hidden vs not",
            _max_difference(rows_too_open, columns_only_open, real_targets),
            tolerance,
            False,
        ),
    ]
    return LabResult(
        name="encoder-row-mask",
        claim="hiding the encoder's padded rows changes nothing that reaches the loss",
        setup=setup.description,
        comparisons=comparisons,
        notes=[
            "rows hidden: a 3-D attn_mask [B*H, S, S] from masks.padded_query_rows_mask, on top of the "
            "src_key_padding_mask; a fully hidden row gives a zero mixture here (torch's explicit path: NaN)",
            "only the padded memory rows change, and memory_key_padding_mask hides exactly those rows "
            "from every cross-attention; the last two rows show what happens without it",
        ],
    )


def decoder_rows_experiment(setup: LabSetup, tolerance: float = DEFAULT_TOLERANCE) -> LabResult:
    """The decoder's self-attention with and without padded target rows hidden.

    The tutorial's closing question: the decoder's masked self-attention hides only
    columns, so what hides its padded rows? The loss's ``ignore_index``: with it, hiding
    the rows changes neither the loss nor any gradient; without it, both change.
    """
    model, batch = setup.model, setup.batch
    pad_id = model.pad_id
    target_padding = masks.padding_mask(batch.tgt_in_ids, pad_id)  # [B, T]
    target_len = batch.tgt_in_ids.shape[1]
    causal = masks.causal_mask(target_len, device=batch.tgt_in_ids.device)  # [T, T]
    causal_and_rows = masks.padded_query_rows_mask(
        target_padding, _number_of_heads(model), attn_mask=causal
    )  # [B*H, T, T]

    def forward(rows_hidden: bool) -> Callable[[], tuple[Tensor, Tensor | None]]:
        def run() -> tuple[Tensor, Tensor | None]:
            memory = _encode(model, batch.src_ids)
            tgt_mask = causal_and_rows if rows_hidden else causal
            return _decode(model, memory, batch.src_ids, batch.tgt_in_ids, tgt_mask=tgt_mask), memory

        return run

    columns_only = _run(model, forward(False), batch.tgt_out_ids, pad_id)
    rows_too = _run(model, forward(True), batch.tgt_out_ids, pad_id)
    counted_columns_only = _run(model, forward(False), batch.tgt_out_ids, _NO_IGNORE_INDEX)
    counted_rows_too = _run(model, forward(True), batch.tgt_out_ids, _NO_IGNORE_INDEX)
    comparisons = [
        Comparison(
            "logits at real target positions",
            _max_difference(rows_too.logits, columns_only.logits, ~target_padding),
            tolerance,
            True,
        ),
        Comparison("loss (ignore_index = pad)", _max_difference(rows_too.loss, columns_only.loss), tolerance, True),
        Comparison(
            "every parameter's gradient (ignore_index = pad)",
            _max_gradient_difference(rows_too, columns_only),
            tolerance,
            True,
        ),
        Comparison(
            "logits at padded target positions",
            _max_difference(rows_too.logits, columns_only.logits, target_padding),
            tolerance,
            False,
        ),
        Comparison(
            "loss summed without ignore_index",
            _max_difference(counted_rows_too.loss, counted_columns_only.loss),
            tolerance,
            False,
        ),
        Comparison(
            "every parameter's gradient without ignore_index",
            _max_gradient_difference(counted_rows_too, counted_columns_only),
            tolerance,
            False,
        ),
    ]
    return LabResult(
        name="decoder-rows",
        claim="in the decoder, the loss's ignore_index does what hiding padded rows would do",
        setup=setup.description,
        comparisons=comparisons,
        notes=[
            "rows hidden: tgt_mask = masks.padded_query_rows_mask(target padding, H, attn_mask=causal_mask(T)), "
            "[B*H, T, T]",
            "a padded row of tgt_in_ids is exactly a pad of tgt_out_ids, so ignore_index = pad removes those "
            "rows from the loss, and with them every path from them to a gradient",
        ],
    )


def key_padding_polarity_experiment(setup: LabSetup, tolerance: float = DEFAULT_TOLERANCE) -> LabResult:
    """The two bool-mask conventions side by side, and what mixing them does.

    The Annotated Transformer's masks say True = may attend: ``(src != pad).unsqueeze(-2)``
    (``[B, 1, S]``) and a lower-triangular "subsequent" mask. PyTorch's and this package's
    say True = hidden. Converted with :func:`~transformer_lab.nn.masks.keep_to_hidden`
    they give the same numbers; passed unconverted, the real tokens are hidden instead of
    the padding (and rows without padding see nothing), and the causal mask shows the
    future instead of hiding it. The checks refuse the mix-ups that show in shape or dtype.
    """
    model, batch = setup.model, setup.batch
    pad_id = model.pad_id
    src_ids = batch.src_ids
    source_padding = masks.padding_mask(src_ids, pad_id)  # [B, S], ours: True = padding
    real_sources = ~source_padding  # [B, S]
    # The Annotated Transformer's own expressions, reproduced as the foreign input under study.
    annotated_source_mask = (src_ids != pad_id).unsqueeze(-2)  # [B, 1, S], True = keep
    target_len = batch.tgt_in_ids.shape[1]
    annotated_subsequent_mask = torch.tril(torch.ones(target_len, target_len, dtype=torch.bool))  # [T, T], True = keep
    converted = masks.keep_to_hidden(annotated_source_mask).squeeze(1)  # [B, S], True = padding

    encoder_input = model.embed_source(src_ids).detach()  # [B, S, D]
    first_layer = _stacks(model)[0].layers[0]
    assert isinstance(first_layer, TransformerEncoderLayer), type(first_layer)
    first_attention = first_layer.self_attn

    def attend(key_padding_mask: Tensor) -> tuple[Tensor, Tensor]:
        """First encoder self-attention: output ``[B, S, D]`` and weights ``[B, S, S]``."""
        output, weights = first_attention(
            encoder_input, encoder_input, encoder_input, key_padding_mask=key_padding_mask
        )
        assert weights is not None
        return output, weights

    with torch.no_grad():
        ours_output, ours_weights = attend(source_padding)
        converted_output, _ = attend(converted)
        mixed_mask = annotated_source_mask.squeeze(1)  # [B, S], True = keep, taken as True = hidden
        mixed_output, mixed_weights = attend(mixed_mask)
        rows_with_padding = source_padding.any(dim=1)  # [B]
        weight_on_padding = (ours_weights * source_padding[:, None, :]).sum(dim=-1)  # [B, S]
        mixed_weight_on_real = (mixed_weights * real_sources[:, None, :]).sum(dim=-1)  # [B, S]
        fully_hidden = masks.fully_hidden_rows(mixed_mask[:, None, :].expand(-1, src_ids.shape[1], -1))  # [B, S, 1]
        non_finite = float((~torch.isfinite(mixed_output)).sum())

        memory = _encode(model, src_ids)  # [B, S, D]
        changed_future = batch.tgt_in_ids.clone()  # [B, T]
        visible_until = 1  # positions 0..1 are compared; every later token is replaced
        later = changed_future[:, visible_until + 1 :]  # [B, T - 2]
        # Every later position gets another ordinary symbol (ids from 4 on), deterministically.
        changed_future[:, visible_until + 1 :] = 4 + (later + 1) % (model.tgt_vocab_size - 4)
        causal = masks.causal_mask(target_len)  # [T, T]
        converted_causal = masks.keep_to_hidden(annotated_subsequent_mask)  # [T, T]

        def future_leak(tgt_mask: Tensor) -> float:
            before = _decode(model, memory, src_ids, batch.tgt_in_ids, tgt_mask=tgt_mask)[:, : visible_until + 1]
            after = _decode(model, memory, src_ids, changed_future, tgt_mask=tgt_mask)[:, : visible_until + 1]
            return _max_difference(before, after)

        comparisons = [
            Comparison(
                "keep_to_hidden(Annotated mask) vs padding_mask: entries",
                float((converted != source_padding).sum()),
                tolerance,
                True,
            ),
            Comparison(
                "attention output, converted vs padding_mask",
                _max_difference(converted_output, ours_output),
                tolerance,
                True,
            ),
            Comparison("weight on padded keys with padding_mask", float(weight_on_padding.max()), tolerance, True),
            Comparison(
                "keep_to_hidden(subsequent mask) vs causal_mask: entries",
                float((converted_causal != causal).sum()),
                tolerance,
                True,
            ),
            Comparison("logits 0..1 after changing later tokens, causal_mask", future_leak(causal), tolerance, True),
            Comparison(
                "mixed: attention output at real positions",
                _max_difference(mixed_output, ours_output, real_sources),
                tolerance,
                False,
            ),
            Comparison(
                "mixed: weight on real keys (rows with padding)",
                float(mixed_weight_on_real[rows_with_padding].max()),
                tolerance,
                True,
            ),
            Comparison(
                "mixed: query rows with every key hidden",
                float(fully_hidden[~rows_with_padding].sum()),
                tolerance,
                False,
            ),
            Comparison("mixed: non-finite outputs (zero mixture, not NaN)", non_finite, tolerance, True),
            Comparison(
                "mixed: logits 0..1 after changing later tokens",
                future_leak(annotated_subsequent_mask),
                tolerance,
                False,
            ),
        ]

    guards = [
        _guard(
            "the Annotated source mask [B, 1, S] given as key_padding_mask",
            lambda: first_attention(
                encoder_input, encoder_input, encoder_input, key_padding_mask=annotated_source_mask
            ),
        ),
        _guard(
            "an integer 0/1 keep mask given as key_padding_mask",
            lambda: first_attention(
                encoder_input, encoder_input, encoder_input, key_padding_mask=annotated_source_mask.squeeze(1).long()
            ),
        ),
        _guard(
            "an integer 0/1 keep mask given to keep_to_hidden",
            lambda: masks.keep_to_hidden(annotated_source_mask.long()),
        ),
    ]
    return LabResult(
        name="key-padding-polarity",
        claim="'True = keep' and 'True = padding' masks agree once converted, and break when mixed",
        setup=setup.description,
        comparisons=comparisons,
        guards=guards,
        notes=[
            "rows before 'mixed': the Annotated Transformer's masks converted with masks.keep_to_hidden "
            "give the same masks and numbers as masks.padding_mask / masks.causal_mask",
            "'mixed' rows: the keep mask passed unconverted; real queries then attend only to padding, "
            "rows without padding see nothing, and the subsequent mask shows the future instead of hiding it",
            "build masks from ids with masks.padding_mask (True = padding), convert foreign masks only "
            "with masks.keep_to_hidden; a bool [B, S] mask of the wrong polarity has the right shape and "
            "dtype, so no check can see it: only the numbers above can",
        ],
    )


def _guard(description: str, action: Callable[[], object]) -> GuardCheck:
    try:
        with torch.no_grad():
            action()
    except ValueError as error:
        return GuardCheck(description, str(error))
    return GuardCheck(description, None)


EXPERIMENTS: dict[str, Callable[..., LabResult]] = {
    "tgt-padding-mask": tgt_padding_mask_experiment,
    "encoder-row-mask": encoder_row_mask_experiment,
    "decoder-rows": decoder_rows_experiment,
    "key-padding-polarity": key_padding_polarity_experiment,
}


def run_experiment(name: str, setup: LabSetup, tolerance: float = DEFAULT_TOLERANCE) -> LabResult:
    """Run the experiment called ``name`` (a key of :data:`EXPERIMENTS`) on ``setup``."""
    if name not in EXPERIMENTS:
        raise ValueError(f"experiment: expected one of {sorted(EXPERIMENTS)}, got {name!r}")
    if not tolerance >= 0.0:
        raise ValueError(f"tolerance: expected a number >= 0, got {tolerance!r}")
    return EXPERIMENTS[name](setup, tolerance=tolerance)
