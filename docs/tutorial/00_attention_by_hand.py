# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 0. Attention by hand
#
# A Transformer turns one sequence into another: a German sentence into its English
# translation, the upper line of a couplet into its lower line. Before this tutorial takes the
# library's model apart, this chapter gives you the whole picture and then has you write its
# central operation yourself, in a few lines of plain PyTorch:
#
# 1. the architecture in one figure, and the words the later chapters use for its parts;
# 2. scaled dot-product attention: scores, scale, mask, softmax, weighted sum;
# 3. why the scores are divided by `sqrt(d_k)`, measured;
# 4. masks as a way of hiding keys;
# 5. multi-head attention, checked against `torch.nn.MultiheadAttention` with the same weights.
#
# Nothing here needs the library's model: only `torch` (and the library for the figures and
# one exercise). A few seconds on one CPU core. The chapter ends, as every chapter does, with a summary and
# exercises, whose solutions follow them.

# %%
import math
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from transformer_lab.lab.architecture_figure import plot_architecture
from transformer_lab.lab.plotting import save_png, show_figure

torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)
figures = Path("runs/tutorial-figures")  # every figure of the tutorial is written here

# %% [markdown]
# ## The whole model in one picture
#
# The figure below is the encoder-decoder Transformer of "Attention Is All You Need" as this
# library builds it. Every chapter refers back to it; the same figure is
# [docs/figures/architecture.png](../figures/architecture.png). The cell prints where it wrote
# the figure and, in a notebook, shows it.

# %%
print("figure:", show_figure(plot_architecture(figures / "architecture.png")))

# %% [markdown]
# Read it from the bottom up.
#
# - **Tokens and embeddings.** A sentence arrives as token ids (integers). Each id is looked up
#   in a table of vectors of size `d_model` (the *embedding*), and a fixed pattern that encodes
#   the position is added, since attention by itself does not see order (exercise 1 shows it).
# - **The encoder** (left) is a stack of `N` identical layers. Each has two *sublayers*:
#   self-attention, in which every source position reads every other one, and a feed-forward
#   network applied to each position alone. Each sublayer is wrapped in a residual connection
#   and a layer norm ("add & norm").
# - **The memory** is the encoder's output: one vector per source token, `[B, S, D]` (batch,
#   source length, `d_model`). It is computed once per sentence.
# - **The decoder** (right) is a stack of `N` layers with three sublayers: *masked*
#   self-attention over the target written so far, **cross-attention**, in which each target
#   position queries the memory (every decoder layer reads the same memory), and feed-forward.
# - **The generator** is one linear map from `d_model` to the vocabulary size `V`. Its outputs
#   are the **logits**: one score per word of the vocabulary, at every target position; a
#   softmax turns them into the probabilities of the next token.
#
# In training, the decoder reads the target shifted right (`<bos>` first) and must predict the
# target itself (`<eos>` last) at every position at once; the loss compares the logits with the
# right tokens, and backpropagation computes the *gradient* of that loss for every weight. In
# use, the model writes one token at a time and feeds it back in (chapter 3).
#
# Three attentions appear in the figure, each with its own mask: the encoder's self-attention
# must not read padding, the decoder's self-attention must not read the future, and the
# cross-attention must not read the memory's padding. The rest of this chapter builds
# attention itself.
#
# ## Attention: a soft lookup
#
# A dictionary lookup compares a query with every key and returns the value of the one that
# matches. Attention does the same softly: it scores the query against every key with a dot
# product, turns the scores into weights that sum to 1 with a softmax, and returns the
# weighted sum of the values. With many queries at once, in matrices:
#
# `attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`
#
# where `d_k` is the size of a query (and of a key). Five lines of torch:


# %%
def attention(query, key, value, mask=None):
    """Scaled dot-product attention. query [..., T, d_k], key [..., S, d_k], value [..., S, d_v].

    mask: bool, True = hidden, broadcastable to [..., T, S]. Returns the output [..., T, d_v] and
    the weights [..., T, S].
    """
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # [..., T, S]: a row per query, a column per key
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # exp(-inf) = 0: a hidden key gets no weight
    weights = scores.softmax(dim=-1)  # [..., T, S], each row sums to 1
    return weights @ value, weights  # [..., T, d_v]


