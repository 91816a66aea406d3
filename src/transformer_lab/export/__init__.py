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

from transformer_lab.export import ctranslate2 as _ctranslate2

__all__ = list(_ctranslate2.__all__)
