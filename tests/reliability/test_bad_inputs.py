"""The bad-input matrix: every row is one bad input, the exact error, and the words it must say.

Two tables, easy to extend (a new command adds rows, not code):

- ``LIBRARY_CASES``: a library call, the exact exception class, a regex the message must
  match (the argument or file, and the line where there is one);
- ``CLI_CASES``: a command line, the exit code, and a regex for the one stderr line; the
  test also checks that the line is the only one (no traceback, no usage block).

Every row builds its own broken input from real artefacts (``builders.py``) in tmp_path.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import safetensors
import safetensors.torch
import torch

from tests.lab.conftest import write_tiny_checkpoint
from tests.reliability.builders import (
    SENTENCES,
    train_classification_checkpoint,
    train_couplet_checkpoint,
    write_multi30k_split,
    write_translation_checkpoint,
)
from tests.reliability.tiny_runs import tiny_copy_options
from tests.tasks.couplet_fixture import made_up_couplets, write_split
from transformer_lab import api
from transformer_lab import nn as lab_nn
from transformer_lab.cli import main
from transformer_lab.data import SubwordTokenizer, Vocabulary, read_ag_news_csv, read_lines, read_parallel_text
from transformer_lab.data.couplet import LOWER_FILE, UPPER_FILE, load_couplets, read_couplets
from transformer_lab.data.dataset_folder import DatasetMissingError
from transformer_lab.data.line_stream import count_lines
from transformer_lab.decoding import DecodeConfig
from transformer_lab.decoding.couplet_constraints import CoupletConstraintConfig
from transformer_lab.decoding.search_settings import resolved_search
from transformer_lab.decoding.sentences import translate_nbest, translate_sentences
from transformer_lab.models import ModelConfig, Seq2SeqTransformer
from transformer_lab.setting_error import SettingError
from transformer_lab.tasks.synthetic import train as synthetic_train
from transformer_lab.tasks.translation import train as translation_train
from transformer_lab.training import (
    CONFIG_FILE,
    MODEL_FILE,
    TRAINER_STATE_FILE,
    apply_overrides,
    config_from_dict,
    config_to_dict,
    load_checkpoint_config,
    load_trainer_state,
    save_checkpoint,
)
from transformer_lab.training.checkpoint import UnreadableWeightsError, resolve_checkpoint

REPOSITORY = Path(__file__).resolve().parents[2]
GERMAN = [source for source, _ in SENTENCES]
ENGLISH = [target for _, target in SENTENCES]


class Checkpoints:
    """One small checkpoint per task, each built on first use; rows that break one work on copies."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._factory = tmp_path_factory

    @functools.cached_property
    def translation(self) -> Path:
        return write_translation_checkpoint(self._factory.mktemp("translation") / "last")

    @functools.cached_property
    def classification(self) -> Path:
        return train_classification_checkpoint(self._factory.mktemp("classification"))

    @functools.cached_property
    def couplet(self) -> Path:
        return train_couplet_checkpoint(self._factory.mktemp("couplet"))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Checkpoints:
    return Checkpoints(tmp_path_factory)


@pytest.fixture(scope="module")
def checkpoint(checkpoints: Checkpoints) -> Path:
    """The translation checkpoint."""
    return checkpoints.translation


def broken_copy(checkpoint: Path, tmp_path: Path, name: str, change: Callable[[Path], None]) -> Path:
    folder = Path(shutil.copytree(checkpoint, tmp_path / f"broken-{name.replace('.', '-')}"))
    change(folder / name)
    return folder


def into_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def classify_with_class_names(change: Callable[[list[str]], list[str]]) -> Callable[[Path, Checkpoints], list[str]]:
    """The argv of ``classify`` over a copy of the classifier whose config.json class names ``change`` rewrote."""

    def argv(tmp: Path, checkpoints: Checkpoints) -> list[str]:
        edit = edit_config(lambda config: config.update(class_names=change(config["class_names"])))
        folder = broken_copy(checkpoints.classification, tmp, CONFIG_FILE, edit)
        return ["classify", "--checkpoint", str(folder), "goal"]

    return argv


def cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def edit_config(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        config = json.loads(path.read_text(encoding="utf-8"))
        change(config)
        path.write_text(json.dumps(config), encoding="utf-8")

    return edit


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------------------- the library


@dataclasses.dataclass(frozen=True)
class LibraryCase:
    name: str
    call: Callable[[Path, Checkpoints], object]  # (tmp_path, checkpoints) -> calls the library
    error: type[Exception]
    message: str  # a regex; {tmp} is replaced by the escaped tmp_path


def tiny_model() -> Seq2SeqTransformer:
    torch.manual_seed(0)
    return Seq2SeqTransformer(
        20,
        20,
        d_model=16,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=32,
        dropout=0.0,
        max_len=8,
    )


def attention_call(**masks: torch.Tensor) -> object:
    attention = lab_nn.MultiheadAttention(8, 2, batch_first=True)
    query = torch.zeros(2, 3, 8)  # [B, L, E]
    return attention(query, query, query, **masks)


LIBRARY_CASES = [
    *(
        LibraryCase(
            f"translate with batch_size {size!r}",
            lambda tmp, ck, size=size: api.Translator(ck.translation).translate(
                ["Ein Hund.", "Zwei."], batch_size=size
            ),
            ValueError,
            rf"^batch_size: expected an int >= 1, got {re.escape(repr(size))}$",
        )
        # -1 gave every sentence "" without a word (range() with a negative step is empty).
        for size in (-1, 0, 2.5, "2", True)
    ),
    *(
        LibraryCase(
            f"translate with nbest 2 and batch_size {size!r}",
            lambda tmp, ck, size=size: api.Translator(ck.translation).translate(
                ["Ein Hund.", "Zwei."], nbest=2, batch_size=size
            ),
            ValueError,
            rf"^batch_size: expected an int >= 1, got {re.escape(repr(size))}$",
        )
        # The n-best path searches each sentence alone and never read batch_size: any value was accepted.
        for size in (-1, "2")
    ),
    *(
        LibraryCase(
            f"translate a {type(texts).__name__}",
            lambda tmp, ck, texts=texts: api.Translator(ck.translation).translate(texts),
            ValueError,
            rf"^sentences: expected a str or a sequence of str, got {type(texts).__name__}$",
        )
        # list() of a dict gave its keys, translated without a word; of a set, its items in hash order.
        for texts in ({"Ein Hund.": 1}, b"Ein Hund.", None, 5, {"Ein Hund.", "Zwei."}, frozenset({"Eins."}))
    ),
    LibraryCase(
        "couplet: num_candidates not an int",
        lambda tmp, ck: api.CoupletWriter(ck.couplet).write("春风", num_candidates=2.5),
        api.SettingError,
        r"^num_candidates: expected an int >= 1, got 2\.5$",
    ),
    LibraryCase(
        "couplet: num_candidates True",
        lambda tmp, ck: api.CoupletWriter(ck.couplet).write("春风", num_candidates=True),
        api.SettingError,
        r"^num_candidates: expected an int >= 1, got True$",
    ),
    LibraryCase(
        # Told as the keyword given, not as the beam_size the search is widened to.
        "couplet: num_candidates over the beam limit",
        lambda tmp, ck: api.CoupletWriter(ck.couplet).write("春风", num_candidates=100),
        api.SettingError,
        r"^num_candidates: expected at most 64 \(each candidate is a beam\), got 100$",
    ),
    LibraryCase(
        "translate: nbest over the beam limit",
        lambda tmp, ck: api.Translator(ck.translation).translate("Hallo", nbest=65),
        api.SettingError,
        r"^nbest: expected at most 64 \(each candidate is a beam\), got 65$",
    ),
    LibraryCase(
        "translate: plot_attention to a path of bytes",
        lambda tmp, ck: api.Translator(ck.translation).plot_attention("Hallo", b"attention.png"),
        TypeError,
        r"^path: expected a str or an os\.PathLike path such as pathlib\.Path, got bytes b'attention\.png'; "
        r"decode it with os\.fsdecode$",
    ),
    LibraryCase(
        "translate: a checkpoint path of bytes",
        lambda tmp, ck: api.Translator(os.fsencode(ck.translation)),
        TypeError,
        r"^checkpoint: expected a str or an os\.PathLike path such as pathlib\.Path, got bytes b'/.*'; decode it",
    ),
    LibraryCase(
        "couplet: constraints not a config",
        lambda tmp, ck: api.CoupletWriter(ck.couplet).write("春风", constraints="none"),
        ValueError,
        r"^constraints: expected a CoupletConstraintConfig or None, got str$",
    ),
    LibraryCase(
        "couplet: a rule switch that is a string",
        lambda tmp, ck: CoupletConstraintConfig(mirror_repetition="no"),  # type: ignore[arg-type]
        ValueError,
        r"^mirror_repetition: expected true or false, got 'no'$",
    ),
    LibraryCase(
        "couplet: no punctuation mode",
        lambda tmp, ck: CoupletConstraintConfig(punctuation_mode=None),  # type: ignore[arg-type]
        ValueError,
        r"^punctuation_mode: expected one of \('copy', 'any'\), got None$",
    ),
    LibraryCase(
        "couplet: attention_map of a list",
        lambda tmp, ck: api.CoupletWriter(ck.couplet).attention_map(["春风"]),
        ValueError,
        r"^upper: expected a str, got list$",
    ),
    LibraryCase(
        "translate: attention_map of None",
        lambda tmp, ck: api.Translator(ck.translation).attention_map(None),
        ValueError,
        r"^sentence: expected a str, got NoneType$",
    ),
    LibraryCase(
        "classify: truncate not a bool",
        lambda tmp, ck: api.Classifier(ck.classification).classify("stocks rally", truncate="no"),
        ValueError,
        r"^truncate must be a bool, got 'no' \(str\)$",
    ),
    LibraryCase(
        "missing text file",
        lambda tmp, ck: read_lines(tmp / "absent.txt"),
        FileNotFoundError,
        r"absent\.txt.*does not exist",
    ),
    LibraryCase(
        "folder given as a text file",
        lambda tmp, ck: read_lines(tmp),
        ValueError,
        r"expected a text file, got '{tmp}', which is a folder",
    ),
    LibraryCase(
        "non-UTF-8 bytes",
        lambda tmp, ck: read_lines(write(tmp / "bad.de", b"gut\nschl\xe9cht\n")),
        ValueError,
        r"bad\.de: line 2: expected UTF-8 text, got invalid byte\(s\) b'\\xe9' at byte column 5",
    ),
    LibraryCase(
        "misaligned parallel files",
        lambda tmp, ck: read_parallel_text(*write_parallel(tmp, GERMAN, ENGLISH[:-1])),
        ValueError,
        r"same number of lines, got 4 line\(s\) in .*val\.de and 3 line\(s\) in .*val\.en",
    ),
    LibraryCase(
        "empty parallel files",
        lambda tmp, ck: read_parallel_text(*write_parallel(tmp, [], [])),
        ValueError,
        r"expected at least one line in .*val\.de and .*val\.en, got two empty files",
    ),
    LibraryCase(
        "an empty line in a parallel file",
        lambda tmp, ck: read_parallel_text(*write_parallel(tmp, GERMAN, [*ENGLISH[:2], " ", ENGLISH[3]])),
        ValueError,
        r"val\.en: line 3: expected a non-empty sentence, got ' '",
    ),
    LibraryCase(
        "vocabulary with bad bytes",
        lambda tmp, ck: Vocabulary.load(write(tmp / "vocab.txt", b"<pad>\n<unk>\n<bos>\n<eos>\nwo\xffrd\n")),
        ValueError,
        r"vocab\.txt: line 5: expected UTF-8 text",
    ),
    LibraryCase(
        "tokenizer file cut in half",
        lambda tmp, ck: SubwordTokenizer.load(
            write(tmp / "tok.json", (ck.translation / "tokenizer.json").read_bytes()[:500])
        ),
        ValueError,
        r"tok\.json: expected a tokenizer JSON file",
    ),
    LibraryCase(
        "config with an unknown key",
        lambda tmp, ck: config_from_dict(ModelConfig, {"d_model": 16, "heads": 2}),
        ValueError,
        r"^heads: unknown key for ModelConfig",
    ),
    LibraryCase(
        "config with a wrong type",
        lambda tmp, ck: config_from_dict(ModelConfig, {"d_model": "16"}),
        ValueError,
        r"^d_model: expected an int, got '16'",
    ),
    LibraryCase(
        "config with a non-finite float (strict JSON cannot hold it)",
        lambda tmp, ck: config_from_dict(ModelConfig, {"dropout": float("nan")}),
        ValueError,
        r"^dropout: expected a finite float, got nan",
    ),
    LibraryCase(
        "--set with an unknown key",
        lambda tmp, ck: apply_overrides(synthetic_train.default_config(), ["train.learning_rate=1"]),
        ValueError,
        r"^train\.learning_rate: unknown key for TrainConfig",
    ),
    LibraryCase(
        "--set with a bad value",
        lambda tmp, ck: apply_overrides(synthetic_train.default_config(), ["train.max_steps=many"]),
        ValueError,
        r"^train\.max_steps: expected an int, got 'many'",
    ),
    LibraryCase(
        "--set with an infinite float",
        lambda tmp, ck: apply_overrides(synthetic_train.default_config(), ["train.lr_factor=inf"]),
        ValueError,
        r"^train\.lr_factor: expected a finite float, got 'inf'",
    ),
    LibraryCase(
        "--set with an int past a float's range, for a float (it was an OverflowError)",
        lambda tmp, ck: apply_overrides(synthetic_train.default_config(), ["train.lr_factor=1" + "0" * 400]),
        ValueError,
        r"^train\.lr_factor: expected a finite float, got '1000",
    ),
    LibraryCase(
        "a search's length penalty past a float's range (it was an OverflowError)",
        lambda tmp, ck: resolved_search(DecodeConfig(), torch.device("cpu"), length_penalty=10**400),
        SettingError,  # a ValueError naming the keyword, which a command says as its option
        r"^length_penalty: expected a float in \[0, 10\]",
    ),
    LibraryCase(
        "checkpoint folder missing",
        lambda tmp, ck: load_checkpoint_config(tmp / "nowhere"),
        FileNotFoundError,
        r"expected a checkpoint folder at '{tmp}/nowhere'",
    ),
    LibraryCase(
        "checkpoint missing its weights",
        lambda tmp, ck: translation_train.load_translator(broken_copy(ck.translation, tmp, MODEL_FILE, Path.unlink)),
        FileNotFoundError,
        r"expected the weights 'model\.safetensors' in checkpoint",
    ),
    LibraryCase(
        "checkpoint whose weights are a folder",
        lambda tmp, ck: translation_train.load_translator(broken_copy(ck.translation, tmp, MODEL_FILE, into_folder)),
        FileNotFoundError,
        r"expected the weights 'model\.safetensors' in checkpoint .*model\.safetensors' is a folder$",
    ),
    LibraryCase(
        "checkpoint missing its tokenizer",
        lambda tmp, ck: translation_train.load_translator(
            broken_copy(ck.translation, tmp, "tokenizer.json", Path.unlink)
        ),
        FileNotFoundError,
        r"expected the extra file 'tokenizer\.json'",
    ),
    LibraryCase(
        "weights cut in half",
        lambda tmp, ck: translation_train.load_translator(broken_copy(ck.translation, tmp, MODEL_FILE, cut_in_half)),
        UnreadableWeightsError,  # a ValueError
        # Named by the weights file alone (was: prefixed by config.json, as if the config were at fault).
        r"^'[^']*model\.safetensors': expected a complete safetensors file",
    ),
    LibraryCase(
        "config.json cut in half",
        lambda tmp, ck: translation_train.load_translator(broken_copy(ck.translation, tmp, CONFIG_FILE, cut_in_half)),
        ValueError,
        r"config\.json': expected a JSON object, got malformed JSON",
    ),
    LibraryCase(
        "config.json of another model size",
        lambda tmp, ck: translation_train.load_translator(
            broken_copy(ck.translation, tmp, CONFIG_FILE, edit_config(lambda c: c["model"].update(dim_feedforward=64)))
        ),
        ValueError,
        r"model\.safetensors': expected weights of the shapes .* first transformer\.\S+: stored \[32",
    ),
    LibraryCase(
        "config.json with an unknown key",
        lambda tmp, ck: translation_train.load_translator(
            broken_copy(ck.translation, tmp, CONFIG_FILE, edit_config(lambda c: c["model"].update(layers=2)))
        ),
        ValueError,
        r"config\.json: model\.layers: unknown key for ModelConfig",
    ),
    LibraryCase(
        "config.json with a wrong type",
        lambda tmp, ck: translation_train.load_translator(
            broken_copy(ck.translation, tmp, CONFIG_FILE, edit_config(lambda c: c["train"].update(epochs="ten")))
        ),
        ValueError,
        r"config\.json: train\.epochs: expected an int, got 'ten'",
    ),
    LibraryCase(
        "trainer state cut in half",
        lambda tmp, ck: load_trainer_state(cut_state(tmp)),
        ValueError,
        r"trainer_state\.pt': expected a complete trainer state .* truncated",
    ),
    LibraryCase(
        "token id out of range",
        lambda tmp, ck: tiny_model()(torch.tensor([[1, 20]]), torch.tensor([[2]])),
        ValueError,
        r"src_ids must hold token ids in \[0, 20\), got 20",
    ),
    LibraryCase(
        "negative token id",
        lambda tmp, ck: tiny_model()(torch.tensor([[1, 2]]), torch.tensor([[-1]])),
        ValueError,
        r"tgt_in_ids must hold token ids in \[0, 20\), got -1",
    ),
    LibraryCase(
        "float token ids",
        lambda tmp, ck: tiny_model()(torch.tensor([[1.0, 2.0]]), torch.tensor([[2]])),
        ValueError,
        r"src_ids must be an int64 or int32 tensor of shape \[batch, seq_len\], got dtype torch\.float32",
    ),
    LibraryCase(
        "sequence longer than the positional table",
        lambda tmp, ck: tiny_model()(torch.ones(1, 9, dtype=torch.long), torch.tensor([[2]])),
        ValueError,
        r"sequence length must be <= max_len=8 \(the positional table\), got positions up to 9",
    ),
    LibraryCase(
        "attention mask of the wrong shape",
        lambda tmp, ck: attention_call(attn_mask=torch.zeros(3, 4, dtype=torch.bool)),
        ValueError,
        r"attn_mask must have shape \[3, 3\] or \[4, 3, 3\] .* got \[3, 4\]",
    ),
    LibraryCase(
        "attention mask of the wrong dtype",
        lambda tmp, ck: attention_call(attn_mask=torch.zeros(3, 3, dtype=torch.long)),
        ValueError,
        r"attn_mask must be a bool \(True = hidden\) or floating .* got dtype torch\.int64",
    ),
    LibraryCase(
        "key padding mask of the wrong shape",
        lambda tmp, ck: attention_call(key_padding_mask=torch.zeros(3, 2, dtype=torch.bool)),
        ValueError,
        r"key_padding_mask must have shape \[batch, src_len\] = \[2, 3\], got \[3, 2\]",
    ),
    LibraryCase(
        "10,000 characters to translate",
        lambda tmp, ck: translate(ck.translation, ["kurz", "x" * 10_000]),
        ValueError,
        r"sentences\[1\] must be at most 256 subword tokens \(the model's max_len\), got \d{4,}",
    ),
    LibraryCase(
        "a lone surrogate to translate",
        lambda tmp, ck: translate(ck.translation, ["gut", "schl\udce9cht"]),
        ValueError,
        r"sentences\[1\]: text must be valid Unicode text, got the lone surrogate U\+DCE9 at character 4",
    ),
    LibraryCase(
        "a lone surrogate in an n-best list's sentence",
        lambda tmp, ck: translate_nbest(
            *translation_train.load_translator(ck.translation)[:2],
            "schl\udce9cht",
            translation_train.load_translator(ck.translation)[2].decode,
        ),
        ValueError,
        r"^sentence: text must be valid Unicode text, got the lone surrogate U\+DCE9 at character 4",
    ),
    # AG News CSV (data/ag_news.py): the row's line is named, with what is wrong in it.
    LibraryCase(
        "AG News: a row with two fields",
        lambda tmp, ck: read_news(tmp, b'"1","only a title"\n'),
        ValueError,
        r"news\.csv: line 2: expected 3 fields \(class, title, description\), got 2",
    ),
    LibraryCase(
        "AG News: a row with four fields",
        lambda tmp, ck: read_news(tmp, b'"1","a","b","c"\n'),
        ValueError,
        r"news\.csv: line 2: expected 3 fields \(class, title, description\), got 4",
    ),
    LibraryCase(
        "AG News: class 5",
        lambda tmp, ck: read_news(tmp, b'"5","a","b"\n'),
        ValueError,
        r"news\.csv: line 2: expected a class id in 1, 2, 3, 4, got '5'",
    ),
    LibraryCase(
        "AG News: class 0",
        lambda tmp, ck: read_news(tmp, b'"0","a","b"\n'),
        ValueError,
        r"news\.csv: line 2: expected a class id in 1, 2, 3, 4, got '0'",
    ),
    LibraryCase(
        "AG News: a quote never closed",
        lambda tmp, ck: read_news(tmp, b'"3","a","unterminated\n'),
        ValueError,
        r"news\.csv: line 2: bad quoting at column 9: a quoted field that is never closed",
    ),
    LibraryCase(
        "AG News: text after a closing quote",
        lambda tmp, ck: read_news(tmp, b'"3","never closed,"b"\n'),
        ValueError,
        r"news\.csv: line 2: bad quoting at column 20: expected ',' or the end of the line",
    ),
    LibraryCase(
        "AG News: non-UTF-8 bytes",
        lambda tmp, ck: read_news(tmp, b'"2","caf\xe9","b"\n'),
        ValueError,
        r"news\.csv: line 2: expected UTF-8 text, got invalid byte\(s\) b'\\xe9' at byte column 9",
    ),
    LibraryCase(
        "AG News: empty file",
        lambda tmp, ck: read_ag_news_csv(write(tmp / "news.csv", b"")),
        ValueError,
        r"news\.csv: expected at least one article, got none",
    ),
    LibraryCase(
        "AG News: missing file",
        lambda tmp, ck: read_ag_news_csv(tmp / "absent.csv"),
        FileNotFoundError,
        r"expected an AG News CSV file, got '{tmp}/absent\.csv', which does not exist",
    ),
    LibraryCase(
        "AG News: a folder as the CSV file",
        lambda tmp, ck: read_ag_news_csv(tmp),
        ValueError,
        r"expected a text file, got '{tmp}', which is a folder",
    ),
    # Couplets (data/couplet.py): in.txt and out.txt, aligned, a pair's lines equally long.
    LibraryCase(
        "couplet: misaligned files",
        lambda tmp, ck: read_couplet_files(tmp, "晚 风 \n春 水 \n", "晨 露 \n"),
        ValueError,
        r"same number of lines, got 2 line\(s\) in .*in\.txt and 1 line\(s\) in .*out\.txt",
    ),
    LibraryCase(
        "couplet: a pair of unequal lengths",
        lambda tmp, ck: read_couplet_files(tmp, "晚 风 \n春 水 长 \n", "晨 露 \n秋 月 \n"),
        ValueError,
        r"out\.txt: line 2: expected a lower line of 3 characters, as long as line 2 of .*in\.txt "
        r"\('春水长'\), got 2 \('秋月'\)",
    ),
    LibraryCase(
        "couplet: an empty line",
        lambda tmp, ck: read_couplet_files(tmp, "晚 风 \n \n", "晨 露 \n雨 \n"),
        ValueError,
        r"in\.txt: line 2: expected a non-empty sentence, got ' '; .* skip_invalid=True",
    ),
    LibraryCase(
        "couplet: non-UTF-8 bytes",
        lambda tmp, ck: read_couplet_files(tmp, "晚 风 \n春 水 \n", "晨 露 \n".encode() + b"\xe7\xa7\n"),
        ValueError,
        r"out\.txt: line 2: expected UTF-8 text, got invalid byte\(s\) b'\\xe7\\xa7' at byte column 1",
    ),
    LibraryCase(
        "couplet: empty files",
        lambda tmp, ck: read_couplet_files(tmp, "", ""),
        ValueError,
        r"expected at least one line in .*in\.txt and .*out\.txt, got two empty files",
    ),
    LibraryCase(
        "couplet: out.txt missing",
        lambda tmp, ck: read_couplets(write_folder(tmp, {"in.txt": b"a \n"})),
        FileNotFoundError,
        r"expected the couplet file '{tmp}/out\.txt', which does not exist",
    ),
    LibraryCase(
        "couplet: split missing",
        lambda tmp, ck: load_couplets("test", tmp),
        DatasetMissingError,  # a FileNotFoundError the commands rename after the option that gave the folder
        r"expected the couplet split 'test' \(in\.txt and out\.txt\) in one of '{tmp}/couplet/test'",
    ),
]


def write_parallel(folder: Path, german: list[str], english: list[str]) -> tuple[Path, Path]:
    write_multi30k_split(folder, "val", german, english)
    return folder / "val.de", folder / "val.en"


def read_news(folder: Path, bad_row: bytes) -> object:
    """Read a news.csv whose line 2, between two good rows, is ``bad_row``."""
    return read_ag_news_csv(write(folder / "news.csv", b'"1","good","row"\n' + bad_row + b'"2","good","row"\n'))


def write_folder(folder: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        write(folder / name, data)
    return folder


def read_couplet_files(folder: Path, upper: str | bytes, lower: str | bytes) -> object:
    """Read a couplet split folder holding these in.txt and out.txt (str is written as UTF-8)."""
    files = {
        name: text.encode("utf-8") if isinstance(text, str) else text
        for name, text in ((UPPER_FILE, upper), (LOWER_FILE, lower))
    }
    return read_couplets(write_folder(folder, files))


def cut_state(folder: Path) -> Path:
    saved = save_checkpoint(folder / "state", torch.nn.Linear(3, 3), {}, trainer_state={"step": torch.zeros(1000)})
    cut_in_half(saved / TRAINER_STATE_FILE)
    return saved


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def a_file(tmp: Path) -> Path:
    """A plain file, for outputs named under it."""
    path = tmp / "notes.txt"
    path.write_text("x\n", encoding="utf-8")
    return path


def translate(checkpoint: Path, sentences: list[str]) -> list[str]:
    model, tokenizer, config = translation_train.load_translator(checkpoint)
    return translate_sentences(model, tokenizer, sentences, dataclasses.replace(config.decode, strategy="greedy"))


@pytest.mark.parametrize("case", LIBRARY_CASES, ids=lambda case: case.name)
def test_library_refuses_bad_input(case: LibraryCase, tmp_path: Path, checkpoints: Checkpoints) -> None:
    with pytest.raises(Exception) as caught:
        case.call(tmp_path, checkpoints)
    assert type(caught.value) is case.error, f"{case.name}: {type(caught.value).__name__}: {caught.value}"
    pattern = case.message.replace("{tmp}", str(tmp_path).replace(".", r"\."))
    assert caught.match(pattern)


# ---------------------------------------------------------------------------- the CLI


@dataclasses.dataclass(frozen=True)
class CliCase:
    name: str
    argv: Callable[[Path, Checkpoints], list[str]]  # (tmp_path, checkpoints) -> the command line
    message: str  # a regex for the one stderr line
    exit_code: int = 2
    stdin: bytes = b""


def translate_argv(checkpoint: Path, *rest: str) -> list[str]:
    return ["translate", "--checkpoint", str(checkpoint), *rest]


def evaluate_argv(checkpoint: Path, data: Path, *rest: str) -> list[str]:
    return [
        "evaluate",
        "translation",
        "--checkpoint",
        str(checkpoint),
        "--split",
        "val",
        "--data-dir",
        str(data),
        "--output",
        str(data / "hypotheses.txt"),
        *rest,
    ]


def evaluate_files_argv(tmp: Path, checkpoint: Path, sources: list[str], references: list[str]) -> list[str]:
    """``evaluate translation`` of ``sources`` against ``references``, written as test.de and test.en in ``tmp``."""
    source, reference = write_lines(tmp / "test.de", sources), write_lines(tmp / "test.en", references)
    return [
        "evaluate",
        "translation",
        "--checkpoint",
        str(checkpoint),
        "--source",
        str(source),
        "--reference",
        str(reference),
    ]


CLI_CASES = [
    CliCase(
        # The --set came later and won: the budget of 2 hours was dropped without a word (and --train's files).
        "train: an option and a --set of its key",
        lambda tmp, ck: ["train", "copy", "--out", str(tmp / "run"), "--time-budget", "2h"]
        + ["--set", "train.time_budget=1h"],
        r"error: --time-budget and --set train\.time_budget: expected one value, got two \(--time-budget '2h' "
        r"and --set train\.time_budget=1h\)$",
    ),
    CliCase(
        "prepare: --train and --set data.train_files",
        lambda tmp, ck: ["prepare", "translation", "--train", "a.de", "a.en", "--out", str(tmp / "prepared")]
        + ["--set", "data.train_files=b.de,b.en"],
        r"error: --train and --set data\.train_files: expected one value, got two",
    ),
    CliCase(
        # The file system's own error, "failed: [Errno 36] File name too long", with the exit code of a system failure.
        "translate: a --checkpoint with a name of 300 characters",
        lambda tmp, ck: translate_argv(tmp / ("a" * 300), "x"),
        r"error: .*a{20}\.\.\.: expected a path whose names the file system takes, got one with a name too long "
        r"\(File name too long, ENAMETOOLONG\)$",
    ),
    CliCase(
        "translate: missing --input",
        lambda tmp, ck: translate_argv(ck.translation, "--input", str(tmp / "absent.txt")),
        r"^transformer-lab translate: error: .*absent\.txt', which does not exist$",
    ),
    CliCase(
        "translate: empty --input",
        lambda tmp, ck: translate_argv(ck.translation, "--input", str(write(tmp / "e.txt", b""))),
        r"--input: expected at least one line to translate, got the empty file .*e\.txt$",
    ),
    CliCase(
        # Path("results/") is "results": a file of that name was written in the folder's place.
        "classify: --output ending in a separator",
        lambda tmp, ck: ["classify", "--checkpoint", str(ck.classification), "--output", f"{tmp}/results/", "x"],
        r"argument --output: expected a file, got '.*/results/', which ends in '/' as a folder does",
    ),
    CliCase(
        "evaluate: --output ending in a separator",
        lambda tmp, ck: [*evaluate_files_argv(tmp, ck.translation, ["a"], ["b"]), "--output", f"{tmp}/hyp/"],
        r"argument --output: expected a file, got '.*/hyp/', which ends in '/' as a folder does",
    ),
    CliCase(
        "translate: --input is a folder",
        lambda tmp, ck: translate_argv(ck.translation, "--input", str(tmp)),
        r"expected a text file, got .*, which is a folder$",
    ),
    CliCase(
        "translate: non-UTF-8 --input",
        lambda tmp, ck: translate_argv(ck.translation, "--input", str(write(tmp / "b.txt", b"ok\r\nbad \xff\r\n"))),
        r"b\.txt: line 2: expected UTF-8 text, got invalid byte\(s\) b'\\xff' at byte column 5",
    ),
    CliCase(
        "translate: non-UTF-8 stdin",
        lambda tmp, ck: translate_argv(ck.translation),
        r"stdin: line 3: expected UTF-8 text",
        stdin=b"eins\nzwei\ndrei \xc3\n",
    ),
    CliCase(
        # Two files with a mark each, joined by cat: the second mark was translated as part of "drei".
        "translate: a byte-order mark inside stdin",
        lambda tmp, ck: translate_argv(ck.translation),
        r"^transformer-lab translate: error: stdin: line 3: expected a byte-order mark \(U\+FEFF\) only at the start "
        r"of the file, got one at column 1, as where files were joined \(cat\); remove it",
        stdin="\ufeffeins\nzwei\n\ufeffdrei\n".encode(),
    ),
    CliCase(
        "translate: empty stdin",
        lambda tmp, ck: translate_argv(ck.translation),
        r"stdin: expected at least one line to translate, got none",
    ),
    CliCase(
        "translate: undecodable argument bytes",
        lambda tmp, ck: translate_argv(ck.translation, "gr\udcfc\udcdfe"),
        r"^transformer-lab translate: error: input 1: text must be valid Unicode text, got the lone surrogate U\+DCFC",
    ),
    # A sentence too long for the model is named as the user gave it (was: "sentences[1]", the index
    # into a Python list, one below the line number and naming no file); the command still stops.
    CliCase(
        "translate: 10,000 characters",
        lambda tmp, ck: translate_argv(ck.translation, "Hallo", "Haus " * 2_000),
        r"^transformer-lab translate: error: input 2 must be at most 256 subword tokens \(the model's max_len\), "
        r"got 10000 characters, so at least \d+$",
    ),
    *[
        CliCase(
            f"translate: an --input line too long{label}",
            lambda tmp, ck, extra=extra: translate_argv(
                ck.translation, "--input", str(write_lines(tmp / "long.txt", ["Hallo", "Haus " * 2_000])), *extra
            ),
            r"^transformer-lab translate: error: .*long\.txt: line 2 must be at most 256 subword tokens "
            r"\(the model's max_len\), got 10000 characters, so at least \d+$",
        )
        for label, extra in [("", ()), (", --nbest 2", ("--nbest", "2"))]
    ],
    CliCase(
        "translate: a stdin line too long",
        lambda tmp, ck: translate_argv(ck.translation),
        r"^transformer-lab translate: error: stdin: line 3 must be at most 256 subword tokens \(the model's max_len\)",
        stdin=("eins\nzwei\n" + "Haus " * 2_000 + "\n").encode(),
    ),
    CliCase(
        "translate: --beam 0",
        lambda tmp, ck: translate_argv(ck.translation, "--beam", "0", "Hallo"),
        r"--beam: expected an int >= 1 \(1 is greedy\), got 0$",
    ),
    # Was "transformer-lab: error: unrecognized arguments: ... (see transformer-lab --help)", the top parser's
    # words, whose help lists no option of the command.
    CliCase(
        "translate: an unknown option",
        lambda tmp, ck: translate_argv(ck.translation, "--nbets", "2", "Hallo"),
        r"^transformer-lab translate: error: unrecognized arguments: --nbets \(see transformer-lab translate --help\)$",
    ),
    CliCase(
        "plot masks: an unknown option",
        lambda tmp, ck: ["plot", "masks", "--out", str(tmp / "m.png"), "--colour", "red"],
        r"^transformer-lab plot masks: error: unrecognized arguments: --colour red "
        r"\(see transformer-lab plot masks --help\)$",
    ),
    CliCase(
        "average-checkpoints: checkpoints listed after --run",
        lambda tmp, ck: ["average-checkpoints", "--run", str(tmp / "a"), str(tmp / "b"), "--out", str(tmp / "avg")],
        r"^transformer-lab average-checkpoints: error: unrecognized arguments: .*b "
        r"\(see transformer-lab average-checkpoints --help\)$",
    ),
    CliCase(
        "translate: --beam not a number (argparse)",
        lambda tmp, ck: translate_argv(ck.translation, "--beam", "five", "Hallo"),
        r"^transformer-lab translate: error: argument --beam: invalid int value: 'five' \(see .* --help\)$",
    ),
    CliCase(
        "translate: missing checkpoint",
        lambda tmp, ck: translate_argv(tmp / "nowhere", "Hallo"),
        r": --checkpoint: expected a checkpoint folder \(with config\.json\) or a run folder holding best/ or last/, "
        r"got '.*nowhere'$",
    ),
    CliCase(
        "translate: weights cut in half",
        lambda tmp, ck: translate_argv(broken_copy(ck.translation, tmp, MODEL_FILE, cut_in_half), "Hallo"),
        r"model\.safetensors': expected a complete safetensors file",
    ),
    CliCase(
        "translate: empty weights file",
        lambda tmp, ck: translate_argv(
            broken_copy(ck.translation, tmp, MODEL_FILE, lambda p: p.write_bytes(b"")), "Hallo"
        ),
        r"model\.safetensors': expected a complete safetensors file",
    ),
    CliCase(
        "translate: config.json cut in half",
        lambda tmp, ck: translate_argv(broken_copy(ck.translation, tmp, CONFIG_FILE, cut_in_half), "Hallo"),
        r"config\.json': expected a JSON object, got malformed JSON",
    ),
    CliCase(
        "translate: tokenizer.json cut in half",
        lambda tmp, ck: translate_argv(broken_copy(ck.translation, tmp, "tokenizer.json", cut_in_half), "Hallo"),
        r"tokenizer\.json: expected a tokenizer JSON document",  # was "tokenizer.json: text: ...", a keyword
    ),
    CliCase(
        "translate: config.json of another model size",
        lambda tmp, ck: translate_argv(
            broken_copy(ck.translation, tmp, CONFIG_FILE, edit_config(lambda c: c["model"].update(d_model=32))), "Hallo"
        ),
        r"model\.safetensors': expected weights of the shapes the checkpoint's config\.json gives",
    ),
    CliCase(
        "translate: config.json with heads that do not divide d_model",
        lambda tmp, ck: translate_argv(
            broken_copy(ck.translation, tmp, CONFIG_FILE, edit_config(lambda c: c["model"].update(nhead=3))), "Hallo"
        ),
        r"config\.json: nhead: expected a divisor of d_model=16, got 3",
    ),
    CliCase(
        "translate: config.json vocabulary differs from the tokenizer",
        lambda tmp, ck: translate_argv(
            broken_copy(
                ck.translation,
                tmp,
                CONFIG_FILE,
                edit_config(lambda c: c["model"].update(src_vocab_size=100, tgt_vocab_size=100)),
            ),
            "Hallo",
        ),
        r"config\.json: model\.src_vocab_size must equal the \d+ entries of .*tokenizer\.json, got 100",
    ),
    CliCase(
        # Greedy whatever the checkpoint says: the option would be accepted and never used (as evaluate refuses it).
        "translate: a length penalty with --beam 1",
        lambda tmp, ck: translate_argv(ck.translation, "--beam", "1", "--length-penalty", "3", "Hallo"),
        r"error: --length-penalty: expected beam search, which it steers, got a greedy search \(--beam 1\); "
        r"give --beam N \(N >= 2\) or leave --length-penalty out$",
    ),
    CliCase(
        "couplet: a beam stop with --beam 1",
        lambda tmp, ck: couplet_argv(ck, "--beam", "1", "--beam-stop", "finished", "春风"),
        r"error: --beam-stop: expected beam search, which it steers, got a greedy search \(--beam 1\); ",
    ),
    CliCase(
        "translate: a length penalty out of range is named as the option typed",
        lambda tmp, ck: translate_argv(ck.translation, "--length-penalty", "-1", "Hallo"),
        r"error: --length-penalty: expected a float in \[0, 10\] \(GNMT alpha; 0 ranks by raw log-prob\), given -1\.0$",
    ),
    CliCase(
        "translate: a copy-task checkpoint",
        lambda tmp, ck: translate_argv(copy_checkpoint(tmp), "Hallo"),
        r"expected a translation checkpoint, got task 'copy'",
    ),
    CliCase(
        "export: a copy-task checkpoint",
        lambda tmp, ck: [
            "export",
            "--checkpoint",
            str(copy_checkpoint(tmp)),
            "--format",
            "onnx",
            "--out",
            str(tmp / "o"),
        ],
        r"error: --format onnx: expected a checkpoint of a task it exports \(classification or couplet or "
        r"translation\), got the copy checkpoint .*copy$",
    ),
    CliCase(
        "evaluate: misaligned data files",
        lambda tmp, ck: evaluate_argv(ck.translation, write_parallel(tmp / "data", GERMAN, ENGLISH[:3])[0].parent),
        r"same number of lines, got 4 line\(s\) in .*val\.de and 3 line\(s\) in .*val\.en$",
    ),
    CliCase(
        "evaluate: non-UTF-8 reference",
        lambda tmp, ck: evaluate_argv(ck.translation, bad_reference(tmp / "data")),
        r"val\.en: line 2: expected UTF-8 text",
    ),
    CliCase(
        "evaluate: missing data folder",
        lambda tmp, ck: evaluate_argv(ck.translation, tmp / "nodata"),
        r"^transformer-lab evaluate: error: --data-dir '.*nodata': expected an existing folder",
    ),
    CliCase(
        "train: --data-dir for a task that reads no data",
        lambda tmp, ck: ["train", "copy", "--out", str(tmp / "r"), "--data-dir", str(tmp)],
        r"--data-dir: expected only with a task that reads data \(classification, couplet, translation\), "
        r"got it with copy$",
    ),
    CliCase(
        # Every task has presets: `config copy --preset default` prints one, so train takes the same name.
        "train: a preset the task has not",
        lambda tmp, ck: ["train", "copy", "--out", str(tmp / "r"), "--preset", "base"],
        r"--preset: expected 'default', the only preset of copy, got 'base'$",
    ),
    CliCase(
        "evaluate: --data-dir for a task that reads no data",
        lambda tmp, ck: ["evaluate", "copy", "--checkpoint", str(copy_checkpoint(tmp)), "--data-dir", str(tmp)],
        r"--data-dir: expected only with a task that reads data \(classification, couplet, translation\), "
        r"got it with copy$",
    ),
    CliCase(
        "train: --set unknown key",
        lambda tmp, ck: ["train", "copy", "--out", str(tmp / "r"), "--set", "model.width=3"],
        r"^transformer-lab train: error: model\.width: unknown key for ModelConfig",
    ),
    CliCase(
        "train: --set bad value",
        lambda tmp, ck: ["train", "copy", "--out", str(tmp / "r"), "--set", "train.epochs=ten"],
        r"train\.epochs: expected an int, got 'ten'$",
    ),
    CliCase(
        "train: --set rejected by validation",
        lambda tmp, ck: ["train", "copy", "--out", str(tmp / "r"), "--set", "train.label_smoothing=1.5"],
        r"train\.label_smoothing: expected a float in \[0, 1\), got 1\.5$",
    ),
    CliCase(
        "train: --set without '='",
        lambda tmp, ck: ["train", "copy", "--out", str(tmp / "r"), "--set", "model.d_model"],
        r"error: --set: expected 'key=value', got 'model\.d_model'$",
    ),
    CliCase(
        "train: --resume without a run",
        lambda tmp, ck: ["train", "copy", "--out", str(tmp / "r"), "--resume"],
        r"--resume: expected a run folder .*r, found none; drop --resume to start the run$",
    ),
    CliCase(
        "average-checkpoints: --last 0",
        lambda tmp, ck: ["average-checkpoints", "--run", str(tmp), "--last", "0", "--out", str(tmp / "avg")],
        r"--last: expected at least 1, got 0$",
    ),
    CliCase(
        "average-checkpoints: a run that kept no step checkpoints",
        lambda tmp, ck: ["average-checkpoints", "--run", str(run_without_steps(tmp)), "--last", "2"]
        + ["--out", str(tmp / "avg")],
        r"--run: expected step-NNNNNN checkpoints to average in .*, found none \(the run kept none: "
        r"train\.keep_last was 0",
    ),
    CliCase(
        # No run at all: blaming train.keep_last would send the user after a setting it never had.
        "average-checkpoints: --run an empty folder",
        lambda tmp, ck: ["average-checkpoints", "--run", str(tmp), "--last", "2", "--out", str(tmp / "avg")],
        r"--run: expected a run folder \(holding metrics\.jsonl, best/, last/ and step-NNNNNN/ checkpoints\), "
        r"got \S+, which holds none of them$",
    ),
    CliCase(
        # Only an empty step folder, no run: was "found none (the run kept none: train.keep_last was 0 ...)".
        "average-checkpoints: --run a folder of an empty step folder",
        lambda tmp, ck: ["average-checkpoints", "--run", str(_empty_step_folder(tmp)), "--last", "1"]
        + ["--out", str(tmp / "avg")],
        r"--run: expected a run folder \(holding metrics\.jsonl, best/, last/ and step-NNNNNN/ checkpoints\), "
        r"got \S+, which holds none of them$",
    ),
    CliCase(
        "average-checkpoints: --run the folder of runs",
        lambda tmp, ck: ["average-checkpoints", "--run", str(translation_run(tmp, ck).parent), "--last", "2"]
        + ["--out", str(tmp / "avg")],
        r"--run: expected a run folder \(holding metrics\.jsonl, best/, last/ and step-NNNNNN/ checkpoints\), "
        r"got \S+, which holds none of them; it holds the run folder\(s\) run$",
    ),
    CliCase(
        # A run's best/ (a checkpoint) holds no steps: told as the checkpoint it is, not as a run that kept none.
        "average-checkpoints: --run a checkpoint folder",
        lambda tmp, ck: ["average-checkpoints", "--run", str(translation_run(tmp, ck) / "best")]
        + ["--out", str(tmp / "avg")],
        r"--run: expected a run folder \(holding best/, last/ and step-NNNNNN/ checkpoints\), got .*run/best, which "
        r"is a checkpoint folder; give the run folder that holds it \(.*run\)$",
    ),
    CliCase(
        "average-checkpoints: --run a file",
        lambda tmp, ck: ["average-checkpoints", "--run", str(a_file(tmp)), "--out", str(tmp / "avg")],
        r"--run: expected a run folder, got .*notes\.txt, which is a file$",
    ),
    CliCase(
        "average-checkpoints: fewer steps than the default --last",
        lambda tmp, ck: ["average-checkpoints", "--run", str(translation_run(tmp, ck)), "--out", str(tmp / "avg")],
        r"--last: expected at most the \d step checkpoints in .*, got 10 \(the default: give --last N\)$",
    ),
    CliCase(
        # Told as export tells it, not as a checkpoint that "exists" (EEXIST from under a file).
        "average-checkpoints: --out under a file",
        lambda tmp, ck: ["average-checkpoints", "--run", str(translation_run(tmp, ck)), "--last", "1"]
        + ["--out", str(a_file(tmp) / "averaged")],
        r"--out: expected a path through folders, got .*notes\.txt/averaged, through the file .*notes\.txt$",
    ),
    CliCase(
        "average-checkpoints: --out a step name of the run",
        lambda tmp, ck: ["average-checkpoints", "--run", str(run := translation_run(tmp, ck)), "--last", "1"]
        + ["--out", str(run / "step-000050")],
        r"--out: expected a folder outside the checkpoints of a run, got .*run/step-000050, a checkpoint name of the "
        r"run folder .*run: the next save of that run replaces it",
    ),
    CliCase(
        "average-checkpoints: --out inside the run's last/",
        lambda tmp, ck: ["average-checkpoints", "--run", str(run := translation_run(tmp, ck)), "--last", "1"]
        + ["--out", str(run / "last" / "averaged")],
        r"--out: expected a folder outside the checkpoints of a run, got .*run/last/averaged, inside .*run/last, "
        r"a checkpoint name of the run folder .*run: the next save of that run replaces it",
    ),
    CliCase(
        "average-checkpoints: steps of other model configurations",
        lambda tmp, ck: ["average-checkpoints", "--run", str(steps_of_two_activations(tmp)), "--last", "2"]
        + ["--out", str(tmp / "averaged")],
        r"sources: expected checkpoints of one model configuration, got model\.activation 'relu' in "
        r".*step-000001 and 'gelu' in .*step-000002",
    ),
    CliCase(
        "average-checkpoints: NaN in a step's weights",
        lambda tmp, ck: ["average-checkpoints", "--run", str(nan_step_run(tmp, ck)), "--last", "2"]
        + ["--out", str(tmp / "averaged")],
        r"sources: expected finite weights, got NaN or inf in tensor '[\w.]+' of .*step-000001/model\.safetensors",
    ),
    CliCase(
        "export: --out inside a run's best/",
        lambda tmp, ck: ["export", "--checkpoint", str(run := translation_run(tmp, ck)), "--format", "onnx"]
        + ["--out", str(run / "best" / "onnx")],
        r"--out: expected a folder outside the checkpoints of a run, got .*run/best/onnx, inside .*run/best, "
        r"a checkpoint name of the run folder .*run: the next save of that run replaces it",
    ),
    CliCase(
        # Was written: the next save deleted it, and a step checkpoint holding it could no longer be averaged.
        "plot attention: --out inside a step checkpoint",
        lambda tmp, ck: ["plot", "attention", "--checkpoint", str(run := translation_run(tmp, ck)), "--source"]
        + ["Hallo", "--out", str(run / "step-000001" / "attention.png")],
        r"--out: expected a file outside the checkpoints of a run, got .*run/step-000001/attention\.png, inside "
        r".*run/step-000001, a checkpoint name of the run folder .*run: the next save of that run replaces it",
    ),
    CliCase(
        "translate: --plot-attention inside a checkpoint",
        lambda tmp, ck: translate_argv(ck.translation, "Hallo") + ["--plot-attention", str(ck.translation / "a.png")],
        r"--plot-attention: expected a file outside checkpoints, got .*/a\.png, inside the checkpoint folder .*: the "
        r"next save of that checkpoint replaces the folder whole",
    ),
    CliCase(
        # The run's next save replaced best/ whole, and its pruning deleted step-N folders it never wrote.
        "prepare: --out inside a run's best/",
        lambda tmp, ck: ["prepare", "translation", "--train", str(a_file(tmp)), str(a_file(tmp))]
        + ["--out", str(translation_run(tmp, ck) / "best" / "corpus")],
        r"--out: expected a folder outside the checkpoints of a run, got .*run/best/corpus, inside .*run/best, "
        r"a checkpoint name of the run folder .*run: the next save of that run replaces it",
    ),
    CliCase(
        "prepare couplet: a byte-order mark inside a --train file",
        lambda tmp, ck: ["prepare", "couplet", "--train", str(write(tmp / "in.txt", "春 风\n\ufeff花 开\n".encode()))]
        + [str(write(tmp / "out.txt", "秋 雨\n草 长\n".encode())), "--out", str(tmp / "corpus")],
        r"^transformer-lab prepare: error: .*in\.txt: line 2: expected a byte-order mark \(U\+FEFF\) only at the "
        r"start of the file, got one at column 1",
    ),
    *(
        CliCase(
            # Was the stat's "[Errno 2] No such file or directory: '...'" of the input watch, before any reader.
            f"prepare {task}: a missing --train file",
            lambda tmp, ck, task=task: ["prepare", task, "--train", str(a_file(tmp)), str(tmp / "absent.txt")]
            + ["--out", str(tmp / "corpus")],
            r"^transformer-lab prepare: error: expected an existing text file, got '.*absent\.txt', "
            r"which does not exist$",
        )
        for task in ("translation", "couplet")
    ),
    *(
        CliCase(
            # Was "checkpoint: expected ...", naming an option these commands do not have.
            f"{command}: --init-from no checkpoint",
            lambda tmp, ck, command=command: [command, "couplet", "--train", str(a_file(tmp)), str(tmp / "lower.txt")]
            + ["--init-from", str(tmp / "nowhere"), "--out", str(tmp / "out")],
            rf"^transformer-lab {command}: error: --init-from: expected a checkpoint folder \(with config\.json\) "
            r"or a run folder holding best/ or last/, got '.*nowhere'$",
        )
        for command in ("train", "prepare")
    ),
    CliCase(
        "train: --out a step name of another run",
        lambda tmp, ck: ["train", "copy", "--out", str(translation_run(tmp, ck) / "step-000200")],
        r"--out: expected a folder outside the checkpoints of a run, got .*run/step-000200, a checkpoint name of the "
        r"run folder .*run: the next save of that run replaces it",
    ),
    *(
        CliCase(
            # Was "notes.txt: expected a folder there (or nothing), got a file", naming neither --out nor the path.
            f"export: --out under a file ({depth})",
            lambda tmp, ck, depth=depth: ["export", "--checkpoint", str(ck.translation), "--format", "onnx"]
            + ["--out", str(a_file(tmp).joinpath(*["onnx"] * depth))],
            r"^transformer-lab export: error: --out: expected a path through folders, got .*notes\.txt/onnx"
            + "/onnx" * (depth - 1)
            + r", through the file .*notes\.txt$",
        )
        for depth in (1, 2)
    ),
    CliCase(
        "export: --out inside a checkpoint folder",
        lambda tmp, ck: ["export", "--checkpoint", str(ck.translation), "--format", "onnx"]
        + ["--out", str(ck.translation / "onnx")],
        r"--out: expected a folder outside checkpoints, got .*last/onnx, inside the checkpoint folder .*last: "
        r"the next save of that checkpoint replaces the folder whole",
    ),
    CliCase(
        "plot training-curve: non-UTF-8 metrics",
        lambda tmp, ck: [
            "plot",
            "training-curve",
            "--out",
            str(tmp / "c.png"),
            "--metrics",
            str(write(tmp / "metrics.jsonl", b'{"event": "eval", "step": 1}\n\xff\n')),
        ],
        r"metrics\.jsonl: line 2: expected UTF-8 text",
    ),
    CliCase(
        "plot training-curve: a train row without its loss",
        lambda tmp, ck: [
            "plot",
            "training-curve",
            "--out",
            str(tmp / "c.png"),
            "--metrics",
            str(
                write(
                    tmp / "metrics.jsonl",
                    b'{"event": "train", "step": 1, "train_loss": 2.5}\n\n{"event": "train", "step": 2}\n',
                )
            ),
        ],
        r"metrics\.jsonl: line 3: expected a numeric 'train_loss' in every train row to draw, "
        r"got \{\"event\": \"train\", \"step\": 2\}$",
    ),
    CliCase(
        "plot attention: token id out of range",
        lambda tmp, ck: [
            "plot",
            "attention",
            "--out",
            str(tmp / "a.png"),
            "--checkpoint",
            str(write_tiny_checkpoint(tmp / "synthetic" / "last")),  # a translation checkpoint reads text
            "--source",
            "5 9999",
        ],
        r"src_ids must hold token ids in \[0, \d+\), got 9999$",
    ),
    CliCase(
        "lab: weights cut in half",
        lambda tmp, ck: [
            "lab",
            "decoder-rows",
            "--checkpoint",
            str(broken_copy(ck.translation, tmp, MODEL_FILE, cut_in_half)),
        ],
        r"model\.safetensors': expected a complete safetensors file",
    ),
    CliCase(
        "evaluate: an empty line in --reference",
        lambda tmp, ck: evaluate_files_argv(tmp, ck.translation, ["Ein Hund.", "Zwei Katzen."], ["A dog.", " "]),
        # Only the advice the command can follow: evaluate has no option to skip such lines.
        r"test\.en: line 2: expected a non-empty sentence, got ' '; fix the file$",
    ),
    # A source the model cannot read whole is named by its file and line (was: "sentences[1]", an index
    # into a list the user never saw, one below the line number, naming no file).
    CliCase(
        "evaluate: a --source line too long to translate",
        lambda tmp, ck: evaluate_files_argv(
            tmp, ck.translation, ["Ein Hund.", "Haus " * 2_000], ["A dog.", "A house."]
        ),
        r"test\.de: line 2 must be at most 256 subword tokens \(the model's max_len\), got 10000 characters",
    ),
    CliCase(
        "evaluate: a split's line too long to translate",
        lambda tmp, ck: evaluate_argv(
            ck.translation, write_parallel(tmp / "data", [*GERMAN[:2], "Haus " * 2_000], ENGLISH[:3])[0].parent
        ),
        r"val\.de: line 3 must be at most 256 subword tokens \(the model's max_len\), got 10000 characters",
    ),
    # Neither command has an option to skip an empty line of Multi30k's files: the error advises fixing the
    # file alone (was: "or pass skip_empty=True to drop (and count) such pairs", a keyword no command takes).
    CliCase(
        "evaluate: an empty line in a split's file",
        lambda tmp, ck: evaluate_argv(
            ck.translation, write_parallel(tmp / "data", ["Ein Hund.", " "], ENGLISH[:2])[0].parent
        ),
        r"val\.de: line 2: expected a non-empty sentence, got ' '; fix the file$",
    ),
    CliCase(
        "train translation: an empty line in Multi30k's training file",
        lambda tmp, ck: [
            "train",
            "translation",
            "--out",
            str(tmp / "run"),
            "--data-dir",
            str(write_multi30k_split(tmp / "data", "train", ["Ein Hund.", " "], ENGLISH[:2])),
        ],
        r"train\.de: line 2: expected a non-empty sentence, got ' '; fix the file$",
    ),
    CliCase(
        "evaluate: --data-dir with --source",
        lambda tmp, ck: [*evaluate_files_argv(tmp, ck.translation, ["Ein Hund."], ["A dog."]), "--data-dir", str(tmp)],
        # It was read past without a word: the files named are what is scored.
        r"--data-dir: expected it only with --split \(--source and --reference name the files\), got it too$",
    ),
    CliCase(
        "plot: --out under a file",
        lambda tmp, ck: ["plot", "masks", "--out", str(a_file(tmp) / "masks.png")],
        r"notes\.txt: expected a folder there \(or nothing\), got a file$",
    ),
    CliCase(
        # Was ".../notes.txt/run: expected a path through folders, got one through the file ...", without --out.
        "train: --out under a file",
        lambda tmp, ck: ["train", "copy", "--out", str(a_file(tmp) / "run")],
        r"error: --out: expected a path through folders, got .*notes\.txt/run, through the file .*notes\.txt$",
    ),
    CliCase(
        "lab: a tolerance that would call every row equal",
        lambda tmp, ck: ["lab", "decoder-rows", "--tolerance", "inf"],
        r"argument --tolerance: expected a number in \(0, 0\.01\], got inf",
    ),
    CliCase(
        "explain: --num-layers without --full",
        lambda tmp, ck: ["explain", "--num-layers", "3"],
        r"--num-layers: expected only with --full \(one attention call has no layers\), got 3$",
    ),
    CliCase(
        "explain: heads that do not divide d_model",
        lambda tmp, ck: ["explain", "--d-model", "32", "--nhead", "3"],
        r"--d-model: expected a multiple of --nhead \(each head takes d_model / nhead dimensions\), "
        r"got --d-model 32 with --nhead 3$",
    ),
    # classify: a text it cannot read is refused on its own line ("-" on stdout, the reason on stderr), exit 2.
    CliCase(
        "classify: empty string",
        lambda tmp, ck: classify_argv(ck, ""),
        r"^transformer-lab classify: input 1: the text is empty or only whitespace, so there is nothing to classify$",
    ),
    CliCase(
        "classify: whitespace only",
        lambda tmp, ck: classify_argv(ck, " \t  "),
        r"^transformer-lab classify: input 1: the text is empty or only whitespace",
    ),
    CliCase(
        "classify: 10,000 characters",
        lambda tmp, ck: classify_argv(ck, "goal " * 2_000),
        # Told by its characters alone (at least N tokens), before it is encoded.
        r"^transformer-lab classify: input 1: the text is at least \d+ subword tokens \(10000 characters\), more "
        r"than the model reads "
        r"\(128, its max_len\); shorten it, or truncate it explicitly \(--truncate\)$",
    ),
    CliCase(
        "classify: undecodable argument bytes",
        lambda tmp, ck: classify_argv(ck, "gr\udcfc\udcdfe"),
        r"texts\[0\] must be valid Unicode text, got the lone surrogate U\+DCFC at character 2",
    ),
    CliCase(
        "classify: non-UTF-8 stdin",
        lambda tmp, ck: classify_argv(ck),
        r"stdin: line 2: expected UTF-8 text, got invalid byte\(s\) b'\\xff' at byte column 6",
        stdin=b"profit\r\ngoal \xff\r\n",
    ),
    CliCase(
        "classify: empty stdin",
        lambda tmp, ck: classify_argv(ck),
        r"stdin: expected at least one line to classify, got none$",
    ),
    CliCase(
        "classify: empty --input",
        lambda tmp, ck: classify_argv(ck, "--input", str(write(tmp / "e.txt", b""))),
        r"--input: expected at least one line to classify, got the empty file .*e\.txt$",
    ),
    CliCase(
        "classify: --input is a folder",
        lambda tmp, ck: classify_argv(ck, "--input", str(tmp)),
        r"expected a text file, got .*, which is a folder$",
    ),
    CliCase(
        "classify: missing checkpoint",
        lambda tmp, ck: ["classify", "--checkpoint", str(tmp / "nowhere"), "goal"],
        r": --checkpoint: expected a checkpoint folder \(with config\.json\) or a run folder .*nowhere'$",
    ),
    CliCase(
        "classify: a translation checkpoint",
        lambda tmp, ck: ["classify", "--checkpoint", str(ck.translation), "goal"],
        r"expected a classification checkpoint, got task 'translation'$",
    ),
    CliCase(
        "classify: a couplet checkpoint",
        lambda tmp, ck: ["classify", "--checkpoint", str(ck.couplet), "goal"],
        r"expected a classification checkpoint, got task 'couplet'$",
    ),
    CliCase(
        "classify: weights cut in half",
        lambda tmp, ck: [
            "classify",
            "--checkpoint",
            str(broken_copy(ck.classification, tmp, MODEL_FILE, cut_in_half)),
            "goal",
        ],
        r"model\.safetensors': expected a complete safetensors file",
    ),
    # couplet: the same per-line refusal (an empty output line, the reason on stderr), exit 2.
    CliCase(
        "couplet: empty string",
        lambda tmp, ck: couplet_argv(ck, ""),
        r"^transformer-lab couplet: input 1: empty upper line: expected Chinese characters, got nothing$",
    ),
    CliCase(
        "couplet: whitespace only",
        lambda tmp, ck: couplet_argv(ck, " \u3000 "),
        r"^transformer-lab couplet: input 1: empty upper line",
    ),
    CliCase(
        "couplet: 10,000 characters",
        lambda tmp, ck: couplet_argv(ck, "春" * 10_000),
        r"^transformer-lab couplet: input 1: upper line of 10000 characters: expected at most 127 "
        r"\(the model's max_len - 1\)$",
    ),
    CliCase(
        "couplet: Latin letters",
        lambda tmp, ck: couplet_argv(ck, "春风 spring 花"),
        r"^transformer-lab couplet: input 1: upper line '春风 spring 花' contains Latin letters 'ginprs': "
        r"expected a line of Chinese characters$",
    ),
    CliCase(
        "couplet: full-width Latin letters",
        lambda tmp, ck: couplet_argv(ck, "春ＡＢ风"),
        r"input 1: upper line '春ＡＢ风' contains Latin letters 'ＡＢ'",
    ),
    CliCase(
        "couplet: undecodable argument bytes",
        lambda tmp, ck: couplet_argv(ck, "春\udcfc风"),
        r"^transformer-lab couplet: input 1: upper line has the lone surrogate U\+DCFC at character 1: "
        r"expected valid Unicode text",
    ),
    CliCase(
        "couplet: non-UTF-8 stdin",
        lambda tmp, ck: couplet_argv(ck),
        r"stdin: line 2: expected UTF-8 text, got invalid byte\(s\) b'\\xe6\\x98' at byte column 1",
        stdin="春风\n".encode() + b"\xe6\x98\n",
    ),
    CliCase(
        "couplet: empty stdin",
        lambda tmp, ck: couplet_argv(ck),
        r"stdin: expected at least one line to answer, got none$",
    ),
    CliCase(
        "couplet: empty --input",
        lambda tmp, ck: couplet_argv(ck, "--input", str(write(tmp / "e.txt", b""))),
        r"--input: expected at least one line to answer, got the empty file .*e\.txt$",
    ),
    CliCase(
        "couplet: --input is a folder",
        lambda tmp, ck: couplet_argv(ck, "--input", str(tmp)),
        r"expected a text file, got .*, which is a folder$",
    ),
    CliCase(
        # Greedy search keeps one candidate: the weight changed nothing, and the answer came back as without it.
        "couplet: a re-ranking weight with --beam 1",
        lambda tmp, ck: couplet_argv(ck, "--beam", "1", "--rhythm-rerank", "100", "春风"),
        r"--rhythm-rerank: expected beam search, whose candidates it re-ranks, got a greedy search \(--beam 1\), "
        r"which keeps one candidate; give --beam N \(N >= 2\) or leave --rhythm-rerank out$",
    ),
    *[
        CliCase(
            f"{command[0]}: missing checkpoint, named as the option",
            lambda tmp, ck, command=command, rest=rest: [*command, "--checkpoint", str(tmp / "nowhere"), *rest],
            rf"^transformer-lab {command[0]}: error: --checkpoint: expected a checkpoint folder \(with config\.json\) "
            r"or a run folder holding best/ or last/, got '.*nowhere'$",
        )
        for command, rest in [
            (["evaluate", "translation"], []),
            (["export"], ["--format", "onnx", "--out", "/tmp/never-written"]),
            (["plot", "attention"], ["--source", "Hallo", "--out", "/tmp/never-written.png"]),
            (["lab", "decoder-rows"], []),
        ]
    ],
    CliCase(
        "couplet: missing checkpoint",
        lambda tmp, ck: ["couplet", "--checkpoint", str(tmp / "nowhere"), "春风"],
        r": --checkpoint: expected a checkpoint folder \(with config\.json\) or a run folder holding best/ or last/, "
        r"got '.*nowhere'$",
    ),
    CliCase(
        "couplet: a translation checkpoint",
        lambda tmp, ck: ["couplet", "--checkpoint", str(ck.translation), "春风"],
        r"expected a couplet checkpoint, got task 'translation'$",
    ),
    CliCase(
        "couplet: a classification checkpoint",
        lambda tmp, ck: ["couplet", "--checkpoint", str(ck.classification), "春风"],
        r"expected a couplet checkpoint, got task 'classification'$",
    ),
    CliCase(
        "couplet: weights cut in half",
        lambda tmp, ck: ["couplet", "--checkpoint", str(broken_copy(ck.couplet, tmp, MODEL_FILE, cut_in_half)), "春风"],
        r"model\.safetensors': expected a complete safetensors file",
    ),
    CliCase(
        "couplet: vocabulary.txt missing",
        lambda tmp, ck: [
            "couplet",
            "--checkpoint",
            str(broken_copy(ck.couplet, tmp, "vocabulary.txt", Path.unlink)),
            "春风",
        ],
        r"'.*broken-vocabulary-txt/vocabulary\.txt': expected a vocabulary file \(one token a line\), "
        r"got no such file$",
    ),
    CliCase(
        "translate: a classification checkpoint",
        lambda tmp, ck: translate_argv(ck.classification, "Hallo"),
        r"expected a translation checkpoint, got task 'classification'$",
    ),
    CliCase(
        "translate: a couplet checkpoint",
        lambda tmp, ck: translate_argv(ck.couplet, "Hallo"),
        r"expected a translation checkpoint, got task 'couplet'$",
    ),
    # train / evaluate of the two tasks: the key, the value or the folder is named before any work.
    # A data setting is named as typed (data.X), and the files as the option that gave them.
    *[
        CliCase(
            f"{command} {task}: format 'lines' with one --train file",
            lambda tmp, ck, command=command, task=task: [
                command,
                task,
                "--out",
                str(tmp / "r"),
                "--set",
                "data.file_format=lines",
                "--train",
                str(write_lines(tmp / "one.txt", ["春风"])),
            ],
            rf"^transformer-lab {command}: error: --train: data\.train_files: expected two files \({sides}\) "
            r"for the format 'lines', got 1 path \('.*one\.txt'\)$",
        )
        for command, task, sides in [
            ("train", "translation", "source then target"),
            ("prepare", "translation", "source then target"),
            ("train", "couplet", "upper then lower"),
        ]
    ],
    *[
        CliCase(
            f"{command} {task}: one data.train_files of no known form, by {given}",
            lambda tmp, ck, command=command, task=task, given=given: [command, task, "--out", str(tmp / "r")]
            + {
                "--set": ["--set", f"data.train_files={write_lines(tmp / 'one.txt', ['春风'])}"],
                "--train": ["--train", str(write_lines(tmp / "one.txt", ["春风"]))],
                "--config": ["--config", str(write_lines(tmp / "c.yaml", ["data:", "  train_files: [one.txt]"]))],
            }[given],
            rf"^transformer-lab {command}: error: {prefix}data\.train_files: cannot tell the form of '.*one\.txt' "
            r"from its suffix: expected \.tsv, \.jsonl or \.json \(or two aligned line files, or set "
            r"data\.file_format=tsv or jsonl\)$",
        )
        for command, task in [("train", "translation"), ("prepare", "translation"), ("train", "couplet")]
        for given, prefix in [("--set", ""), ("--train", "--train: "), ("--config", r"--config .*c\.yaml: ")]
    ],
    *[
        CliCase(
            f"train {task}: unknown data.file_format",
            lambda tmp, ck, task=task: ["train", task, "--out", str(tmp / "r"), "--set", "data.file_format=foo"],
            r"^transformer-lab train: error: data\.file_format: expected one of lines, tsv, jsonl or '' .*, got 'foo'$",
        )
        for task in ("translation", "couplet")
    ],
    CliCase(
        "train classification: --set unknown key",
        lambda tmp, ck: ["train", "classification", "--out", str(tmp / "r"), "--set", "model.num_encoder_layers=1"],
        r"^transformer-lab train: error: model\.num_encoder_layers: unknown key for ClassifierConfig",
    ),
    CliCase(
        "train classification: --set bad value",
        lambda tmp, ck: ["train", "classification", "--out", str(tmp / "r"), "--set", "data.vocab_size=big"],
        r"data\.vocab_size: expected an int, got 'big'$",
    ),
    CliCase(
        "train classification: missing data folder",
        lambda tmp, ck: ["train", "classification", "--out", str(tmp / "r"), "--data-dir", str(tmp / "nodata")],
        r"^transformer-lab train: error: --data-dir '.*nodata': expected an existing folder",
    ),
    # The folder is named as the user gave it, never as the Python keyword data_dir='...'.
    *[
        CliCase(
            f"{command} {task}: missing data folder, by {given}",
            lambda tmp, ck, command=command, task=task, given=given: [command, task, "--out", str(tmp / "r")]
            + {
                "--set": ["--set", f"data.data_dir={tmp / 'nodata'}"],
                "--config": ["--config", str(write_lines(tmp / "c.yaml", ["data:", f"  data_dir: {tmp / 'nodata'}"]))],
            }[given],
            rf"^transformer-lab {command}: error: {prefix}data\.data_dir '.*nodata': expected an existing folder "
            rf"holding {folder}/, got '.*nodata', which does not exist; run `transformer-lab download",
        )
        for command, task, folder in [("train", "translation", "multi30k"), ("prepare", "classification", "ag_news")]
        for given, prefix in [("--set", ""), ("--config", r"--config .*c\.yaml: ")]
    ],
    # The prepared folder too: named as given, not as --prepared whichever way it came.
    *[
        CliCase(
            f"train translation: missing prepared folder, by {given}",
            lambda tmp, ck, given=given: ["train", "translation", "--out", str(tmp / "r")]
            + {
                "--prepared": ["--prepared", str(tmp / "none")],
                "--set": ["--set", f"data.prepared_dir={tmp / 'none'}"],
                "--config": [
                    "--config",
                    str(write_lines(tmp / "c.yaml", ["data:", f"  prepared_dir: {tmp / 'none'}"])),
                ],
            }[given],
            rf"^transformer-lab train: error: {named}: expected a folder written by 'prepare', got '.*none', "
            "which does not exist$",
        )
        for given, named in [
            ("--prepared", "--prepared"),
            ("--set", r"data\.prepared_dir"),
            ("--config", r"--config .*c\.yaml: data\.prepared_dir"),
        ]
    ],
    CliCase(
        "evaluate: the checkpoint's missing data folder",
        lambda tmp, ck: [
            "evaluate",
            "translation",
            "--checkpoint",
            str(write_translation_checkpoint(tmp / "ck", [f"data.data_dir={tmp / 'gone'}"])),
        ],
        # Not --data-dir, which was not given: the folder is the one the checkpoint's config.json records.
        r"^transformer-lab evaluate: error: the checkpoint's data\.data_dir '.*gone': expected an existing folder",
    ),
    CliCase(
        "lab: missing data folder",
        lambda tmp, ck: ["lab", "tgt-padding-mask", "--data-dir", str(tmp / "nodata")],
        r"^transformer-lab lab: error: --data-dir '.*nodata': expected an existing folder holding multi30k/",
    ),
    CliCase(
        "train classification: a data folder without the CSV",
        lambda tmp, ck: ["train", "classification", "--out", str(tmp / "r"), "--data-dir", str(tmp)],
        r"expected the AG News train file at '.*train\.csv' or '.*train_subset_12k\.csv', found none",
    ),
    CliCase(
        "train couplet: --set unknown key",
        lambda tmp, ck: ["train", "couplet", "--out", str(tmp / "r"), "--set", "constraints.rhyme=true"],
        r"^transformer-lab train: error: constraints\.rhyme: unknown key for CoupletConstraintConfig",
    ),
    CliCase(
        "train couplet: --set bad value",
        lambda tmp, ck: ["train", "couplet", "--out", str(tmp / "r"), "--set", "data.skip_invalid=perhaps"],
        r"data\.skip_invalid: expected a bool .*got 'perhaps'$",
    ),
    CliCase(
        "train couplet: missing data folder",
        lambda tmp, ck: ["train", "couplet", "--out", str(tmp / "r"), "--data-dir", str(tmp / "nodata")],
        r"expected the couplet split 'train_couplet_machine' \(in\.txt and out\.txt\) in one of '.*nodata/couplet/",
    ),
    CliCase(
        "evaluate classification: unknown split",
        lambda tmp, ck: ["evaluate", "classification", "--checkpoint", str(ck.classification), "--split", "dev"],
        r"error: --split: expected one of test, validation for the classification task, got 'dev'$",
    ),
    CliCase(
        "evaluate classification: --precision int8",
        lambda tmp, ck: ["evaluate", "classification", "--checkpoint", str(ck.classification), "--precision", "int8"],
        r"error: --precision: expected one of auto, fp32, bf16 \(int8 quantizes a decoder's search: a model that "
        r"does not decode has no int8 copy\), got 'int8'$",
    ),
    CliCase(
        "evaluate classification: the split's file missing",
        lambda tmp, ck: ["evaluate", "classification", "--checkpoint", str(ck.classification), "--data-dir", str(tmp)],
        r"expected the AG News test file at '.*test\.csv', found none",
    ),
    CliCase(
        "evaluate couplet: unknown split",
        lambda tmp, ck: ["evaluate", "couplet", "--checkpoint", str(ck.couplet), "--split", "dev"],
        r"expected the couplet split 'dev' \(in\.txt and out\.txt\) in one of .*; found none$",
    ),
    # A split is a folder's name: an empty one is refused, not read as the default test split (was: exit 0).
    CliCase(
        "evaluate couplet: an empty split",
        lambda tmp, ck: ["evaluate", "couplet", "--checkpoint", str(ck.couplet), "--split", ""],
        r"error: --split: expected a folder name such as validation, train, test, train_couplet_machine, got ''$",
    ),
    CliCase(
        "evaluate couplet: a path as the split",
        lambda tmp, ck: ["evaluate", "couplet", "--checkpoint", str(ck.couplet), "--split", "../couplet/test"],
        r"error: --split: expected a folder name such as validation, .*, got '\.\./couplet/test'$",
    ),
    CliCase(
        "evaluate couplet: the split's folder missing",
        lambda tmp, ck: ["evaluate", "couplet", "--checkpoint", str(ck.couplet), "--data-dir", str(tmp / "nodata")],
        r"expected the couplet split 'test' \(in\.txt and out\.txt\) in one of '.*nodata/couplet/test'",
    ),
    # evaluate has no option to skip a bad test pair: the error advises fixing the file alone (was: "or pass
    # skip_invalid=True to skip (and count) such pairs", a keyword of the library no command takes).
    CliCase(
        "evaluate couplet: a test pair of unequal lengths",
        lambda tmp, ck: couplet_split_argv(ck, tmp, "晚 风 \n春 水 长 \n", "晨 露 \n秋 月 \n"),
        r"out\.txt: line 2: expected a lower line of 3 characters, as long as line 2 of .*in\.txt "
        r"\('春水长'\), got 2 \('秋月'\); fix the file$",
    ),
    CliCase(
        "evaluate couplet: an empty test line",
        lambda tmp, ck: couplet_split_argv(ck, tmp, "晚 风 \n \n", "晨 露 \n雨 \n"),
        r"in\.txt: line 2: expected a non-empty sentence, got ' '; fix the file$",
    ),
    # Checkpoints edited by hand or by another program: each refused naming the file, before anything is answered.
    CliCase(
        "translate: integer weights",
        lambda tmp, ck: translate_argv(broken_copy(ck.translation, tmp, MODEL_FILE, retyped(torch.int64)), "Hallo"),
        r"model\.safetensors': expected floating-point weights \(training writes F32\), got I64 in tensor "
        r"'[\w.]+' and \d+ more; the file was converted or written by another program",
    ),
    CliCase(
        "classify: boolean weights",
        lambda tmp, ck: [
            "classify",
            "--checkpoint",
            str(broken_copy(ck.classification, tmp, MODEL_FILE, retyped(torch.bool))),
        ]
        + ["goal"],
        r"model\.safetensors': expected floating-point weights \(training writes F32\), got BOOL in tensor",
    ),
    CliCase(
        "average-checkpoints: integer weights in an older step",
        lambda tmp, ck: ["average-checkpoints", "--run", str(step_changed(tmp, ck, MODEL_FILE, retyped(torch.int64)))]
        + ["--last", "2", "--out", str(tmp / "averaged")],
        r"step-000001/model\.safetensors': expected floating-point weights \(training writes F32\), got I64",
    ),
    CliCase(
        "average-checkpoints: a step's model section null",
        lambda tmp, ck: [
            "average-checkpoints",
            "--run",
            str(step_changed(tmp, ck, CONFIG_FILE, edit_config(lambda c: c.update(model=None)))),
        ]
        + ["--last", "2", "--out", str(tmp / "averaged")],
        r"step-000001/config\.json: model: expected a JSON object of settings, as training writes it, got null$",
    ),
    CliCase(
        "average-checkpoints: a step's data section a list",
        lambda tmp, ck: [
            "average-checkpoints",
            "--run",
            str(step_changed(tmp, ck, CONFIG_FILE, edit_config(lambda c: c.update(data=["de", "en"])))),
        ]
        + ["--last", "2", "--out", str(tmp / "averaged")],
        r"step-000001/config\.json: data: expected a JSON object of settings, as training writes it, "
        r"got \['de', 'en'\]$",
    ),
    CliCase(
        "export: config.json's task a list (it was a traceback: unhashable type)",
        lambda tmp, ck: [
            "export",
            "--checkpoint",
            str(broken_copy(ck.translation, tmp, CONFIG_FILE, edit_config(lambda c: c.update(task=["translation"])))),
        ]
        + ["--format", "onnx", "--out", str(tmp / "exported")],
        r"config\.json: task: expected the name of the task that trained it, got \['translation'\]$",
    ),
    CliCase(
        "translate: config.json without its decode section",
        lambda tmp, ck: translate_argv(
            broken_copy(ck.translation, tmp, CONFIG_FILE, edit_config(lambda c: c.pop("decode"))), "Hallo"
        ),
        r"config\.json: expected data, model, train and decode, as training writes them, got none for decode; "
        r"was the file edited\?",
    ),
    CliCase(
        "translate: config.json without its model section",
        lambda tmp, ck: translate_argv(
            broken_copy(ck.translation, tmp, CONFIG_FILE, edit_config(lambda c: c.pop("model"))), "Hallo"
        ),
        r"config\.json: expected data, model, train and decode, as training writes them, got none for model;",
    ),
    CliCase(
        "classify: config.json without its class names",
        lambda tmp, ck: [
            "classify",
            "--checkpoint",
            str(broken_copy(ck.classification, tmp, CONFIG_FILE, edit_config(lambda c: c.pop("class_names")))),
        ]
        + ["goal"],
        r"config\.json: expected data, model, train and class_names, as training writes them, got none for "
        r"class_names;",
    ),
    CliCase(
        "classify: config.json with a class name fewer than the model's",
        classify_with_class_names(lambda names: names[:3]),
        r"/config\.json: class_names: expected the 4 distinct names of the model's classes \(model\.num_classes\), "
        r"got 3: \['World', 'Sports', 'Business'\]$",
    ),
    CliCase(
        "classify: config.json with a class name given twice",
        classify_with_class_names(lambda names: ["A", "A", "B", "C"]),
        r"/config\.json: class_names: expected the 4 distinct names of the model's classes \(model\.num_classes\), "
        r"got 'A' twice: \['A', 'A', 'B', 'C'\]$",
    ),
    # A run folder is read as its best/, else its last/: a best/ damaged, or left aside by a
    # stopped save, is said (was: last/ read and scored in its place without a word).
    CliCase(
        "translate: a run whose best/ lacks config.json",
        lambda tmp, ck: translate_argv(
            run_changed(tmp, ck, lambda run: (run / "best" / CONFIG_FILE).unlink()), "Hallo"
        ),
        r"--checkpoint: .*run/best: expected a checkpoint folder \(with config\.json\), got a folder without one "
        r"\(damaged, or emptied by hand\); restore it, or give .*run/last$",
    ),
    CliCase(
        "translate: a run whose best/ a stopped save left aside",
        lambda tmp, ck: translate_argv(
            run_changed(tmp, ck, lambda run: (run / "best").rename(run / ".best.old-k2j4x9")), "Hallo"
        ),
        r"--checkpoint: expected .*run/best, got none: a save of it was stopped between its two renames, and the "
        r"previous best/ is complete at .*run/\.best\.old-k2j4x9; rename it back \(mv .*\), or give .*run/last$",
    ),
    CliCase(
        "translate: a run without best/ whose last/ lacks config.json",
        lambda tmp, ck: translate_argv(
            run_changed(tmp, ck, lambda run: (shutil.rmtree(run / "best"), (run / "last" / CONFIG_FILE).unlink())),
            "Hallo",
        ),
        r"--checkpoint: .*run/last: expected a checkpoint folder \(with config\.json\), got a folder without one "
        r"\(damaged, or emptied by hand\); restore it, or give a step-NNNNNN/ of the run$",
    ),
]


def classify_argv(checkpoints: Checkpoints, *rest: str) -> list[str]:
    return ["classify", "--checkpoint", str(checkpoints.classification), *rest]


def couplet_argv(checkpoints: Checkpoints, *rest: str) -> list[str]:
    return ["couplet", "--checkpoint", str(checkpoints.couplet), *rest]


def couplet_split_argv(checkpoints: Checkpoints, folder: Path, upper: str, lower: str) -> list[str]:
    """``evaluate couplet`` on a data folder whose test split holds these in.txt and out.txt."""
    (folder / "couplet" / "test").mkdir(parents=True)
    write_folder(folder / "couplet" / "test", {UPPER_FILE: upper.encode(), LOWER_FILE: lower.encode()})
    return ["evaluate", "couplet", "--checkpoint", str(checkpoints.couplet), "--data-dir", str(folder)]


def _empty_step_folder(tmp: Path) -> Path:
    """A folder holding only an empty step-000001/: no run."""
    (tmp / "notrun" / "step-000001").mkdir(parents=True)
    return tmp / "notrun"


def translation_run(tmp_path: Path, checkpoints: Checkpoints) -> Path:
    """A run folder as training leaves it: its log, best/, last/ and two step checkpoints."""
    run = tmp_path / "run"
    for name in ("best", "last", "step-000001", "step-000002"):
        shutil.copytree(checkpoints.translation, run / name)
    (run / "metrics.jsonl").write_text('{"event": "train", "step": 2}\n', encoding="utf-8")
    return run


def run_without_steps(tmp_path: Path) -> Path:
    """A run folder that kept no step checkpoints (train.keep_last=0): its log alone."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"event": "train", "step": 2}\n', encoding="utf-8")
    return run


def steps_of_two_activations(tmp_path: Path) -> Path:
    """Two step checkpoints of one vocabulary whose model sections differ (a resume with another --set)."""
    run = tmp_path / "run"
    write_translation_checkpoint(run / "step-000001", ["model.activation=relu"])
    write_translation_checkpoint(run / "step-000002", ["model.activation=gelu"], seed=1)
    return run


def nan_step_run(tmp_path: Path, checkpoints: Checkpoints) -> Path:
    """A run whose older step checkpoint holds a NaN weight (saved while diverging)."""
    run = translation_run(tmp_path, checkpoints)
    weights_file = run / "step-000001" / "model.safetensors"
    weights = safetensors.torch.load_file(weights_file)
    first = sorted(weights)[0]
    weights[first].view(-1)[0] = float("nan")
    safetensors.torch.save_file(weights, weights_file)
    return run


def retyped(dtype: torch.dtype) -> Callable[[Path], None]:
    """Rewrite a weights file with every tensor converted to ``dtype``, its header's notes kept."""

    def change(path: Path) -> None:
        with safetensors.safe_open(str(path), framework="pt") as file:
            notes = file.metadata()
        weights = safetensors.torch.load_file(path)
        safetensors.torch.save_file({name: tensor.to(dtype) for name, tensor in weights.items()}, path, notes)

    return change


def step_changed(tmp_path: Path, checkpoints: Checkpoints, name: str, change: Callable[[Path], None]) -> Path:
    """A run whose older step checkpoint has file ``name`` changed."""
    run = translation_run(tmp_path, checkpoints)
    change(run / "step-000001" / name)
    return run


def run_changed(tmp_path: Path, checkpoints: Checkpoints, change: Callable[[Path], None]) -> Path:
    run = translation_run(tmp_path, checkpoints)
    change(run)
    return run


def copy_checkpoint(tmp_path: Path) -> Path:
    config = synthetic_train.default_config("copy")
    return save_checkpoint(
        tmp_path / "copy", Seq2SeqTransformer.from_config(config.model), {"task": "synthetic", **config_to_dict(config)}
    )


def bad_reference(folder: Path) -> Path:
    write_multi30k_split(folder, "val", GERMAN, ENGLISH)
    (folder / "val.en").write_bytes(b"A man.\nA \xe9 dog.\nOne.\nTwo.\n")
    return folder


def run_cli(
    argv: list[str], stdin: bytes, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    # main's logging.basicConfig is a no-op under pytest (its handlers are installed), so the
    # log lines a user would see on stderr are routed there as the console script does.
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse
        code = int(exit_.code)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("case", CLI_CASES, ids=lambda case: case.name)
def test_cli_bad_input_is_one_line_and_an_exit_code(
    case: CliCase,
    tmp_path: Path,
    checkpoints: Checkpoints,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, error = run_cli(case.argv(tmp_path, checkpoints), case.stdin, monkeypatch, capsys)
    lines = error.strip().splitlines()
    assert code == case.exit_code, f"{case.name}: exit {code}, stderr {error!r}"
    assert len(lines) == 1, f"{case.name}: expected one stderr line, got {lines}"
    assert "Traceback" not in error
    assert re.search(case.message, lines[0]), f"{case.name}: {lines[0]!r} does not match {case.message!r}"


# ---------------------------------------------------------------------------- accepted inputs


# Lines each command accepts, and the checkpoint (Checkpoints attribute) it reads.
ACCEPTED_LINES = {
    "translate": ("translation", GERMAN),
    "classify": ("classification", ["Shares and profit rose", "The striker scored a goal", "市场 📈 rally"]),
    "couplet": ("couplet", ["春风花", "山水，云天", "江河"]),
}


@pytest.mark.parametrize("command", list(ACCEPTED_LINES))
def test_crlf_input_gives_what_lf_gives(
    command: str, tmp_path: Path, checkpoints: Checkpoints, monkeypatch, capsys
) -> None:
    task, lines = ACCEPTED_LINES[command]
    argv = [command, "--checkpoint", str(getattr(checkpoints, task))]
    outputs = []
    for name, newline in (("lf", "\n"), ("crlf", "\r\n")):
        path = write(tmp_path / f"{name}.txt", "".join(line + newline for line in lines).encode("utf-8"))
        code, out, _ = run_cli([*argv, "--input", str(path)], b"", monkeypatch, capsys)
        assert code == 0
        outputs.append(out)
        code, piped, _ = run_cli(argv, path.read_bytes(), monkeypatch, capsys)
        assert code == 0 and piped == out
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == len(lines)


def test_crlf_news_and_couplet_files_read_like_lf(tmp_path: Path) -> None:
    rows = ['"3","Fed holds","Rates \\$1 unchanged\\said ""analysts"""', '"2","Cup final","A late, late goal"']
    lf = read_ag_news_csv(write(tmp_path / "lf.csv", ("\n".join(rows) + "\n").encode("utf-8")))
    assert len(lf.articles) == 2 and lf.articles[0].description == 'Rates $1 unchanged\nsaid "analysts"'
    for name, final in (("crlf.csv", "\r\n"), ("crlf-unterminated.csv", "")):
        assert (
            read_ag_news_csv(write(tmp_path / name, ("\r\n".join(rows) + final).encode("utf-8"))).articles
            == lf.articles
        )
    pairs = made_up_couplets(6, seed=3)
    lf_pairs = read_couplets(write_split(tmp_path / "lf", pairs)).pairs
    assert read_couplets(write_split(tmp_path / "crlf", pairs, newline="\r\n")).pairs == lf_pairs == pairs


def test_crlf_data_files_evaluate_like_lf(tmp_path: Path, checkpoint: Path, monkeypatch, capsys) -> None:
    reports = []
    for name, newline in (("lf", "\n"), ("crlf", "\r\n")):
        data = write_multi30k_split(tmp_path / name, "val", GERMAN, ENGLISH, newline=newline)
        code, out, _ = run_cli(evaluate_argv(checkpoint, data), b"", monkeypatch, capsys)
        assert code == 0
        reports.append((out.replace(str(data), "DATA"), (data / "hypotheses.txt").read_text(encoding="utf-8")))
    assert reports[0] == reports[1]
    assert read_parallel_text(tmp_path / "crlf" / "val.de", tmp_path / "crlf" / "val.en").pairs == list(SENTENCES)


def test_awkward_but_valid_text_translates_to_one_line_each(checkpoint: Path) -> None:
    sentences = [
        "",
        "   ",
        "\t",
        "😀🎉👍🏽",
        "Ein Mann 🚲 fährt.",
        "日本語とΕλληνικά und русский",
        "عربى",
        "a\u0301 combining",
        "<eos> <pad> <unk>",
        "x" * 200,
    ]
    outputs = translate(checkpoint, sentences)
    assert len(outputs) == len(sentences)
    assert outputs[:3] == ["", "", ""]  # blank in, blank out: nothing decoded
    assert all(isinstance(text, str) and "\n" not in text for text in outputs)


def test_awkward_but_valid_text_is_classified_one_line_each(checkpoints: Checkpoints, monkeypatch, capsys) -> None:
    texts = [
        "😀🎉👍🏽",
        "Stocks 📈 rally in 東京 and Frankfurt",
        "股市大涨，央行维持利率",
        "日本語とΕλληνικά und русский",
        "عربى",
        "a\u0301 combining",
        "<eos> <pad> <unk>",
        "goal " * 20,
        "line\u2028separator",
    ]
    code, out, error = run_cli(classify_argv(checkpoints, *texts), b"", monkeypatch, capsys)
    assert code == 0 and error == ""
    lines = out.splitlines()
    assert len(lines) == len(texts)
    for line in lines:
        label, shares = line.split("\t")
        probabilities = {name: float(value) for name, value in (item.split("=") for item in shares.split(" "))}
        assert list(probabilities) == ["World", "Sports", "Business", "Sci/Tech"] and label in probabilities
        assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-3)


def test_awkward_but_valid_upper_lines_are_answered_with_a_note(checkpoints: Checkpoints, monkeypatch, capsys) -> None:
    """Emoji and non-Latin scripts read as <unk> (said on stderr) and still get a lower line of the same length."""
    uppers = ["春风😀花", "山水，云天🎉", "春ひらがな风", "한국어春", "Привет春", "春 风 花 ", "江河。"]
    code, out, error = run_cli(couplet_argv(checkpoints, *uppers), b"", monkeypatch, capsys)
    assert code == 0 and "Traceback" not in error
    lowers = out.splitlines()
    assert [len(lower) for lower in lowers] == [len("".join(upper.split())) for upper in uppers]
    assert "，" == lowers[1][2] and lowers[6].endswith("。")  # the upper line's marks are kept in place
    notes = error.splitlines()
    assert notes[0] == "transformer-lab couplet: input 1: characters never seen in training, read as <unk>: 😀"
    assert [note.split(":")[0] for note in notes] == ["transformer-lab couplet"] * 6
    assert [note.split(": ")[1] for note in notes] == ["input 1", "input 2", "input 3", "input 4", "input 5", "input 7"]


def test_no_traceback_through_the_real_entry_point(tmp_path: Path, checkpoint: Path) -> None:
    """The console script itself (a fresh interpreter): a cut weights file is one line, exit 2."""
    broken = broken_copy(checkpoint, tmp_path, MODEL_FILE, cut_in_half)
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "src"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "transformer_lab", "translate", "--checkpoint", str(broken), "Hallo"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "expected a complete safetensors file" in result.stderr


def test_a_closed_stdout_is_one_line_before_any_work_through_the_real_entry_point() -> None:
    """Started with stdout closed (``>&-``), ``sys.stdout`` is None (was: an AttributeError traceback, exit 1,
    after the work: a training run's summary an hour on)."""
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "src"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "transformer_lab", "config", "copy"],
        env=environment,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(1),  # noqa: PLW1509 (the child's own fd 1, closed before it starts)
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "transformer-lab: error: stdout: expected an open output for the command's answers or summary, got it "
        "closed; send it to a file or to /dev/null instead"
    ]


def test_undecodable_argument_bytes_through_the_real_entry_point(checkpoints: Checkpoints) -> None:
    """Bytes that are not UTF-8 in argv arrive as lone surrogates; the line is refused, not a UnicodeEncodeError."""
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPOSITORY / "src"),
        "OMP_NUM_THREADS": "1",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "",
    }
    argv = [sys.executable, "-m", "transformer_lab", "couplet", "--checkpoint", str(checkpoints.couplet)]
    result = subprocess.run(
        [*argv, "春风".encode() + b"\xff", "江河"], env=environment, capture_output=True, timeout=120
    )
    assert result.returncode == 2
    assert result.stdout.decode("utf-8").split("\n")[0] == "" and len(result.stdout.decode("utf-8").split("\n")[1]) == 2
    assert result.stderr.decode("utf-8").splitlines() == [
        "transformer-lab couplet: input 1: upper line has the lone surrogate U+DCFF at character 2: "
        "expected valid Unicode text (undecodable input bytes?)"
    ]


