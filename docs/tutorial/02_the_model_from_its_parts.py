# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2. The model from its parts
#
# Chapter 1 looked inside one attention call. This chapter assembles the whole encoder-decoder
# around it, one part at a time, in the order of chapter 0's
# [architecture figure](../figures/architecture.png), from the bottom up, and checks each part
# against what the paper says: token
# embeddings scaled by `sqrt(d_model)`, the sinusoidal positional table, the position-wise
# feed-forward network, encoder and decoder layers and their stacks, post-norm against pre-norm,
# the generator, and Xavier initialisation. It ends with the strongest check the library offers:
# loaded with the same weights, our `Transformer` and `torch.nn.Transformer` compute the same
# numbers.
#
# The modules in `transformer_lab.nn` are twins of PyTorch's: same class names, same constructor
# and forward arguments, same parameter names. `transformer_lab.models` adds what an application
# needs around them. Runs in a few seconds.

# %%
import math
import warnings

import torch

from transformer_lab import nn as lab
from transformer_lab.models import ModelConfig, Seq2SeqTransformer, SinusoidalPositionalEncoding, TokenEmbedding

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## Embeddings times sqrt(d_model)
#
# A token id becomes a vector by table lookup. The paper multiplies that vector by
# `sqrt(d_model)`. `Seq2SeqTransformer` initialises the table with Xavier, which gives small
# entries: for a `[V, d_model]` table their standard deviation is `sqrt(2 / (V + d_model))`,
# about 0.016 for the translation preset (V 8,000, d_model 256). The positional encoding added
# next has entries between -1 and 1 (root mean square 0.71). Scaling by sqrt(256) = 16 brings the
# embeddings to about 0.25, the same order of size as the positions, so that neither drowns the other. A
# `TokenEmbedding` built alone, as below, keeps torch's default entries (drawn from N(0, 1)); only
# the ratio matters here.

# %%
embedding = TokenEmbedding(vocab_size=10, d_model=16)
token_ids = torch.tensor([[4, 5, 6]])  # [B, T]
with torch.no_grad():
    scaled = embedding(token_ids)  # [B, T, D]
    looked_up = embedding.embedding(token_ids)  # the plain table
print("scale:", embedding.scale, "= sqrt(16)")
print("scaled / looked up:", (scaled / looked_up)[0, 0, :4])

# %% [markdown]
# Every ratio is 4.0, the square root of 16.
#
# The modules below take a `dropout=` probability, set to 0.0 in this chapter. **Dropout** is a
# regulariser used while training: each activation it is applied to is zeroed with that
# probability and the others are scaled by `1 / (1 - p)`; in eval mode (`model.eval()`) it does
# nothing. The paper uses 0.1.
#
# ## The positional table
#
# Attention itself is blind to order: permute the keys and the weights permute with them. The
# model learns order from a table added to the embeddings. Dimension `2i` of position `pos` holds
# `sin(pos / 10000^(2i/d_model))`, dimension `2i+1` the cosine of the same angle. The first
# dimensions turn fast, the last ones slowly, so every position gets a distinct pattern, and the
# pattern of `pos + k` is a fixed linear function of that of `pos`.

# %%
from pathlib import Path

from transformer_lab.lab.figures import plot_positions
from transformer_lab.lab.plotting import show_figure

positions = SinusoidalPositionalEncoding(d_model=16, max_len=50, dropout=0.0)
table = positions.table  # [max_len, D]
print("table", tuple(table.shape), "position 0:", table[0, :6])
print("PE[3, 0] = sin(3) =", round(math.sin(3), 4), "->", round(float(table[3, 0]), 4))

figures = Path("runs/tutorial-figures")
print("figure:", show_figure(plot_positions(figures / "positions.png", max_len=100, d_model=128)))

# %% [markdown]
# Position 0 alternates 0 and 1 (sin 0 and cos 0), and entry `[3, 0]` is `sin(3)`. In the figure
# (d_model 128, 100 positions) the left columns change colour quickly down the positions and the
# right columns hardly at all; on the right, four dimensions as curves, their wavelengths growing
# with the dimension.
#
# ## The position-wise feed-forward network
#
# After attention, each position passes on its own through two linear maps with a ReLU between
# them: `linear2(relu(linear1(x)))`, from `d_model` to `dim_feedforward` (2,048 in the paper, four
# times 512) and back. "Position-wise" means the same weights at every position, and no position
# sees another. That can be checked: change one position's input and only that position's output
# changes.

