"""Translation presets and config, the training run, and loading the checkpoints it writes."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.data import TokenizerPair, collated_lengths
from transformer_lab.data.positional_fit import check_fits_positional_table
from transformer_lab.data.prepared_pairs import validation_pair_origin
from transformer_lab.data.tokenizer_pair import JOINT_TOKENIZER_FILE, SOURCE_TOKENIZER_FILE, TARGET_TOKENIZER_FILE
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.ensemble import Ensemble, check_same_tokens, distinct_members, member_paths
from transformer_lab.evaluation import bleu_tokenizer_for
from transformer_lab.evaluation.translation_bleu import evaluate_bleu
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.tasks import seq2seq
from transformer_lab.tasks.seq2seq import Seq2SeqTask
from transformer_lab.tasks.task import VocabularyFunctions
from transformer_lab.tasks.translation.data import TranslationDataConfig, build_data
from transformer_lab.training import TrainConfig
from transformer_lab.training.batch_losses import validation_loss
from transformer_lab.training.checkpoint import resolve_checkpoint
from transformer_lab.training.checkpoint_loading import read_tokenizer

TASK_NAME = "translation"


def _default_model() -> ModelConfig:
    return ModelConfig(
        d_model=256,
        nhead=4,
        num_encoder_layers=3,
        num_decoder_layers=3,
        dim_feedforward=1024,
        dropout=0.2,
        max_len=256,
        tie_embeddings="all",
    )


def _default_train() -> TrainConfig:
    return TrainConfig(
        **seq2seq.SEQ2SEQ_TRAIN_PRESET,
        # Validation BLEU still rose after 20 epochs; 34 fit in about 80 minutes of two bf16 CPU
        # threads. An AVX2-only CPU takes hours: docs/results.md#translation-avx2 has a shorter schedule.
        epochs=34,
        # The last ~7 epochs decay the rate linearly, which raised validation BLEU over the same
        # epochs without it (docs/experiments/2026-11-translation.md).
        cooldown_steps=800,
        keep_last=10,  # the last 10 epoch checkpoints, for checkpoint averaging
    )


def _default_decode() -> DecodeConfig:
    # Length penalty chosen on validation with beam 5 among alpha 0.3-1.8
    # (docs/experiments/2026-11-translation.md).
    return DecodeConfig(
        strategy="beam", beam_size=5, max_len=200, max_len_a=1.5, max_len_b=10, length_penalty=1.4, precision="auto"
    )


@dataclass
class TranslationConfig:
    """Everything a translation run needs; written into every checkpoint."""

    data: TranslationDataConfig = field(default_factory=TranslationDataConfig)
    model: ModelConfig = field(default_factory=_default_model)
    train: TrainConfig = field(default_factory=_default_train)
    decode: DecodeConfig = field(default_factory=_default_decode)


default_config = TranslationConfig


def base_config() -> TranslationConfig:
    """The paper's base model and recipe, for a large corpus (WMT14 en-de) on GPUs.

    d_model 512, 8 heads, 6 + 6 layers, feed-forward 2,048, dropout 0.1, one shared 37k
    BPE; Adam (0.9, 0.98, 1e-9) with the paper's schedule (factor 1, 4,000 warm-up steps)
    for 100k steps of about 25k target tokens: 4,096 per batch x 6 accumulated batches on
    one process (on N GPUs under torchrun, ``train.grad_accum_steps`` = 6 / N). Beam 4,
    length penalty 0.6, at most 50 tokens beyond the source, as in the paper.
    """
    return TranslationConfig(
        data=TranslationDataConfig(vocab_size=37_000, max_tokens=4096, num_carved_validation=3000),
        model=ModelConfig(
            d_model=512,
            nhead=8,
            num_encoder_layers=6,
            num_decoder_layers=6,
            dim_feedforward=2048,
            dropout=0.1,
            max_len=256,
            tie_embeddings="all",
        ),
        # The shared recipe's smoothing, precision and best/ rule, at the paper's rate and length.
        train=dataclasses.replace(
            TrainConfig(**seq2seq.SEQ2SEQ_TRAIN_PRESET),
            lr_factor=1.0,
            warmup_steps=4000,
            grad_accum_steps=6,
            epochs=0,
            max_steps=100_000,
            eval_every_steps=5000,
            keep_last=5,  # the last five checkpoints, for averaging (transformer-lab average)
            log_every_steps=100,
        ),
        decode=DecodeConfig(
            strategy="beam", beam_size=4, max_len=256, max_len_a=1.0, max_len_b=50, length_penalty=0.6, precision="auto"
        ),
    )


# The presets `train translation --preset NAME` starts from (then --set overrides them).
PRESETS: dict[str, Callable[[], TranslationConfig]] = {"default": default_config, "base": base_config}


def _read_tokenizers(folder: Path) -> TokenizerPair:
    """A checkpoint's tokenizers: its tokenizer.json (joint), or its source_ and target_tokenizer.json."""
    if (folder / SOURCE_TOKENIZER_FILE).is_file() or (folder / TARGET_TOKENIZER_FILE).is_file():
        return TokenizerPair(
            read_tokenizer(folder, SOURCE_TOKENIZER_FILE), read_tokenizer(folder, TARGET_TOKENIZER_FILE)
        )
    return TokenizerPair.joint(read_tokenizer(folder, JOINT_TOKENIZER_FILE))


