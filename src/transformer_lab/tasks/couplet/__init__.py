"""Chinese couplets (对联): given the upper line, write the lower line, under `CoupletConstraints`.

One character vocabulary, built from the training split only and kept in every checkpoint.
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
    corpus=lambda config, progress, checkpoint: data.corpus_kind(  # written without a progress bar
        config, None if checkpoint is None else train.SEQ2SEQ_TASK.vocabulary.read(checkpoint)
    ),
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
