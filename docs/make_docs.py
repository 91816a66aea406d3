"""Regenerate the generated parts of docs/architecture.md and docs/masks.md, and docs/figures/.

Usage (from the repository root, with the package installed)::

    python docs/make_docs.py            # everything, about two minutes on a laptop CPU
    python docs/make_docs.py --check    # fail if a generated block would change (no training)

The prose of the two pages is written by hand; every block between
``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->`` is rewritten here
from the output of the ``transformer-lab`` commands shown in the block (or, for the tables
of the package, from the package itself), so that what the docs say stays what the code
does. Every figure is written by the ``transformer-lab plot`` command printed beside it;
the attention figure and the training curve come from a short ``transformer-lab train
reverse`` run into a temporary folder. The tutorial's architecture figure is drawn by
:func:`transformer_lab.lab.architecture_figure.plot_architecture`.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
FIGURES = DOCS / "figures"
PACKAGE = ROOT / "src" / "transformer_lab"
MAX_FIGURE_BYTES = 200_000

# The training run behind the attention figure and the training curve (about a minute).
TRAIN_ARGUMENTS = ["train", "reverse", "--set", "train.progress_bar=false", "--set", "train.eval_every_steps=100"]

# Where each idea of the paper lives; every path is imported and checked when the page is made.
CONCEPTS: list[tuple[str, list[str]]] = [
    (
        "Scaled dot-product attention, softmax(QK^T / sqrt(d_k)) V",
        ["transformer_lab.nn.attention.explicit_attention"],
    ),
    ("Multi-head attention (project, split heads, merge, W_o)", ["transformer_lab.nn.MultiheadAttention"]),
    ("Look-ahead (causal) mask", ["transformer_lab.nn.masks.causal_mask"]),
    (
        "Key padding mask (True = padding)",
        ["transformer_lab.nn.masks.padding_mask", "transformer_lab.nn.masks.lengths_to_padding_mask"],
    ),
    (
        "Masks combined; a fully hidden row gives zeros, not NaN",
        ["transformer_lab.nn.masks.merge_masks", "transformer_lab.nn.masks.fully_hidden_rows"],
    ),
    (
        "Position-wise feed-forward, residual + LayerNorm (post-norm; pre-norm with norm_first)",
        ["transformer_lab.nn.TransformerEncoderLayer", "transformer_lab.nn.TransformerDecoderLayer"],
    ),
    ("Encoder stack, N layers", ["transformer_lab.nn.TransformerEncoder"]),
    (
        "Decoder stack: masked self-attention, then cross-attention to the memory",
        ["transformer_lab.nn.TransformerDecoder"],
    ),
    ("Encoder-decoder", ["transformer_lab.nn.Transformer"]),
    ("Embeddings multiplied by sqrt(d_model)", ["transformer_lab.models.embedding.TokenEmbedding"]),
    ("Sinusoidal positional encoding", ["transformer_lab.models.embedding.SinusoidalPositionalEncoding"]),
    (
        "Shared embedding / pre-softmax weights, the generator to logits",
        ["transformer_lab.models.Seq2SeqTransformer", "transformer_lab.models.ModelConfig"],
    ),
    ("Teacher forcing: decoder input `<bos> y`, output `y <eos>`", ["transformer_lab.data.collate_pairs"]),
    ("Batches by token count", ["transformer_lab.data.token_budget_batches"]),
    ("Label smoothing (epsilon_ls = 0.1), padding ignored", ["transformer_lab.training.label_smoothed_cross_entropy"]),
    ("Adam, beta = (0.9, 0.98), epsilon = 1e-9", ["transformer_lab.training.build_optimizer"]),
    (
        "Warm-up, then inverse square root learning rate",
        ["transformer_lab.training.noam_lr", "transformer_lab.training.build_noam_scheduler"],
    ),
    (
        "Training loop, checkpoints, metrics log",
        ["transformer_lab.training.Trainer", "transformer_lab.training.save_checkpoint"],
    ),
    ("Key/value cache for incremental decoding", ["transformer_lab.nn.DecoderCache"]),
    (
        "Greedy decoding; beam search with length penalty",
        ["transformer_lab.decoding.greedy_search", "transformer_lab.decoding.beam_search"],
    ),
    ("Averaging the last checkpoints", ["transformer_lab.training.averaging"]),
    ("BLEU", ["transformer_lab.evaluation.bleu"]),
    (
        "Attention weights of a trained model",
        ["transformer_lab.models.attention_maps.attention_maps", "transformer_lab.lab.figures.plot_attention"],
    ),
    ("The tutorials' mask claims, executable", ["transformer_lab.lab.mask_experiments"]),
]


def run_cli(arguments: list[str], check: bool = True) -> str:
    """Run ``transformer-lab ARGUMENTS`` in a fresh process; return its standard output."""
    environment = dict(os.environ)
    # The models here are tiny; many threads on a busy machine only fight each other.
    environment.setdefault("OMP_NUM_THREADS", "1")
    completed = subprocess.run(
        [sys.executable, "-m", "transformer_lab", *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
    )
    if check and completed.returncode != 0:
        raise SystemExit(
            f"transformer-lab {' '.join(arguments)} failed with exit code {completed.returncode}:\n{completed.stderr}"
        )
    return completed.stdout


def command_text(arguments: list[str]) -> str:
    return "transformer-lab " + " ".join(arguments)


def code_block(text: str, language: str = "text") -> str:
    return f"```{language}\n{text.rstrip()}\n```"


def figure_block(arguments: list[str], image: str, caption: str) -> str:
    """Draw a figure with ``transformer-lab plot`` and return its markdown (image + command)."""
    run_cli(arguments)
    size = (FIGURES / image).stat().st_size
    if size > MAX_FIGURE_BYTES:
        raise SystemExit(f"docs/figures/{image} is {size} bytes; keep figures under {MAX_FIGURE_BYTES} (lower --dpi)")
    shown = [
        argument if not argument.startswith(str(ROOT)) else os.path.relpath(argument, ROOT) for argument in arguments
    ]
    alternative = caption.replace("`", "")
    return f"![{alternative}](figures/{image})\n\n{caption}. Drawn by:\n\n" + code_block(command_text(shown), "bash")


def replace_block(text: str, name: str, content: str, page: str) -> str:
    pattern = re.compile(
        rf"(<!-- BEGIN GENERATED: {re.escape(name)} [^\n]*-->\n).*?(<!-- END GENERATED: {re.escape(name)} -->)",
        re.DOTALL,
    )
    if not pattern.search(text):
        raise SystemExit(f"{page}: expected the markers of the generated block {name!r}")
    return pattern.sub(lambda match: match.group(1) + content.rstrip() + "\n" + match.group(2), text)


# ----------------------------------------------------------------------------------------
# architecture.md
# ----------------------------------------------------------------------------------------
def model_path_table() -> str:
    """Every module a token batch passes through in Seq2SeqTransformer, with its output shape."""
    from transformer_lab.models import ModelConfig, Seq2SeqTransformer
    from transformer_lab.nn import masks

    sizes = {"B": 2, "S": 6, "T": 5, "D": 32, "H": 4, "F": 64, "V": 14}
    names = {value: key for key, value in sizes.items() if key != "H"}
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=sizes["V"],
        tgt_vocab_size=sizes["V"],
        d_model=sizes["D"],
        nhead=sizes["H"],
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=sizes["F"],
        dropout=0.0,
        max_len=16,
    )
    model = Seq2SeqTransformer.from_config(config).eval()
    src_ids = torch.tensor([[4, 5, 6, 7, 8, 9], [4, 5, 6, 0, 0, 0]])  # [B, S], the second padded
    tgt_in_ids = torch.tensor([[2, 9, 8, 7, 6], [2, 6, 5, 0, 0]])  # [B, T]

    def shape_text(shape: torch.Size) -> str:
        return "[" + ", ".join(f"{names.get(size, size)}={size}" for size in shape) + "]"

    rows: list[tuple[str, str, str]] = [
        ("src_ids", "token ids, right-padded with pad_id 0", shape_text(src_ids.shape)),
        ("tgt_in_ids", "`<bos>` + target, right-padded", shape_text(tgt_in_ids.shape)),
        (
            "masks.padding_mask(src_ids)",
            "source key padding mask, True = padding",
            shape_text(masks.padding_mask(src_ids, 0).shape),
        ),
        (
            "masks.causal_mask(T)",
            "target mask, True = future",
            shape_text(masks.causal_mask(tgt_in_ids.shape[1]).shape),
        ),
    ]
    described = {
        "src_embedding": "source token vectors x sqrt(D)",
        "tgt_embedding": "target token vectors x sqrt(D)",
        "positional_encoding": "+ sinusoidal positions, dropout",
        "transformer.encoder.layers.0.self_attn": "encoder self-attention (padding keys hidden)",
        "transformer.encoder.layers.0.linear1": "feed-forward, first linear (then ReLU)",
        "transformer.encoder.layers.0.linear2": "feed-forward, second linear",
        "transformer.encoder.layers.0": "encoder layer output (after residual + LayerNorm)",
        "transformer.encoder": "memory, read by every decoder layer",
        "transformer.decoder.layers.0.self_attn": "masked self-attention (causal mask)",
        "transformer.decoder.layers.0.multihead_attn": (
            "cross-attention: queries from the target, keys/values from the memory"
        ),
        "transformer.decoder.layers.0.linear1": "feed-forward, first linear",
        "transformer.decoder.layers.0.linear2": "feed-forward, second linear",
        "transformer.decoder.layers.0": "decoder layer output",
        "transformer.decoder": "decoder output",
        "generator": "logits over the target vocabulary",
    }
    modules = dict(model.named_modules())
    handles = []

    def hook_for(name: str):
        def hook(module: torch.nn.Module, inputs: object, output: object) -> None:
            tensor = output[0] if isinstance(output, tuple) else output
            rows.append((name, described[name], shape_text(tensor.shape)))

        return hook

    for name in described:
        handles.append(modules[name].register_forward_hook(hook_for(name)))
    with torch.no_grad():
        model(src_ids, tgt_in_ids)
    for handle in handles:
        handle.remove()
    legend = ", ".join(f"{key}={value}" for key, value in sizes.items())
    lines = [
        f"Sizes: {legend} (H heads of size D/H = {sizes['D'] // sizes['H']}; F = dim_feedforward). "
        "One layer per stack; with N layers the layer rows repeat N times.",
        "",
        "| step | what it is | shape |",
        "|---|---|---|",
    ]
    lines += [f"| `{name}` | {words} | `{shape}` |" for name, words, shape in rows]
    return "\n".join(lines)


def package_map() -> str:
    """One row per module of the package: its path and the first line of its docstring."""
    lines = ["| module | what it holds |", "|---|---|"]
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        elif parts[-1].startswith("_") and parts[-1] != "__main__":
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        first_paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
        lines.append(f"| `{'.'.join(parts)}` | {markdown_text(first_paragraph)} |")
    return "\n".join(lines)


def markdown_text(text: str) -> str:
    """Text for a table cell: ``|`` and, outside code spans, ``<`` ``>`` escaped (not HTML)."""
    pieces = re.split(r"(`+[^`]*`+)", text.replace("|", "\\|"))
    return "".join(
        piece if piece.startswith("`") else piece.replace("<", "&lt;").replace(">", "&gt;") for piece in pieces
    )


def resolve(dotted: str) -> object:
    """Import ``dotted`` (a module, or a module then attributes); SystemExit if it does not exist."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            if not hasattr(target, attribute):
                raise SystemExit(f"concept table: {dotted} does not exist (no {attribute!r})")
            target = getattr(target, attribute)
        return target
    raise SystemExit(f"concept table: {dotted} does not exist")


