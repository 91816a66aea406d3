"""Couplets from regulated verse: the form rule, the filters, the written split, the package reader, t2s."""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

from transformer_lab.data import regulated_verse
from transformer_lab.data.couplet import load_couplets
from transformer_lab.data.regulated_verse import (
    antithetical_couplets,
    extract_npm_package,
    filter_against,
    read_regulated_verse,
    to_simplified,
    verse_lines,
    write_couplet_files,
)
from transformer_lab.extras import MissingExtraError

# 杜甫《春望》, a five-character regulated verse, in simplified characters.
CHUN_WANG = [
    "国破山河在，城春草木深。",
    "感时花溅泪，恨别鸟惊心。",
    "烽火连三月，家书抵万金。",
    "白头搔更短，浑欲不胜簪。",
]
# 杜甫《登高》, a seven-character regulated verse.
DENG_GAO = [
    "风急天高猿啸哀，渚清沙白鸟飞回。",
    "无边落木萧萧下，不尽长江滚滚来。",
    "万里悲秋常作客，百年多病独登台。",
    "艰难苦恨繁霜鬓，潦倒新停浊酒杯。",
]
# 王之涣《登鹳雀楼》, a quatrain.
QUATRAIN = ["白日依山尽，黄河入海流。", "欲穷千里目，更上一层楼。"]


def test_a_five_character_regulated_verse_gives_its_second_and_third_couplets() -> None:
    # Lines 3-4 (颔联) and 5-6 (颈联); not 首联 (lines 1-2) nor 尾联 (7-8).
    assert antithetical_couplets(CHUN_WANG) == [("感时花溅泪", "恨别鸟惊心"), ("烽火连三月", "家书抵万金")]


def test_a_seven_character_regulated_verse_gives_its_second_and_third_couplets() -> None:
    assert antithetical_couplets(DENG_GAO) == [
        ("无边落木萧萧下", "不尽长江滚滚来"),
        ("万里悲秋常作客", "百年多病独登台"),
    ]


def test_the_couplets_do_not_depend_on_how_the_lines_are_grouped_in_paragraphs() -> None:
    one_paragraph = ["".join(DENG_GAO)]
    line_a_paragraph = [line for paragraph in DENG_GAO for line in paragraph.replace("，", "，\n").split("\n")]
    assert antithetical_couplets(one_paragraph) == antithetical_couplets(DENG_GAO)
    assert antithetical_couplets(line_a_paragraph) == antithetical_couplets(DENG_GAO)


def test_punctuation_is_stripped_whatever_the_mark() -> None:
    marks = ["国破山河在！城春草木深？", "感时花溅泪;恨别鸟惊心.", "烽火连三月、家书抵万金；", "白头搔更短,浑欲不胜簪!"]
    pairs = antithetical_couplets(marks)
    assert pairs == [("感时花溅泪", "恨别鸟惊心"), ("烽火连三月", "家书抵万金")]
    assert all(len(line) == 5 for pair in pairs for line in pair)
    assert verse_lines(["白日依山尽，黄河入海流", " 欲穷千里目 。"]) == ["白日依山尽", "黄河入海流", "欲穷千里目"]


@pytest.mark.parametrize(
    "paragraphs",
    [
        pytest.param(QUATRAIN, id="quatrain"),
        pytest.param(CHUN_WANG[:3] + ["白头搔更短。"], id="seven lines"),
        pytest.param(CHUN_WANG + QUATRAIN, id="twelve lines"),
        pytest.param(CHUN_WANG[:3] + ["白头搔更短，浑欲不胜簪子。"], id="mixed lengths"),
        pytest.param(["一二三四，五六七八。"] * 4, id="four-character lines"),
        pytest.param(CHUN_WANG[:2] + ["烽火连□月，家书抵万金。"] + CHUN_WANG[3:], id="damage marker"),
        pytest.param(CHUN_WANG[:2] + ["烽火连三月，家（书）金。"] + CHUN_WANG[3:], id="note in brackets"),
        pytest.param(CHUN_WANG[:3] + ["白{搔}短，浑欲不胜簪。"], id="component description"),
        pytest.param(CHUN_WANG[:3] + ["白头搔更短，浑欲不胜\ue829。"], id="private-use code point"),
        pytest.param(CHUN_WANG[:1] + ["感时花溅泪：恨别鸟惊心。"] + CHUN_WANG[2:], id="colon is no line break"),
        pytest.param([], id="empty"),
    ],
)
def test_anything_but_a_regulated_verse_by_form_gives_nothing(paragraphs: list[str]) -> None:
    assert antithetical_couplets(paragraphs) == []


