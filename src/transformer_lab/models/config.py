"""Model configurations: typed dataclasses, saved as JSON with every checkpoint.

Every field is checked for type, sign and range when a config is made (from a preset,
``--set`` or a checkpoint's ``config.json``), so that no model is built, not even on the
meta device, from a size no machine could hold: the bounds below are far beyond any model
this package trains, and a config whose parameters would pass ``MAX_PARAMETERS`` is refused
naming its sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from transformer_lab.models.embedding import MAX_POSITIONS

__all__ = [
    "MAX_FEEDFORWARD",
    "MAX_LAYERS",
    "MAX_PARAMETERS",
    "MAX_VOCABULARY_SIZE",
    "MAX_WIDTH",
    "ClassifierConfig",
    "ModelConfig",
]

TieEmbeddings = Literal["none", "decoder", "all"]
Pooling = Literal["mean", "first"]

MAX_WIDTH = 65_536  # d_model
MAX_FEEDFORWARD = 1 << 20  # dim_feedforward
MAX_LAYERS = 1_024  # per stack
MAX_VOCABULARY_SIZE = 1 << 20  # as data.subword's tokenizers
# 2^32 float32 parameters are 16 GiB, and training needs about four times that.
MAX_PARAMETERS = 1 << 32
_ACTIVATIONS = ("relu", "gelu")


def _check_int(config: Any, name: str, low: int, high: int) -> int:
    value = getattr(config, name)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name}: expected an int in [{low:,}, {high:,}], got {value!r}")
    return value


def _check_choice(config: Any, name: str, choices: tuple[Any, ...]) -> None:
    value = getattr(config, name)
    if value not in choices or not isinstance(value, type(choices[0])):
        raise ValueError(f"{name}: expected one of {list(choices)}, got {value!r}")


def _check_common(config: Any) -> None:
    """The fields a sequence-to-sequence model and a classifier share."""
    d_model = _check_int(config, "d_model", 2, MAX_WIDTH)
    if d_model % 2:
        raise ValueError(f"d_model: expected an even int (the positions are sin/cos pairs), got {d_model}")
    nhead = _check_int(config, "nhead", 1, d_model)
    if d_model % nhead:
        raise ValueError(f"nhead: expected a divisor of d_model={d_model}, got {nhead}")
    _check_int(config, "dim_feedforward", 1, MAX_FEEDFORWARD)
    _check_int(config, "max_len", 1, MAX_POSITIONS)
    dropout = config.dropout
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout: expected a float in [0, 1), got {dropout!r}")
    if not isinstance(config.norm_first, bool):
        raise ValueError(f"norm_first: expected a bool, got {config.norm_first!r}")
    _check_choice(config, "activation", _ACTIVATIONS)


def _check_token_id(config: Any, name: str, vocabularies: tuple[str, ...]) -> None:
    """``name`` is an id of every vocabulary in ``vocabularies`` that is set (0: set later by the task)."""
    sizes = [getattr(config, vocabulary) for vocabulary in vocabularies if getattr(config, vocabulary)]
    high = min(sizes) - 1 if sizes else MAX_VOCABULARY_SIZE - 1
    token_id = getattr(config, name)
    if not isinstance(token_id, int) or isinstance(token_id, bool) or not 0 <= token_id <= high:
        within = " and ".join(f"{vocabulary}={getattr(config, vocabulary)}" for vocabulary in vocabularies)
        raise ValueError(f"{name}: expected a token id in [0, {high}] ({within}), got {token_id!r}")


def _check_parameters(count: int, sizes: str) -> None:
    if count > MAX_PARAMETERS:
        raise ValueError(
            f"model: expected at most {MAX_PARAMETERS:,} parameters, got a config of about {count:,} ({sizes})"
        )


@dataclass
class ModelConfig:
    """Hyperparameters of :class:`~transformer_lab.models.Seq2SeqTransformer`.

    The defaults are the paper's base model; tasks override them with their own presets.
    """

    # Set by the task from its vocabulary; "derived" says so to the config readers, which refuse a value.
    src_vocab_size: int = field(default=0, metadata={"derived": "the task sets it from the source vocabulary"})
    tgt_vocab_size: int = field(default=0, metadata={"derived": "the task sets it from the target vocabulary"})
    d_model: int = 512  # width of every token vector
    nhead: int = 8  # attention heads; d_model must be divisible by it
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    dim_feedforward: int = 2048  # inner width of the position-wise feed-forward
    dropout: float = 0.1  # after embeddings+positions, in attention and in every sublayer
    norm_first: bool = False  # False: the paper's post-norm; True: pre-norm (Annotated Transformer)
    activation: str = "relu"  # "relu" or "gelu"
    max_len: int = 512  # longest sequence the positional table covers
    pad_id: int = 0
    bos_id: int = 2
    eos_id: int = 3
    # "none": three separate matrices; "decoder": target embedding shared with the
    # generator; "all": source and target embeddings and the generator shared (needs one
    # joint vocabulary).
    tie_embeddings: TieEmbeddings = "none"
    # Add the encoder's output at source position t to the decoder's input at target
    # position t: for tasks whose output follows the input position by position (a
    # couplet's lower line, character under character), so that the decoder need not
    # first learn to find "its" source position through cross-attention.
    aligned_decoder_input: bool = False

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size"):
            _check_int(self, name, 0, MAX_VOCABULARY_SIZE)
        _check_common(self)
        _check_int(self, "num_encoder_layers", 1, MAX_LAYERS)
        _check_int(self, "num_decoder_layers", 1, MAX_LAYERS)
        _check_token_id(self, "pad_id", ("src_vocab_size", "tgt_vocab_size"))
        _check_token_id(self, "bos_id", ("tgt_vocab_size",))
        _check_token_id(self, "eos_id", ("tgt_vocab_size",))
        _check_choice(self, "tie_embeddings", ("none", "decoder", "all"))
        if not isinstance(self.aligned_decoder_input, bool):
            raise ValueError(f"aligned_decoder_input: expected a bool, got {self.aligned_decoder_input!r}")
        width, inner = self.d_model, self.dim_feedforward
        # Attention (4 D^2) and feed-forward (2 D F) per layer, twice the attention in a
        # decoder layer, three vocabulary matrices; biases and norms are a rounding error.
        count = (
            self.num_encoder_layers * (4 * width * width + 2 * width * inner)
            + self.num_decoder_layers * (8 * width * width + 2 * width * inner)
            + width * (self.src_vocab_size + 2 * self.tgt_vocab_size)
        )
        _check_parameters(
            count,
            f"d_model={width}, dim_feedforward={inner}, {self.num_encoder_layers}+{self.num_decoder_layers} "
            f"layers, vocabularies {self.src_vocab_size} and {self.tgt_vocab_size}",
        )


@dataclass
class ClassifierConfig:
    """Hyperparameters of :class:`~transformer_lab.models.TransformerClassifier`."""

    vocab_size: int = field(default=0, metadata={"derived": "the task sets it from its vocabulary"})
    num_classes: int = field(default=0, metadata={"derived": "the task sets it from the labels' classes"})
    d_model: int = 256
    nhead: int = 4
    num_layers: int = 4
    dim_feedforward: int = 1024
    dropout: float = 0.1
    norm_first: bool = True
    activation: str = "gelu"
    max_len: int = 512
    pad_id: int = 0
    pooling: Pooling = "mean"  # "mean" over real tokens, or "first" (the first token's vector)

    def __post_init__(self) -> None:
        _check_int(self, "vocab_size", 0, MAX_VOCABULARY_SIZE)
        _check_int(self, "num_classes", 0, MAX_VOCABULARY_SIZE)
        _check_common(self)
        _check_int(self, "num_layers", 1, MAX_LAYERS)
        _check_token_id(self, "pad_id", ("vocab_size",))
        _check_choice(self, "pooling", ("mean", "first"))
        width = self.d_model
        count = self.num_layers * (4 * width * width + 2 * width * self.dim_feedforward) + width * (
            self.vocab_size + self.num_classes
        )
        _check_parameters(
            count,
            f"d_model={width}, dim_feedforward={self.dim_feedforward}, {self.num_layers} layers, "
            f"vocabulary {self.vocab_size}",
        )
