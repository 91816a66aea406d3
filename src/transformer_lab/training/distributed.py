"""Data-parallel training with PyTorch's DistributedDataParallel under ``torchrun``.

We do not write our own distribution: ``torchrun`` starts one process per device (or
several CPU processes), on one machine or many, and sets ``RANK``, ``LOCAL_RANK`` and
``WORLD_SIZE`` (plus ``MASTER_ADDR``/``MASTER_PORT``) in each. :class:`DataParallel` reads
them, initialises the process group (``nccl`` when the model is on CUDA, ``gloo`` on the
CPU), wraps the model in ``DistributedDataParallel`` and gives the
:class:`~transformer_lab.training.Trainer` the few collective operations it needs. Without
those variables (or with ``WORLD_SIZE=1``) every method is a cheap no-op, so the
single-process path stays exactly what it was.

The global batch and the loss normalisation. Each rank trains on its own shard of every
epoch's batches (``data_shard()`` gives the ``num_shards``/``shard_index`` for
``transformer_lab.data``'s batching functions): at each micro-step rank r holds batch
``t * W + r`` of the epoch's batch list, and those W batches together are the *global
batch* of that micro-step. ``loss_fn`` returns the mean over its own ``n_r`` tokens, and
``DistributedDataParallel`` averages gradients over the W ranks, so plain DDP would follow
the mean of the per-rank means, which over-weights the tokens of a rank whose batch is
small. Instead each rank multiplies its loss by ``W * n_r / N``, where ``N`` is the tokens
of the whole global batch (one all-reduce of two numbers per micro-batch, which also agrees
on the loss's finiteness). DDP's average then gives

    (1 / W) * sum_r W * n_r / N * grad(mean_r) = grad(sum of all token losses) / N,

the gradient of the per-token mean over the global batch: exactly what one process
training on the W batches merged into one would compute. Gradient accumulation then
combines the global batches of a group as the single-process Trainer combines its batches
(the mean of their per-batch losses). ``n_r`` comes from the Trainer's ``count_tokens``,
which must therefore count the tokens ``loss_fn`` averages over (for the sequence-to-sequence
tasks: the non-padding targets); without ``count_tokens`` every rank weighs 1.

Batch sizes and token budgets stay per process: with W ranks a step sees W times the data
and an epoch has about 1/W of the steps.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from transformer_lab.training.run.stop_signal import signals_end_at_once

__all__ = [
    "BatchLoss",
    "DataParallel",
    "Launch",
    "ProcessLostError",
    "data_shard",
    "exit_leaving_the_process_group",
    "is_main_process",
    "launch_from_environment",
]

logger = logging.getLogger(__name__)

LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
Result = TypeVar("Result")


# What gloo's and NCCL's errors say when the process at the other end of a collective is gone;
# gloo raises a plain RuntimeError, NCCL a torch.distributed.DistError.
_PEER_LOST_MARKERS = ("gloo", "NCCL", "Connection reset by peer", "Connection closed by peer")


class ProcessLostError(RuntimeError):
    """A collective call failed under torchrun: another process of the run stopped or lost its connection."""


def is_peer_lost(error: BaseException) -> bool:
    """Whether ``error``, raised in a process of an active group, is a collective call that lost its peer."""
    distributed_error = getattr(dist, "DistError", None)
    if distributed_error is not None and isinstance(error, distributed_error):
        return True
    return isinstance(error, RuntimeError) and any(marker in str(error) for marker in _PEER_LOST_MARKERS)


@dataclass(frozen=True)
class Launch:
    """This process's place in a ``torchrun`` launch."""

    rank: int  # 0 .. world_size - 1 over all machines
    local_rank: int  # the index on this machine: which GPU to use
    world_size: int  # the number of processes over all machines


