"""``transformer-lab translate --checkpoint DIR "Ein Mann fährt Fahrrad."``: sentences, stdin or a file."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from transformer_lab.cli.bounds import int_in
from transformer_lab.cli.decode_options import (
    add_decode_arguments,
    command_precision,
    input_lines,
    with_decode_arguments,
)
from transformer_lab.data import TokenizerPair
from transformer_lab.decoding import DecodeConfig, decoding_model
from transformer_lab.decoding.config import MAX_BEAM_SIZE
from transformer_lab.models import Seq2SeqTransformer
from transformer_lab.tasks import translation


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("translate", help="translate sentences with a translation checkpoint")
    parser.add_argument("sentences", nargs="*", help="sentences to translate (none: read stdin, one per line)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint folder (e.g. runs/NAME/best)")
    parser.add_argument("--input", type=Path, default=None, help="translate every line of this UTF-8 file")
    add_decode_arguments(parser)
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
    sentences = input_lines(arguments.sentences, arguments.input, purpose="translate")
    model, tokenizer, config = translation.load_translator(arguments.checkpoint)
    precision = command_precision(arguments, config.decode.precision, model)
    decode_config = with_decode_arguments(config.decode, arguments, precision)
    model = decoding_model(model, precision)
    if arguments.nbest is not None:
        _print_nbest(model, tokenizer, sentences, decode_config, arguments.nbest, beam_given=arguments.beam is not None)
    else:
        for translated in translation.translate_sentences(model, tokenizer, sentences, decode_config):
            print(translated)
    if arguments.plot_attention is not None and sentences:
        from transformer_lab.lab.translation_attention import plot_translation_attention

        path = plot_translation_attention(model, tokenizer, sentences[0], decode_config, arguments.plot_attention)
        print(f"attention heat map: {path}", file=sys.stderr)
    return 0


def _print_nbest(
    model: Seq2SeqTransformer,
    tokenizer: TokenizerPair,
    sentences: list[str],
    decode_config: DecodeConfig,
    nbest: int,
    beam_given: bool,
) -> None:
    if nbest < 1:
        raise ValueError(f"--nbest: expected an int >= 1, got {nbest}")
    if beam_given and (decode_config.strategy != "beam" or decode_config.beam_size < nbest):
        raise ValueError(
            f"--nbest {nbest}: expected --beam of at least {nbest}, "
            f"got --beam {decode_config.beam_size if decode_config.strategy == 'beam' else 1}"
        )
    beam_size = max(nbest, decode_config.beam_size if decode_config.strategy == "beam" else 1)
    config = dataclasses.replace(decode_config, strategy="beam", beam_size=beam_size, num_return=nbest)
    for number, sentence in enumerate(sentences, start=1):
        if not sentence.strip():
            continue  # a blank sentence has no candidates, so no line; the numbers show the gap
        for rank, candidate in enumerate(translation.translate_nbest(model, tokenizer, sentence, config), start=1):
            print(f"{number}\t{rank}\t{candidate.score:.4f}\t{candidate.text}")
