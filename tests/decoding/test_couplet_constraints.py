"""The couplet form in greedy and beam search, on fake models that would break it if they could.

Vocabulary of these tests: the project's specials (0 pad, 1 unk, 2 bos, 3 eos), then
the characters of TOKENS from id 4. A fake model's next-token scores are fixed
preferences (the same at every step), so everything the output obeys beyond "take the
favourite" comes from the constraints.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from transformer_lab.decoding import beam_search, greedy_search
from transformer_lab.decoding.couplet_constraints import CoupletConstraints

PAD, UNK, BOS, EOS = 0, 1, 2, 3
TOKENS = ["，", "？", "春", "风", "花", "月", "山", "水", "天", "地"]
ID = {token: index + 4 for index, token in enumerate(TOKENS)}
VOCAB = 4 + len(TOKENS)
PUNCTUATION = torch.tensor([index >= 4 and TOKENS[index - 4] in "，？" for index in range(VOCAB)])
# 风 天 (tone 1) and 花 山 (tone 1) are level; 月 水 地 春 are treated as oblique here.
LEVEL = torch.tensor([index >= 4 and TOKENS[index - 4] in "风天花山" for index in range(VOCAB)])
OBLIQUE = torch.tensor([index >= 4 and TOKENS[index - 4] in "月水地春" for index in range(VOCAB)])


class NoCache:
    def reorder(self, index: Tensor, include_static: bool = True) -> None:
        pass


class PreferenceModel:
    """Follows `IncrementalDecoder`; every step returns the same logits."""

    bos_id, eos_id, pad_id = BOS, EOS, PAD

    def __init__(self, preferences: dict[int, float]) -> None:
        self.logits = torch.full((VOCAB,), -5.0)
        for token_id, value in preferences.items():
            self.logits[token_id] = value

    def encode(self, src_ids: Tensor) -> Tensor:
        return torch.zeros(src_ids.size(0), src_ids.size(1), 4)  # [B, S, D]

    def new_cache(self) -> NoCache:
        return NoCache()

    def decode_step(self, tgt_prefix_ids: Tensor, memory: Tensor, src_ids: Tensor, cache: object = None) -> Tensor:
        return self.logits.expand(tgt_prefix_ids.size(0), VOCAB).clone()  # [N, V]


def eos_lover() -> PreferenceModel:
    """Loves eos, then punctuation, then unk/pad/bos: every rule has something to stop."""
    return PreferenceModel({EOS: 10.0, ID["，"]: 8.0, ID["？"]: 7.5, UNK: 7.0, PAD: 6.5, BOS: 6.0, ID["春"]: 1.0})


def punctuation_lover() -> PreferenceModel:
    return PreferenceModel({ID["？"]: 10.0, ID["，"]: 9.0, ID["月"]: 1.0, ID["水"]: 0.5})


def encode(lines: list[str]) -> Tensor:
    longest = max(len(line) for line in lines)
    rows = [[ID.get(character, UNK) for character in line] + [PAD] * (longest - len(line)) for line in lines]
    return torch.tensor(rows)  # [B, S]


def decode_text(ids: list[int]) -> str:
    assert EOS in ids, f"no eos in {ids}"
    body = ids[: ids.index(EOS)]
    assert all(token_id >= 4 for token_id in body), f"a special inside the line: {ids}"
    return "".join(TOKENS[token_id - 4] for token_id in body)


def constraints(**options: object) -> CoupletConstraints:
    return CoupletConstraints(PUNCTUATION, eos_id=EOS, pad_id=PAD, forbidden_ids=(PAD, BOS, UNK), **options)


def greedy_lines(model: PreferenceModel, uppers: list[str], processor: CoupletConstraints) -> list[str]:
    longest = max(len(upper) for upper in uppers)
    output = greedy_search(model, encode(uppers), longest + 1, logits_processor=processor)
    return [decode_text(row) for row in output.best_ids.tolist()]


def beam_lines(
    model: PreferenceModel, uppers: list[str], processor: CoupletConstraints, beams: int = 3
) -> list[list[str]]:
    longest = max(len(upper) for upper in uppers)
    output = beam_search(model, encode(uppers), beams, longest + 1, num_return=beams, logits_processor=processor)
    return [[decode_text(hypothesis.ids) for hypothesis in sentence] for sentence in output.hypotheses]


# Lengths differ so that beam search finishes and drops sentences at different steps.
UPPERS = ["春风，花月山水", "天地", "花？", "春，风，花，月，山"]


def assert_form(upper: str, lower: str, identical_marks: bool = True) -> None:
    assert len(lower) == len(upper), (upper, lower)
    for mark, character in zip(upper, lower):
        if mark in "，？":
            assert character == mark if identical_marks else character in "，？", (upper, lower)
        else:
            assert character not in "，？", (upper, lower)


@pytest.mark.parametrize("model_factory", [eos_lover, punctuation_lover])
def test_greedy_output_has_the_upper_lines_length_and_punctuation(model_factory) -> None:
    lowers = greedy_lines(model_factory(), UPPERS, constraints())
    for upper, lower in zip(UPPERS, lowers):
        assert_form(upper, lower)


@pytest.mark.parametrize("model_factory", [eos_lover, punctuation_lover])
def test_every_beam_hypothesis_has_the_upper_lines_length_and_punctuation(model_factory) -> None:
    sentences = beam_lines(model_factory(), UPPERS, constraints())
    for upper, lowers in zip(UPPERS, sentences):
        assert len(lowers) == 3
        for lower in lowers:
            assert_form(upper, lower)


def test_without_the_constraints_the_eos_lover_stops_at_once() -> None:
    # The oracle for the tests above: the fake really does break the form on its own.
    output = greedy_search(eos_lover(), encode(UPPERS), 8)
    assert output.best_ids[:, 0].tolist() == [EOS] * len(UPPERS)


def test_any_punctuation_mode_lets_the_model_choose_the_mark() -> None:
    lowers = greedy_lines(punctuation_lover(), ["春风，花月"], constraints(punctuation_mode="any"))
    assert lowers == ["月月？月月"]
    assert_form("春风，花月", lowers[0], identical_marks=False)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_mirror_repetition_repeats_where_the_upper_line_repeats_and_only_there(search: str) -> None:
    model = PreferenceModel({ID["山"]: 5.0, ID["水"]: 4.0, ID["天"]: 3.0, ID["地"]: 2.0})
    uppers = ["春春风花风", "春风花月"]
    processor = constraints(mirror_repetition=True)
    if search == "greedy":
        assert greedy_lines(model, uppers, processor) == ["山山水天水", "山水天地"]
    else:
        first, second = beam_lines(model, uppers, processor)
        # The pattern AABCB scores 2a + 2b + c, so swapping A and B ties: the best is one
        # of these two (5 + 5 + 4 + 3 + 4 = 4 + 4 + 5 + 3 + 5); which one depends on how
        # topk breaks the exact ties on the way, and the other may be pruned by them.
        assert first[0] in {"山山水天水", "水水山天山"}
        for lower in first:
            assert lower[0] == lower[1] and lower[2] == lower[4] and len({lower[0], lower[2], lower[3]}) == 3
        # Every order of the four favourites scores the same; each hypothesis repeats nothing.
        for lower in second:
            assert sorted(lower) == sorted("山水天地")
    # Without the rule the favourite fills every position.
    assert greedy_lines(model, uppers, constraints()) == ["山山山山山", "山山山山"]


def test_unknown_characters_never_count_as_a_repetition() -> None:
    model = PreferenceModel({ID["山"]: 5.0, ID["水"]: 4.0})
    # Two different unseen characters both read as <unk>: not a repetition.
    assert greedy_lines(model, ["龘靐"], constraints(mirror_repetition=True)) == ["山水"]


def test_avoid_source_characters_keeps_the_upper_lines_characters_out() -> None:
    model = PreferenceModel({ID["山"]: 5.0, ID["水"]: 4.0, ID["天"]: 3.0})
    assert greedy_lines(model, ["山水，山"], constraints(avoid_source_characters=True)) == ["天天，天"]


def test_soft_rules_give_way_when_they_would_leave_no_character() -> None:
    # Eight characters but a vocabulary of eight non-punctuation tokens, all in the upper
    # line: avoiding them is impossible, so the hard form alone decides.
    upper = "春风花月山水天地"
    lowers = greedy_lines(eos_lover(), [upper], constraints(avoid_source_characters=True, mirror_repetition=True))
    assert_form(upper, lowers[0])


def test_oblique_final_penalty_prefers_a_level_ending_unless_the_model_is_sure() -> None:
    model = PreferenceModel({ID["月"]: 5.0, ID["花"]: 4.0})  # 月 oblique, 花 level
    penalised = constraints(level_tone_mask=LEVEL, oblique_final_penalty=2.0)
    # Only the last character position changes; the trailing mark is copied after it.
    assert greedy_lines(model, ["春风", "春风？"], penalised) == ["月花", "月花？"]
    mild = constraints(level_tone_mask=LEVEL, oblique_final_penalty=0.5)
    assert greedy_lines(model, ["春风"], mild) == ["月月"]
    beam = beam_lines(model, ["春风"], penalised, beams=2)
    assert beam[0][0] == "月花"


def test_tone_opposition_penalty_leans_each_position_to_the_other_tone() -> None:
    model = PreferenceModel({ID["月"]: 5.0, ID["花"]: 4.0})  # 月 oblique, 花 level
    options = {"level_tone_mask": LEVEL, "oblique_tone_mask": OBLIQUE}
    penalised = constraints(**options, tone_opposition_penalty=2.0)
    # 风 is level: 月 (oblique) keeps its lead. 春 is oblique: 月 loses 2 nats, 花 wins.
    # The mark is copied and no tone rule touches it.
    assert greedy_lines(model, ["风春", "风，春"], penalised) == ["月花", "月，花"]
    assert greedy_lines(model, ["风春"], constraints(**options, tone_opposition_penalty=0.5)) == ["月月"]
    assert beam_lines(model, ["风春"], penalised, beams=2)[0][0] == "月花"


def test_tone_opposition_penalty_only_lowers_and_only_same_class_tokens() -> None:
    processor = constraints(level_tone_mask=LEVEL, oblique_tone_mask=OBLIQUE, tone_opposition_penalty=1.5)
    plain = constraints()
    src_ids = encode(["风春"])  # [1, S]
    log_probs = torch.log_softmax(torch.randn(1, VOCAB, generator=torch.Generator().manual_seed(0)), dim=-1)
    for step, upper_class in ((0, LEVEL), (1, OBLIQUE)):
        prefix = torch.full((1, step + 1), BOS)
        with_penalty = processor(step, prefix, log_probs, src_ids=src_ids)
        without = plain(step, prefix, log_probs, src_ids=src_ids)
        finite = torch.isfinite(without)
        assert torch.equal(torch.isfinite(with_penalty), finite)
        difference = (without - with_penalty)[finite]  # what each allowed token lost
        expected = (upper_class.float() * 1.5)[finite[0]]
        assert torch.allclose(difference, expected, atol=1e-6, rtol=0)


def test_bad_arguments_are_refused_with_their_names() -> None:
    with pytest.raises(ValueError, match="oblique_tone_mask"):
        constraints(level_tone_mask=LEVEL, tone_opposition_penalty=1.0)
    with pytest.raises(ValueError, match="oblique_tone_mask: expected no token"):
        constraints(level_tone_mask=LEVEL, oblique_tone_mask=LEVEL, tone_opposition_penalty=1.0)
    with pytest.raises(ValueError, match="tone_opposition_penalty"):
        constraints(level_tone_mask=LEVEL, oblique_tone_mask=OBLIQUE, tone_opposition_penalty=-1.0)
    with pytest.raises(ValueError, match="punctuation_mode"):
        constraints(punctuation_mode="mirror")
    with pytest.raises(ValueError, match="level_tone_mask"):
        constraints(oblique_final_penalty=1.0)
    with pytest.raises(ValueError, match="oblique_final_penalty"):
        constraints(level_tone_mask=LEVEL, oblique_final_penalty=float("inf"))
    with pytest.raises(ValueError, match="punctuation_mask"):
        CoupletConstraints(torch.zeros(VOCAB), eos_id=EOS, pad_id=PAD)


class _TableCopies(TorchFunctionMode):
    """Counts ``Tensor.to`` calls on the processor's tables: on a GPU each copies one and waits for the device."""

    def __init__(self, processor: CoupletConstraints) -> None:
        super().__init__()
        self.tables = [processor.punctuation_mask, processor.never_a_character, LEVEL, OBLIQUE]
        self.count = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if getattr(func, "__name__", "") == "to" and any(args[0] is table for table in self.tables):
            self.count += 1
        return func(*args, **(kwargs or {}))


def test_the_rule_tables_are_copied_to_the_search_device_once() -> None:
    # Was 6-7 copies at every step of the search (each a wait for the GPU), against a search that reads
    # the device at most once every few steps.
    processor = constraints(
        mirror_repetition=True,
        avoid_source_characters=True,
        level_tone_mask=LEVEL,
        oblique_final_penalty=2.0,
        oblique_tone_mask=OBLIQUE,
        tone_opposition_penalty=1.5,
    )
    copies = _TableCopies(processor)
    with copies:
        first = greedy_lines(eos_lover(), UPPERS, processor)
    assert 0 < copies.count <= 4  # one per table
    again = _TableCopies(processor)
    with again:
        assert greedy_lines(eos_lover(), UPPERS, processor) == first
    assert again.count == 0
