"""The complete encoder-decoder model for sequence-to-sequence tasks (batch-first).

Shape legend: B batch, S source length, T target length, D d_model, V vocabulary.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from transformer_lab import nn as lab_nn
from transformer_lab.models.config import ModelConfig
from transformer_lab.models.embedding import (
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    check_token_ids,
    reads_id_range,
)
from transformer_lab.nn import arguments, host_reads, masks
from transformer_lab.nn.decoder_step import DecoderStep

__all__ = ["Seq2SeqTransformer"]

_TIE_CHOICES = ("none", "decoder", "all")


class Seq2SeqTransformer(nn.Module):
    """Embeddings x sqrt(d_model) + sinusoidal positions, the Transformer, a generator to logits.

    Masks are derived from the token ids: the source padding mask from ``pad_id`` (used by
    the encoder's self-attention and by every decoder layer's cross-attention), and the
    causal mask for the target. No target key padding mask is needed: a padded target
    position is only ever seen by later (also padded) positions, and the loss ignores them.

    It implements the decoding protocol of ``transformer_lab.decoding``: ``encode``,
    ``new_cache``, ``decode_step``, ``bos_id`` / ``eos_id`` / ``pad_id`` and ``max_len``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        max_len: int = 512,
        pad_id: int = 0,
        tie_embeddings: str = "none",
        bos_id: int = 2,
        eos_id: int = 3,
        aligned_decoder_input: bool = False,
    ) -> None:
        super().__init__()
        if tie_embeddings not in _TIE_CHOICES:
            raise ValueError(f"tie_embeddings must be one of {_TIE_CHOICES}, got {tie_embeddings!r}")
        if tie_embeddings == "all" and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                "tie_embeddings='all': expected one shared vocabulary (src_vocab_size equal to tgt_vocab_size), "
                f"got src_vocab_size={src_vocab_size} and tgt_vocab_size={tgt_vocab_size}"
            )
        for name, token_id in (("pad_id", pad_id), ("bos_id", bos_id), ("eos_id", eos_id)):
            if not 0 <= token_id < tgt_vocab_size:
                raise ValueError(f"{name}: expected an id in [0, tgt_vocab_size={tgt_vocab_size}), got {token_id}")
        self.src_embedding = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embedding = TokenEmbedding(tgt_vocab_size, d_model)
        self.positional_encoding = SinusoidalPositionalEncoding(d_model, max_len, dropout)
        self.transformer = lab_nn.Transformer(
            d_model=d_model,
            nhead=nhead,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            batch_first=True,
            norm_first=norm_first,
        )
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        # Xavier-uniform on every matrix, embeddings included, as the paper's code does.
        for parameter in self.parameters():
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)
        if tie_embeddings in ("decoder", "all"):
            self.generator.weight = self.tgt_embedding.embedding.weight
        if tie_embeddings == "all":
            self.src_embedding.embedding.weight = self.tgt_embedding.embedding.weight
        self.src_vocab_size = src_vocab_size
        self.tgt_vocab_size = tgt_vocab_size
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.aligned_decoder_input = aligned_decoder_input
        # The positions either side can read: the searches stop there (decoding protocol).
        self.max_len = max_len

    @classmethod
    def from_config(cls, config: ModelConfig) -> "Seq2SeqTransformer":
        # The config's fields are the constructor's arguments, name for name.
        return cls(**{field.name: getattr(config, field.name) for field in dataclasses.fields(config)})

    def embed_source(self, src_ids: Tensor) -> Tensor:
        """What the encoder's first layer reads: token embeddings x sqrt(d_model) plus positions.

        Shape:
            src_ids ``[B, S]`` -> ``[B, S, D]``.
        """
        check_token_ids(src_ids, self.src_vocab_size, "src_ids", check_range=reads_id_range(self, src_ids))
        return self.positional_encoding(self.src_embedding(src_ids))  # [B, S, D]

    def encode(self, src_ids: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Encode source ids into the memory every decoder layer reads.

        ``src_mask`` (torch's name) is an extra attention mask for the encoder's
        self-attention, ``[S, S]`` or ``[B*H, S, S]``, beside the key padding mask that
        ``src_ids`` give; the lab uses it to hide padded rows.

        Shape:
            src_ids ``[B, S]`` -> memory ``[B, S, D]``.
        """
        src_emb = self.embed_source(src_ids)  # [B, S, D]
        src_padding_mask = masks.padding_mask(src_ids, self.pad_id)  # [B, S]
        return self.transformer.encoder(src_emb, mask=src_mask, src_key_padding_mask=src_padding_mask)  # [B, S, D]

    def decode(
        self,
        tgt_in_ids: Tensor,
        memory: Tensor,
        src_ids: Tensor,
        tgt_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        hide_source_padding: bool = True,
        *,
        apply_generator: bool = True,
    ) -> Tensor:
        """Logits for every target position (teacher forcing).

        The masks are the model's own unless given (the seam the lab studies them through):
        ``tgt_mask`` defaults to the causal mask, no target key padding mask (the loss
        ignores padding), and the memory's padded positions hidden from cross-attention
        (``hide_source_padding=False`` shows them). ``apply_generator=False`` returns the
        decoder's hidden states instead, for a loss that applies :attr:`generator` itself.

        Shape:
            tgt_in_ids ``[B, T]``, memory ``[B, S, D]``, src_ids ``[B, S]`` -> ``[B, T, V]``
            (``[B, T, D]`` without the generator).
        """
        check_token_ids(tgt_in_ids, self.tgt_vocab_size, "tgt_in_ids", check_range=reads_id_range(self, tgt_in_ids))
        self._check_memory(memory, src_ids, tgt_in_ids.shape[0])
        # A true string ("no") was read as True: the logits where the hidden states were asked for.
        apply_generator = arguments.check_flag("apply_generator", apply_generator)
        hide_source_padding = arguments.check_flag("hide_source_padding", hide_source_padding)
        tgt_emb = self.positional_encoding(self.tgt_embedding(tgt_in_ids))  # [B, T, D]
        tgt_emb = self._add_aligned_memory(tgt_emb, memory, src_ids, offset=0)
        causal = tgt_mask is None
        if causal:
            tgt_mask = masks.causal_mask(tgt_in_ids.shape[1], device=tgt_in_ids.device)  # [T, T]
        hidden = self.transformer.decoder(
            tgt_emb,
            memory,
            tgt_mask=tgt_mask,
            tgt_is_causal=causal,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=masks.padding_mask(src_ids, self.pad_id) if hide_source_padding else None,  # [B, S]
        )  # [B, T, D]
        return self.generator(hidden) if apply_generator else hidden  # [B, T, V] or [B, T, D]

    def forward(self, src_ids: Tensor, tgt_in_ids: Tensor, *, apply_generator: bool = True) -> Tensor:
        """Logits for every target position; the decoder's hidden states with ``apply_generator=False``.

        The training loss asks for the hidden states through this call (under
        ``torchrun`` the model is wrapped, and only its forward prepares the gradients'
        all-reduce) and applies the generator a chunk of rows at a time.

        Shape: src_ids ``[B, S]``, tgt_in_ids ``[B, T]`` -> logits ``[B, T, V]`` (hidden ``[B, T, D]``).
        """
        shaped = isinstance(src_ids, Tensor) and isinstance(tgt_in_ids, Tensor)  # else encode and decode name them
        if shaped and src_ids.dim() == 2 and tgt_in_ids.dim() == 2 and src_ids.shape[0] != tgt_in_ids.shape[0]:
            raise ValueError(
                "src_ids and tgt_in_ids must have the same batch size, "
                f"got {src_ids.shape[0]} and {tgt_in_ids.shape[0]}"
            )
        return self.decode(tgt_in_ids, self.encode(src_ids), src_ids, apply_generator=apply_generator)

    def new_cache(self) -> lab_nn.DecoderCache:
        """An empty key/value cache for :meth:`decode_step`."""
        decoder = self.transformer.decoder
        assert isinstance(decoder, lab_nn.TransformerDecoder)  # __init__ builds the stacks itself
        return decoder.new_cache()

    def decode_step(
        self, tgt_prefix_ids: Tensor, memory: Tensor, src_ids: Tensor, cache: lab_nn.DecoderCache | None = None
    ) -> Tensor:
        """Logits of the token that follows ``tgt_prefix_ids``.

        Without a cache the whole prefix runs through the decoder (the tutorials' method).
        With a cache only the positions not yet cached run (one per step after the first)
        and their keys/values are appended; a single new position in plain inference goes
        through the decoder's single-position step (``nn/decoder_step.py``), which computes
        the same as the modules in far fewer operator calls.

        Shape:
            tgt_prefix_ids ``[B, t]``, memory ``[B, S, D]``, src_ids ``[B, S]`` -> ``[B, V]``.
        """
        if cache is None:
            return self.decode(tgt_prefix_ids, memory, src_ids)[:, -1]  # [B, V]
        cached = cache.length
        if tgt_prefix_ids.shape[1] <= cached:
            raise ValueError(
                f"tgt_prefix_ids must be longer than the {cached} cached positions, "
                f"got length {tgt_prefix_ids.shape[1]}"
            )
        new_ids = tgt_prefix_ids[:, cached:]  # [B, t - cached]
        # After the first step, a device whose reads wait (nn/host_reads.py) is not asked for
        # the ids' range at every step: the searches feed back their own choices among the V
        # logits, and the embedding still bounds-checks on the device.
        check_range = cached == 0 or not host_reads.host_reads_wait(new_ids.device)
        check_token_ids(new_ids, self.tgt_vocab_size, "tgt_prefix_ids", check_range=check_range)
        self._check_memory(memory, src_ids, new_ids.shape[0])
        new_emb = self.positional_encoding(self.tgt_embedding(new_ids), offset=cached)  # [B, t_new, D]
        new_emb = self._add_aligned_memory(new_emb, memory, src_ids, offset=cached)
        memory_padding_mask = self._memory_padding_mask(src_ids, cache)  # [B, S] or None
        step = self._single_position_step(cache)
        if step is not None and not self.training and DecoderStep.applies(new_emb, cache):
            last = step(new_emb[:, 0], cache, memory_padding_mask)  # [B, D]
        else:
            hidden = self.transformer.decoder(
                new_emb, memory, memory_key_padding_mask=memory_padding_mask, cache=cache
            )  # [B, t_new, D]
            last = hidden[:, -1]  # [B, D]
        return self._cached_generator(last, cache)  # [B, V]

    def _single_position_step(self, cache: lab_nn.DecoderCache) -> DecoderStep | None:
        """The decoder's single-position step for this run (``nn/decoder_step.py``), or None where it cannot apply.

        Built once per run: it reads the decoder's parameters as they are (views). None when
        the decoder has something the step does not cover, or when a source row of this run
        has every position padded (the modules give such rows their defined output).
        """
        if cache.derived.get("source_fully_hidden", False):
            return None
        if "decoder_step" not in cache.derived:
            decoder = self.transformer.decoder
            assert isinstance(decoder, lab_nn.TransformerDecoder)  # __init__ builds the stacks itself
            cache.derived["decoder_step"] = (
                DecoderStep(decoder) if DecoderStep.unsupported_reason(decoder) is None else None
            )
        step = cache.derived["decoder_step"]
        assert step is None or isinstance(step, DecoderStep)
        return step

    def _memory_padding_mask(self, src_ids: Tensor, cache: lab_nn.DecoderCache) -> Tensor | None:
        """The source's key padding mask ``[B, S]``, built once per source tensor of a run; None without padding.

        The searches pass the same ``src_ids`` at every step until they drop finished rows,
        so the mask (and whether it hides anything, which costs a device sync to ask) is
        kept in the run's cache for that tensor and that version of it. Without padding
        the cross-attention then skips its mask checks, merge and hidden-row test in
        every layer at every step.
        """
        # Inference-mode tensors keep no version counter; for them identity alone decides.
        version = None if src_ids.is_inference() else src_ids._version
        source, source_version, mask = cache.derived.get("memory_padding", (None, None, None))
        if source is src_ids and source_version == version:
            return mask
        mask = masks.padding_mask(src_ids, self.pad_id)  # [B, S]
        # Both questions in one read (on an accelerator each read waits for the device);
        # the second is for the single-position step.
        padded, fully_hidden = torch.stack([mask.any(), mask.all(dim=1).any()]).tolist()
        cache.derived["memory_padding"] = (src_ids, version, mask if padded else None)
        cache.derived["source_fully_hidden"] = fully_hidden
        return mask if padded else None

    def _cached_generator(self, hidden: Tensor, cache: lab_nn.DecoderCache) -> Tensor:
        """The generator for one decoding run: ``hidden @ W^T + b`` with ``W^T`` made contiguous once.

        With the (possibly tied) weight ``[V, D]`` as it is, every step multiplies by a
        transposed view, which the CPU's kernels multiply slower than a contiguous ``[D, V]``
        copy (docs/results.md#ctranslate2). The copy lives in the run's cache, so it can never
        outlive the weights it was made from. Anything but a plain Linear (the int8
        copy's quantized layer), a hooked generator, autocast or autograd keeps the module's own call.

        Shape: hidden ``[B, D]`` -> ``[B, V]``.
        """
        generator = self.generator
        hooked = bool(generator._forward_hooks or generator._forward_pre_hooks)  # a hook expects the module's call
        if (
            type(generator) is not nn.Linear
            or hooked
            or torch.is_autocast_enabled(hidden.device.type)
            or torch.is_grad_enabled()
        ):
            return generator(hidden)
        weight_t = cache.derived.get("generator_weight_t")
        if weight_t is None or weight_t.dtype != hidden.dtype or weight_t.device != hidden.device:
            weight_t = generator.weight.detach().t().contiguous().to(hidden.dtype)  # [D, V]
            cache.derived["generator_weight_t"] = weight_t
        if generator.bias is None:
            return hidden @ weight_t
        return torch.addmm(generator.bias.detach().to(hidden.dtype), hidden, weight_t)  # [B, V]

    def _add_aligned_memory(self, tgt_emb: Tensor, memory: Tensor, src_ids: Tensor, offset: int) -> Tensor:
        """With ``aligned_decoder_input``: target position ``offset + t`` gets memory position ``offset + t``.

        Target positions past the source, or facing source padding, get nothing (the memory
        there is not a real token's). Shape: tgt_emb ``[B, t, D]``, memory ``[B, S, D]`` ->
        ``[B, t, D]``.
        """
        if not self.aligned_decoder_input:
            return tgt_emb
        length = tgt_emb.shape[1]
        aligned = memory[:, offset : offset + length]  # [B, <=t, D]
        real = ~masks.padding_mask(src_ids[:, offset : offset + length], self.pad_id)  # [B, <=t]
        aligned = aligned * real.unsqueeze(-1).to(aligned.dtype)  # [B, <=t, D]
        if aligned.shape[1] < length:
            aligned = nn.functional.pad(aligned, (0, 0, 0, length - aligned.shape[1]))  # [B, t, D]
        return tgt_emb + aligned.to(tgt_emb.dtype)

    def _check_memory(self, memory: Tensor, src_ids: Tensor, batch_size: int) -> None:
        if memory.dim() != 3 or tuple(memory.shape[:2]) != tuple(src_ids.shape) or memory.shape[0] != batch_size:
            raise ValueError(
                "memory must have shape [batch, src_len, d_model] matching src_ids "
                f"{list(src_ids.shape)} and the target batch {batch_size}, got {list(memory.shape)}"
            )
