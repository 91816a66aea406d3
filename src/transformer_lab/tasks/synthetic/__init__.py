"""The Annotated Transformer's copy task, and its siblings reverse and sort: random symbol sequences, no files."""

import functools

from transformer_lab.data import SYNTHETIC_TASKS
from transformer_lab.tasks.evaluation import SEARCH_OPTIONS
from transformer_lab.tasks.synthetic import evaluate, train
from transformer_lab.tasks.task import Task

# The three synthetic tasks: one model and one checkpoint kind ("synthetic"), three data rules.
TASKS = tuple(
    Task(
        name=name,
        presets={"default": functools.partial(train.default_config, name)},
        train=functools.partial(train.train, task=name),
        load=train.load,
        checkpoint_task=train.TASK_NAME,
        reads_data=False,
        surfaces=frozenset({"lab"}),
        closing=train.greedy_exact_match,
        evaluate=evaluate.evaluator(name),
        evaluation_split=evaluate.DEFAULT_SPLIT,
        evaluation_splits=evaluate.SPLITS,
        evaluation_options=SEARCH_OPTIONS,
    )
    for name in SYNTHETIC_TASKS
)