def concept_table() -> str:
    lines = ["| concept (paper) | where in the code |", "|---|---|"]
    for concept, paths in CONCEPTS:
        for path in paths:
            resolve(path)
        lines.append(f"| {concept} | {', '.join(f'`{path}`' for path in paths)} |")
    return "\n".join(lines)


def architecture_blocks(run_folder: Path | None, draw_figures: bool = True) -> dict[str, str]:
    """The generated blocks of architecture.md; figures only with ``draw_figures``."""
    explain = [
        "explain",
        "--full",
        "--d-model",
        "32",
        "--nhead",
        "4",
        "--src-len",
        "6",
        "--tgt-len",
        "5",
        "--batch",
        "2",
    ]
    blocks = {
        "model-path": model_path_table(),
        "explain-full": code_block("$ " + command_text(explain) + "\n" + run_cli(explain)),
        "package-map": package_map(),
        "concepts": concept_table(),
    }
    if not draw_figures:
        return blocks
    blocks |= {
        "figure-positions": figure_block(
            ["plot", "positions", "--out", str(FIGURES / "positions.png"), "--dpi", "80"],
            "positions.png",
            "The sinusoidal positional encoding table (d_model 128, 100 positions) and four of its sine dimensions",
        ),
        "figure-lr-schedule": figure_block(
            ["plot", "lr-schedule", "--out", str(FIGURES / "lr-schedule.png"), "--dpi", "80"],
            "lr-schedule.png",
            "The learning rate for (d_model, warmup) = (512, 4000), (512, 8000), (256, 4000)",
        ),
    }
    if run_folder is not None:
        train = TRAIN_ARGUMENTS + ["--out", "RUN"]
        blocks["figure-attention"] = figure_block(
            [
                "plot",
                "attention",
                "--checkpoint",
                str(run_folder / "best"),
                "--out",
                str(FIGURES / "attention.png"),
                "--dpi",
                "70",
            ],
            "attention.png",
            "Every head of every layer of a model trained on the reverse task, reading 6 symbols and writing "
            "their reverse (greedy); the checkpoint comes from `" + command_text(train) + "`",
        ).replace(str(run_folder), "RUN")
        blocks["figure-training-curve"] = figure_block(
            [
                "plot",
                "training-curve",
                "--metrics",
                str(run_folder / "metrics.jsonl"),
                "--out",
                str(FIGURES / "training-curve.png"),
                "--dpi",
                "80",
            ],
            "training-curve.png",
            "Training loss, learning rate and validation metrics of that run",
        ).replace(str(run_folder), "RUN")
    return blocks


