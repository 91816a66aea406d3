"""Classifying with a trained model: class probabilities, predictions that say why not, and the `Classifier`.

`Classifier` is the task's Python API object (``transformer_lab.api.Classifier`` opens one
from a checkpoint); `ClassificationHandler` answers the server's classification pane with it,
and `COMMAND` is ``transformer-lab classify``: each text gives one stdout line, in input
order, the predicted class then every class's probability, tab-separated
(``Business<TAB>World=0.0123 Sports=0.0031 ...``); past `MAX_PRINTED_CLASSES` classes, the
`PRINTED_TOP` most probable in falling order and how many more (``--output`` keeps all). A
text that cannot be classified (empty, or longer than the model reads without
``--truncate``) gives ``-`` and the reason on its line and one line on stderr, and the exit
code is 2; the other texts are still classified.
``--output`` also writes one JSON object a line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import torch
from torch import Tensor

from transformer_lab.data import PAD_ID, SubwordTokenizer, collate_classification, token_budget_batches
from transformer_lab.data._checks import check_bool, texts_of
from transformer_lab.data.subword import check_texts, token_labels
from transformer_lab.evaluation.classification_metrics import MAX_PRINTED_CLASSES
from transformer_lab.hardware import PRECISIONS, autocast, resolve_inference_precision, resolve_precision
from transformer_lab.models import TransformerClassifier
from transformer_lab.models.bfloat16 import as_bf16
from transformer_lab.nn.eval_mode import eval_mode
from transformer_lab.one_line import json_line
from transformer_lab.tasks.command import Answers, PredictCommand, input_name
from transformer_lab.tasks.evaluation import TaskOption
from transformer_lab.tasks.task import Endpoint, Serving

_ENCODE_BATCH = 64  # texts encoded at once by predict_each
# How the Python API asks for a long text's first max_len tokens; the command says --truncate.
PYTHON_TRUNCATE = "truncate=True"


def _shorten_advice(truncate_name: str | None) -> str:
    """What to do with a text too long, naming how the caller's surface truncates (None: it cannot)."""
    return "shorten it" if truncate_name is None else f"shorten it, or truncate it explicitly ({truncate_name})"


def _problem_before_encoding(
    tokenizer: SubwordTokenizer, text: str, max_len: int, truncate: bool, truncate_name: str | None
) -> str | None:
    """Why ``text`` cannot be classified where its characters alone tell (``fewest_tokens``), or None."""
    fewest = 0 if truncate else tokenizer.fewest_tokens(text)
    if fewest > max_len:
        return (
            f"the text is at least {fewest} subword tokens ({len(text)} characters), more than the model reads "
            f"({max_len}, its max_len); {_shorten_advice(truncate_name)}"
        )
    return text_problem(text, 0, max_len, truncate_name)


def text_problem(text: str, token_count: int, max_len: int, truncate_name: str | None = None) -> str | None:
    """Why ``text`` (of ``token_count`` subword tokens) cannot be classified, or None.

    ``truncate_name``: how the caller's user asks for truncation (``--truncate``,
    ``truncate=True``), named in the advice; None where they cannot.
    """
    if not text.strip():
        return "the text is empty or only whitespace, so there is nothing to classify"
    if token_count > max_len:
        return (
            f"the text is {token_count} subword tokens, more than the model reads ({max_len}, its max_len); "
            f"{_shorten_advice(truncate_name)}"
        )
    return None


def predict_probabilities(
    model: TransformerClassifier, token_ids: Sequence[Sequence[int]], precision: str = "fp32"
) -> Tensor:
    """Class probabilities of already encoded texts, batched by length, in input order.

    ``precision`` is "fp32", "bf16" or "auto" (bf16 where the device runs it fast). bf16
    runs a bf16 copy of the model (``models.bfloat16``), made once per call: faster than
    autocast, which casts the weights at every call (docs/results.md#bf16-decoding). A model
    already bf16 runs as it is; an autocast the caller opened is kept. ``model`` runs in eval
    mode and is left in the mode it came in.

    Shape:
        returns ``[N, C]`` float32, each row summing to 1.
    """
    device = next(model.parameters()).device
    lengths = [len(ids) for ids in token_ids]
    budget = max(8192, max(lengths))  # padded tokens a batch; a longer text is a batch of its own
    probabilities = torch.empty(len(token_ids), model.num_classes)
    resolved = resolve_precision(precision, device, log_level=logging.DEBUG)
    with eval_mode(model):
        if resolved == "bf16" and not torch.is_autocast_enabled(device.type):
            model = as_bf16(model)
            resolved = "fp32"  # the copy's own dtype is the precision: no autocast on top
        with autocast(resolved, device):
            for batch in token_budget_batches(lengths, budget, shuffle=False):
                collated = collate_classification([(token_ids[index], 0) for index in batch], PAD_ID)
                logits = model(collated.token_ids.to(device))  # [B, C]
                probabilities[batch] = logits.float().softmax(dim=-1).cpu()
    return probabilities