keys = torch.randn(4, 8)  # [S, d_k]: 4 keys
values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [10.0, 10.0], [-1.0, -1.0]])  # [S, d_v]
queries = torch.stack([3 * keys[2], torch.zeros(8)])  # [T, d_k]: one query like key 2, one like no key
output, weights = attention(queries, keys, values)
print("weights (rows: queries, columns: keys):\n", weights)
print("output:\n", output)
print("each row sums to", weights.sum(dim=-1))

# %% [markdown]
# The first query points the way key 2 points, so key 2 gets nearly all its weight and the
# output is nearly value 2, `[10, 10]`. The second query is zero: every score is 0, the weights
# are uniform (0.25 each), and the output is the mean of the values. Each row of weights is a
# probability distribution over the keys.
#
# ## Why divide by sqrt(d_k)
#
# Take a query and a key whose entries are independent, with mean 0 and variance 1 (roughly
# what a network with sensible initialisation sees). Their dot product is a sum of `d_k`
# products, each of variance 1, so its variance is `d_k`: with `d_k = 512`, scores are typically
# about ±23. A softmax over scores that far apart puts almost all the weight on the largest one,
# and where the softmax is saturated its gradient is almost zero: the weights stop learning.
# Dividing by `sqrt(d_k)` brings the variance back to 1, whatever `d_k`.
#
# Measured: 500 queries, each against 16 keys, for growing `d_k`. For each setting the cell
# prints the variance of the scores, the largest softmax weight of a row (averaged over the
# rows), and the average size of the gradient that reaches the scores from a random gradient
# on the weights, without the scaling and then with it.

# %%
upstream = torch.randn(500, 16)  # a fixed gradient arriving at the weights, as from a loss
dimensions = [4, 16, 64, 256, 1024]
# Each quantity: (values without the scaling, values with it), one per d_k.
variance, largest, gradient_size = ([], []), ([], []), ([], [])
for d_k in dimensions:
    q = torch.randn(500, 1, d_k)  # [N, 1, d_k]: one query per row
    k = torch.randn(500, 16, d_k)  # [N, S, d_k]: 16 keys per row
    raw = (q * k).sum(dim=-1)  # [N, S], the dot products q . k
    for column, scores in enumerate((raw, raw / math.sqrt(d_k))):
        scores = scores.clone().requires_grad_()
        row_weights = scores.softmax(dim=-1)  # [N, S]
        (gradient,) = torch.autograd.grad((row_weights * upstream).sum(), scores)
        variance[column].append(float(scores.detach().var()))
        largest[column].append(float(row_weights.detach().max(dim=-1).values.mean()))
        gradient_size[column].append(float(gradient.abs().mean()))
    print(
        f"d_k {d_k:>4}: variance {variance[0][-1]:7.1f} -> {variance[1][-1]:.2f}, "
        f"largest weight {largest[0][-1]:.2f} -> {largest[1][-1]:.2f}, "
        f"gradient {gradient_size[0][-1]:.4f} -> {gradient_size[1][-1]:.4f}"
    )

figure, panels = plt.subplots(1, 3, figsize=(11.0, 3.4))
titles = ["variance of the scores", "largest weight of a row (mean)", "gradient reaching the scores (mean |.|)"]
for panel, title, (unscaled, scaled) in zip(panels, titles, (variance, largest, gradient_size)):
    panel.plot(dimensions, unscaled, "o-", label="q . k")
    panel.plot(dimensions, scaled, "o-", label="q . k / sqrt(d_k)")
    panel.set_xscale("log", base=2)
    panel.set_xlabel("d_k")
    panel.set_title(title, fontsize=10)
    panel.grid(alpha=0.3)
panels[0].set_yscale("log", base=2)
panels[2].set_yscale("log")
panels[0].legend(fontsize=8)
figure.suptitle("scores of random unit-variance queries and keys, 16 keys per query", fontsize=10)
figure.tight_layout()
print("figure:", show_figure(save_png(figure, figures / "score-scaling.png", dpi=80)))