# %%
layer = lab.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=64, dropout=0.0)
x = torch.randn(5, 1, 16)  # [T, B, D]
feed_forward = lambda inputs: layer.linear2(torch.relu(layer.linear1(inputs)))  # noqa: E731
changed = x.clone()
changed[2] += 1.0
with torch.no_grad():
    moved = (feed_forward(changed) - feed_forward(x)).abs().amax(dim=(1, 2))  # [T]
print("linear1", tuple(layer.linear1.weight.shape), "linear2", tuple(layer.linear2.weight.shape))
print("change per position after changing position 2:", moved)

# %% [markdown]
# Only position 2 moved; the others are exactly 0.
#
# ## Encoder and decoder layers
#
# An encoder layer is two sublayers, self-attention and feed-forward, each wrapped in a residual
# connection and a layer norm. A decoder layer has three: masked self-attention, cross-attention
# over the encoder's output, and feed-forward. Printing a decoder layer shows its parts under
# PyTorch's names (`self_attn`, `multihead_attn`, `linear1`, `linear2`, `norm1..3`,
# `dropout1..3`).

# %%
model = lab.Transformer(
    d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=64, dropout=0.0
)
print(model.decoder.layers[0])

# %% [markdown]
# ## Every decoder layer reads the same memory
#
# The encoder runs once; its output, the *memory*, goes to the cross-attention of **every**
# decoder layer, not only the first. A hook on each cross-attention records the keys it was
# handed.

# %%
handed = {}
for number, decoder_layer in enumerate(model.decoder.layers):
    decoder_layer.multihead_attn.register_forward_hook(
        lambda module, args, output, number=number: handed.__setitem__(number, args[1])
    )
source = torch.randn(7, 2, 32)  # [S, B, D]
target = torch.randn(5, 2, 32)  # [T, B, D]
with torch.no_grad():
    model(source, target, tgt_mask=lab.causal_mask(5))
    memory = model.encoder(source)  # [S, B, D]
for number, keys in handed.items():
    print(f"decoder layer {number}: keys {tuple(keys.shape)}, the encoder's memory: {torch.equal(keys, memory)}")

# %% [markdown]
# All three layers say `True`: the same `[7, 2, 32]` tensor.
#
# ## Post-norm against pre-norm
#
# The paper normalises after the residual sum: `x = norm(x + sublayer(x))` (post-norm,
# `norm_first=False`, the default here and in PyTorch). The Annotated Transformer normalises
# before the sublayer: `x = x + sublayer(norm(x))` (pre-norm, `norm_first=True`), and adds one
# final norm after the stack. Pre-norm trains more stably in deep stacks; post-norm is the
# paper's. The difference shows in what flows between layers: post-norm hands each layer a
# normalised vector, pre-norm lets the residual stream grow. The `Transformer` class, here as in
# PyTorch, ends each stack on one final norm whatever `norm_first` says: needed after pre-norm,
# one more normalisation of an already normalised output after post-norm (the paper's stack has
# none). Exercise 2 counts its parameters.

# %%
for norm_first in (False, True):
    torch.manual_seed(0)
    stack = lab.TransformerEncoder(
        lab.TransformerEncoderLayer(32, 4, 64, dropout=0.0, norm_first=norm_first), num_layers=6
    )
    hidden = torch.randn(7, 2, 32)
    sizes = []
    with torch.no_grad():
        for encoder_layer in stack.layers:
            hidden = encoder_layer(hidden)
            sizes.append(round(float(hidden.std(dim=-1).mean()), 2))
    print(f"norm_first={norm_first!s:<5}  std of each layer's output: {sizes}")

# %% [markdown]
# With post-norm every layer's output has a standard deviation of about 1; with pre-norm it grows
# from layer to layer (which is why the pre-norm stack needs its final norm).
#
# ## The generator and Xavier initialisation
#
# `Seq2SeqTransformer` puts it all together: the two embeddings, the positional table, the
# `Transformer`, and the **generator**, one linear map from `d_model` to the target vocabulary.
# It returns logits; the log-softmax that the Annotated Transformer's `Generator` applies is taken
# inside the loss (chapter 3), which is more accurate in floating point. Every matrix is
# initialised with Xavier's uniform rule, whose standard deviation is
# `sqrt(2 / (fan_in + fan_out))`.