@pytest.mark.parametrize("command", list(ACCEPTED_LINES))
def test_a_closed_stdin_is_one_line_naming_it(
    command: str, checkpoints: Checkpoints, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process started with stdin closed (``<&-``) has ``sys.stdin`` None (was: an AttributeError traceback)."""
    checkpoint = getattr(checkpoints, ACCEPTED_LINES[command][0])
    monkeypatch.setattr(sys, "stdin", None)
    assert main([command, "--checkpoint", str(checkpoint)]) == 2
    captured = capsys.readouterr()
    verb = {"translate": "translate", "classify": "classify", "couplet": "answer"}[command]
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"transformer-lab {command}: error: stdin: expected the lines to {verb} (or them as arguments, "
        "or --input FILE), got it closed"
    ]


@pytest.mark.parametrize("command", list(ACCEPTED_LINES))
def test_input_dash_reads_stdin_as_no_input_does(
    command: str, checkpoints: Checkpoints, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--input -`` is stdin, as for other command-line tools (was: "got '-', which does not exist")."""
    name, lines = ACCEPTED_LINES[command]
    given = "".join(line + "\n" for line in lines).encode("utf-8")
    plain = run_cli([command, "--checkpoint", str(getattr(checkpoints, name))], given, monkeypatch, capsys)
    dash = run_cli(
        [command, "--checkpoint", str(getattr(checkpoints, name)), "--input", "-"], given, monkeypatch, capsys
    )
    assert dash == plain
    assert plain[0] == 0 and plain[1].count("\n") >= len(lines)


@pytest.mark.parametrize("command", list(ACCEPTED_LINES))
def test_a_stdin_open_for_writing_only_is_named(
    command: str,
    checkpoints: Checkpoints,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Started with ``0> FILE``, stdin cannot be read (was: "failed: [Errno 9] Bad file descriptor", exit 1)."""
    checkpoint = getattr(checkpoints, ACCEPTED_LINES[command][0])
    with open(tmp_path / "written.txt", "w", encoding="utf-8") as write_only:
        monkeypatch.setattr(sys, "stdin", write_only)
        assert main([command, "--checkpoint", str(checkpoint)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"transformer-lab {command}: error: stdin: could not read it: it is not open for reading"
    ]


def test_config_to_a_full_standard_output_is_named_as_one(tmp_path: Path) -> None:
    # `transformer-lab config copy > /dev/full`: was "failed: [Errno 28] No space left on device", exit 1.
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    with open("/dev/full", "w", encoding="utf-8") as full:
        result = subprocess.run(
            [sys.executable, "-m", "transformer_lab", "config", "copy"],
            env=environment,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert (result.returncode, result.stderr) == (
        2,
        "transformer-lab config: error: could not write the standard output (No space left on device, ENOSPC); "
        "the config was not written\n",
    )


def test_output_dash_is_refused_not_written_as_a_file(
    checkpoints: Checkpoints, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--output -`` wrote a file named "-" in the working folder, without a word."""
    monkeypatch.chdir(tmp_path)
    assert main(["couplet", "--checkpoint", str(checkpoints.couplet), "--output", "-", "春风花"]) == 2
    assert not (tmp_path / "-").exists()
    assert capsys.readouterr().err.splitlines() == [
        "transformer-lab couplet: error: --output: expected a file to write, got '-'; the answers go to the "
        "standard output without --output (a file named '-' is ./-)"
    ]


OUT_COMMANDS = {
    "train": lambda tmp, ck: ["train", "copy", *tiny_copy_options(max_steps=1)],
    "demo": lambda tmp, ck: ["demo"],
    "export": lambda tmp, ck: ["export", "--checkpoint", str(ck.translation), "--format", "onnx"],
    "prepare": lambda tmp, ck: ["prepare", "couplet", "--train", str(write(tmp / "upper.txt", "春风\n".encode()))]
    + [str(write(tmp / "lower.txt", "秋雨\n".encode()))],
    "average-checkpoints": lambda tmp, ck: ["average-checkpoints", "--run", str(translation_run(tmp, ck))]
    + ["--last", "1"],
}


@pytest.mark.parametrize("place", ["new/..", "/proc/x"])
@pytest.mark.parametrize("command", list(OUT_COMMANDS))
def test_an_out_no_folder_can_be_made_at_is_refused_naming_the_option_and_makes_nothing(
    command: str,
    place: str,
    tmp_path: Path,
    checkpoints: Checkpoints,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--out new/..``: the lock's folder "new" was made, then "new/.." existed: refused as existing, "new" left.

    ``--out /proc/x``: was "[Errno 2] No such file or directory: '/proc/.x.lock'", a lock file's name.
    """
    if place == "/proc/x" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc on this system")
    argv = OUT_COMMANDS[command](tmp_path, checkpoints)
    work = tmp_path / "work"
    work.mkdir()
    out = work / "new" / ".." if place == "new/.." else Path(place)
    code, _, error = run_cli([*argv, "--out", str(out)], b"", monkeypatch, capsys)
    assert code == 2
    expected = (
        f"--out: expected a path whose '..' steps out of an existing folder, got {out}, where {work / 'new'} is no "
        "folder; name the folder without it"
        if place == "new/.."
        else "--out: could not write '/proc/x' (No such file or directory, ENOENT); nothing was written"
    )
    assert error.strip().splitlines() == [f"transformer-lab {command}: error: {expected}"]
    assert list(work.iterdir()) == []


def test_unreadable_file_is_a_value_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "secret.txt", b"Hallo\n")
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        path.chmod(0)  # a real permission error where the user can be refused
    else:
        # root reads everything; make the read fail the way the kernel would.
        def refuse(self: Path) -> bytes:
            raise PermissionError(13, "Permission denied", str(self))

        monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(
        ValueError, match=r"secret\.txt: expected a readable text file, got an error: Permission denied"
    ):
        read_lines(path)


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("translation", "expected the Multi30k file '{data}/train.de', which does not exist"),
        ("classification", "expected the AG News train file at '{data}/train.csv' or "),
        ("couplet", "expected the couplet split 'train_couplet_machine' (in.txt and out.txt) in one of "),
    ],
    ids=["translation", "classification", "couplet"],
)
def test_a_data_folder_without_the_data_names_the_variable_that_gave_it(
    task: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every task says where its data folder came from, so a user who set the variable reads it named.
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("TRANSFORMER_LAB_DATA", str(data))
    assert main(["train", task, "--out", str(tmp_path / "run"), "--set", "train.max_steps=1"]) == 2
    (error,) = capsys.readouterr().err.splitlines()
    prefix = f"transformer-lab train: error: TRANSFORMER_LAB_DATA={str(data)!r}: "
    assert error.startswith(prefix + expected.format(data=data)), error
    assert error.endswith(" to fetch it") and not (tmp_path / "run").exists()


def test_a_named_pipe_is_read_as_input_once_and_refused_as_a_corpus(tmp_path: Path) -> None:
    # A shell's <(command) and a FIFO exist but are no regular files; they read as "does not exist" before.
    pipe = tmp_path / "lines"
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_bytes("Ein Hund.\r\nZwei.\n".encode()))
    writer.start()
    assert read_lines(pipe) == ["Ein Hund.", "Zwei."]
    writer.join()
    # A corpus is read more than once (counted, then streamed): a pipe is refused, not read empty the second time.
    with pytest.raises(ValueError, match=r"expected a regular file, got '.*lines', which is a named pipe or a device"):
        count_lines(pipe)


def test_an_output_naming_an_input_file_is_refused_and_the_input_kept(
    tmp_path: Path, checkpoints: Checkpoints, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source, reference = write_parallel(tmp_path, GERMAN, ENGLISH)
    lines = tmp_path / "lines.txt"
    lines.write_text("Shares and profit rose\n", encoding="utf-8")
    kept = {path: path.read_bytes() for path in (source, reference, lines)}
    evaluate = ["evaluate", "translation", "--checkpoint", str(checkpoints.translation), "--source", str(source)]
    cases = [
        ([*evaluate, "--reference", str(reference), "--output", str(reference)], "--output", "--reference"),
        # The same file by another spelling.
        (
            [*evaluate, "--reference", str(reference), "--output", str(tmp_path / "x" / ".." / "val.de")],
            "--output",
            "--source",
        ),
        ([*classify_argv(checkpoints), "--input", str(lines), "--output", str(lines)], "--output", "--input"),
        ([*couplet_argv(checkpoints), "--input", str(lines), "--output", str(lines)], "--output", "--input"),
    ]
    for argv, output_flag, input_flag in cases:
        code, _, error = run_cli(argv, b"", monkeypatch, capsys)
        assert code == 2 and len(error.strip().splitlines()) == 1, error
        assert re.search(rf"error: {output_flag}: expected a file other than the {input_flag} file ", error), error
    assert {path: path.read_bytes() for path in kept} == kept


def output_commands(tmp_path: Path, checkpoints: Checkpoints) -> list[tuple[str, list[str]]]:
    """(command, its arguments but --output) of each command with an --output file: classify, couplet, evaluate."""
    source, reference = write_parallel(tmp_path, GERMAN, ENGLISH)
    evaluate = ["evaluate", "translation", "--checkpoint", str(checkpoints.translation), "--source", str(source)]
    return [
        ("classify", [*classify_argv(checkpoints), "Shares rose"]),
        ("couplet", [*couplet_argv(checkpoints), "春风"]),
        ("evaluate", [*evaluate, "--reference", str(reference)]),
    ]


def test_an_output_that_is_a_folder_is_named_by_its_option_before_any_work(
    tmp_path: Path, checkpoints: Checkpoints, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    cases = output_commands(tmp_path, checkpoints)
    for command, argv in cases:
        code, out, error = run_cli([*argv, "--output", str(folder)], b"", monkeypatch, capsys)
        assert (code, out) == (2, ""), error
        assert error.splitlines() == [
            f"transformer-lab {command}: error: --output: expected a file to write, got the folder '{folder}'"
        ]
        # "results/" names a folder as plainly, whether or not there is one: argparse refuses it.
        code, out, error = run_cli([*argv, "--output", f"{folder}/"], b"", monkeypatch, capsys)
        assert (code, len(error.splitlines())) == (2, 1) and "which ends in '/' as a folder does" in error
    assert list(folder.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, which takes no new file")
def test_an_output_the_system_refuses_is_one_line_naming_the_option_the_path_and_the_errno(
    tmp_path: Path, checkpoints: Checkpoints, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was "[Errno 2] No such file or directory: '/proc/x.txt'" after the work, and "notes.txt: expected a
    # folder there (or nothing), got a file" without the option; /proc refuses root too.
    notes = a_file(tmp_path)
    cases = output_commands(tmp_path, checkpoints)
    refusals = [
        ("/proc/x.txt", "No such file or directory, ENOENT"),
        ("/proc/sub/x.txt", "No such file or directory, ENOENT"),  # a folder /proc will not make
        (f"{notes}/x.txt", f"Not a directory, ENOTDIR: '{notes}' is a file"),
        (f"{notes}/sub/x.txt", f"Not a directory, ENOTDIR: '{notes}' is a file"),
    ]
    for command, argv in cases:
        for output, meaning in refusals:
            code, out, error = run_cli([*argv, "--output", output], b"", monkeypatch, capsys)
            assert (code, out) == (2, ""), error  # refused before any answer is printed
            refusal = f"--output: could not write '{output}' ({meaning}); nothing was written"
            assert error.splitlines() == [f"transformer-lab {command}: error: {refusal}"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt", "val.de", "val.en"]


def test_an_output_through_a_link_to_nothing_is_one_line_naming_the_link_before_any_work(
    tmp_path: Path, checkpoints: Checkpoints, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An unmounted disk, a results folder removed: the link counted as missing, a probe was made beside it,
    # and the work ended on "failed: [Errno 17] File exists: 'gone'", exit 1.
    link = tmp_path / "gone"
    link.symlink_to(tmp_path / "nowhere")
    points = f"a symbolic link to '{tmp_path / 'nowhere'}', which points nowhere"
    cases = [
        (
            [*classify_argv(checkpoints), "Shares rose", "--output", str(link / "out.jsonl")],
            f"--output: could not write '{link / 'out.jsonl'}' (No such file or directory, ENOENT: '{link}' is a ",
        ),
        (
            translate_argv(checkpoints.translation, "Ein Hund.", "--plot-attention", str(link / "a.png")),
            f"--plot-attention: could not write '{link / 'a.png'}' (No such file or directory, ENOENT: '{link}' is ",
        ),
        (
            ["export", "--checkpoint", str(checkpoints.translation), "--format", "onnx", "--out", str(link / "x")],
            f"--out: expected a path through folders, got {link / 'x'}, through the symbolic link {link} (to ",
        ),
        (
            ["plot", "masks", "--out", str(link / "m.png")],
            f"{link}: expected a folder there (or nothing), got {points}",
        ),
    ]
    for argv, message in cases:
        code, out, error = run_cli(argv, b"", monkeypatch, capsys)
        assert (code, out, len(error.splitlines())) == (2, "", 1), error
        assert message in error, error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gone"]


def test_an_output_naming_a_checkpoint_file_a_split_file_or_another_output_is_refused(
    tmp_path: Path, checkpoints: Checkpoints, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The files a command reads without an option naming them: the checkpoint's, and the split's.
    data = tmp_path / "data"
    write_multi30k_split(data / "multi30k", "val", GERMAN, ENGLISH)
    folder = resolve_checkpoint(checkpoints.translation)
    member = write_translation_checkpoint(tmp_path / "member", seed=1)  # an --ensemble member's files are read too
    # The validation splits of classification and couplets are carved from their training files.
    news = checkpoints.classification.parent.parent / "data" / "ag_news" / "train.csv"
    upper = checkpoints.couplet.parent.parent / "data" / "couplet" / "train_couplet_machine" / "in.txt"
    read = [*folder.iterdir(), *(data / "multi30k").iterdir(), *member.iterdir(), news, upper]
    kept = {path: path.read_bytes() for path in read if path.is_file()}
    evaluate = ["evaluate", "translation", "--checkpoint", str(checkpoints.translation), "--split", "val"]
    validation = ["--split", "validation", "--output"]
    picture = str(tmp_path / "o.png")
    cases = [
        (
            translate_argv(checkpoints.translation, "Ein Hund.", "--plot-attention", str(folder / "config.json")),
            r"--plot-attention: expected a file other than the checkpoint's config\.json ",
        ),
        (
            [*couplet_argv(checkpoints), "春风", "--output", picture, "--plot-attention", picture],
            r"--plot-attention: expected a file other than the --output file ",
        ),
        (
            [*evaluate, "--data-dir", str(data), "--output", str(folder / "model.safetensors")],
            r"--output: expected a file other than the checkpoint's model\.safetensors ",
        ),
        (
            [*evaluate, "--data-dir", str(data), "--output", str(data / "multi30k" / "val.en")],
            r"--output: expected a file other than the val split's references .*val\.en, got ",
        ),
        (
            [
                *evaluate,
                "--data-dir",
                str(data),
                "--ensemble",
                str(member),
                "--output",
                str(member / "model.safetensors"),
            ],
            rf"--output: expected a file other than the --ensemble {member} checkpoint's file .*safetensors, got ",
        ),
        (
            ["evaluate", "classification", "--checkpoint", str(checkpoints.classification), *validation, str(news)],
            r"--output: expected a file other than the file the validation split is read from .*train\.csv, got ",
        ),
        (
            ["evaluate", "couplet", "--checkpoint", str(checkpoints.couplet), *validation, str(upper)],
            r"--output: expected a file other than the file the validation pairs are read from .*in\.txt, got ",
        ),
    ]
    for argv, message in cases:
        code, _, error = run_cli(argv, b"", monkeypatch, capsys)
        assert code == 2 and len(error.strip().splitlines()) == 1, error
        assert re.search(message, error), error
    assert {path: path.read_bytes() for path in kept} == kept


def test_classify_output_keeps_one_json_record_a_line_whatever_the_text_holds(
    tmp_path: Path, checkpoints: Checkpoints, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every character str.splitlines splits on that a line of --input can hold (it is split on
    # \n, \r and \r\n): JSON escapes the control ones, and U+0085, U+2028, U+2029 were left raw.
    texts = ["Shares\x0brose", "Oil\x85fell", "Markets\u2028closed", "Banks\u2029merged", "Tech\x1crallied"]
    source = write(tmp_path / "in.txt", "\n".join(texts).encode("utf-8") + b"\n")
    output = tmp_path / "out.jsonl"
    code, _, error = run_cli(
        [*classify_argv(checkpoints), "--input", str(source), "--output", str(output)], b"", monkeypatch, capsys
    )
    assert code == 0, error
    written = output.read_text(encoding="utf-8")
    assert len(written.splitlines()) == len(texts)
    assert [json.loads(line)["text"] for line in written.splitlines()] == texts
