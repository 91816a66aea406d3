"""Training: the smoothed loss, the Noam schedule, configs, checkpoints and the Trainer.

Model-agnostic: nothing here imports ``transformer_lab.models``; the tasks hand the
:class:`Trainer` a loss function (``batch_losses``: those of the data package's two batch
kinds) and a batch source. Under ``torchrun`` the Trainer trains with DistributedDataParallel
(``distributed.py``).
"""

from .averaging import average_checkpoints
from .checkpoint import (
    CONFIG_FILE,
    MODEL_FILE,
    TRAINER_STATE_FILE,
    copy_checkpoint,
    load_checkpoint_config,
    load_model_weights,
    load_task_config,
    load_trainer_state,
    read_extra_file,
    recover_interrupted_save,
    resolve_checkpoint,
    save_checkpoint,
)
from .config import TrainConfig
from .config_io import apply_overrides, config_from_dict, config_to_dict
from .distributed import (
    DataParallel,
    ProcessLostError,
    data_shard,
    exit_leaving_the_process_group,
    is_main_process,
    launch_from_environment,
)
from .generator_loss import generator_cross_entropy
from .losses import label_smoothed_cross_entropy
from .optimization import OptimizerFactory, ScheduleFactory
from .run.stop_signal import Terminated, TrainingInterrupted, raise_on_sigterm
from .schedule import build_noam_scheduler, build_optimizer, cooldown_multiplier, noam_lr
from .trainer import Trainer, TrainingDivergedError

__all__ = [
    "CONFIG_FILE",
    "MODEL_FILE",
    "TRAINER_STATE_FILE",
    "DataParallel",
    "OptimizerFactory",
    "ScheduleFactory",
    "TrainConfig",
    "Trainer",
    "ProcessLostError",
    "TrainingDivergedError",
    "Terminated",
    "TrainingInterrupted",
    "raise_on_sigterm",
    "apply_overrides",
    "average_checkpoints",
    "build_noam_scheduler",
    "build_optimizer",
    "cooldown_multiplier",
    "config_from_dict",
    "config_to_dict",
    "copy_checkpoint",
    "data_shard",
    "exit_leaving_the_process_group",
    "generator_cross_entropy",
    "is_main_process",
    "label_smoothed_cross_entropy",
    "launch_from_environment",
    "load_checkpoint_config",
    "load_model_weights",
    "load_task_config",
    "load_trainer_state",
    "noam_lr",
    "read_extra_file",
    "recover_interrupted_save",
    "resolve_checkpoint",
    "save_checkpoint",
]