SEQ2SEQ_TASK: Seq2SeqTask[TokenizerPair, TranslationConfig] = Seq2SeqTask(
    name=TASK_NAME,
    config_type=TranslationConfig,
    vocabulary=VocabularyFunctions(
        read=_read_tokenizers,
        files=TokenizerPair.files,
        tokens=lambda pair: (pair.source.tokens, pair.target.tokens),
        # The BPE's settings (data.bpe_settings) and the tokenizer files given instead of it.
        settings=(
            "vocab_size",
            "target_vocab_size",
            "separate_vocabularies",
            "lowercase",
            "min_frequency",
            "tokenizer_sample",
            "tokenizer_file",
            "target_tokenizer_file",
        ),
    ),
    vocabulary_sizes=lambda pair: (pair.source.vocab_size, pair.target.vocab_size),
    # The preset's Multi30k; its languages come from the config (data.source_language, ...).
    card={"hub_task": "translation", "dataset": "multi30k"},
    metric_names=("val_bleu", "val_bleu_lowercased", "val_chrf", "val_loss"),
)


def train(
    config: TranslationConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
) -> seq2seq.TrainResult[TokenizerPair, TranslationConfig]:
    """Train a translation model; validation BLEU (greedy) every epoch decides ``best/``.

    ``init_from`` fine-tunes: the checkpoint's tokenizer and weights are the start (its
    model config must already be ``config.model``, see ``training.finetune``).
    """
    data = build_data(config.data, seq2seq.starting_vocabulary(SEQ2SEQ_TASK, Path(out_dir), resume, init_from))
    tokenizers = data.vocabulary
    target_size = None if tokenizers.is_joint else tokenizers.target.vocab_size
    config = seq2seq.with_vocabulary(config, tokenizers.source.vocab_size, target_size)
    greedy = dataclasses.replace(config.decode, strategy="greedy")
    bleu_tokenize = bleu_tokenizer_for(config.data.target_language)
    validation_ids = tokenizers.encode_pairs(data.validation_pairs)
    lengths = collated_lengths(validation_ids)
    fixed = resume or init_from is not None
    folder = data.train_store.folder  # a prepared corpus's, whose manifest says where validation was read
    origin = None if folder is None else functools.partial(validation_pair_origin, folder)
    check_fits_positional_table(lengths, data.validation_pairs, config.model.max_len, "validation data", fixed, origin)

    def evaluate(evaluated_model: Seq2SeqTransformer) -> dict[str, float]:
        # A model still learning runs many sentences to the length limit: warned at every validation, that is noise.
        report = evaluate_bleu(
            evaluated_model, data.vocabulary, data.validation_pairs, greedy, bleu_tokenize, warn=False
        )
        return {
            "val_bleu": report.cased.score,
            "val_bleu_lowercased": report.lowercased.score,
            "val_chrf": report.chrf.score,
            "val_loss": validation_loss(evaluated_model, validation_ids, config.data.max_tokens),
        }

    return seq2seq.train(SEQ2SEQ_TASK, config, data, out_dir, evaluate, resume=resume, init_from=init_from)


def load_translator(checkpoint: str | os.PathLike[str]) -> tuple[Seq2SeqTransformer, TokenizerPair, TranslationConfig]:
    """Rebuild the model, tokenizers and config of a translation checkpoint folder (or a run folder's best/)."""
    return seq2seq.load(SEQ2SEQ_TASK, checkpoint)


def load_ensemble(
    model: Seq2SeqTransformer,
    tokenizers: TokenizerPair,
    config: TranslationConfig,
    checkpoints: Sequence[str | os.PathLike[str]],
    name: str,
) -> Ensemble:
    """``model`` and the model of each checkpoint (or run folder) decoded as one, on ``model``'s device.

    A checkpoint that cannot be read, or whose vocabulary or languages are not ``tokenizers``'
    and ``config``'s, is an error starting with ``name`` (the option or keyword that gave it).
    """
    device = next(model.parameters()).device
    languages = (config.data.source_language, config.data.target_language)
    members, paths = [model], member_paths(checkpoints, name)
    for checkpoint in paths:
        folder = resolve_checkpoint(checkpoint, name)
        try:
            member, member_tokenizers, member_config = load_translator(folder)
        except (ValueError, FileNotFoundError) as error:  # named as the option that gave the folder
            kind = FileNotFoundError if isinstance(error, FileNotFoundError) else ValueError
            raise kind(f"{name}: {error}") from None
        member_languages = (member_config.data.source_language, member_config.data.target_language)
        check_same_tokens(f"{name} {checkpoint}", (tokenizers, languages), (member_tokenizers, member_languages))
        members.append(member.to(device).eval())
    return Ensemble(distinct_members(members, paths, name))