def test_a_string_instead_of_paragraphs_is_an_error() -> None:
    with pytest.raises(ValueError, match="paragraphs: expected a sequence of strings"):
        antithetical_couplets("".join(CHUN_WANG))


def test_filter_against_drops_a_pair_by_either_line_and_counts_it() -> None:
    pairs = [("春风", "秋雨"), ("山高", "水长"), ("月明", "星稀"), ("花红", "柳绿")]
    kept, dropped = filter_against(pairs, {"春风", "水长"})
    assert kept == [("月明", "星稀"), ("花红", "柳绿")]
    assert dropped == 2
    assert filter_against(pairs, set()) == (pairs, 0)


def test_written_files_read_back_through_the_couplet_loader(tmp_path: Path) -> None:
    pairs = antithetical_couplets(CHUN_WANG) + antithetical_couplets(DENG_GAO)
    folder = write_couplet_files(pairs, tmp_path / "couplet" / "regulated_verse")
    assert folder == tmp_path / "couplet" / "regulated_verse"
    assert load_couplets("regulated_verse", tmp_path).pairs == pairs
    # The wb14123 form: characters separated by single spaces, a trailing space.
    assert (folder / "in.txt").read_text(encoding="utf-8").splitlines()[0] == "感 时 花 溅 泪 "
    assert (folder / "out.txt").read_bytes().count(b"\n") == len(pairs)
    assert sorted(path.name for path in tmp_path.joinpath("couplet").iterdir()) == ["regulated_verse"]


def test_writing_refuses_an_existing_folder_and_leaves_it_alone(tmp_path: Path) -> None:
    folder = tmp_path / "regulated_verse"
    folder.mkdir()
    (folder / "in.txt").write_text("旧 \n", encoding="utf-8")
    with pytest.raises(ValueError, match="out_dir: expected a new folder"):
        write_couplet_files([("春风", "秋雨")], folder)
    assert (folder / "in.txt").read_text(encoding="utf-8") == "旧 \n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["regulated_verse"]


