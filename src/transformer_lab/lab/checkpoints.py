"""Rebuilding a trained sequence-to-sequence model, and one sentence's attention, for the lab.

A checkpoint that reads text (translation: its subword tokenizer; couplets: one character
a token) reads the sentence with its own tokenizer and labels the axes with its tokens
(:func:`checkpoint_attention`); a synthetic-task checkpoint reads token ids.

Shape legend: S source length, T target length, H heads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from transformer_lab.data import SubwordTokenizer, TokenizerPair, Vocabulary, make_synthetic_pairs
from transformer_lab.data.couplet import check_upper_line, encode_upper, punctuation_stand_in
from transformer_lab.data.couplet_stream import split_characters
from transformer_lab.data.subword import token_labels
from transformer_lab.decoding import greedy_search
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.models.attention_maps import attention_maps
from transformer_lab.setting_error import SettingError
from transformer_lab.tasks.registry import TrainedModel, load_trained, task_named, tasks_offering

SEQ2SEQ_TASKS = tasks_offering("lab")

__all__ = ["SentenceAttention", "checkpoint_attention", "load_seq2seq_checkpoint", "sentence_attention"]


def load_seq2seq_checkpoint(folder: str | os.PathLike[str]) -> Seq2SeqTransformer:
    """The :class:`Seq2SeqTransformer` of a checkpoint (or run) folder of any sequence-to-sequence task, in eval mode.

    Rebuilt by the task that wrote it (``tasks.registry``), so the lab studies exactly the
    model that was trained; a classifier checkpoint is an error naming it.
    """
    model = load_trained(folder, tasks=SEQ2SEQ_TASKS).model
    # Every task in SEQ2SEQ_TASKS rebuilds a Seq2SeqTransformer.
    assert isinstance(model, Seq2SeqTransformer), type(model)
    return model


@dataclass
class SentenceAttention:
    """Every attention module's weights for one sentence, with the tokens of both sides.

    Shape:
        maps values ``[1, H, L, S']`` (encoder self ``S x S``, decoder self ``T x T``,
        cross ``T x S``); ``source_labels`` S entries, ``target_labels`` T entries (the
        decoder inputs, ``<bos>`` first).
    """

    maps: dict[str, Tensor]
    source_labels: list[str]
    target_labels: list[str]
    source_ids: list[int]  # S ids
    target_ids: list[int]  # T ids, the decoder inputs (bos first)


def sentence_attention(
    model: Seq2SeqTransformer,
    source_ids: Sequence[int],
    target_ids: Sequence[int] | None = None,
    source_vocabulary: Vocabulary | None = None,
    target_vocabulary: Vocabulary | None = None,
    max_new_tokens: int | None = None,
) -> SentenceAttention:
    """Attention weights of ``model`` reading ``source_ids`` and writing ``target_ids``.

    Without ``target_ids`` the model writes its own greedy output (up to ``<eos>``, at most
    ``max_new_tokens``, default 2 * S + 10 within the positional table). The labels are the
    vocabularies' tokens, or the ids as text.
    """
    if len(source_ids) == 0:
        raise ValueError("source_ids must hold at least one token id, got none")
    device = next(model.parameters()).device  # the ids go where the model is (a GPU's, say)
    src_ids = torch.tensor([list(source_ids)], dtype=torch.long, device=device)  # [1, S]
    model.eval()
    if target_ids is None:
        # The output is fed back whole below, after bos: it must leave that one position.
        positional_limit = model.max_len - 1
        limit = min(2 * src_ids.shape[1] + 10, positional_limit) if max_new_tokens is None else max_new_tokens
        with torch.no_grad():
            generated = greedy_search(model, src_ids, limit).best_ids[0].tolist()  # [L]
        target_ids = generated[: generated.index(model.eos_id)] if model.eos_id in generated else generated
    tgt_in_ids = torch.tensor([[model.bos_id, *target_ids]], dtype=torch.long, device=device)  # [1, T]
    maps = {name: weights.cpu() for name, weights in attention_maps(model, src_ids, tgt_in_ids).items()}  # drawn

    def labels(ids: Sequence[int], vocabulary: Vocabulary | None) -> list[str]:
        if vocabulary is None:
            return [str(token_id) for token_id in ids]
        return [vocabulary.id_to_token(token_id) for token_id in ids]

    return SentenceAttention(
        maps=maps,
        source_labels=labels(src_ids[0].tolist(), source_vocabulary),
        target_labels=labels(tgt_in_ids[0].tolist(), target_vocabulary),
        source_ids=src_ids[0].tolist(),
        target_ids=tgt_in_ids[0].tolist(),
    )


def checkpoint_attention(
    checkpoint: str | os.PathLike[str],
    source: str | Sequence[int] | None = None,
    target: str | Sequence[int] | None = None,
    source_vocabulary: Vocabulary | str | os.PathLike[str] | None = None,
    target_vocabulary: Vocabulary | str | os.PathLike[str] | None = None,
) -> SentenceAttention:
    """One sentence's attention in a checkpoint of any sequence-to-sequence task.

    A str ``source`` (or ``target``) is read as the checkpoint reads its inputs: a
    translation checkpoint's text through its subword tokenizer, a couplet line one
    character a token without its spaces (an upper line checked and read as the couplet
    writer reads it), and the labels are those tokens; such a checkpoint needs a
    ``source`` (a made-up one would be noise). A synthetic-task checkpoint reads the str as
    token ids separated by spaces, or as tokens of ``source_vocabulary`` /
    ``target_vocabulary``, and without ``source`` draws 6 synthetic symbols (seed 0). A
    sequence of ints is token ids for any checkpoint. Without ``target`` the model writes
    its own greedy output. Errors name the argument (``source``, ``target``); the
    vocabularies (each a `Vocabulary` or its file, read once the checkpoint is known to take
    one) are an error with a checkpoint that reads text (it reads with its own).
    """
    trained = load_trained(checkpoint, tasks=SEQ2SEQ_TASKS)
    model = trained.model
    assert isinstance(model, Seq2SeqTransformer), type(model)  # every task in SEQ2SEQ_TASKS builds one
    reader = trained.vocabulary
    vocabularies = {"source_vocabulary": source_vocabulary, "target_vocabulary": target_vocabulary}
    given = [name for name, vocabulary in vocabularies.items() if vocabulary is not None]
    if reader is not None and given:
        # Drawn with the checkpoint's own reader, a vocabulary given would be ignored without a word.
        own = "tokenizer" if isinstance(reader, (SubwordTokenizer, TokenizerPair)) else "vocabulary"
        raise SettingError(
            f"{{{given[0]}}}: expected only with a synthetic-task checkpoint (a {{task}} checkpoint reads "
            f"text with its own {own}), got it with {{task}}",
            tuple(given),
            task=trained.task,
        )
    if isinstance(reader, (SubwordTokenizer, TokenizerPair)):
        return _subword_attention(trained, model, TokenizerPair.of(reader), source, target)
    if isinstance(reader, Vocabulary):
        source_ids = _upper_line_ids(source, reader, model.max_len)
        if source_ids is None:
            raise _needs_a_sentence(trained)
        target_ids = _character_ids(target, reader, "target")
        _check_lengths(model, source_ids, target_ids)
        return sentence_attention(model, source_ids, target_ids, reader, reader)
    if source is None:
        vocab_size = min(model.src_vocab_size, model.tgt_vocab_size)
        source = make_synthetic_pairs("reverse", 1, vocab_size, 6, 6, seed=0)[0][0]
    source_vocabulary, target_vocabulary = _loaded(source_vocabulary), _loaded(target_vocabulary)
    source_ids = _token_ids(source, source_vocabulary, "source")
    assert source_ids is not None
    target_ids = _token_ids(target, target_vocabulary, "target")
    if model.pad_id in source_ids:
        # The model hides a source's padding id from every query: its column would be drawn blank.
        raise SettingError(
            "{source}: expected token ids other than the padding id {pad_id} (the model hides source padding "
            "from attention), got it at position {position} of {given!r}",
            ("source",),
            pad_id=model.pad_id,
            position=source_ids.index(model.pad_id) + 1,
            given=source,
        )
    _check_lengths(model, source_ids, target_ids)
    return sentence_attention(model, source_ids, target_ids, source_vocabulary, target_vocabulary)


def _loaded(vocabulary: Vocabulary | str | os.PathLike[str] | None) -> Vocabulary | None:
    """A vocabulary given as its file, read (called once the checkpoint's task is known to take one)."""
    return vocabulary if vocabulary is None or isinstance(vocabulary, Vocabulary) else Vocabulary.load(vocabulary)


def _check_lengths(model: Seq2SeqTransformer, source_ids: Sequence[int], target_ids: Sequence[int] | None) -> None:
    """Refuse a sentence longer than the positional table, naming it (the model would name none)."""
    # The target is read after <bos>, which takes one position of its own.
    for name, length in (("source", len(source_ids)), ("target", None if target_ids is None else len(target_ids) + 1)):
        if length is not None and length > model.max_len:
            raise SettingError(
                f"{{{name}}}: expected a sentence of at most {{limit}} tokens (the checkpoint's max_len), "
                f"got {{length}}; shorten it",
                (name,),
                limit=model.max_len if name == "source" else model.max_len - 1,
                length=length if name == "source" else length - 1,
            )


def _needs_a_sentence(trained: TrainedModel) -> SettingError:
    command = task_named(trained.task).command
    elsewhere = f" (or transformer-lab {command.name} --plot-attention)" if command and command.plots_attention else ""
    return SettingError(
        f"{{source}}: a {trained.task} checkpoint reads text: expected a sentence to draw{elsewhere}, got none",
        ("source",),
    )


def _subword_attention(
    trained: TrainedModel,
    model: Seq2SeqTransformer,
    tokenizers: TokenizerPair,
    source: str | Sequence[int] | None,
    target: str | Sequence[int] | None,
) -> SentenceAttention:
    if source is None:
        raise _needs_a_sentence(trained)
    source_ids = tokenizers.source.encode(source) if isinstance(source, str) else list(source)
    target_ids = tokenizers.target.encode(target) if isinstance(target, str) else target
    if not source_ids:
        raise SettingError(
            "{source}: expected a sentence with at least one token, got {text!r}", ("source",), text=source
        )
    _check_lengths(model, source_ids, target_ids)
    attention = sentence_attention(model, source_ids, target_ids)
    attention.source_labels = token_labels(tokenizers.source, attention.source_ids)
    attention.target_labels = token_labels(tokenizers.target, attention.target_ids)
    return attention


def _upper_line_ids(text: str | Sequence[int] | None, vocabulary: Vocabulary, max_len: int) -> list[int] | None:
    """An upper line's ids as the couplet task reads it: without spaces, checked, unseen marks as its stand-in."""
    if text is None or not isinstance(text, str):
        return None if text is None else list(text)
    # The couplet writer's own reading, so that the drawing shows the columns the model answers from
    # (a space read as <unk> was a column of its own, Latin letters were drawn as <unk>).
    line = split_characters(text)
    error, _ = check_upper_line(line, vocabulary, max_len, text)
    if error is not None:
        raise SettingError("{source}: {error}", ("source",), error=error)
    return encode_upper(line, vocabulary, punctuation_stand_in(vocabulary))


def _character_ids(text: str | Sequence[int] | None, vocabulary: Vocabulary, name: str) -> list[int] | None:
    if text is None or not isinstance(text, str):
        return None if text is None else list(text)
    line = split_characters(text)  # a lower line's spaces are no characters either
    if not line:
        raise SettingError(f"{{{name}}}: expected a line of at least one character, got {{text!r}}", (name,), text=text)
    return vocabulary.encode(list(line))


def _token_ids(text: str | Sequence[int] | None, vocabulary: Vocabulary | None, name: str) -> list[int] | None:
    """Token ids from ids separated by spaces, or from tokens of ``vocabulary``; errors name ``name``."""
    if text is None or not isinstance(text, str):
        return None if text is None else list(text)
    tokens = text.split()
    if not tokens:
        raise SettingError(f"{{{name}}}: expected at least one token, got {{text!r}}", (name,), text=text)
    if vocabulary is not None:
        return vocabulary.encode(tokens)
    try:
        return [int(token) for token in tokens]
    except ValueError:
        raise SettingError(
            f"{{{name}}}: expected token ids separated by spaces (or pass a vocabulary file), got {{text!r}}",
            (name,),
            text=text,
        ) from None
