"""Whether reading a tensor's value makes the host wait for its device.

On the CPU, ``tensor.item()``, ``bool(tensor)``, ``tensor.tolist()`` or ``nonzero`` read
memory that is already computed. On CUDA (and any other accelerator) the host queues
kernels ahead of the device, and such a read waits until every queued kernel has run:
the queue drains, and the device then idles while the host queues the next ones. A
decoding step that reads once stalls once per step, whatever the size of the read.

Code that reads a value only to save work (skip a masked fill, drop finished rows at
once) asks :func:`host_reads_wait` first: where reads are free it reads, elsewhere it
does the work on the device, or reads every few steps. The tests switch it on for the CPU
to run, and count, the reads an accelerator would make.
"""

from __future__ import annotations

import torch

__all__ = ["host_reads_wait"]


def host_reads_wait(device: torch.device) -> bool:
    """Whether reading a value held on ``device`` waits for the device's queued work (every device but the CPU)."""
    return device.type != "cpu"
