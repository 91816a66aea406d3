"""LossWindow: the figures of one logged line, against a hand computation."""

import pytest

from transformer_lab.training.loss_window import LossWindow, WindowSummary


def test_summary_is_the_mean_of_the_finite_losses_and_all_the_tokens_over_the_time():
    window = LossWindow(lr=1e-3, started_at=100.0)
    window.add(10, 2.0)
    window.add(6)  # a skipped batch: its tokens were computed, its loss is left out
    window.add(4, 3.5)
    window.record_step(lr=5e-4, grad_norm=1.25)
    # (2.0 + 3.5) / 2 losses; (10 + 6 + 4) tokens over 4 seconds.
    assert window.summary(now=104.0) == WindowSummary(train_loss=2.75, lr=5e-4, grad_norm=1.25, tokens_per_second=5.0)
    assert window.mean_loss() == 2.75


def test_close_keeps_the_mean_and_starts_a_new_window():
    window = LossWindow(started_at=0.0)
    window.add(8, 1.0)
    window.add(8, 2.0)
    window.record_step(lr=0.1, grad_norm=0.5)
    line = window.close(now=2.0)
    assert line is not None and line.train_loss == 1.5 and line.tokens_per_second == 8.0
    assert (window.loss_sum, window.loss_count, window.tokens, window.started_at) == (0.0, 0, 0, 2.0)
    # The last step's figures and the last mean stay: the progress bar shows them.
    assert (window.lr, window.grad_norm, window.last_loss) == (0.1, 0.5, 1.5)
    assert window.mean_loss() == 1.5
    window.add(4, 4.0)
    assert window.mean_loss() == 4.0  # the open window's own mean once it holds a loss


def test_a_window_without_a_loss_logs_nothing_and_stays_open():
    window = LossWindow(started_at=0.0)
    assert window.mean_loss() is None
    window.add(12)  # only a skipped batch
    assert window.summary(now=1.0) is None
    assert window.close(now=1.0) is None
    assert window.tokens == 12 and window.started_at == 0.0  # counted towards the next line
    window.add(0, 3.0)
    assert window.close(now=3.0).tokens_per_second == pytest.approx(4.0)


def test_restart_clock_keeps_the_losses_of_a_resumed_window():
    window = LossWindow(loss_sum=6.0, loss_count=3, tokens=50, started_at=0.0)
    window.restart_clock(now=10.0)
    assert (window.loss_sum, window.loss_count, window.tokens, window.started_at) == (6.0, 3, 0, 10.0)
    assert window.tokens_per_second(now=10.0) == 0.0  # no time passed: no division by zero
    window.reset(now=11.0)
    assert (window.loss_sum, window.loss_count, window.started_at) == (0.0, 0, 11.0)


def test_restore_reopens_a_saved_window_so_the_next_line_is_the_uninterrupted_ones():
    uninterrupted = LossWindow(lr=0.1, started_at=0.0)
    uninterrupted.add(4, 1.0)
    uninterrupted.add(4, 2.0)
    resumed = LossWindow(started_at=0.0)
    resumed.restore(uninterrupted.loss_sum, uninterrupted.loss_count, uninterrupted.last_loss, lr=0.1)
    for window in (uninterrupted, resumed):
        window.add(4, 3.0)
    assert resumed.mean_loss() == uninterrupted.mean_loss() == 2.0
    assert (resumed.lr, resumed.loss_count) == (0.1, 3)
