"""German -> English translation on Multi30k (task 1): data, model, training, translation, BLEU.

Thin glue over ``data`` (reader, byte-level BPE, token-budget batches), ``models``
(Seq2SeqTransformer with one joint vocabulary and tied embeddings), ``training`` (Trainer)
and ``decoding`` (beam search). The tokenizer is trained on the training split only and
saved inside every checkpoint as ``tokenizer.json``.
"""

from transformer_lab.data.prepared_pairs import PAIRS_KIND
from transformer_lab.tasks.evaluation import SEARCH_OPTIONS
from transformer_lab.tasks.task import Task
from transformer_lab.tasks.translation import data, evaluate, predict, train

TASK = Task(
    name=train.TASK_NAME,
    presets=train.PRESETS,
    train=train.train,
    load=train.load_translator,
    vocabulary=train.SEQ2SEQ_TASK.vocabulary,
    corpus=lambda config, progress: data.corpus_kind(config, progress=progress),
    corpus_kind=PAIRS_KIND,
    evaluate=evaluate.evaluate,
    evaluation_split=evaluate.DEFAULT_SPLIT,
    evaluation_options=(*SEARCH_OPTIONS, *evaluate.OPTIONS),
    surfaces=frozenset({"onnx", "ctranslate2", "serve", "lab"}),
    dataset="multi30k",
    predictor=predict.Translator,
    serving=predict.SERVING,
    command=predict.COMMAND,
)
