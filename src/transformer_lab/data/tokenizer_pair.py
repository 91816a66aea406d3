"""The tokenizers of a translation pair: one joint vocabulary (the default) or one per side.

A joint byte-level BPE over both languages lets the source and target embeddings be one
matrix; two scripts that share nothing (Chinese and English, Russian and Japanese) waste
half of a joint vocabulary on the other side, so each side may have its own. A joint
pair is the same tokenizer twice. Callers encode with ``source`` and decode with
``target`` and never need to know which kind they hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from transformer_lab.data.subword import SubwordTokenizer, encode_pairs

# The files a checkpoint holds: the joint tokenizer, or the two of a separate pair.
JOINT_TOKENIZER_FILE = "tokenizer.json"
SOURCE_TOKENIZER_FILE = "source_tokenizer.json"
TARGET_TOKENIZER_FILE = "target_tokenizer.json"


@dataclass(frozen=True)
class TokenizerPair:
    """The source-side and the target-side tokenizer; the same object when the vocabulary is joint."""

    source: SubwordTokenizer
    target: SubwordTokenizer

    @classmethod
    def joint(cls, tokenizer: SubwordTokenizer) -> TokenizerPair:
        return cls(tokenizer, tokenizer)

    @classmethod
    def of(cls, tokenizer: SubwordTokenizer | TokenizerPair) -> TokenizerPair:
        """``tokenizer`` itself if it is a pair, else the joint pair of it."""
        if isinstance(tokenizer, TokenizerPair):
            return tokenizer
        if isinstance(tokenizer, SubwordTokenizer):
            return cls.joint(tokenizer)
        raise ValueError(f"tokenizer: expected a SubwordTokenizer or a TokenizerPair, got {type(tokenizer).__name__}")

    @property
    def is_joint(self) -> bool:
        return self.source is self.target

    def encode_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        """(source ids, target ids) of each (source, target) sentence pair, in order."""
        return encode_pairs(pairs, self.source, self.target)

    def files(self) -> dict[str, str]:
        """The checkpoint files that hold this pair: name -> JSON text."""
        if self.is_joint:
            return {JOINT_TOKENIZER_FILE: self.source.to_json()}
        return {SOURCE_TOKENIZER_FILE: self.source.to_json(), TARGET_TOKENIZER_FILE: self.target.to_json()}
