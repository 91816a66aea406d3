"""Subword tokenization of text without spaces: the joint byte-level BPE on Chinese couplets.

Trains the project's joint byte-level BPE (``SubwordTokenizer.train_from_pairs``) on the
couplet training pairs (``couplet/train_couplet_machine/{in,out}.txt``) at several
vocabulary sizes, and scores the 4,000 wb14123 test pairs (``couplet/test/{in,out}.txt``).
The files separate characters by single spaces; the spaces are removed first, so the
tokenizer sees real Chinese text without spaces. For comparison it does the same for
Multi30k German/English (train.de + train.en for training, test_2016_flickr for scoring).

Reported per row, over all test lines of both sides:

- chars/token: characters (code points, spaces included for Multi30k) per subword token;
- bytes/token: UTF-8 bytes per token (a Chinese character is 3 bytes);
- tokens/line: mean subword tokens per line;
- unk rate: the share of ids equal to the unk id 1 (0 by construction for byte-level BPE:
  every byte is in the vocabulary);
- partial-char tokens: the share of tokens whose bytes are not whole UTF-8 characters
  (a byte-level token holding one or two bytes of a three-byte character);
- exact lines: the share of lines for which decode(encode(line)) == line;
- vocab 1 / n / part: how many vocabulary entries (specials left out) are one whole
  character, several whole characters, or not whole characters.

Also printed: the share of test characters never seen in the training text (the unknown
rate a character vocabulary of the training data would have).

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/tokenizer_report.py
        [--data-dir ~/data] [--sizes 4000 8000 16000] [--multi30k-size 8000]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from tokenizers import pre_tokenizers

from transformer_lab.data.subword import SubwordTokenizer
from transformer_lab.data.vocabulary import NUM_SPECIAL_TOKENS, UNK_ID
from transformer_lab.hardware import machine_summary

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def byte_decoder() -> dict[str, int]:
    """GPT-2's byte <-> printable-character table, inverted: symbol -> byte value."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    symbols = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in symbols:
            symbols[byte] = chr(256 + extra)
            extra += 1
    table = {symbol: byte for byte, symbol in symbols.items()}
    # The same alphabet as the tokenizer's own, or the partial-character count is wrong.
    assert set(table) == set(pre_tokenizers.ByteLevel.alphabet()), "byte-level alphabet differs from GPT-2's"
    return table


def read_lines(path: Path, remove_spaces: bool) -> list[str]:
    """The lines of a UTF-8 file; with `remove_spaces` every space is taken out."""
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.replace(" ", "") for line in lines] if remove_spaces else lines


def read_pairs(source: Path, target: Path, remove_spaces: bool) -> list[tuple[str, str]]:
    sources, targets = read_lines(source, remove_spaces), read_lines(target, remove_spaces)
    if len(sources) != len(targets):
        raise ValueError(f"expected aligned files, got {len(sources)} lines in {source} and {len(targets)} in {target}")
    return list(zip(sources, targets))


def score(tokenizer: SubwordTokenizer, lines: list[str], decoder: dict[str, int]) -> dict[str, float]:
    """The figures of one row (see the module docstring)."""
    encoded = tokenizer.encode_batch(lines)
    tokens = sum(len(ids) for ids in encoded)
    characters = sum(len(line) for line in lines)
    utf8_bytes = sum(len(line.encode("utf-8")) for line in lines)
    partial_ids: dict[int, bool] = {}
    partial = 0
    for ids in encoded:
        for token_id in ids:
            if token_id not in partial_ids:
                token = tokenizer.id_to_token(token_id)
                try:
                    bytes(decoder[symbol] for symbol in token).decode("utf-8")
                    partial_ids[token_id] = False
                except (UnicodeDecodeError, KeyError):
                    # KeyError: a special such as "<unk>" is not byte symbols; it is counted as unk.
                    partial_ids[token_id] = token_id != UNK_ID
            partial += partial_ids[token_id]
    exact = sum(tokenizer.decode(ids) == line for ids, line in zip(encoded, lines))
    return {
        "chars_per_token": characters / tokens,
        "bytes_per_token": utf8_bytes / tokens,
        "tokens_per_line": tokens / len(lines),
        "unk_rate": sum(ids.count(UNK_ID) for ids in encoded) / tokens,
        "partial_share": partial / tokens,
        "exact_share": exact / len(lines),
    }


