"""The searches read the device rarely, and their attention never meets more than two shapes a step.

On an accelerator every read of a tensor's value (``item``, ``bool``, ``tolist``,
``nonzero`` ...) waits for the device's queued work, so a search that reads at every step
stalls at every step. There is no such wait on the CPU to observe, so these tests count
the reads themselves: a ``TorchFunctionMode`` sees every torch function and tensor method
called, and counts those that bring a value to the host; ``host_reads_wait`` is switched
on, so the code takes the branches it takes on an accelerator (and its default interval
between reads, ``ACCELERATOR_CHECK_EVERY``). Each read is charged to the decoding step
during which it happens (a step starts when the search calls ``decode_step``).

The same counting sees every attention call: through ``nn/sdpa.py``, with cuDNN attention
switched off (``plans_per_shape`` on), and at most two shapes per step (the
self-attention's cache length, the cross-attention's source length), whatever the number
of layers. And the outputs are the same whatever the interval between reads.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable

import pytest
import torch
from torch.overrides import TorchFunctionMode

from transformer_lab.decoding import DecodeConfig, DecodeOutput, beam_search, decode, greedy_search
from transformer_lab.decoding.protocol import ACCELERATOR_CHECK_EVERY
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.models.bfloat16 import bf16_for_inference
from transformer_lab.nn import host_reads, sdpa

from .test_real_model import tiny_model as real_model_tiny_model

VOCAB = 13  # 0 pad, 1 unk, 2 bos, 3 eos, then 9 ordinary tokens
PAD_ID, BOS_ID, EOS_ID = 0, 2, 3
MAX_LEN = 14
# Torch functions and tensor methods that bring a value from the device to the host.
READS = {
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "__array__",
    "item",
    "tolist",
    "numpy",
    "nonzero",
    "argwhere",
    "masked_select",
    "unique",
    "unique_consecutive",
}


class StepCounter(TorchFunctionMode):
    """Counts host reads per decoding step (step -1: before the first), and SDPA's shapes per step."""

    def __init__(self) -> None:
        super().__init__()
        self.step = -1
        self.reads: Counter[int] = Counter()
        self.read_names: list[tuple[int, str]] = []
        self.attention_shapes: dict[int, set[tuple[tuple[int, ...], ...]]] = {}
        self.attention_calls: Counter[int] = Counter()
        self.cudnn_at_attention: list[bool] = []

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if name in READS:
            self.reads[self.step] += 1
            self.read_names.append((self.step, name))
        elif name == "scaled_dot_product_attention":
            shapes = tuple(tuple(tensor.shape) for tensor in args[:3])
            self.attention_shapes.setdefault(self.step, set()).add(shapes)
            self.attention_calls[self.step] += 1
            self.cudnn_at_attention.append(torch.backends.cuda.cudnn_sdp_enabled())
        return func(*args, **(kwargs or {}))


def tiny_model() -> Seq2SeqTransformer:
    """The real-model tests' 2+2-layer model (d_model 16; its eos bias ends sentences at different steps), seeded."""
    torch.manual_seed(3)
    return real_model_tiny_model()


def padded_sources(lengths: tuple[int, ...] = (6, 2, 5, 1, 4, 3)) -> torch.Tensor:
    """Random sources of these lengths, right-padded. Shape: returns [B, max(lengths)]."""
    generator = torch.Generator().manual_seed(11)
    src_ids = torch.full((len(lengths), max(lengths)), PAD_ID, dtype=torch.long)
    for row, length in enumerate(lengths):
        src_ids[row, :length] = torch.randint(4, VOCAB, (length,), generator=generator)
    return src_ids


def counted(model: Seq2SeqTransformer, search: Callable[[], DecodeOutput]) -> tuple[DecodeOutput, StepCounter]:
    """Run ``search`` under the counter, each ``model.decode_step`` call starting a step."""
    counter = StepCounter()
    original = model.decode_step

    def decode_step(*arguments: Any, **keywords: Any) -> torch.Tensor:
        counter.step += 1
        return original(*arguments, **keywords)

    model.decode_step = decode_step  # type: ignore[method-assign]
    try:
        with counter:
            output = search()
    finally:
        del model.decode_step
    return output, counter