# %%
config = ModelConfig(
    src_vocab_size=100,
    tgt_vocab_size=100,
    d_model=32,
    nhead=4,
    num_encoder_layers=2,
    num_decoder_layers=2,
    dim_feedforward=64,
)
seq2seq = Seq2SeqTransformer.from_config(config)
print("generator:", seq2seq.generator)
print("parameters:", sum(parameter.numel() for parameter in seq2seq.parameters()))
weight = seq2seq.transformer.encoder.layers[0].linear1.weight.detach()  # [dim_feedforward, D]
print(
    f"linear1 std {float(weight.std()):.4f} against Xavier's {math.sqrt(2 / (weight.shape[0] + weight.shape[1])):.4f}"
)
source_ids = torch.tensor([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])  # [B, S], 0 = <pad>, 3 = <eos>
target_in_ids = torch.tensor([[2, 5, 6, 7], [2, 8, 9, 0]])  # [B, T], 2 = <bos>
with torch.no_grad():
    logits = seq2seq.eval()(source_ids, target_in_ids)  # [B, T, V]
print("logits:", tuple(logits.shape), "= [batch, target length, vocabulary]")

# %% [markdown]
# The measured standard deviation sits close to Xavier's, and the model maps `[2, 5]` source ids
# and `[2, 4]` target ids to `[2, 4, 100]` logits. `Seq2SeqTransformer` builds the masks itself
# from the ids: the source key padding mask for the encoder and for every cross-attention, the
# causal mask for the decoder, and no target key padding mask (chapter 4 shows why none is
# needed).
#
# ## The twin check
#
# The last check is the strongest. Build `torch.nn.Transformer`, load its `state_dict` into ours
# with `strict=True` (every parameter name must match), and run both on the same batch with the
# same masks, padding included.

# %%
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # torch's note on its nested-tensor fast path, unused here
    reference = torch.nn.Transformer(
        d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=64, dropout=0.0
    )
model.load_state_dict(reference.state_dict(), strict=True)
model.eval()
reference.eval()

source_padding = lab.lengths_to_padding_mask(torch.tensor([7, 5]), 7)  # [B, S], True = padding
masks = dict(tgt_mask=lab.causal_mask(5), src_key_padding_mask=source_padding, memory_key_padding_mask=source_padding)
with torch.no_grad():
    ours = model(source, target, **masks)  # [T, B, D]
    theirs = reference(source, target, **masks)
twin_difference = float((ours - theirs).abs().max())
print(f"twin check: max |ours - torch.nn.Transformer| = {twin_difference:.2e}")
assert twin_difference < 1e-5

