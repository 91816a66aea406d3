"""Exports of trained models to other inference engines.

:mod:`transformer_lab.export.ctranslate2`: an encoder-decoder checkpoint as a CTranslate2
model directory (``transformer-lab export --format ctranslate2``).
:mod:`transformer_lab.export.onnx`: an encoder-decoder checkpoint as an encoder and a
decoder-step ONNX graph, a classifier checkpoint as one graph (``--format onnx``);
:mod:`transformer_lab.export.onnx_runtime` runs them with numpy and onnxruntime alone.
:mod:`transformer_lab.folders`: the new, atomically written output folder both use.

The names below are the CTranslate2 exporter's (kept for its callers); import the ONNX
exporter's from its module. Each task says which exports it offers (``Task.surfaces``) and
how its vocabulary is written (``Task.vocabulary``).
"""

from transformer_lab.export.ctranslate2 import (
    QUANTIZATIONS,
    build_spec,
    export_checkpoint,
    export_model,
)

__all__ = [
    "QUANTIZATIONS",
    "build_spec",
    "export_checkpoint",
    "export_model",
]
