"""Translation: Multi30k German -> English by default, or any parallel text (README "Your own data")."""

from transformer_lab.data import MULTI30K_SPLITS
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
    layout_settings=("source_language", "target_language"),
    corpus=lambda config, progress, checkpoint: data.corpus_kind(
        config, None if checkpoint is None else train.SEQ2SEQ_TASK.vocabulary.read(checkpoint), progress
    ),
    corpus_kind=PAIRS_KIND,
    evaluate=evaluate.evaluate,
    evaluation_split=evaluate.DEFAULT_SPLIT,
    evaluation_splits=MULTI30K_SPLITS,
    evaluation_options=(*SEARCH_OPTIONS, *evaluate.OPTIONS),
    surfaces=frozenset({"onnx", "ctranslate2", "serve", "lab"}),
    dataset="multi30k",
    predictor=predict.Translator,
    serving=predict.SERVING,
    command=predict.COMMAND,
)