# %% [markdown]
# Without the scaling (the first number of each pair) the variance grows with `d_k` (it
# equals `d_k`, up to sampling noise), the largest weight climbs towards 1 (the softmax picks a
# single key), and the gradient shrinks more than tenfold by `d_k = 1024`. With it, the variance stays
# near 1, the weights stay spread, and the gradient keeps its size at every `d_k`. In the
# paper's model `d_k = 64`; the figure shows where that would sit without the division.
#
# ## Masks hide keys
#
# A mask says which keys a query may not read. In this library, as in PyTorch, a bool mask
# says **True = hidden**; the hidden scores become `-inf` before the softmax, so their weights
# are exactly 0 and the other weights still sum to 1. Two masks are needed.
#
# The **causal mask** of the decoder's self-attention: position `t` may read positions `0..t`
# only, since in training it must predict token `t + 1` and must not see it. It hides
# everything above the diagonal:

# %%
length = 4
causal = torch.ones(length, length, dtype=torch.bool).triu(diagonal=1)  # [T, T], True above the diagonal
sequence = torch.randn(length, 8)  # [T, D]: self-attention, so queries, keys and values are all this
_, causal_weights = attention(sequence, sequence, sequence, mask=causal)
print("causal mask (1 = hidden):\n", causal.int())
print("weights:\n", causal_weights)

# %% [markdown]
# Row 0 reads only itself (weight 1), row 3 reads all four positions; above the diagonal every
# weight is 0.
#
# The **key padding mask**: sentences in a batch have different lengths and are padded to the
# longest. A padded position is not a token, so no query may read it. The mask is one row per
# sentence, `[B, S]`, True at padding; given the shape `[B, 1, S]` it broadcasts over the
# query rows, so a padded key is hidden from every query of its sentence.

# %%
lengths = torch.tensor([4, 2])  # two sentences: 4 real tokens, and 2 real tokens + 2 pads
key_padding = torch.arange(4) >= lengths.unsqueeze(1)  # [B, S], True = padding
batch = torch.randn(2, 4, 8)  # [B, S, D]
_, padding_weights = attention(batch, batch, batch, mask=key_padding.unsqueeze(1))  # mask [B, 1, S]
print("key padding mask:\n", key_padding.int())
print("weights of sentence 1:\n", padding_weights[1])

# %% [markdown]
# In sentence 1 the last two columns are 0 in every row. The last two *rows*, the padded
# positions' own queries, still get answers: mixtures of the two real tokens. Chapter 1 asks
# whether that matters (it does not) and shows the library's masks and their shapes in detail.
#
# ## Multi-head attention
#
# One attention gives each query one distribution over the keys. The Transformer runs `H`
# attentions side by side (*heads*), each on its own learnt projection of the inputs, so that
# one head can follow, say, the previous word while another follows the subject. The
# projections matter for a single head too: in the self-attention above, each position's
# query was its own key, so it tended to read itself (most of the large weights lie on the
# diagonal); a learnt `W_q`
# and `W_k` let a query look for something other than itself. With
# `d_model = 16` and `H = 4` heads of `d_k = 4`:
#
# 1. project: `Q = query W_q^T + b_q`, and likewise K and V, each `[B, L, d_model]`;
# 2. split: view the last dimension as `[H, d_k]` and move the heads forward, `[B, H, L, d_k]`;
# 3. attend: the function above, once for all heads (it works on any leading dimensions);
# 4. merge: move the heads back and concatenate them, `[B, T, d_model]`;
# 5. project the result once more with `W_o`.
#
# `torch.nn.MultiheadAttention` holds exactly these weights: `in_proj_weight` is `W_q`, `W_k`
# and `W_v` stacked (`[3 d_model, d_model]`), `out_proj` is `W_o`. So we can write the five
# steps with its weights and compare.

# %%
d_model, nhead = 16, 4
reference = torch.nn.MultiheadAttention(d_model, nhead, batch_first=True)  # dropout 0 by default


