"""Exports of trained models to other inference engines.

:mod:`transformer_lab.export.ctranslate2`: a translation or couplet checkpoint as a
CTranslate2 model directory (``transformer-lab export --format ctranslate2``).
:mod:`transformer_lab.export.onnx`: a translation or couplet checkpoint as an encoder and a
decoder-step ONNX graph, a classification checkpoint as one graph (``--format onnx``);
:mod:`transformer_lab.export.onnx_runtime` runs them with numpy and onnxruntime alone.
:mod:`transformer_lab.folders`: the new, atomically written output folder both use.

The names below are the CTranslate2 exporter's (kept for its callers); import the ONNX
exporter's from its module.
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
