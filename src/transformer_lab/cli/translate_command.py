"""``transformer-lab translate --checkpoint DIR "Ein Mann fährt Fahrrad."``: sentences, stdin or a file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_lab.cli.decode_options import add_decode_arguments, input_lines, with_decode_arguments
from transformer_lab.tasks import translation


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("translate", help="translate sentences with a translation checkpoint")
    parser.add_argument("sentences", nargs="*", help="sentences to translate (none: read stdin, one per line)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder (e.g. runs/NAME/best)")
    parser.add_argument("--input", type=Path, default=None, help="translate every line of this UTF-8 file")
    add_decode_arguments(parser)
    parser.add_argument("--plot-attention", type=Path, default=None, help="write a cross-attention heat map of the first sentence")
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    sentences = input_lines(arguments.sentences, arguments.input, purpose="translate")
    model, tokenizer, config = translation.load_translator(arguments.checkpoint)
    decode_config = with_decode_arguments(config.decode, arguments)
    for translated in translation.translate_sentences(model, tokenizer, sentences, decode_config):
        print(translated)
    if arguments.plot_attention is not None and sentences:
        from transformer_lab.lab.translation_attention import plot_translation_attention

        path = plot_translation_attention(model, tokenizer, sentences[0], decode_config, arguments.plot_attention)
        print(f"attention heat map: {path}", file=sys.stderr)
    return 0
