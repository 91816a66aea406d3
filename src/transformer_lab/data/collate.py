"""Collation: lists of id sequences into padded, batch-first tensors.

For sequence-to-sequence training the target is shifted by one ("teacher forcing"):
the decoder reads `<bos> y1 ... yn` and is trained to predict `y1 ... yn <eos>`, so

    tgt_in_ids  = bos + target      [B, T]
    tgt_out_ids = target + eos      [B, T]

both of length T = 1 + the longest target, padded with pad_id on the right. Masks are
not built here: `transformer_lab.nn.masks` builds them from these ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transformer_lab.data._checks import check_integer, is_integer


def to_device(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``tensor`` on ``device``; from the CPU to a CUDA GPU through pinned memory, without waiting.

    A copy from ordinary (pageable) memory makes the host wait until the GPU has run every
    kernel queued before it, once per batch; from pinned memory the copy is queued like a
    kernel (torch keeps the pinned block until the copy has run).
    """
    target = torch.device(device)
    if target.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(target, non_blocking=True)
    return tensor.to(target)


def _as_id_row(name: str, sequence: object) -> torch.Tensor:
    """One sequence of ids as a 1-D int64 tensor, refusing anything that is not integer.

    `torch.tensor([1.7], dtype=torch.long)` would quietly truncate to 1, so the dtype
    is inferred first and checked, then converted.
    """
    if isinstance(sequence, str):
        raise ValueError(f"{name} must be a sequence of integer ids, got a str {sequence[:40]!r}")
    try:
        row = torch.as_tensor(sequence)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"{name} must be a sequence of integer ids, got {sequence!r:.80} ({error})") from None
    if row.numel() == 0:
        return torch.empty(0, dtype=torch.long)
    if row.dim() != 1 or row.is_floating_point() or row.is_complex() or row.dtype == torch.bool:
        raise ValueError(
            f"{name} must be a 1-D sequence of integer ids, got dtype {row.dtype} " f"and shape {tuple(row.shape)}"
        )
    row = row.to(torch.long)
    if bool((row < 0).any()):
        raise ValueError(f"{name} must hold non-negative ids, got {int(row.min())}")
    return row


def _pad_rows(rows: list[torch.Tensor], pad_id: int) -> torch.Tensor:
    """Stack 1-D int64 rows into [N, longest], right-padded with pad_id."""
    longest = max(row.numel() for row in rows)
    padded = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    for index, row in enumerate(rows):
        padded[index, : row.numel()] = row
    return padded


def pad_sequences(sequences: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """Right-pad id sequences with pad_id into one int64 tensor.

    Empty inner sequences are allowed (their row is all padding); an empty list of
    sequences, a non-integer or a negative id is a ValueError.

    Shape:
        returns [N, L], N = len(sequences), L = the longest sequence.
    """
    pad_id = check_integer("pad_id", pad_id, minimum=0)
    if isinstance(sequences, (str, torch.Tensor)) or len(sequences) == 0:
        raise ValueError(f"sequences must be a non-empty list of id sequences, got {sequences!r:.80}")
    rows = [_as_id_row(f"sequences[{index}]", sequence) for index, sequence in enumerate(sequences)]
    return _pad_rows(rows, pad_id)


def collated_lengths(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[tuple[int, int]]:
    """The (source, target) length each pair takes once `collate_pairs` has collated it.

    The source length is len(source); the target length is len(target) + 1, for the bos of
    tgt_in_ids or the eos of tgt_out_ids. Pass these to `token_budget_batches` so that its
    token budget counts the tensors actually built.
    """
    lengths = []
    for index, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"pairs[{index}] must be a (source ids, target ids) pair, got {pair!r:.80}")
        lengths.append((len(pair[0]), len(pair[1]) + 1))
    return lengths


@dataclass
class Seq2SeqBatch:
    """A padded batch for sequence-to-sequence training.

    Attributes:
        src_ids: the sources, right-padded with pad_id.
        tgt_in_ids: the decoder inputs, bos + target, right-padded.
        tgt_out_ids: the decoder outputs to predict, target + eos, right-padded.
        num_target_tokens: the number of non-pad entries of tgt_out_ids, the number of
            predictions the loss averages over.
        num_source_tokens: the number of non-pad entries of src_ids (for throughput).

    Shape:
        src_ids [B, S]; tgt_in_ids [B, T]; tgt_out_ids [B, T].
    """

    src_ids: torch.Tensor
    tgt_in_ids: torch.Tensor
    tgt_out_ids: torch.Tensor
    num_target_tokens: int
    num_source_tokens: int

    def __post_init__(self) -> None:
        if self.src_ids.dim() != 2:
            raise ValueError(f"src_ids must have shape [B, S], got {tuple(self.src_ids.shape)}")
        if self.tgt_in_ids.dim() != 2 or self.tgt_in_ids.shape != self.tgt_out_ids.shape:
            raise ValueError(
                f"tgt_in_ids and tgt_out_ids must share one shape [B, T], got "
                f"{tuple(self.tgt_in_ids.shape)} and {tuple(self.tgt_out_ids.shape)}"
            )
        if self.src_ids.shape[0] != self.tgt_in_ids.shape[0]:
            raise ValueError(
                f"src_ids and tgt_in_ids must have the same batch size B, got "
                f"{self.src_ids.shape[0]} and {self.tgt_in_ids.shape[0]}"
            )

    @property
    def batch_size(self) -> int:
        """B, the number of pairs in the batch."""
        return self.src_ids.shape[0]

    def to(self, device: torch.device | str) -> Seq2SeqBatch:
        """A copy with every tensor on `device` (the counts stay Python ints), see :func:`to_device`."""
        return Seq2SeqBatch(
            src_ids=to_device(self.src_ids, device),
            tgt_in_ids=to_device(self.tgt_in_ids, device),
            tgt_out_ids=to_device(self.tgt_out_ids, device),
            num_target_tokens=self.num_target_tokens,
            num_source_tokens=self.num_source_tokens,
        )


def collate_pairs(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int, bos_id: int, eos_id: int
) -> Seq2SeqBatch:
    """Collate (source ids, target ids) pairs into a `Seq2SeqBatch`.

    The target gets bos in front for the decoder input and eos behind for the decoder
    output; the source stays as it is. A sequence that contains pad_id is a ValueError: its
    token would be hidden by the padding mask and not counted by the loss, silently. An
    empty source is a ValueError, since the encoder would have nothing to attend to; an
    empty target is fine (the model learns to emit eos at once).

    Shape:
        returns src_ids [B, S], tgt_in_ids [B, T], tgt_out_ids [B, T], B = len(pairs),
        S = the longest source, T = the longest target + 1.
    """
    pad_id = check_integer("pad_id", pad_id, minimum=0)
    bos_id = check_integer("bos_id", bos_id, minimum=0)
    eos_id = check_integer("eos_id", eos_id, minimum=0)
    if pad_id in (bos_id, eos_id):
        raise ValueError(
            f"pad_id must differ from bos_id and eos_id, got pad_id={pad_id}, " f"bos_id={bos_id}, eos_id={eos_id}"
        )
    if isinstance(pairs, (str, torch.Tensor)) or len(pairs) == 0:
        raise ValueError(f"pairs must be a non-empty list of (source ids, target ids), got {pairs!r:.80}")
    bos = torch.tensor([bos_id], dtype=torch.long)
    eos = torch.tensor([eos_id], dtype=torch.long)
    sources, targets_in, targets_out = [], [], []
    for index, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"pairs[{index}] must be a (source ids, target ids) pair, got {pair!r:.80}")
        source = _as_id_row(f"pairs[{index}] source", pair[0])
        target = _as_id_row(f"pairs[{index}] target", pair[1])
        for side, row in (("source", source), ("target", target)):
            if bool((row == pad_id).any()):
                raise ValueError(f"pairs[{index}] {side} must not contain pad_id {pad_id}, got {row.tolist()!r:.80}")
        if source.numel() == 0:
            raise ValueError(f"pairs[{index}] source must be non-empty, got []")
        sources.append(source)
        targets_in.append(torch.cat([bos, target]))
        targets_out.append(torch.cat([target, eos]))
    src_ids = _pad_rows(sources, pad_id)
    tgt_out_ids = _pad_rows(targets_out, pad_id)
    return Seq2SeqBatch(
        src_ids=src_ids,
        tgt_in_ids=_pad_rows(targets_in, pad_id),
        tgt_out_ids=tgt_out_ids,
        num_target_tokens=int((tgt_out_ids != pad_id).sum()),
        num_source_tokens=int((src_ids != pad_id).sum()),
    )