@dataclass(frozen=True)
class Prediction:
    """The predicted class of one text and the probability of every class.

    ``num_tokens`` is the text's subword length; ``truncated`` says whether only its
    first ``max_len`` tokens were read (only ever with ``truncate=True``).
    """

    label: int
    label_name: str
    probabilities: dict[str, float]
    num_tokens: int
    truncated: bool = False


def predict_each(
    model: TransformerClassifier,
    tokenizer: SubwordTokenizer,
    class_names: Sequence[str],
    texts: Sequence[str],
    truncate: bool = False,
    precision: str = "fp32",
    truncate_name: str | None = None,
) -> list[Prediction | str]:
    """Classify each text; a text that cannot be classified gets the reason (a str) instead.

    Refused: an empty or whitespace-only text, and one longer than the model's
    ``max_len`` subword tokens unless ``truncate`` (then its first ``max_len`` tokens are
    read and the prediction says ``truncated``). Nothing is cut silently. ``precision``:
    see :func:`predict_probabilities`; ``truncate_name``: see :func:`text_problem`.
    """
    if len(class_names) != model.num_classes:
        raise ValueError(f"class_names must name the model's {model.num_classes} classes, got {list(class_names)!r}")
    texts = check_texts(texts)  # whole, so that a lone surrogate is named by its index in ``texts``
    max_len = model.positional_encoding.max_len
    results: list[Prediction | str] = []
    usable: list[tuple[int, list[int], int]] = []  # (index, the ids the model reads, the text's token count)
    # In batches, each cut to what the model reads before the next is encoded: memory
    # follows the batch, not the input (2,000 texts of 100 kB were all encoded at once).
    for start in range(0, len(texts), _ENCODE_BATCH):
        batch = texts[start : start + _ENCODE_BATCH]
        problems = [_problem_before_encoding(tokenizer, text, max_len, truncate, truncate_name) for text in batch]
        encoded = iter(tokenizer.encode_batch([text for text, problem in zip(batch, problems) if problem is None]))
        for index, (text, problem) in enumerate(zip(batch, problems), start):
            if problem is None:
                ids = next(encoded)
                problem = text_problem(text, 0 if truncate else len(ids), max_len, truncate_name)
                if problem is None:
                    usable.append((index, ids[:max_len], len(ids)))
            results.append(problem or "")
    if usable:
        with torch.no_grad():
            probabilities = predict_probabilities(model, [ids for _, ids, _ in usable], precision=precision)
        for (index, _, count), row in zip(usable, probabilities.tolist()):
            label = max(range(len(row)), key=row.__getitem__)
            results[index] = Prediction(label, class_names[label], dict(zip(class_names, row)), count, count > max_len)
    return results


class Classifier:
    """A classification model on a device, ready to classify (``transformer_lab.api.Classifier`` opens one).

    Attributes: ``model`` (in eval mode on ``device``), ``tokenizer``, ``config``, ``class_names`` in the model's order.
    """

    def __init__(
        self, model: TransformerClassifier, tokenizer: SubwordTokenizer, config: Any, device: str | torch.device = "cpu"
    ) -> None:
        self.model: TransformerClassifier = model.to(device).eval()
        self.tokenizer = tokenizer
        self.config = config
        self.class_names: tuple[str, ...] = tuple(config.class_names)

    @property
    def max_len(self) -> int:
        """The most subword tokens the model reads of one text (``truncate`` reads a longer one's first)."""
        return self.model.positional_encoding.max_len

    @overload
    def classify(  # type: ignore[overload-overlap]  # a str is a Sequence[str]; it matches first
        self, texts: str, *, precision: str | None = ..., truncate: bool = ...
    ) -> Prediction: ...

    @overload
    def classify(
        self, texts: Sequence[str], *, precision: str | None = ..., truncate: bool = ...
    ) -> list[Prediction]: ...

    def classify(
        self, texts: str | Sequence[str], *, precision: str | None = None, truncate: bool = False
    ) -> Prediction | list[Prediction]:
        """The `Prediction` of each text: its class, class name and every class's probability.

        ``precision`` "fp32", "bf16" or "auto" (None: "auto", as ``transformer-lab classify``,
        so both print the same probabilities); ``truncate`` reads only the
        first ``max_len`` tokens of a longer text (else it is a ValueError naming its index,
        as is a blank text; :meth:`classify_each` answers the others instead).
        """
        predictions = self.classify_each(texts_of(texts, "texts"), precision=precision, truncate=truncate)
        for index, prediction in enumerate(predictions):
            if isinstance(prediction, str):
                raise ValueError(f"texts[{index}]: {prediction}")
        return predictions[0] if isinstance(texts, str) else predictions  # type: ignore[return-value]

    def classify_each(
        self, texts: Sequence[str], *, precision: str | None = None, truncate: bool = False
    ) -> list[Prediction | str]:
        """Each text's `Prediction`, or the reason (a str) it cannot be classified; one bad text costs only itself.

        Refused: a blank text, and one longer than :attr:`max_len` subword tokens unless
        ``truncate``. ``precision`` as in :meth:`classify`.
        """
        return self._classify_each(texts, precision, truncate, PYTHON_TRUNCATE)

    def _classify_each(
        self, texts: Sequence[str], precision: str | None, truncate: bool, truncate_name: str | None
    ) -> list[Prediction | str]:
        """:meth:`classify_each`, its reasons naming ``truncate_name`` (the surface's; see :func:`text_problem`)."""
        truncate = check_bool("truncate", truncate)  # "no" is true in Python: it would truncate
        resolved = resolve_inference_precision(precision, "auto", next(self.model.parameters()).device, int8=False)
        batch = texts_of(texts, "texts")
        return predict_each(
            self.model,
            self.tokenizer,
            self.class_names,
            batch,
            truncate=truncate,
            precision=resolved,
            truncate_name=truncate_name,
        )