# %% [markdown]
# The largest difference is under `1e-5` (often exactly 0: the two add the same numbers in the
# same order). The library's tests run this check for every module, in both layouts, with every
# kind of mask; [docs/architecture.md](../architecture.md) follows one batch through the model with the shape of every
# tensor.
#
# ## Summary
#
# - Token embeddings are multiplied by `sqrt(d_model)` so that they and the positional table
#   (entries in [-1, 1]) are of the same size.
# - The sinusoidal table gives each position a distinct pattern of sines and cosines, fast in
#   the first dimensions and slow in the last.
# - The feed-forward network acts on each position alone; encoder layers have two sublayers,
#   decoder layers three, each with a residual connection and a layer norm.
# - Every decoder layer reads the same memory. Post-norm (the paper's) keeps the signal between
#   layers normalised; pre-norm lets it grow and needs a final norm.
# - The generator maps each decoder position to logits over the vocabulary; Xavier initialises
#   the matrices; and with the same weights our `Transformer` computes what
#   `torch.nn.Transformer` computes.
#
# ## Exercises
#
# 1. **Relative positions.** The paper chose sinusoids because `PE[pos + k]` is a linear
#    function of `PE[pos]`, the same for every `pos`. For `k = 5`, build that function from the
#    frequencies (each pair of dimensions `(2i, 2i+1)` turns by the angle `k * w_i`) and check it
#    on the table of `positions`.
# 2. **Counting parameters.** Write the number of parameters of an encoder layer and of a
#    decoder layer as formulas in `d_model` and `dim_feedforward`, check them against `model`
#    (the `lab.Transformer` above), and use them to count the paper's base model (d_model 512,
#    dim_feedforward 2,048, 6 + 6 layers, embeddings left out).
# 3. **The final norm of a pre-norm stack.** Give the pre-norm stack of six layers a final
#    `LayerNorm` (`norm=` in `TransformerEncoder`): what is the standard deviation of its output?
#
# ## Solutions
#
# Try the exercises first. In Jupyter the solution cells are collapsed: click the bar to open
# one. Each prints its finding; the tests check these lines.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 1: PE[pos + k] = R_k PE[pos], where R_k turns each (sin, cos) pair by the angle k * w_i.
k = 5
frequencies = 1.0 / 10000 ** (torch.arange(0, 16, 2) / 16)  # [D/2], w_i of the pair (2i, 2i+1)
sin_k, cos_k = torch.sin(k * frequencies), torch.cos(k * frequencies)  # [D/2]
now_sin, now_cos = table[:-k, 0::2], table[:-k, 1::2]  # [max_len - k, D/2] each
later = torch.empty_like(table[k:])  # [max_len - k, D]
later[:, 0::2] = now_sin * cos_k + now_cos * sin_k  # sin(a + b) = sin a cos b + cos a sin b
later[:, 1::2] = now_cos * cos_k - now_sin * sin_k  # cos(a + b) = cos a cos b - sin a sin b
print(
    f"exercise 1: max |R_5 PE[pos] - PE[pos + 5]| over {table.shape[0] - k} positions = "
    f"{float((later - table[k:]).abs().max()):.1e}"
)

# %% [markdown]
# Each pair of dimensions is a point on a circle that turns at its own speed as the position
# grows, so moving `k` positions is a rotation of each pair by a fixed angle, whatever `pos` is:
# a linear map attention can learn to use for "the word `k` places back". The difference is
# float rounding.


# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: parameters of a layer, as formulas.
def encoder_layer_parameters(d, f):
    attention = 4 * d * d + 4 * d  # W_q, W_k, W_v, W_o and their biases
    feed_forward = 2 * d * f + f + d  # linear1 and linear2 with biases
    return attention + feed_forward + 2 * 2 * d  # two layer norms, each a weight and a bias


def decoder_layer_parameters(d, f):
    return encoder_layer_parameters(d, f) + 4 * d * d + 4 * d + 2 * d  # cross-attention and a third norm


def transformer_parameters(d, f, encoder_layers, decoder_layers):
    final_norms = 2 * 2 * d  # the stacks' final norms
    return (
        encoder_layers * encoder_layer_parameters(d, f) + decoder_layers * decoder_layer_parameters(d, f) + final_norms
    )


counted = sum(parameter.numel() for parameter in model.parameters())
print(f"exercise 2: formula {transformer_parameters(32, 64, 2, 3)}, model.parameters() {counted}")
print(f"exercise 2: the base model without embeddings: {transformer_parameters(512, 2048, 6, 6) / 1e6:.1f} M")

# %% [markdown]
# An attention holds four `d x d` matrices, the feed-forward network two `d x f` ones; with the
# paper's sizes the layers hold 44 M parameters. The paper's 65 M adds the embeddings: a shared
# vocabulary of about 37,000 subwords times 512.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 3: a pre-norm stack with a final LayerNorm.
torch.manual_seed(0)
normed_stack = lab.TransformerEncoder(
    lab.TransformerEncoderLayer(32, 4, 64, dropout=0.0, norm_first=True), num_layers=6, norm=torch.nn.LayerNorm(32)
)
with torch.no_grad():
    normed = normed_stack(torch.randn(7, 2, 32))  # [S, B, D]
print(f"exercise 3: std of the pre-norm stack's output with a final norm: {float(normed.std(dim=-1).mean()):.2f}")

# %% [markdown]
# About 1: the final norm rescales the grown residual stream, so the decoder (or the generator)
# receives vectors of the usual size. In a post-norm stack each layer already ends with a
# norm, and a final one changes little.
#
# **Next:** chapter 3 trains this model.