@dataclass
class ClassificationBatch:
    """A padded batch for sequence classification.

    Attributes:
        token_ids: the token ids, right-padded with pad_id.
        labels: the class index of each sequence.

    Shape:
        token_ids [B, S]; labels [B].
    """

    token_ids: torch.Tensor
    labels: torch.Tensor

    def __post_init__(self) -> None:
        shapes_agree = self.labels.dim() == 1 and self.labels.shape[0] == self.token_ids.shape[0]
        if self.token_ids.dim() != 2 or not shapes_agree:
            raise ValueError(
                f"token_ids must have shape [B, S] and labels [B], got "
                f"{tuple(self.token_ids.shape)} and {tuple(self.labels.shape)}"
            )

    @property
    def batch_size(self) -> int:
        """B, the number of sequences in the batch."""
        return self.token_ids.shape[0]

    def to(self, device: torch.device | str) -> ClassificationBatch:
        """A copy with every tensor on `device`, see :func:`to_device`."""
        return ClassificationBatch(
            token_ids=to_device(self.token_ids, device),
            labels=to_device(self.labels, device),
        )


def collate_classification(examples: Sequence[tuple[Sequence[int], int]], pad_id: int) -> ClassificationBatch:
    """Collate (token ids, label) examples into a `ClassificationBatch`.

    An empty token sequence, a sequence containing pad_id, or a label that is not a
    non-negative integer is a ValueError.

    Shape:
        returns token_ids [B, S], labels [B], B = len(examples), S = the longest sequence.
    """
    pad_id = check_integer("pad_id", pad_id, minimum=0)
    if isinstance(examples, (str, torch.Tensor)) or len(examples) == 0:
        raise ValueError(f"examples must be a non-empty list of (token ids, label), got {examples!r:.80}")
    rows, labels = [], []
    for index, example in enumerate(examples):
        if not isinstance(example, (tuple, list)) or len(example) != 2:
            raise ValueError(f"examples[{index}] must be a (token ids, label) pair, got {example!r:.80}")
        row = _as_id_row(f"examples[{index}] token ids", example[0])
        if row.numel() == 0:
            raise ValueError(f"examples[{index}] token ids must be non-empty, got []")
        if bool((row == pad_id).any()):
            raise ValueError(f"examples[{index}] token ids must not contain pad_id {pad_id}, got {row.tolist()!r:.80}")
        label = example[1]
        if (
            isinstance(label, torch.Tensor)
            and label.dim() == 0
            and not label.is_floating_point()
            and label.dtype != torch.bool
        ):
            label = int(label)
        if not is_integer(label) or int(label) < 0:
            raise ValueError(f"examples[{index}] label must be a non-negative integer, got {label!r}")
        rows.append(row)
        labels.append(int(label))
    return ClassificationBatch(token_ids=_pad_rows(rows, pad_id), labels=torch.tensor(labels, dtype=torch.long))
