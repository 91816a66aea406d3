"""Exports of trained models to other inference engines.

:mod:`transformer_lab.export.ctranslate2`: a translation or couplet checkpoint as a
CTranslate2 model directory (``transformer-lab export --format ctranslate2``).
"""

from transformer_lab.export.ctranslate2 import (
    EXPORTABLE_TASKS,
    QUANTIZATIONS,
    build_spec,
    export_checkpoint,
    export_model,
    vocabulary_tokens,
)

__all__ = [
    "EXPORTABLE_TASKS",
    "QUANTIZATIONS",
    "build_spec",
    "export_checkpoint",
    "export_model",
    "vocabulary_tokens",
]
