"""Text classification: AG News by default, or any labelled CSV / TSV / JSON Lines file.

Thin glue over ``data`` (the AG News reader, a seeded stratified validation split carved
from the training file, byte-level BPE, token-budget batches), ``models``
(TransformerClassifier, mean pooling over real tokens only), ``training`` (the Trainer,
label smoothing, the Noam schedule, bf16 autocast) and ``evaluation`` (accuracy,
per-class precision/recall/F1, the confusion matrix). The tokenizer is trained on the
training split only (never on the validation rows or the test set) and saved inside
every checkpoint as ``tokenizer.json``; ``best/`` is the checkpoint with the highest
validation accuracy. The test set is read only by :func:`evaluate_classifier` callers.

A text is the title and the description joined by a line break
(:func:`~transformer_lab.data.join_title_and_description`); a text given to
:func:`predict` is read as it is.

Your own data: ``data.train_files`` names one labelled file (read by
:func:`~transformer_lab.data.read_labelled_text`: ``data.text_fields`` joined by "\\n",
``data.label_field``, ``data.file_format`` or the suffix), ``data.valid_files`` optionally
one more; without it the validation rows are carved from the training file with the same
seeded stratified split. The classes are the training file's labels in the order of
:func:`~transformer_lab.data.sorted_class_names` (integer-looking labels numerically, then
the rest sorted), stored in the checkpoint as ``class_names``; a validation or test label
outside them is a ValueError naming the file, the line and the label.
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
    corpus=lambda config, progress: data.corpus_kind(config),  # written without a progress bar
    corpus_kind=LABELLED_KIND,
    evaluate=evaluate.evaluate,
    evaluation_split=evaluate.DEFAULT_SPLIT,
    evaluation_options=evaluate.OPTIONS,
    surfaces=frozenset({"onnx", "serve"}),
    dataset="ag-news",
    predictor=predict.Classifier,
    serving=predict.SERVING,
    command=predict.COMMAND,
)
