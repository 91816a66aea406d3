"""Chinese couplets (对联): given the upper line, write the lower line.

Thin glue over ``data`` (the wb14123-format reader, a character vocabulary, token-budget
batches), ``models`` (Seq2SeqTransformer with one vocabulary and all embeddings tied),
``training`` (Trainer) and ``decoding`` (greedy or beam search with `CoupletConstraints`,
which fixes the length and punctuation and, as configured, repetition and the final tone).
The vocabulary is built from the training split only and saved in every checkpoint as
``vocabulary.txt``; characters it does not know read as ``<unk>``.
"""

from transformer_lab.data.prepared_couplets import COUPLETS_KIND
from transformer_lab.tasks.couplet import data, evaluate, predict, train
from transformer_lab.tasks.evaluation import SEARCH_OPTIONS
from transformer_lab.tasks.task import Task

TASK = Task(
    name=train.TASK_NAME,
    presets={"default": train.default_config},
    train=train.train,
    load=train.load,
    vocabulary=train.SEQ2SEQ_TASK.vocabulary,
    corpus=lambda config, progress: data.corpus_kind(config),  # written without a progress bar
    corpus_kind=COUPLETS_KIND,
    evaluate=evaluate.evaluate,
    evaluation_split=evaluate.DEFAULT_SPLIT,
    evaluation_options=(*SEARCH_OPTIONS, *predict.CONSTRAINT_TASK_OPTIONS),
    surfaces=frozenset({"onnx", "ctranslate2", "serve", "lab"}),
    dataset="couplets",
    predictor=predict.CoupletWriter,
    serving=predict.SERVING,
    command=predict.COMMAND,
)
