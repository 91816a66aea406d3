"""Several models decoded as one: each step's distribution is the mean of the members' probabilities.

The oracle is the members' own full-prefix forward, averaged in probability space by hand;
the searches must decode the ensemble as they decode one model (cached equals uncached, a
batch equals each sentence alone), and an ensemble of one model with itself is that model.
Through ``evaluate translation --ensemble`` the scores stay off the checkpoint's card.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.reliability.builders import SENTENCES, write_translation_checkpoint
from transformer_lab.api import Translator
from transformer_lab.cli import main
from transformer_lab.data import SubwordTokenizer
from transformer_lab.decoding import beam_search, greedy_search
from transformer_lab.decoding.config import decoding_model
from transformer_lab.decoding.ensemble import Ensemble
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.models.attention_maps import last_layer_map
from transformer_lab.models.bfloat16 import holds_bf16
from transformer_lab.tasks.translation.predict import TranslationHandler

VOCAB = 11
PAD_ID, BOS_ID, EOS_ID = 0, 2, 3
SOURCE_LENGTHS = [5, 2, 4]


def member(d_model: int, seed: int, max_len: int = 32, eos_id: int = EOS_ID) -> Seq2SeqTransformer:
    torch.manual_seed(seed)
    model = Seq2SeqTransformer(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        d_model=d_model,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=2,
        dim_feedforward=2 * d_model,
        dropout=0.0,
        max_len=max_len,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=eos_id,
    )
    with torch.no_grad():
        model.generator.bias[EOS_ID] += 1.0  # some sentences end early, others run to the limit
    return model.eval()


def sources() -> torch.Tensor:
    generator = torch.Generator().manual_seed(7)
    rows = torch.full((len(SOURCE_LENGTHS), max(SOURCE_LENGTHS)), PAD_ID)  # [B, S]
    for row, length in enumerate(SOURCE_LENGTHS):
        rows[row, :length] = torch.randint(4, VOCAB, (length,), generator=generator)
    return rows


def test_a_step_is_the_log_of_the_members_mean_probability() -> None:
    members = [member(16, seed=1), member(24, seed=2), member(16, seed=3)]  # other widths side by side
    ensemble = Ensemble(members).eval()
    src_ids = sources()  # [B, S]
    prefix = torch.tensor([[BOS_ID, 5, 6]] * src_ids.size(0))  # [B, 3]
    with torch.no_grad():
        stepped = ensemble.decode_step(prefix, ensemble.encode(src_ids), src_ids)  # [B, V]
        probabilities = [
            torch.softmax(model.decode_step(prefix, model.encode(src_ids), src_ids), dim=-1) for model in members
        ]
    expected = torch.log(torch.stack(probabilities).mean(dim=0))  # [B, V]
    torch.testing.assert_close(stepped, expected, rtol=1e-5, atol=1e-5)
    assert torch.allclose(stepped.exp().sum(dim=-1), torch.ones(src_ids.size(0)))  # already normalised


def test_an_ensemble_of_a_model_with_itself_decodes_as_the_model() -> None:
    model = member(16, seed=4)
    src_ids = sources()
    alone = beam_search(model, src_ids, beam_size=3, max_len=9, length_penalty=1.0)
    twice = beam_search(Ensemble([model, model]), src_ids, beam_size=3, max_len=9, length_penalty=1.0)
    assert twice.best_ids.tolist() == alone.best_ids.tolist()
    for ours, theirs in zip(twice.hypotheses, alone.hypotheses):
        assert [hypothesis.ids for hypothesis in ours] == [hypothesis.ids for hypothesis in theirs]
        assert [hypothesis.score for hypothesis in ours] == pytest.approx([h.score for h in theirs], abs=1e-4)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_cached_equals_uncached_and_a_batch_equals_each_sentence_alone(search: str) -> None:
    ensemble = Ensemble([member(16, seed=5), member(24, seed=6)]).eval()
    src_ids = sources()

    def run(rows: torch.Tensor, use_cache: bool) -> list[list[int]]:
        if search == "greedy":
            output = greedy_search(ensemble, rows, 9, use_cache=use_cache)
        else:
            output = beam_search(ensemble, rows, 3, 9, length_penalty=0.6, use_cache=use_cache)
        return [sentence[0].ids for sentence in output.hypotheses]

    batched = run(src_ids, use_cache=True)
    assert batched == run(src_ids, use_cache=False)
    alone = [run(src_ids[row : row + 1, :length], use_cache=True)[0] for row, length in enumerate(SOURCE_LENGTHS)]
    assert batched == alone
    assert len({tuple(ids) for ids in batched}) > 1  # the sentences are not all decoded alike


def test_the_bf16_copy_converts_every_member_and_the_limit_is_the_shortest_members() -> None:
    ensemble = Ensemble([member(16, seed=7, max_len=32), member(16, seed=8, max_len=12)])
    assert ensemble.max_len == 12
    copy = decoding_model(ensemble, "bf16")
    assert all(holds_bf16(model) for model in copy.members)
    output = beam_search(copy, sources(), 2, 40)
    assert max(len(sentence[0].ids) for sentence in output.hypotheses) <= 12


def test_members_that_cannot_be_averaged_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"members: expected at least 2 models to ensemble, given 1"):
        Ensemble([member(16, seed=1)])
    with pytest.raises(ValueError, match=r"members\[1\]\.eos_id: expected 3 as members\[0\] has, given 4"):
        Ensemble([member(16, seed=1), member(16, seed=2, eos_id=4)])
    with pytest.raises(ValueError, match=r"members\[1\]: expected a model with encode, new_cache and decode_step"):
        Ensemble([member(16, seed=1), torch.nn.Linear(2, 2)])


def _evaluate(checkpoint: Path, folder: Path, *ensemble: Path, status: int = 0) -> list[str]:
    source, reference = folder / "test.de", folder / "test.en"
    source.write_text("".join(de + "\n" for de, _ in SENTENCES), encoding="utf-8")
    reference.write_text("".join(en + "\n" for _, en in SENTENCES), encoding="utf-8")
    output = folder / f"hypotheses{len(ensemble)}.txt"
    command = ["evaluate", "translation", "--checkpoint", str(checkpoint), "--precision", "fp32"]
    command += ["--source", str(source), "--reference", str(reference), "--output", str(output)]
    for other in ensemble:
        command += ["--ensemble", str(other)]
    assert main(command) == status
    return [] if status else output.read_text(encoding="utf-8").splitlines()


def test_evaluate_ensemble_decodes_the_models_together_and_keeps_the_card(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write_translation_checkpoint(tmp_path / "first", seed=1)
    favouring = write_translation_checkpoint(tmp_path / "favouring", seed=2, favoured="man")
    alone = _evaluate(first, tmp_path)
    assert "model card: none in" in capsys.readouterr().out  # a single model's scores would go to its card
    # With a model sure of "man" at every step, "man" only.
    together = _evaluate(first, tmp_path, favouring)
    assert together != alone and all(line and not line.replace("man", "") for line in together)
    printed = capsys.readouterr().out
    assert "model card: not updated (beam 2, ensemble of 2: the scores are not the checkpoint's own)" in printed


def test_two_ensembles_of_as_many_members_keep_their_own_hypotheses(tmp_path: Path) -> None:
    # Was: both wrote hypotheses.test.de.<digest>.beam2ensemble2.txt, the second over the first's.
    first = write_translation_checkpoint(tmp_path / "first", seed=1)
    others = [write_translation_checkpoint(tmp_path / f"other{seed}", seed=seed) for seed in (2, 3)]
    source, reference = tmp_path / "test.de", tmp_path / "test.en"
    source.write_text("".join(de + "\n" for de, _ in SENTENCES), encoding="utf-8")
    reference.write_text("".join(en + "\n" for _, en in SENTENCES), encoding="utf-8")
    for other in others:
        command = ["evaluate", "translation", "--checkpoint", str(first), "--precision", "fp32", "--ensemble"]
        assert main([*command, str(other), "--source", str(source), "--reference", str(reference)]) == 0
    written = sorted(path.name for path in first.glob("hypotheses.*ensemble2*"))
    assert len(written) == 2 and all(".beam2ensemble2." in name for name in written)


def test_evaluate_ensemble_refuses_a_model_of_another_vocabulary_or_direction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write_translation_checkpoint(tmp_path / "first")
    other = write_translation_checkpoint(tmp_path / "other")
    pairs = [(german + " Haus", english + " house") for german, english in SENTENCES]
    (other / "tokenizer.json").write_text(
        SubwordTokenizer.train_from_pairs(pairs, vocab_size=300, min_frequency=1).to_json(), encoding="utf-8"
    )
    _evaluate(first, tmp_path, other, status=2)
    expected = f"--ensemble {other}: expected the first model's source vocabulary (the models must share their token"
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "hypotheses1.txt").exists()
    _evaluate(first, tmp_path, tmp_path / "absent", status=2)
    assert "--ensemble: expected a checkpoint folder (with config.json) or a run folder" in capsys.readouterr().err
    reverse = write_translation_checkpoint(tmp_path / "reverse", ["data.source_language=en", "data.target_language=de"])
    _evaluate(first, tmp_path, reverse, status=2)
    expected = f"--ensemble {reverse}: expected a model translating de->en as the first model does, given one"
    assert expected + " translating en->de" in capsys.readouterr().err


def test_translate_and_the_python_translator_decode_an_ensemble_as_evaluate_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write_translation_checkpoint(tmp_path / "first", seed=1)
    favouring = write_translation_checkpoint(tmp_path / "favouring", seed=2, favoured="man")
    sentences = [german for german, _ in SENTENCES]
    alone = Translator(first).translate(sentences, precision="fp32")
    together = Translator(first, ensemble=[favouring]).translate(sentences, precision="fp32")
    assert together != alone and all(line and not line.replace("man", "") for line in together)
    assert together == _evaluate(first, tmp_path, favouring)
    capsys.readouterr()
    command = ["translate", "--checkpoint", str(first), "--precision", "fp32", *sentences]
    assert main([*command, "--ensemble", str(favouring)]) == 0
    assert capsys.readouterr().out.splitlines() == together


def test_an_ensembles_attention_map_is_the_mean_of_its_members_maps(tmp_path: Path) -> None:
    first = write_translation_checkpoint(tmp_path / "first", seed=1)
    second = write_translation_checkpoint(tmp_path / "second", seed=2)
    sentence = SENTENCES[0][0]
    ensemble = Translator(first, ensemble=[second])
    target_ids = ensemble.candidates(sentence, precision="fp32")[0].ids
    together = ensemble.attention_map(sentence, precision="fp32")
    # Each member's map over the ids the ensemble wrote, read alone (teacher-forced), then averaged.
    source_ids = ensemble.tokenizers.source.encode(sentence)
    maps = [
        last_layer_map(Translator(folder).model, source_ids, target_ids, together.columns, together.rows[1:], "")
        for folder in (first, second)
    ]
    torch.testing.assert_close(together.weights, (maps[0].weights + maps[1].weights) / 2)
    assert together.title.endswith(", mean of 2 models") and not torch.equal(maps[0].weights, maps[1].weights)


def test_an_ensemble_is_refused_where_one_model_is_expected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = write_translation_checkpoint(tmp_path / "first", seed=1)
    second = write_translation_checkpoint(tmp_path / "second", seed=2)
    reverse = write_translation_checkpoint(tmp_path / "reverse", ["data.source_language=en", "data.target_language=de"])
    with pytest.raises(ValueError, match=rf"^ensemble {reverse}: expected a model translating de->en"):
        Translator(first, ensemble=[reverse])
    with pytest.raises(ValueError, match=r"^ensemble: expected a list of one checkpoint or more, got '"):
        Translator(first).ensembled(str(second))
    with pytest.raises(ValueError, match="^ensemble: expected a translator of one model to add models to"):
        Translator(first, ensemble=[second]).ensembled([second])
    with pytest.raises(ValueError, match="^predictor: expected one checkpoint's model to serve, got a Ensemble"):
        TranslationHandler(Translator(first, ensemble=[second]))
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(first), "--ensemble", str(tmp_path / "absent"), "Ein Haus."]) == 2
    assert "--ensemble: expected a checkpoint folder (with config.json) or a run folder" in capsys.readouterr().err


def test_a_member_with_the_weights_of_another_is_refused_not_averaged_with_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same folder twice, a run folder beside its own best/, a copy: each decodes as fewer models than given.
    first = write_translation_checkpoint(tmp_path / "first", seed=1)
    copy = write_translation_checkpoint(tmp_path / "run" / "best", seed=1)  # first's weights, in a run's best/
    second = write_translation_checkpoint(tmp_path / "second", seed=2)
    joined = "expected a model other than the checkpoint it joins, got the same weights"
    for members in ([first], [copy.parent], [copy, second]):
        with pytest.raises(ValueError, match=rf"^ensemble {members[0]}: {joined} \(ensembled with itself"):
            Translator(first, ensemble=members)
    with pytest.raises(ValueError, match=rf"^ensemble {second}: expected a model other than ensemble {second}, got"):
        Translator(first, ensemble=[second, second])
    capsys.readouterr()
    command = ["translate", "--checkpoint", str(tmp_path / "run"), "Ein Haus."]
    assert main([*command, "--ensemble", str(first)]) == 2
    error = f"transformer-lab translate: error: --ensemble {first}: {joined} (ensembled with itself, a model "
    assert capsys.readouterr().err == error + "decodes as it does alone)\n"
    assert main([*command, "--ensemble", str(second), "--ensemble", str(second)]) == 2
    assert f"--ensemble {second}: expected a model other than --ensemble {second}, got" in capsys.readouterr().err
    _evaluate(first, tmp_path, copy, status=2)
    assert f"--ensemble {copy}: {joined}" in capsys.readouterr().err
    assert not (tmp_path / "hypotheses1.txt").exists()


def test_an_ensemble_that_is_no_list_of_paths_is_refused_naming_the_keyword(tmp_path: Path) -> None:
    first = write_translation_checkpoint(tmp_path / "first", seed=1)
    with pytest.raises(TypeError, match=r"^ensemble: expected a list of checkpoint paths, got int 3$"):
        Translator(first, ensemble=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^ensemble: expected a list of one checkpoint or more, got ''$"):
        Translator(first, ensemble="")  # was read as no ensemble
    for member, given in ((3, "int"), (b"second", "bytes")):
        with pytest.raises(TypeError, match=rf"^ensemble: expected a str or an os.PathLike path .*, got {given}"):
            Translator(first, ensemble=[member])  # type: ignore[list-item]
    assert isinstance(Translator(first, ensemble=[]).model, Seq2SeqTransformer)  # an empty list: no ensemble