def vocabulary_kinds(tokenizer: SubwordTokenizer, decoder: dict[str, int]) -> tuple[int, int, int]:
    """Entries (specials left out) that are one whole character, several, or a partial one."""
    single = multiple = partial = 0
    for token_id in range(NUM_SPECIAL_TOKENS, tokenizer.vocab_size):
        try:
            length = len(bytes(decoder[symbol] for symbol in tokenizer.id_to_token(token_id)).decode("utf-8"))
        except UnicodeDecodeError:
            partial += 1
            continue
        single += length == 1
        multiple += length > 1
    return single, multiple, partial


def unseen_character_share(train: list[tuple[str, str]], test_lines: list[str]) -> tuple[float, int]:
    """The share of test characters absent from the training text, and the training alphabet size."""
    seen = {character for pair in train for line in pair for character in line}
    test_characters = [character for line in test_lines for character in line]
    return sum(character not in seen for character in test_characters) / len(test_characters), len(seen)


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("TRANSFORMER_LAB_DATA", str(DEFAULT_DATA_DIR)),
        help="folder holding couplet/ and multi30k/ (default: $TRANSFORMER_LAB_DATA or ~/data)",
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[4000, 8000, 16000], help="couplet vocabulary sizes")
    parser.add_argument("--multi30k-size", type=int, default=8000, help="Multi30k vocabulary size (0: skip)")
    return parser.parse_args()


def main() -> None:
    arguments = parse_arguments()
    started = time.perf_counter()
    for line in machine_summary():
        print(line)
    data_dir = Path(arguments.data_dir)
    couplet = data_dir / "couplet"
    train = read_pairs(
        couplet / "train_couplet_machine" / "in.txt", couplet / "train_couplet_machine" / "out.txt", True
    )
    test = read_pairs(couplet / "test" / "in.txt", couplet / "test" / "out.txt", True)
    test_lines = [line for pair in test for line in pair]
    print(f"couplet: {len(train)} training pairs, {len(test)} test pairs ({len(test_lines)} lines), spaces removed")
    unseen, alphabet = unseen_character_share(train, test_lines)
    print(
        f"couplet: {alphabet} distinct characters in training; {unseen:.3%} of the test characters are "
        f"unseen in training (the unk rate of a character vocabulary)"
    )
    decoder = byte_decoder()
    runs = [("couplet zh", size, train, test_lines) for size in arguments.sizes]
    if arguments.multi30k_size:
        multi30k = data_dir / "multi30k"
        m_train = read_pairs(multi30k / "train.de", multi30k / "train.en", False)
        m_test = read_pairs(multi30k / "test_2016_flickr.de", multi30k / "test_2016_flickr.en", False)
        runs.append(("Multi30k de+en", arguments.multi30k_size, m_train, [line for pair in m_test for line in pair]))

    rows = []
    for name, size, pairs, lines in runs:
        begun = time.perf_counter()
        tokenizer = SubwordTokenizer.train_from_pairs(pairs, vocab_size=size)
        seconds = time.perf_counter() - begun
        figures = score(tokenizer, lines, decoder)
        rows.append(
            (name, size, tokenizer.vocab_size, seconds, len(lines), figures, vocabulary_kinds(tokenizer, decoder))
        )
        print(f"trained {name} at {size}: {tokenizer.vocab_size} entries in {seconds:.1f} s")

    print()
    print(
        "| text | vocab asked | vocab got | train s | test lines | chars/token | bytes/token | tokens/line "
        "| unk rate | partial-char tokens | exact lines | vocab 1 / n / part |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, size, got, seconds, count, figures, kinds in rows:
        print(
            f"| {name} | {size} | {got} | {seconds:.1f} | {count} | {figures['chars_per_token']:.2f} "
            f"| {figures['bytes_per_token']:.2f} | {figures['tokens_per_line']:.2f} | {figures['unk_rate']:.4f} "
            f"| {figures['partial_share']:.2%} | {figures['exact_share']:.2%} | {' / '.join(map(str, kinds))} |"
        )
    print(f"\ntotal time: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