@pytest.fixture
def reads_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the CPU through the branches an accelerator takes (reads wait, cuDNN attention to avoid)."""
    monkeypatch.setattr(host_reads, "host_reads_wait", lambda device: True)
    monkeypatch.setattr(sdpa, "plans_per_shape", lambda device: True)
    # An AMX CPU held to AVX2 kernels takes the CPU's own bf16 branch (flash off) first: not an accelerator's.
    monkeypatch.setattr(sdpa, "cpu_flash_fails", lambda: False)


def assert_reads_are_rare(counter: StepCounter, every: int) -> None:
    """Between the first and the last step: at most one read a step, two in any ``every`` steps in a row.

    The first step reads the source once (its ids' range, its padding); the last one also
    holds the reads of the results. The second read of a window is the model's: after
    finished rows leave the batch, it asks once whether the new source rows hold padding.
    """
    last = counter.step
    per_step = [counter.reads[step] for step in range(1, last)]
    assert max(per_step, default=0) <= 1, counter.read_names
    windows = [sum(per_step[start : start + every]) for start in range(max(1, len(per_step) - every + 1))]
    assert max(windows) <= 2, counter.read_names
    assert sum(per_step) <= 2 * math.ceil(last / every), counter.read_names
    assert counter.reads[last] <= 4, counter.read_names  # ids, lengths, scores; or the last record and the tokens


def search_runs(model: Seq2SeqTransformer) -> list[tuple[str, Callable[[torch.Tensor, int | None], DecodeOutput]]]:
    return [
        ("greedy", lambda src_ids, every: greedy_search(model, src_ids, MAX_LEN, check_every=every)),
        ("beam", lambda src_ids, every: beam_search(model, src_ids, 3, MAX_LEN, num_return=2, check_every=every)),
        (
            "beam finished",
            lambda src_ids, every: beam_search(model, src_ids, 3, MAX_LEN, stop="finished", check_every=every),
        ),
    ]


@pytest.mark.parametrize("search", ["greedy", "beam", "beam finished"])
@pytest.mark.parametrize("bf16", [False, True])
def test_a_search_reads_the_device_once_every_few_steps(reads_wait: None, search: str, bf16: bool) -> None:
    model = tiny_model()
    if bf16:
        model = bf16_for_inference(model)
    src_ids = padded_sources()
    run = dict(search_runs(model))[search]
    output, counter = counted(model, lambda: run(src_ids, None))
    lengths = output.lengths.tolist()
    assert min(lengths) < max(lengths), "a guard: sentences should end at different steps"
    assert counter.step >= 2 * ACCELERATOR_CHECK_EVERY
    assert_reads_are_rare(counter, ACCELERATOR_CHECK_EVERY)


def test_a_length_limit_per_sentence_adds_no_read(reads_wait: None) -> None:
    model = tiny_model()
    config = DecodeConfig(strategy="beam", beam_size=3, max_len=MAX_LEN, max_len_a=1.0, max_len_b=3)
    output, counter = counted(model, lambda: decode(model, padded_sources(), config))
    assert min(output.lengths.tolist()) < MAX_LEN
    assert_reads_are_rare(counter, ACCELERATOR_CHECK_EVERY)


def test_on_the_cpu_the_search_reads_every_step_and_drops_finished_rows_at_once() -> None:
    # Reads cost nothing there, and rows that leave at once save their share of each step.
    model = tiny_model()
    _, counter = counted(model, lambda: greedy_search(model, padded_sources(), MAX_LEN))
    assert all(counter.reads[step] >= 1 for step in range(counter.step))


def test_bf16_attention_runs_off_cudnn_with_two_shapes_a_step(reads_wait: None) -> None:
    model = bf16_for_inference(tiny_model())
    layers = len(model.transformer.decoder.layers)
    src_ids = padded_sources()
    _, counter = counted(model, lambda: beam_search(model, src_ids, 3, MAX_LEN))
    assert counter.cudnn_at_attention and not any(counter.cudnn_at_attention)
    single_position_steps = range(1, counter.step + 1)
    for step in single_position_steps:
        shapes = counter.attention_shapes[step]
        # The self-attention's and the cross-attention's, shared by all layers (one where
        # the cache is as long as the source).
        assert {shape[1][2] for shape in shapes} == {step + 1, src_ids.shape[1]}, (step, shapes)
        assert len(shapes) <= 2
        assert counter.attention_calls[step] == 2 * layers
    # Why cuDNN attention must stay out: the self-attention's key length is new at each step.
    self_lengths = {shape[1][2] for step in single_position_steps for shape in counter.attention_shapes[step]}
    assert len(self_lengths) >= counter.step - 1


@pytest.mark.parametrize("every", [2, 3, ACCELERATOR_CHECK_EVERY, 7])
def test_the_outputs_do_not_depend_on_the_interval_between_reads(every: int) -> None:
    model = tiny_model()
    src_ids = padded_sources()
    for name, run in search_runs(model):
        each_step, spaced = run(src_ids, 1), run(src_ids, every)
        assert torch.equal(each_step.best_ids, spaced.best_ids), name
        assert torch.equal(each_step.lengths, spaced.lengths), name
        for first, second in zip(each_step.hypotheses, spaced.hypotheses):
            assert [hypothesis.ids for hypothesis in first] == [hypothesis.ids for hypothesis in second], name
            # Rows leave the batch at other steps, so the products run at other batch sizes.
            assert [hypothesis.log_prob for hypothesis in first] == pytest.approx(
                [hypothesis.log_prob for hypothesis in second], abs=1e-5
            ), name


@pytest.mark.parametrize("every", [2, 5])
def test_on_hand_built_log_probs_the_interval_changes_nothing_at_all(table_model, sources, every: int) -> None:
    src_ids = sources([0, 3, 1, 4, 5, 2], [4, 2, 5, 3, 4, 4])
    for alpha in (0.0, 1.0):
        for stop in ("exact", "finished"):
            each_step = beam_search(table_model, src_ids, 3, 8, num_return=2, length_penalty=alpha, stop=stop)
            spaced = beam_search(
                table_model, src_ids, 3, 8, num_return=2, length_penalty=alpha, stop=stop, check_every=every
            )
            assert each_step.hypotheses == spaced.hypotheses
            assert torch.equal(each_step.best_ids, spaced.best_ids)
    each_step = greedy_search(table_model, src_ids, 8)
    spaced = greedy_search(table_model, src_ids, 8, check_every=every)
    assert each_step.hypotheses == spaced.hypotheses
    assert torch.equal(each_step.best_ids, spaced.best_ids) and torch.equal(each_step.scores, spaced.scores)


def test_check_every_must_be_a_positive_int(table_model, sources) -> None:
    with pytest.raises(ValueError, match="check_every"):
        greedy_search(table_model, sources([0]), 4, check_every=0)
    with pytest.raises(ValueError, match="check_every"):
        beam_search(table_model, sources([0]), 2, 4, check_every=1.5)  # type: ignore[arg-type]
