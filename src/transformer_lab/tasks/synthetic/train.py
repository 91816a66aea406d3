"""The synthetic tasks (copy, reverse, sort): their data settings, presets, the run, exact match, loading."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from transformer_lab.data import EOS_ID, PAD_ID
from transformer_lab.data._checks import SEED_RANGE, check_int_in_range
from transformer_lab.data.synthetic import SyntheticData, SyntheticPair, SyntheticTask, batches_of
from transformer_lab.data.vocabulary import NUM_SPECIAL_TOKENS
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.sources import decode_sources, strip_generated
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.models.config import MAX_VOCABULARY_SIZE
from transformer_lab.models.embedding import MAX_POSITIONS
from transformer_lab.tasks.seq2seq import with_vocabulary
from transformer_lab.tasks.task import Closing
from transformer_lab.training import TrainConfig, data_shard, is_main_process
from transformer_lab.training.batch_losses import seq2seq_loss_fn, validation_loss
from transformer_lab.training.checkpoint_loading import load_checkpoint_parts
from transformer_lab.training.run.plan import RunPlan, RunResult, train_run

TASK_NAME = "synthetic"
# Where the special ids of a synthetic model come from, as errors name it: the tasks keep no vocabulary file.
FIXED_SPECIALS = "the copy tasks' fixed specials"
# How many examples of each split a synthetic run may ask for (the preset uses 20,000).
MAX_SYNTHETIC_EXAMPLES = 1_000_000


@dataclass(frozen=True)
class SyntheticDataConfig:
    """What the random sequences look like and how many there are."""

    task: str = "copy"  # "copy", "reverse" or "sort"
    vocab_size: int = 14  # 4 specials + 10 symbols, as small as the Annotated Transformer's
    min_length: int = 1
    max_length: int = 10
    num_train: int = 20_000  # distinct examples per epoch
    num_validation: int = 200  # scored (exact match) at each evaluation
    num_test: int = 1_000  # held out; none of their sources occurs in training
    batch_size: int = 64
    seed: int = 1234

    def __post_init__(self) -> None:
        # The examples are drawn at once and held as Python lists (a few hundred bytes each).
        for name in ("num_train", "num_validation", "num_test"):
            check_int_in_range(f"data.{name}", getattr(self, name), 1, MAX_SYNTHETIC_EXAMPLES)
        check_int_in_range("data.vocab_size", self.vocab_size, NUM_SPECIAL_TOKENS + 2, MAX_VOCABULARY_SIZE)
        check_int_in_range("data.min_length", self.min_length, 1, MAX_POSITIONS - 2)
        # <bos> and <eos> around the longest sequence must fit the positional table.
        check_int_in_range("data.max_length", self.max_length, self.min_length, MAX_POSITIONS - 2)
        check_int_in_range("data.batch_size", self.batch_size, 1, MAX_SYNTHETIC_EXAMPLES)
        check_int_in_range("data.seed", self.seed, *SEED_RANGE)


def build_data(config: SyntheticDataConfig) -> SyntheticData:
    """Training pairs, and validation/test pairs whose sources never occur in training."""
    task = SyntheticTask(config.task, config.vocab_size, config.min_length, config.max_length)
    return SyntheticData.draw(task, config.num_train, config.num_validation, config.num_test, config.seed)


def _default_model() -> ModelConfig:
    return ModelConfig(
        src_vocab_size=14,
        tgt_vocab_size=14,
        d_model=64,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=256,
        dropout=0.0,
        max_len=64,
        tie_embeddings="all",
    )


def _default_train() -> TrainConfig:
    # 2,500 steps: the held-out exact match and the time it takes are in docs/results.md#copy-task.
    return TrainConfig(
        epochs=0,
        max_steps=2500,
        lr_factor=0.5,
        warmup_steps=400,
        label_smoothing=0.1,
        eval_every_steps=500,
        keep_last=0,
        best_metric="val_exact_match",
        best_mode="max",
        log_every_steps=20,
    )


@dataclass
class SyntheticConfig:
    """Everything a synthetic-task run needs; written into every checkpoint."""

    data: SyntheticDataConfig = field(default_factory=SyntheticDataConfig)
    model: ModelConfig = field(default_factory=_default_model)
    train: TrainConfig = field(default_factory=_default_train)
    decode: DecodeConfig = field(default_factory=lambda: DecodeConfig(strategy="greedy", beam_size=4, max_len=20))


def default_config(task: str = "copy") -> SyntheticConfig:
    """The preset for ``task``; the model's vocabulary follows the data's."""
    return resolve(SyntheticConfig(data=SyntheticDataConfig(task=task)))


def resolve(config: SyntheticConfig) -> SyntheticConfig:
    """Fill the fields that follow from others (vocabulary sizes, special ids, the model's and the search's max_len)."""
    config = with_vocabulary(config, config.data.vocab_size, specials_from=FIXED_SPECIALS)
    # The preset's values follow the data; a value set below what the data needs is refused, not raised.
    needs = (
        ("model.max_len", config.model.max_len, _default_model().max_len, 2, "the longest sequence, <bos> and <eos>"),
        ("decode.max_len", config.decode.max_len, SyntheticConfig().decode.max_len, 1, "the longest target and <eos>"),
    )
    for name, value, preset, extra, what in needs:
        if value != preset and value < config.data.max_length + extra:
            raise ValueError(
                f"{name}: expected at least data.max_length + {extra} = {config.data.max_length + extra} ({what}), "
                f"got {value}"
            )
    max_len = max(config.model.max_len, config.data.max_length + 2)
    # A target is as long as its source, then <eos>: a shorter search could match none of the longer ones.
    decode_max_len = max(config.decode.max_len, config.data.max_length + 1)
    return dataclasses.replace(
        config,
        model=dataclasses.replace(config.model, max_len=max_len),
        decode=dataclasses.replace(config.decode, max_len=decode_max_len),
    )


def decode_pairs(model: Seq2SeqTransformer, pairs: list[SyntheticPair], decode_config: DecodeConfig) -> list[list[int]]:
    """Decode every source of ``pairs``; returns the best output of each, its generated symbols (no specials)."""
    found = decode_sources(model, [source for source, _ in pairs], decode_config, batch_size=256)
    return [strip_generated(hypotheses[0].ids, EOS_ID, PAD_ID) if hypotheses else [] for hypotheses in found]


def exact_match(model: Seq2SeqTransformer, pairs: list[SyntheticPair], decode_config: DecodeConfig) -> float:
    """Share of sources whose whole decoded output equals the target."""
    predictions = decode_pairs(model, pairs, decode_config)
    return sum(prediction == target for prediction, (_, target) in zip(predictions, pairs)) / len(pairs)


# A synthetic run's result: its model, config and data (the task has no vocabulary: None).
TrainResult = RunResult[Seq2SeqTransformer, None, SyntheticConfig, SyntheticData]


def train(
    config: SyntheticConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    init_from: str | os.PathLike[str] | None = None,
    task: str | None = None,
) -> TrainResult:
    """Train on the synthetic task; checkpoints and ``metrics.jsonl`` go to ``out_dir``.

    ``task`` names the task the command trains (``train copy``): a ``data.task`` from --set or
    --config that names another is refused, as it would train another task under its name.
    """
    if task is not None and config.data.task != task:
        raise ValueError(f"data.task: expected {task!r} (the task trained) or no setting, got {config.data.task!r}")
    config = resolve(config)
    data = build_data(config.data)
    greedy = dataclasses.replace(config.decode, strategy="greedy")
    model_config, data_config = config.model, config.data

    def evaluate(evaluated_model: Seq2SeqTransformer) -> dict[str, float]:
        # Batches of up to 256 of the longest pairs (with bos/eos), as many as decoding takes.
        val_loss = validation_loss(evaluated_model, data.validation, 256 * (data_config.max_length + 2))
        return {"val_loss": val_loss, "val_exact_match": exact_match(evaluated_model, data.validation, greedy)}

    plan = RunPlan(
        task_name=TASK_NAME,
        config=config,
        build_model=lambda: Seq2SeqTransformer.from_config(model_config),
        loss_fn=seq2seq_loss_fn(config.train.label_smoothing, PAD_ID, config.train.rdrop_alpha),
        # Under torchrun each rank trains on its own shard of the epoch.
        train_batches=lambda epoch: batches_of(
            data.train, data_config.batch_size, True, data_config.seed, epoch, *data_shard()
        ),
        evaluate_fn=evaluate,
        metric_names=("val_loss", "val_exact_match"),
        count_tokens=lambda batch: batch.num_target_tokens,
        data_counts={
            "training sequences": len(data.train),
            "validation sequences": len(data.validation),
            "test sequences": len(data.test),
        },
    )
    model, summary = train_run(plan, out_dir, resume=resume, init_from=init_from)
    return TrainResult(model=model, vocabulary=None, config=config, data=data, summary=summary)


def load(checkpoint: str | os.PathLike[str]) -> tuple[Seq2SeqTransformer, None, SyntheticConfig]:
    """The model (in eval mode) and config of a synthetic-task checkpoint; the task has no vocabulary file (None)."""
    return load_checkpoint_parts(
        checkpoint,
        TASK_NAME,
        SyntheticConfig,
        lambda config: Seq2SeqTransformer.from_config(config.model),
        lambda folder: None,
        lambda vocabulary: {},
        fixed_specials=FIXED_SPECIALS,
    )


def greedy_exact_match(result: TrainResult, config: SyntheticConfig) -> Closing:
    """What a person reads after training, and its figures: the last weights' exact match on the held-out sequences."""
    if not is_main_process():
        return Closing([], {})  # under torchrun rank 0 reports (the weights are the same on every rank)
    greedy = exact_match(result.model.eval(), result.data.test, dataclasses.replace(config.decode, strategy="greedy"))
    count = len(result.data.test)
    return Closing(
        # The weights training ended with (last/), which may not be best/'s: said, since best/'s line comes before.
        [f"exact match on {count} held-out sequences (greedy, the last step's weights, last/): {greedy:.1%}"],
        {"test_sequences": count, "test_exact_match_greedy": greedy},
    )
