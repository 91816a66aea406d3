"""`eval_mode` restores every submodule's own mode, and holds a module shared by threads until the last block ends."""

from __future__ import annotations

import threading

import torch

from transformer_lab.nn.eval_mode import eval_mode


def test_each_submodules_mode_comes_back_as_it_was() -> None:
    # A frozen part in eval mode inside a model in training mode: was put back in training mode.
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5)).train()
    model[1].eval()
    with eval_mode(model):
        assert not any(module.training for module in model.modules())
    assert [module.training for module in model.modules()] == [True, True, False]


def test_overlapping_blocks_of_two_threads_keep_the_module_in_eval_mode_until_both_end() -> None:
    # Was: the first block to end put training mode back under the other, which then decoded with dropout,
    # and the module was left in eval mode at the end.
    model = torch.nn.Dropout(0.5).train()
    inside, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def second() -> None:
        with eval_mode(model):
            inside.set()
            release.wait(timeout=30)
            seen.append(model.training)

    thread = threading.Thread(target=second)
    with eval_mode(model):
        thread.start()
        assert inside.wait(timeout=30)
    assert not model.training  # the second thread's block still runs
    release.set()
    thread.join(timeout=30)
    assert seen == [False] and model.training