# ----------------------------------------------------------------------------------------
# masks.md
# ----------------------------------------------------------------------------------------
LAB_EXPERIMENTS = ("tgt-padding-mask", "encoder-row-mask", "decoder-rows", "key-padding-polarity")


def masks_blocks(draw_figures: bool = True) -> dict[str, str]:
    """The generated blocks of masks.md; the figure only with ``draw_figures``."""
    blocks: dict[str, str] = {}
    if draw_figures:
        blocks["figure-masks"] = figure_block(
            ["plot", "masks", "--out", str(FIGURES / "masks.png"), "--dpi", "80"],
            "masks.png",
            "The causal mask, a key padding mask (4 real tokens, 2 pads), the two combined (what torch users "
            "pass to the decoder's self-attention, where the causal mask already hides the pads on the right), "
            "and padded rows hidden as well; dark = True = hidden",
        )
    for name in LAB_EXPERIMENTS:
        arguments = ["lab", name]
        blocks[f"lab-{name}"] = code_block("$ " + command_text(arguments) + "\n" + run_cli(arguments))
    return blocks


def write_page(page: Path, blocks: dict[str, str], check: bool) -> bool:
    """Fill ``blocks`` into ``page``; with ``check`` only report whether it would change."""
    text = page.read_text(encoding="utf-8")
    new_text = text
    for name, content in blocks.items():
        new_text = replace_block(new_text, name, content, page.name)
    if check:
        return new_text == text
    page.write_text(new_text, encoding="utf-8")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="only compare the text blocks (no figures, no training); exit 1 if stale"
    )
    parser.add_argument(
        "--text-only", action="store_true", help="rewrite only the text blocks (no figures, no training)"
    )
    arguments = parser.parse_args()
    if arguments.check or arguments.text_only:
        check = not arguments.text_only
        fresh = write_page(DOCS / "architecture.md", architecture_blocks(None, draw_figures=False), check)
        fresh = write_page(DOCS / "masks.md", masks_blocks(draw_figures=False), check) and fresh
        if check:
            print("docs are up to date" if fresh else "docs are out of date: run python docs/make_docs.py")
        return 0 if fresh else 1
    FIGURES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as temporary:
        run_folder = Path(temporary) / "run"
        print(f"training the reverse task into {run_folder} (about a minute) ...", flush=True)
        run_cli(TRAIN_ARGUMENTS + ["--out", str(run_folder)])
        write_page(DOCS / "architecture.md", architecture_blocks(run_folder), False)
    write_page(DOCS / "masks.md", masks_blocks(), False)
    # The tutorial's picture of the whole model, linked from its chapters (no page block).
    from transformer_lab.lab.architecture_figure import plot_architecture

    plot_architecture(FIGURES / "architecture.png")
    for image in sorted(FIGURES.glob("*.png")):
        print(f"{image.relative_to(ROOT)}: {image.stat().st_size // 1000} KB")
    print("wrote docs/architecture.md and docs/masks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
