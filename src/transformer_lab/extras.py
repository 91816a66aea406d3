"""Optional dependencies: which extra brings which package, and one clear error when one is missing.

The core (``pip install -e .`` in a clone of the repository; the package is not published
on PyPI) trains, translates and evaluates. The web page, the figures, the couplet rules,
the data set builders, TensorBoard logs, the papers' BLEU flavour (Moses tokenization) and
the CTranslate2 and ONNX exports need packages that not every user wants; they come with
extras (``pip install -e ".[serve]"``, or ``[dev]`` for all of them). A feature imports
its package through :func:`require_extra`, so that a missing one is a
:class:`MissingExtraError` naming the ``pip install`` to run, not a ``ModuleNotFoundError``
from deep inside.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# package -> the extra that installs it (pyproject.toml's [project.optional-dependencies]).
EXTRA_OF_PACKAGE = {
    "fastapi": "serve",
    "uvicorn": "serve",
    "matplotlib": "plots",
    "pypinyin": "couplet",
    "jieba": "couplet",
    "opencc": "data",
    "ctranslate2": "deploy",
    "onnx": "deploy",
    "onnxruntime": "deploy",
    "tensorboard": "tensorboard",
    "sacremoses": "moses",
}


def install_command(extra: str) -> str:
    """The command that installs ``extra`` from a clone of the repository (the only way: it is not on PyPI)."""
    return f'pip install -e ".[{extra}]"'


class MissingExtraError(ImportError):
    """An optional package is not installed; the message says which extra installs it."""


def require_extra(package: str, purpose: str) -> ModuleType:
    """Import ``package`` (a key of :data:`EXTRA_OF_PACKAGE`), or raise a :class:`MissingExtraError` for ``purpose``."""
    extra = EXTRA_OF_PACKAGE[package]
    try:
        return importlib.import_module(package)
    except ImportError as error:
        raise MissingExtraError(
            # The purpose is a noun phrase, singular or plural ("the couplet tone rules"): no verb agrees with it.
            f"the {package} package, needed for {purpose}, is not installed: "
            f"in your transformer_lab clone, run {install_command(extra)}"
        ) from error
