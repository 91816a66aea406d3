"""``transformer-lab translate --checkpoint DIR "Ein Mann fährt Fahrrad."``: sentences, stdin or a file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer_lab.api import Translator
from transformer_lab.cli.bounds import int_in
from transformer_lab.cli.decode_options import add_decode_arguments, decode_keywords, input_lines
from transformer_lab.cli.device_option import add_device_argument, device_of
from transformer_lab.decoding.config import MAX_BEAM_SIZE


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("translate", help="translate sentences with a translation checkpoint")
    parser.add_argument("sentences", nargs="*", help="sentences to translate (none: read stdin, one per line)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder (e.g. runs/NAME/best)")
    parser.add_argument("--input", type=Path, default=None, help="translate every line of this UTF-8 file")
    add_decode_arguments(parser)
    add_device_argument(parser)
    parser.add_argument(
        "--nbest",
        type=int_in(1, MAX_BEAM_SIZE),
        default=None,
        metavar="K",
        help="print the K best translations of each sentence, one a line, tab-separated: the sentence's number "
        "(from 1), the rank (from 1), the score (log-probability / GNMT length penalty), the translation "
        "(beam search with at least K beams; default beam: max(K, the checkpoint's)); a blank sentence gets no line",
    )
    parser.add_argument(
        "--plot-attention", type=Path, default=None, help="write a cross-attention heat map of the first sentence"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    device = device_of(arguments)
    sentences = input_lines(arguments.sentences, arguments.input, purpose="translate")
    translator = Translator(arguments.checkpoint, device=device)
    settings = decode_keywords(arguments)
    if arguments.nbest is not None:
        found = translator.candidates(sentences, nbest=arguments.nbest, **settings)
        # A blank sentence has no candidates, so no line; the numbers show the gap.
        for number, candidates in enumerate(found, start=1):
            for rank, candidate in enumerate(candidates, start=1):
                print(f"{number}\t{rank}\t{candidate.score:.4f}\t{candidate.text}")
    else:
        for number, (sentence, translated) in enumerate(zip(sentences, translator.translate(sentences, **settings)), 1):
            print(translated)  # even when empty: line i of the output stays sentence i's
            if not translated:
                print(f"transformer-lab translate: input {number}: {_why_empty(sentence)}", file=sys.stderr)
    if arguments.plot_attention is not None and sentences:
        try:
            path = translator.plot_attention(sentences[0], arguments.plot_attention, **settings)
        except OSError as error:  # the translations are printed: only the figure is missing
            where = str(arguments.plot_attention)
            raise OSError(f"--plot-attention: could not write {where!r} ({error.strerror or error})") from error
        print(f"attention heat map: {path}", file=sys.stderr)
    return 0


def _why_empty(sentence: str) -> str:
    if not sentence.strip():
        return "the sentence is blank, so its translation is the empty line"
    # The model chose <eos> first: typical of a model trained briefly, not a failure of the command.
    return "the translation is empty (the model ended it at once: it may need more training, or try --beam 5)"