def launch_from_environment(environment: Mapping[str, str] | None = None) -> Launch | None:
    """The launch ``torchrun`` describes in ``environment`` (default ``os.environ``), or None.

    None when none of ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` is set (a plain run). Some but
    not all of them, or values that are not consistent integers, raise ``ValueError``.
    """
    environment = os.environ if environment is None else environment
    present = [name for name in LAUNCH_VARIABLES if name in environment]
    if not present:
        return None
    if len(present) != len(LAUNCH_VARIABLES):
        raise ValueError(
            f"environment: expected all of {', '.join(LAUNCH_VARIABLES)} (as torchrun sets them) "
            f"or none, got only {', '.join(present)}"
        )
    values = {}
    for name in LAUNCH_VARIABLES:
        text = environment[name]
        try:
            values[name] = int(text)
        except ValueError:
            raise ValueError(f"environment: expected an integer in {name}, got {text!r}") from None
    rank, local_rank, world_size = (values[name] for name in LAUNCH_VARIABLES)
    if world_size < 1 or not 0 <= rank < world_size or local_rank < 0:
        raise ValueError(
            f"environment: expected WORLD_SIZE >= 1, 0 <= RANK < WORLD_SIZE and LOCAL_RANK >= 0, "
            f"got RANK={rank}, LOCAL_RANK={local_rank}, WORLD_SIZE={world_size}"
        )
    return Launch(rank=rank, local_rank=local_rank, world_size=world_size)


def data_shard() -> tuple[int, int]:
    """``(num_shards, shard_index)`` of this process: ``(WORLD_SIZE, RANK)``, or ``(1, 0)``.

    Pass them to ``token_budget_batches`` / ``fixed_size_batches`` for the training batches,
    so that each rank sees a distinct part of every epoch and all ranks as many batches.
    """
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    launch = launch_from_environment()
    return (launch.world_size, launch.rank) if launch is not None else (1, 0)


def is_main_process() -> bool:
    """Whether this process is rank 0 (or not under ``torchrun``): the one that reports."""
    return data_shard()[1] == 0


@dataclass(frozen=True)
class BatchLoss:
    """One micro-batch's loss as agreed by all ranks.

    value: the per-token mean over the global batch (every rank gets the same number; NaN
        or inf if any rank's loss was not finite).
    tokens: the tokens of the global batch (0 without ``count_tokens``).
    weight: what this rank multiplies its loss by before ``backward`` (see the module
        docstring); 1.0 in a single process.
    """

    value: float
    tokens: int
    weight: float


