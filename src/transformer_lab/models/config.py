"""Model configurations: typed dataclasses, saved as JSON with every checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TieEmbeddings = Literal["none", "decoder", "all"]
Pooling = Literal["mean", "first"]


@dataclass
class ModelConfig:
    """Hyperparameters of :class:`~transformer_lab.models.Seq2SeqTransformer`.

    The defaults are the paper's base model; tasks override them with their own presets.
    """

    src_vocab_size: int = 0  # set by the task from its vocabulary
    tgt_vocab_size: int = 0  # set by the task from its vocabulary
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


@dataclass
class ClassifierConfig:
    """Hyperparameters of :class:`~transformer_lab.models.TransformerClassifier`."""

    vocab_size: int = 0  # set by the task from its vocabulary
    num_classes: int = 0  # set by the task from its labels
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