@dataclass(frozen=True)
class ClassifyRequest:
    """``POST /api/classify``: a text to classify."""

    text: str


class ClassificationHandler:
    """The classification pane over a `Classifier`: the predicted label of a text and every class's probability."""

    def __init__(self, predictor: Classifier) -> None:
        self.predictor = predictor

    def describe(self) -> dict[str, Any]:
        model = self.predictor.config.model
        return {"layers": model.num_layers, "heads": model.nhead, "labels": list(self.predictor.class_names)}

    def tokenize(self, text: str) -> list[str]:
        """The subword tokens the model reads for ``text`` (for the masks view)."""
        return token_labels(self.predictor.tokenizer, self.predictor.tokenizer.encode(text))

    def classify(self, request: ClassifyRequest) -> dict[str, Any]:
        """The label and every class's probability, in the order of the class names."""
        # fp32: the pane shows the probabilities of the float model, not of a bf16 copy. The request's
        # field is `text`, and it offers no truncation: the reason names neither texts[0] nor truncate.
        (prediction,) = self.predictor._classify_each([request.text], "fp32", False, None)
        if isinstance(prediction, str):
            raise ValueError(f"text: {prediction}")
        return {
            "label": prediction.label_name,
            "classes": [{"label": name, "probability": share} for name, share in prediction.probabilities.items()],
            "num_tokens": prediction.num_tokens,
        }


SERVING = Serving(
    handler=ClassificationHandler,
    endpoints=(Endpoint("/api/classify", ClassifyRequest, ClassificationHandler.classify),),
)


OUTPUT = TaskOption("--output", "also write the results here, one JSON object a line", Path)
TRUNCATE = TaskOption("--truncate", "read only the first max_len subword tokens of a longer text (reported)", bool)
PRECISION = TaskOption(
    "--precision",
    "bf16: classify with a bf16 copy of the model; auto: bf16 where this machine runs bf16 fast, else fp32 "
    "(default auto)",
    choices=PRECISIONS,
)


# A line of hundreds of classes' probabilities helps no one on a terminal: the most probable are printed.
PRINTED_TOP = 5


def printed_shares(probabilities: Mapping[str, float]) -> str:
    """Every class's probability, in class order; past `MAX_PRINTED_CLASSES`, the top `PRINTED_TOP` and a count."""
    if len(probabilities) <= MAX_PRINTED_CLASSES:
        return " ".join(f"{name}={probability:.4f}" for name, probability in probabilities.items())
    top = sorted(probabilities.items(), key=lambda item: -item[1])[:PRINTED_TOP]
    shown = " ".join(f"{name}={probability:.4f}" for name, probability in top)
    return f"{shown} (+{len(probabilities) - PRINTED_TOP:,} more classes; --output keeps all)"


def answer(classifier: Classifier, texts: list[str], options: Mapping[str, Any]) -> Answers:
    """``transformer-lab classify``: a line per text (see the module docstring), and ``--output``'s JSON lines."""
    results = classifier._classify_each(
        texts, options.get(PRECISION.flag, "auto"), options.get(TRUNCATE.flag, False), TRUNCATE.flag
    )
    answers = Answers(lines=[])
    records: list[dict[str, Any]] = []  # the --output JSON lines
    for index, (text, result) in enumerate(zip(texts, results)):
        name = input_name(options, index)
        if isinstance(result, str):
            answers.refused += 1
            answers.lines.append(f"-\t{result}")
            answers.notes.append(f"{name}: {result}")
            records.append({"text": text, "error": result})
            continue
        if result.truncated:
            answers.notes.append(
                f"{name}: read only the first {classifier.max_len} of its {result.num_tokens} "
                "subword tokens (--truncate)"
            )
        shares = printed_shares(result.probabilities)
        answers.lines.append(f"{result.label_name}\t{shares}")
        records.append(
            {
                "text": text,
                "label": result.label_name,
                "probabilities": result.probabilities,
                "truncated": result.truncated,
            }
        )
    if OUTPUT.flag in options:
        answers.files[options[OUTPUT.flag]] = "".join(json_line(record) for record in records)
    return answers


COMMAND = PredictCommand(
    name="classify",
    help="classify texts with a classification checkpoint",
    inputs="texts",
    verb="classify",
    answer=answer,
    options=(OUTPUT, TRUNCATE, PRECISION),
)