class DataParallel:
    """The process group of a ``torchrun`` launch, and the collectives the Trainer uses.

    Build it with :meth:`from_environment`. In a single process ``active`` is False and
    every method does nothing collective.
    """

    def __init__(self, rank: int = 0, world_size: int = 1, device: torch.device | None = None) -> None:
        self.rank = rank
        self.world_size = world_size
        self.device = device if device is not None else torch.device("cpu")
        # True while some rank-local gradient has not been all-reduced yet (no_sync).
        self._gradients_pending = False

    @staticmethod
    def launch_device(device: torch.device) -> torch.device:
        """``device`` as this rank of a ``torchrun`` launch uses it: CUDA is its ``cuda:LOCAL_RANK``.

        The model goes there first: moved to a bare ``cuda``, each rank would open a context and leave
        cached memory on GPU 0 before :meth:`from_environment` moved it on.
        """
        launch = launch_from_environment()
        if launch is None or launch.world_size == 1 or device.type != "cuda":
            return device
        return torch.device("cuda", launch.local_rank)

    @classmethod
    def from_environment(cls, model: nn.Module, device: torch.device) -> DataParallel:
        """Join the launch ``torchrun`` describes, or return the inactive single-process one.

        Initialises the default process group unless it exists (the caller's, or a previous
        Trainer's): ``nccl`` for a model on CUDA (moved to ``cuda:LOCAL_RANK`` first), ``gloo``
        on the CPU. A group created here lives until the process exits, when it is
        destroyed: later Trainers of the same process reuse it, since destroying and
        creating it again under torchrun can hang. Returns after all ranks have joined.
        """
        launch = launch_from_environment()
        if launch is None or launch.world_size == 1:
            return cls(device=device)
        if not dist.is_available():
            raise RuntimeError("torch.distributed is not available in this PyTorch build, but torchrun launched us")
        if device.type == "cuda":
            device = torch.device("cuda", launch.local_rank)
            torch.cuda.set_device(device)
            model.to(device)
        # A rank whose peer failed before joining (rank 0 refusing --out) waits here in C++;
        # torchrun's SIGTERM must end it then, as nothing of it is written yet.
        with signals_end_at_once():
            if not dist.is_initialized():
                dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
                atexit.register(_destroy_process_group)
            if dist.get_world_size() != launch.world_size or dist.get_rank() != launch.rank:
                raise ValueError(
                    f"process group: expected rank {launch.rank} of {launch.world_size} (from RANK and "
                    f"WORLD_SIZE), got rank {dist.get_rank()} of {dist.get_world_size()}"
                )
            parallel = cls(launch.rank, launch.world_size, device)
            # Nobody starts (or writes into the run folder) before every rank has joined.
            parallel.barrier()
        logger.info(
            "DistributedDataParallel: rank %d of %d, backend %s, device %s",
            launch.rank,
            launch.world_size,
            dist.get_backend(),
            device,
        )
        return parallel

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # -- the model ------------------------------------------------------------------------

    def wrap(self, model: nn.Module) -> nn.Module:
        """``DistributedDataParallel(model)`` (which copies rank 0's weights to all), or model."""
        if not self.active:
            return model
        device_ids = [self.device] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=device_ids)

    @staticmethod
    def unwrap(model: nn.Module) -> nn.Module:
        """The model inside a ``DistributedDataParallel`` wrapper: what checkpoints hold."""
        return model.module if isinstance(model, DistributedDataParallel) else model

    def micro_batch(self, model: nn.Module, synchronize: bool, forward_backward: Callable[[], bool]) -> bool:
        """Run ``forward_backward()`` (True if it called backward), all-reducing only if asked.

        With gradient accumulation only the last batch of a group needs DDP's all-reduce,
        which then carries the gradients summed locally under ``no_sync`` before it.
        """
        if not self.active:
            return forward_backward()
        # An active run's model is the DistributedDataParallel that wrap() returned.
        assert isinstance(model, DistributedDataParallel), type(model)
        context = contextlib.nullcontext() if synchronize else model.no_sync()
        with context:
            backward_done = forward_backward()
        if backward_done:
            self._gradients_pending = not synchronize
        return backward_done

    def finish_gradient_sync(self, parameters: Sequence[nn.Parameter]) -> None:
        """All-reduce (average) gradients that no DDP backward has synchronised yet.

        Needed when a group ends on a ``no_sync`` batch: an epoch that ends inside a group,
        or a last batch skipped for a non-finite loss.
        """
        if not self._gradients_pending:
            return
        for parameter in parameters:
            if parameter.grad is not None:
                dist.all_reduce(parameter.grad)
                parameter.grad.div_(self.world_size)
        self._gradients_pending = False

    # -- numbers --------------------------------------------------------------------------

    def reduce_batch_loss(self, loss: torch.Tensor, tokens: int | None) -> BatchLoss:
        """Agree on one micro-batch's loss, token count and this rank's loss weight.

        ``loss`` is this rank's mean over its ``tokens`` tokens (None: unknown, weigh 1).
        """
        value = float(loss.detach().float())
        if not self.active:
            return BatchLoss(value=value, tokens=tokens or 0, weight=1.0)
        local_tokens = float(tokens) if tokens is not None else 1.0
        # [loss x tokens, tokens] summed over ranks: the global per-token mean and count.
        totals = self._all_reduce([value * local_tokens, local_tokens])
        global_value = totals[0] / totals[1] if totals[1] > 0 else math.nan
        weight = self.world_size * local_tokens / totals[1] if totals[1] > 0 else 0.0
        return BatchLoss(value=global_value, tokens=int(totals[1]) if tokens is not None else 0, weight=weight)

    def largest(self, value: int) -> int:
        """The largest of the ranks' ``value`` (every rank gets it); ``value`` itself in one process."""
        if not self.active:
            return value
        (result,) = self._all_reduce([float(value)], dist.ReduceOp.MAX)
        return int(result)

    def check_same_count(self, name: str, count: int) -> None:
        """Raise ValueError unless ``count`` is the same on every rank (else DDP would hang)."""
        if not self.active:
            return
        largest, negative_smallest = self._all_reduce([float(count), -float(count)], dist.ReduceOp.MAX)
        if largest != -negative_smallest:
            raise ValueError(
                f"{name}: expected the same number of batches on every rank (shard them with "
                f"num_shards/shard_index from data_shard()), got between {int(-negative_smallest)} "
                f"and {int(largest)}; this rank ({self.rank}) has {count}"
            )

    def check_identical(self, name: str, payload: bytes) -> None:
        """Raise ValueError unless ``payload`` is the same bytes on every rank."""
        if not self.active:
            return
        digests: list[Any] = [None] * self.world_size
        dist.all_gather_object(digests, hashlib.sha256(payload).hexdigest())
        differing = [rank for rank, digest in enumerate(digests) if digest != digests[0]]
        if differing:
            raise ValueError(
                f"{name}: expected the same on every rank (each rank must build the same "
                f"config, data and tokenizer), got a different one on rank(s) {differing} than on rank 0"
            )

    def _all_reduce(self, values: list[float], operation: Any = None) -> list[float]:
        # float64, so that token counts and loss sums stay exact enough.
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=operation if operation is not None else dist.ReduceOp.SUM)
        return tensor.tolist()

    # -- objects and coordination ---------------------------------------------------------

    def run_on_main(self, function: Callable[[], Result]) -> Result:
        """Run ``function`` on rank 0 only and give its (picklable) result to every rank.

        Evaluation runs this way: every rank gets the same metrics, and the other ranks do
        not repeat work whose result would be identical.
        """
        if not self.active:
            return function()
        box: list[Any] = [function() if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather_on_main(self, value: Result) -> list[Result] | None:
        """Every rank's ``value`` in rank order on rank 0; None elsewhere and in one process."""
        if not self.active:
            return None
        values: list[Any] | None = [None] * self.world_size if self.is_main else None
        dist.gather_object(value, values, dst=0)
        return values

    def rank_state(self, own: Result, by_rank: Sequence[Result] | None) -> Result:
        """This rank's entry of ``by_rank`` (saved by a run of the same size), else ``own``."""
        if by_rank is not None and len(by_rank) == self.world_size:
            return by_rank[self.rank]
        if self.active:
            logger.warning(
                "the checkpoint holds random states for %s rank(s), this run has %d: every rank "
                "continues from rank 0's",
                len(by_rank) if by_rank is not None else 1,
                self.world_size,
            )
        return own

    def barrier(self) -> None:
        """Wait until every rank is here (after rank 0 wrote a checkpoint, for one)."""
        if self.active:
            if self.device.type == "cuda":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()


def exit_leaving_the_process_group(exit_code: int) -> NoReturn:
    """End this process with ``exit_code`` at once, without tearing down its process group.

    After a peer is lost the gloo group's connections are half closed, and destroying it (the
    exit hook below, or the interpreter's own finalisation) can call std::terminate: the
    process then dies by SIGABRT after its line was printed, instead of exiting 1. By now
    every ``finally`` has run; the logs are flushed here, as the skipped exit hooks would.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # closed or absent: nothing to flush
            stream.flush()
    os._exit(exit_code)


def _destroy_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