def split_heads(x, nhead):
    """[B, L, d_model] -> [B, H, L, d_k]"""
    batch_size, length, width = x.shape
    return x.view(batch_size, length, nhead, width // nhead).transpose(1, 2)


def multi_head_attention(module, query, key, value, mask=None):
    """The five steps with the weights of a torch.nn.MultiheadAttention (batch first)."""
    w_q, w_k, w_v = module.in_proj_weight.chunk(3)  # each [d_model, d_model]
    b_q, b_k, b_v = module.in_proj_bias.chunk(3)
    q = split_heads(query @ w_q.T + b_q, module.num_heads)  # [B, H, T, d_k]
    k = split_heads(key @ w_k.T + b_k, module.num_heads)  # [B, H, S, d_k]
    v = split_heads(value @ w_v.T + b_v, module.num_heads)  # [B, H, S, d_k]
    heads, head_weights = attention(q, k, v, mask)  # [B, H, T, d_k], [B, H, T, S]
    merged = heads.transpose(1, 2).reshape(query.shape[0], query.shape[1], -1)  # [B, T, d_model]
    return module.out_proj(merged), head_weights  # [B, T, d_model]


# Decoder-style self-attention on a padded batch: the causal mask and the key padding mask together
# (for the real rows the key padding part changes nothing: chapter 4 shows why).
target = torch.randn(2, 5, d_model)  # [B, T, D]
target_padding = torch.arange(5) >= torch.tensor([5, 3]).unsqueeze(1)  # [B, T], True = padding
causal = torch.ones(5, 5, dtype=torch.bool).triu(diagonal=1)  # [T, T]
both = causal | target_padding[:, None, None, :]  # [B, 1, T, T]: broadcast over the heads
with torch.no_grad():
    ours, our_weights = multi_head_attention(reference, target, target, target, mask=both)
    theirs, their_weights = reference(target, target, target, key_padding_mask=target_padding, attn_mask=causal)
# Cross-attention: 5 target queries read 6 memory positions, the second sentence's last 2 padded.
memory = torch.randn(2, 6, d_model)  # [B, S, D]
memory_padding = torch.arange(6) >= torch.tensor([6, 4]).unsqueeze(1)  # [B, S]
with torch.no_grad():
    ours_cross, _ = multi_head_attention(reference, target, memory, memory, mask=memory_padding[:, None, None, :])
    theirs_cross, _ = reference(target, memory, memory, key_padding_mask=memory_padding)

difference = max(
    float((ours - theirs).abs().max()),
    float((our_weights.mean(dim=1) - their_weights).abs().max()),  # torch averages the weights over the heads
    float((ours_cross - theirs_cross).abs().max()),
)
print("output", tuple(ours.shape), "weights per head", tuple(our_weights.shape))
print(f"check against torch.nn.MultiheadAttention: max |ours - torch| = {difference:.2e}")
assert difference < 1e-5

# %% [markdown]
# The largest difference is 0, or float rounding (under `1e-6`): the hand-written five steps *are*
# multi-head attention. `torch.nn.MultiheadAttention` returns the weights averaged over the
# heads, `[B, T, S]`; ours keeps them per head, `[B, H, T, S]`.
#
# The library's `transformer_lab.nn.MultiheadAttention` is these five steps again, with a shape
# comment on every line, PyTorch's arguments and parameter names, masks of every form PyTorch
# accepts, a fast path, and a key/value cache for decoding. Chapter 1 follows one call through
# it.
#
# ## Summary
#
# - The Transformer is an encoder stack that turns the source into the **memory**, a decoder
#   stack that reads its own prefix and the memory, and a **generator** that turns each
#   decoder position into **logits** over the vocabulary.
# - Attention is `softmax(Q K^T / sqrt(d_k)) V`: a row of weights per query, a column per key,
#   each row summing to 1.
# - Without the division by `sqrt(d_k)` the scores' variance grows as `d_k`, the softmax
#   saturates, and its gradient vanishes.
# - A bool mask (True = hidden) sets scores to `-inf`: the causal mask hides the future, the
#   key padding mask hides padded keys (columns), not padded queries (rows).
# - Multi-head attention projects, splits into heads, attends, merges and projects again; with
#   `torch.nn.MultiheadAttention`'s weights it gives the same numbers.
#
# ## Exercises
#
# 1. **Attention does not see order.** Permute the keys and the values with the same
#    permutation: does the output change? Permute the queries: what happens to the output?
#    What does this say about why the model adds positions to its embeddings?
# 2. **A query with nothing to read.** Hide every key from one query (one row of the mask all
#    True) and run the hand-written `attention`, `torch.nn.MultiheadAttention` and
#    `transformer_lab.nn.MultiheadAttention`. What does that row's output hold in each, and
#    why?
# 3. **Too much scaling.** Divide the scores by `d_k` instead of `sqrt(d_k)`. What happens to
#    the variance of the scores and to the largest weight as `d_k` grows?
#
# ## Solutions
#
# Try the exercises first. In Jupyter the solution cells are collapsed: click the bar to open
# one. Each prints its finding; the tests check these lines.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 1: permute the keys and values together, then the queries.
permutation = torch.randperm(6)
with torch.no_grad():
    base, _ = attention(target, memory, memory)  # [B, T, D]
    keys_permuted, _ = attention(target, memory[:, permutation], memory[:, permutation])
    queries_permuted, _ = attention(target[:, [4, 3, 2, 1, 0]], memory, memory)
keys_change = float((keys_permuted - base).abs().max())
rows_follow = torch.allclose(queries_permuted, base[:, [4, 3, 2, 1, 0]], atol=1e-6)
print(f"exercise 1: permuting keys and values changes the output by {keys_change:.1e}")
print(f"exercise 1: permuting the queries permutes the output rows the same way: {rows_follow}")

# %% [markdown]
# The output is a weighted *sum* over the keys, and a sum does not depend on the order of its
# terms; each query is answered on its own, so reordering the queries reorders the answers.
# Attention is blind to order: without the positional encoding, "dog bites man" and "man bites
# dog" would give the same vectors, reordered.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: hide every key from query 1 (row 1 of the mask all True).
from transformer_lab import nn as lab

nothing = torch.zeros(5, 5, dtype=torch.bool)
nothing[1] = True  # [T, T]: query 1 may read nothing
library = lab.MultiheadAttention(d_model, nhead, batch_first=True)
library.load_state_dict(reference.state_dict())
with torch.no_grad():
    by_hand, _ = attention(target, target, target, mask=nothing)
    torchs, _ = reference(target, target, target, attn_mask=nothing)
    libraries, _ = library(target, target, target, attn_mask=nothing)
print(
    "exercise 2: the hidden row holds",
    f"by hand {float(by_hand[0, 1, 0])}, torch {float(torchs[0, 1, 0])}, transformer_lab {float(libraries[0, 1, 0])}",
)

# %% [markdown]
# Every score of that row is `-inf`, so the softmax computes `exp(-inf) / sum(exp(-inf)) =
# 0 / 0`: NaN, by hand and in torch, and the NaN spreads to everything computed from it
# (and to the gradients). The library gives such a row zero weights instead, so its mixture of
# values is zero and `MultiheadAttention` returns `out_proj.bias` there (zero here, as torch
# initialises it; not after training). In a well-formed batch no row is fully hidden (every
# sentence has at least one real token, and the causal mask always leaves a position its own
# key); chapter 1 meets such rows when it hides padded queries on purpose.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 3: divide by d_k instead of sqrt(d_k).
for d_k in (16, 256, 1024):
    q = torch.randn(500, 1, d_k)
    k = torch.randn(500, 16, d_k)
    over_d_k = (q * k).sum(dim=-1) / d_k  # [N, S]
    largest = float(over_d_k.softmax(dim=-1).max(dim=-1).values.mean())
    print(f"exercise 3: d_k {d_k:>4}: variance {float(over_d_k.var()):.4f}, largest weight {largest:.3f}")

# %% [markdown]
# The variance becomes `1 / d_k` and the scores all sit near 0, so the softmax tends to the
# uniform distribution: with 16 keys the largest weight tends to `1/16 = 0.0625`. The
# attention can no longer prefer any key, and the gradient that reaches the queries and keys
# shrinks as `1 / sqrt(d_k)`. `sqrt(d_k)` is the one divisor that keeps the variance at 1.
#
# **Next:** chapter 1 follows one call of the library's attention, shape by shape, and builds
# its masks.