@pytest.mark.parametrize("pair", [("春风", "秋"), ("", ""), ("春 风", "秋 雨"), ("春风",)])
def test_writing_refuses_a_pair_the_format_cannot_hold(tmp_path: Path, pair: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match=r"pairs\[1\]"):
        write_couplet_files([("山高", "水长"), pair], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary folder left behind


def write_package(root: Path, files: dict[str, list[dict[str, object]]]) -> Path:
    """A stand-in for the extracted npm package: `root/dist/quantangshi/<name>` holding each list of poems."""
    folder = root / "dist" / "quantangshi"
    folder.mkdir(parents=True)
    for name, poems in files.items():
        (folder / name).write_text(json.dumps(poems, ensure_ascii=False), encoding="utf-8")
    return root


def poem(paragraphs: list[str]) -> dict[str, object]:
    return {"author": "佚名", "title": "", "paragraphs": paragraphs, "id": "x"}


def test_the_package_reader_keeps_file_order_and_removes_duplicates(tmp_path: Path) -> None:
    pytest.importorskip("opencc")
    # Traditional characters, as in the package; 登高 is in two files, and the quatrain gives nothing.
    deng_gao = [
        "風急天高猿嘯哀，渚清沙白鳥飛回。",
        "無邊落木蕭蕭下，不盡長江滾滾來。",
        "萬里悲秋常作客，百年多病獨登臺。",
        "艱難苦恨繁霜鬢，潦倒新停濁酒杯。",
    ]
    chun_wang = [
        "國破山河在，城春草木深。",
        "感時花濺淚，恨別鳥驚心。",
        "烽火連三月，家書抵萬金。",
        "白頭搔更短，渾欲不勝簪。",
    ]
    package = write_package(
        tmp_path / "package",
        {
            "poet.tang.1000.json": [poem(deng_gao)],
            "poet.tang.0.json": [poem(chun_wang), poem(["白日依山盡，黃河入海流。", "欲窮千里目，更上一層樓。"])],
            "poet.song.0.json": [poem(deng_gao)],
            "authors.tang.json": [{"name": "杜甫"}],  # not a poem file: never read
        },
    )
    corpus = read_regulated_verse(package, ("tang", "song"))
    assert [path.name for path in corpus.files] == ["poet.tang.0.json", "poet.tang.1000.json", "poet.song.0.json"]
    assert corpus.pairs == antithetical_couplets(CHUN_WANG) + antithetical_couplets(DENG_GAO)
    assert (corpus.poems_read, corpus.regulated_poems, corpus.pairs_found) == (4, 3, 6)
    assert read_regulated_verse(package, ("song",)).pairs == antithetical_couplets(DENG_GAO)


def test_the_package_reader_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="a folder holding dist/"):
        read_regulated_verse(tmp_path)
    package = write_package(tmp_path / "package", {"poet.tang.0.json": [{"title": "no paragraphs"}]})
    with pytest.raises(ValueError, match=r"collections: expected names out of tang, song, got \['ming'\]"):
        read_regulated_verse(package, ("ming",))
    with pytest.raises(FileNotFoundError, match="collection 'song'"):
        read_regulated_verse(package, ("song",))
    with pytest.raises(ValueError, match=r"poet\.tang\.0\.json: poem 0: expected an object whose \"paragraphs\""):
        read_regulated_verse(package, ("tang",))


def test_t2s_maps_known_traditional_characters() -> None:
    pytest.importorskip("opencc")
    assert to_simplified("國門風") == "国门风"
    assert to_simplified("感時花濺淚") == "感时花溅泪"
    assert to_simplified("春风") == "春风"  # simplified text stays as it is


def test_t2s_without_opencc_names_the_data_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opencc", None)
    regulated_verse._t2s_converter.cache_clear()
    try:
        with pytest.raises(MissingExtraError, match=r'pip install -e "\.\[data\]"'):
            to_simplified("國")
    finally:
        regulated_verse._t2s_converter.cache_clear()


def make_tarball(path: Path, members: dict[str, bytes], link: str | None = None) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if link is not None:
            info = tarfile.TarInfo(link)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            archive.addfile(info)
    return path


def test_an_npm_tarball_extracts_its_package_folder(tmp_path: Path) -> None:
    tarball = make_tarball(
        tmp_path / "p.tgz", {"package/package.json": b"{}", "package/dist/quantangshi/poet.tang.0.json": b"[]"}
    )
    folder = extract_npm_package(tarball, tmp_path / "chinese-poetry")
    assert (folder / "dist" / "quantangshi" / "poet.tang.0.json").read_bytes() == b"[]"
    assert (folder / "package.json").read_bytes() == b"{}"
    with pytest.raises(ValueError, match="out_dir: expected a new folder"):
        extract_npm_package(tarball, folder)


@pytest.mark.parametrize(
    ("members", "link", "message"),
    [
        ({"package/../evil": b"x"}, None, "expected members under package/"),
        ({"other/file": b"x"}, None, "expected members under package/"),
        ({"package/a": b"x"}, "package/link", "expected only files and folders"),
    ],
)
def test_an_npm_tarball_with_anything_else_is_refused_and_nothing_is_left(
    tmp_path: Path, members: dict[str, bytes], link: str | None, message: str
) -> None:
    tarball = make_tarball(tmp_path / "p.tgz", members, link)
    with pytest.raises(ValueError, match=message):
        extract_npm_package(tarball, tmp_path / "out" / "chinese-poetry")
    assert list((tmp_path / "out").iterdir()) == []
    assert not (tmp_path / "evil").exists()
