"""Text classification: AG News by default, or any labelled CSV / TSV / JSON Lines file (README "Your own data").

The tokenizer is learned from the training split only and kept in every checkpoint; the
classes are the training file's labels; ``best/`` has the highest validation accuracy.
"""

from transformer_lab.data.prepared_labelled import LABELLED_KIND
from transformer_lab.tasks.classification import data, evaluate, predict, train
from transformer_lab.tasks.task import Task

TASK = Task(
    name=train.TASK_NAME,
    presets={"default": train.default_config},
    train=train.train,
    load=train.load_classifier,
    vocabulary=train.VOCABULARY,
    layout_settings=("text_fields", "label_field"),
    # Written without a progress bar; a checkpoint's tokenizer and classes fix the ids and the class indices.
    corpus=lambda config, progress, checkpoint: data.corpus_kind(config, *train.checkpoint_vocabulary(checkpoint)),
    corpus_kind=LABELLED_KIND,
    evaluate=evaluate.evaluate,
    evaluation_split=evaluate.DEFAULT_SPLIT,
    evaluation_splits=evaluate.SPLITS,
    evaluation_options=evaluate.OPTIONS,
    surfaces=frozenset({"onnx", "serve"}),
    dataset="ag-news",
    predictor=predict.Classifier,
    serving=predict.SERVING,
    command=predict.COMMAND,
)
