"""``transformer-lab translate --checkpoint DIR "Ein Mann fährt Fahrrad."``: sentences, stdin or a file."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from transformer_lab.data import decode_lines, read_lines
from transformer_lab.tasks import translation


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("translate", help="translate sentences with a translation checkpoint")
    parser.add_argument("sentences", nargs="*", help="sentences to translate (none: read stdin, one per line)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder (e.g. runs/NAME/best)")
    parser.add_argument("--input", type=Path, default=None, help="translate every line of this UTF-8 file")
    parser.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy; default: the checkpoint's)")
    parser.add_argument("--plot-attention", type=Path, default=None, help="write a cross-attention heat map of the first sentence")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    if arguments.input is not None and arguments.sentences:
        raise ValueError("sentences: expected either sentences or --input, got both")
    if arguments.input is not None:
        sentences = read_lines(arguments.input)
        if not sentences:
            raise ValueError(f"--input: expected at least one line to translate, got the empty file {arguments.input}")
    elif arguments.sentences:
        sentences = list(arguments.sentences)
    else:
        # Bytes, decoded like a file, so that bad UTF-8 is reported with its line number
        # whatever the locale, and CRLF input gives the same sentences as LF.
        sentences = decode_lines(sys.stdin.buffer.read(), "stdin")
        if not sentences:
            raise ValueError("stdin: expected at least one line to translate, got none")
    model, tokenizer, config = translation.load_translator(arguments.checkpoint)
    decode_config = config.decode
    if arguments.beam is not None:
        if arguments.beam < 1:
            raise ValueError(f"--beam must be >= 1, got {arguments.beam}")
        decode_config = dataclasses.replace(
            decode_config, strategy="greedy" if arguments.beam == 1 else "beam", beam_size=max(arguments.beam, 1),
            num_return=1,
        )
    for translated in translation.translate_sentences(model, tokenizer, sentences, decode_config):
        print(translated)
    if arguments.plot_attention is not None and sentences:
        from transformer_lab.lab.translation_attention import plot_translation_attention

        path = plot_translation_attention(model, tokenizer, sentences[0], decode_config, arguments.plot_attention)
        print(f"attention heat map: {path}", file=sys.stderr)
    return 0
