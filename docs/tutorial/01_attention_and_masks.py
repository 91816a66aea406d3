# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. Attention and its two masks
#
# Chapter 0 drew the whole model ([the architecture figure](../figures/architecture.png): the
# encoder, its output the *memory*, the decoder, the generator and its *logits*) and wrote
# attention by hand. This chapter turns to the library's own attention: it follows one call
# from its inputs to its output, printing the shape of every tensor on the way, then builds
# the two masks a Transformer needs: the **causal mask**,
# which keeps a position from reading the future, and the **key padding mask**, which keeps
# every position from reading padding. It ends with a claim that puzzles many readers: hiding
# the padded *rows* (queries) of the encoder changes nothing downstream. We compute it rather
# than argue it.
#
# Everything here runs on the CPU in a few seconds. Each code cell is followed by a sentence
# saying what it should print; if your output says otherwise, something is wrong.
#
# One convention holds throughout the library, the same as PyTorch's: **in a bool mask, True
# means hidden**. In a key padding mask, True marks padding.

# %%
import torch

from transformer_lab import nn as lab
from transformer_lab.nn import causal_mask, lengths_to_padding_mask, padding_mask

torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## The shape walk of one attention call
#
# A `MultiheadAttention` takes a query sequence and a key/value sequence. In cross-attention
# (the purple box of the architecture figure) the queries come from the decoder (3 target
# positions) and the keys and values from the encoder's output, the memory (4 source positions).
# With two sentences in the batch, the second sentence's last source position is padding. The
# library's modules record the shape of every named tensor while they run; `explain_attention`
# makes one such call and `format_shape_walk` prints the record.

# %%
from transformer_lab.lab import explain_attention, format_shape_walk

print(format_shape_walk(explain_attention(d_model=8, nhead=2, src_len=4, tgt_len=3, batch=2, pad_last=1)))

# %% [markdown]
# You should see the query `[3, 2, 8]` (PyTorch's default `[length, batch, d_model]` layout)
# turned batch-first, projected to Q, K and V, and split into 2 heads of 4 dimensions each.
# The scores `Q K^T / sqrt(head_dim)` are `[batch, heads, tgt_len, src_len]`: one row per query,
# one column per key. The mask is `[2, 1, 1, 4]`: it has a column per key and is broadcast over
# heads and query rows, so a padded key is hidden from *every* query. After the softmax the
# weights multiply V, the heads are merged back to `[2, 3, 8]` and the output projection is
# applied.
#
# The same call from Python, asking for the weights:

# %%
attention = lab.MultiheadAttention(embed_dim=8, num_heads=2)
query = torch.randn(3, 2, 8)  # [T, B, D]: 3 target positions, 2 sentences
memory = torch.randn(4, 2, 8)  # [S, B, D]: 4 source positions
source_lengths = torch.tensor([4, 3])  # the second sentence has one padded position
key_padding_mask = lengths_to_padding_mask(source_lengths, 4)  # [B, S], True = padding
with torch.no_grad():
    output, weights = attention(query, memory, memory, key_padding_mask=key_padding_mask)
print("key padding mask:\n", key_padding_mask)
print("output", tuple(output.shape), "weights", tuple(weights.shape))
print("weights of sentence 1 (rows: queries, columns: keys):\n", weights[1])
print("each row sums to", weights.sum(dim=-1))

# %% [markdown]
# The weights are averaged over the heads (`[B, T, S]`), as in `torch.nn.MultiheadAttention`.
# In sentence 1 the last column is exactly 0: no query gave any weight to the padded key, and
# every row still sums to 1.

# %% [markdown]
# ## The causal mask
#
# In the decoder's self-attention, position `t` may read positions `0..t` only: it is trained to
# predict token `t + 1` and must not see it. The causal mask hides everything above the diagonal.

# %%
print(causal_mask(5).int())

# %% [markdown]
# Row `i` is query `i`; a 1 (True) in column `j` hides key `j` from it. Row 0 sees only itself,
# row 4 sees all five positions. `torch.nn.Transformer.generate_square_subsequent_mask` returns
# the same mask as floats (`-inf` above the diagonal, added to the scores); the library accepts
# either form.
#
# ## The key padding mask
#
# A batch holds sentences of different lengths, padded to the longest with the id of `<pad>`
# (0 in this library). The key padding mask comes straight from the ids:

# %%
PAD = 0
token_ids = torch.tensor(
    [
        [5, 9, 7, 4, 6],
        [8, 5, 6, PAD, PAD],
        [7, 4, PAD, PAD, PAD],
    ]
)  # [B, S]
source_padding = padding_mask(token_ids, PAD)  # [B, S], True = padding
print(source_padding.int())

# %% [markdown]
# It is `[batch, keys]`: a statement about **columns**. Inside attention it is reshaped to
# `[B, 1, 1, S]` and combined with any `[L, S]` attention mask, so a padded key is hidden from
# every query row of its own sentence, in every head.
#
# ## Rows against columns
#
# The key padding mask hides padded **columns** (keys). It does not hide padded **rows**
# (queries): the padded positions still ask their own questions and get answers, mixtures of the
# real tokens. The figure shows four masks for one sentence of four words and two pads: the causal
# mask, the key padding mask, the two together (what `torch.nn.Transformer` users often pass to the
# decoder's self-attention, though with the pads on the right the causal mask already hides them
# from every real row: chapter 4), and padding hidden in both rows and columns.

# %%
from pathlib import Path

from transformer_lab.lab.figures import plot_masks
from transformer_lab.lab.plotting import show_figure

figures = Path("runs/tutorial-figures")
print("figure:", show_figure(plot_masks(figures / "masks.png", length=6, real_length=4)))

# %% [markdown]
# Dark cells are hidden. In the second panel the two `<pad>` columns are dark, but the two
# `<pad>` rows are not: their queries still read `w0..w3`. Hiding them too (last panel) needs a
# per-sentence `[B*H, L, S]` attention mask, which `transformer_lab.nn.masks.padded_query_rows_mask`
# builds. A fully hidden row would make the softmax divide by zero (torch returns NaN there); this
# library returns a zero mixture instead, so that the question below can be asked at all.

# %%
from transformer_lab.nn import masks

row_mask = masks.padded_query_rows_mask(source_padding, num_heads=1)  # [B*H, S, S]
print("sentence 2, rows and columns hidden:\n", (row_mask[2] | source_padding[2]).int())

# %% [markdown]
# Sentence 2 has two real tokens: only the top-left 2 x 2 block is visible.
#
# ## Why masking the padded rows changes nothing downstream
#
# The encoder's padded rows do produce vectors, so the encoder's output (the *memory*) holds
# meaningless values at padded positions. Does that harm the model? Only if something reads them.
# The decoder reads the memory through cross-attention, and there the same source key padding
# mask (`memory_key_padding_mask`) hides the padded **columns** of the memory. So whatever the
# padded rows hold, nothing reads it.
#
# The lab turns this into a measurement. `build_lab_setup` makes a small random model (seeded;
# chapter 2 builds it from its parts) and a batch of sequences of different lengths;
# `run_experiment("encoder-row-mask", ...)` runs the model twice, with and without the padded
# rows hidden in every encoder layer, and compares everything that reaches the loss.

# %%
from transformer_lab.lab.mask_experiments import build_lab_setup, run_experiment
from transformer_lab.lab.mask_report import format_lab_result

setup = build_lab_setup(seed=0)
rows_result = run_experiment("encoder-row-mask", setup)
print(format_lab_result(rows_result))
assert rows_result.holds

# %% [markdown]
# Read the table by its `expect` column. The first five rows say *equal* and show a difference of
# 0 (or float noise under `1e-05`): the memory at real positions, every logit, the loss and the
# gradient of every parameter are the same with and without the row mask. The next row says
# *differ*: the memory at padded positions does change, which is exactly what nothing reads. The
# last two rows remove `memory_key_padding_mask` from the decoder: then the padded memory is read,
# the logits change, and the row mask matters. Every `holds` is `yes`, and the last line reads
# **claim holds**.
#
# Published implementations disagree on one detail worth knowing before you mix code from several
# sources: the Annotated Transformer's masks say **True = may attend**, PyTorch's (and ours) say
# **True = hidden**. `run_experiment("key-padding-polarity", ...)` puts the two side by side.

# %%
polarity_result = run_experiment("key-padding-polarity", setup)
print(format_lab_result(polarity_result))
assert polarity_result.holds

# %% [markdown]
# Converted with `masks.keep_to_hidden`, a "keep" mask gives the same numbers as ours. Passed
# unconverted, it hides the real tokens instead of the padding, and its subsequent (causal) mask shows
# the future instead of hiding it (the rows marked *mixed*: its outputs and causal logits differ from
# ours, the real keys get no weight, and no output is NaN). The guards show the mistakes the
# library can refuse (a `[B, 1, S]` mask, an integer mask); a bool `[B, S]` mask of the wrong
# polarity has the right shape and type, and only numbers like these can catch it.
#
# ## Summary
#
# - The library's `MultiheadAttention` takes PyTorch's arguments and layout; inside, the scores
#   are `[batch, heads, queries, keys]`: a row per query, a column per key.
# - The causal mask (`causal_mask`) hides the future from the decoder's self-attention; the
#   key padding mask (`padding_mask`, `lengths_to_padding_mask`, True = padding) hides padded
#   keys, that is columns, from every query.
# - Padded queries (rows) are not hidden and produce vectors; in the encoder nothing reads
#   them, because cross-attention hides the memory's padded columns: the row mask changes no
#   logit, loss or gradient, as the lab computed.
# - A mask of the wrong polarity (True = keep, as in the Annotated Transformer) has the right
#   shape and type: convert it with `masks.keep_to_hidden`.
#
# ## Exercises
#
# 1. **One mask instead of two.** Build the decoder's self-attention mask for a padded batch as a
#    single bool `attn_mask` of shape `[B * H, T, T]` (causal and key padding together) and check
#    that `MultiheadAttention` gives the same output as with `attn_mask=causal_mask(T)` and
#    `key_padding_mask` passed separately.
# 2. **Float masks.** `torch.nn.Transformer.generate_square_subsequent_mask(5)` returns a float
#    mask. Which positions does it hide, and does the attention give the same output with it as
#    with `causal_mask(5)`?
# 3. **What nobody reads.** In the call of the section "The shape walk", replace the memory
#    vector at sentence 1's padded position by anything you like. Which outputs change?
#
# ## Solutions
#
# Try the exercises first. In Jupyter the solution cells are collapsed: click the bar to open
# one. Each prints its finding; the tests check these lines.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 1: the causal mask and the key padding mask as one [B * H, T, T] bool mask.
self_attention = lab.MultiheadAttention(embed_dim=8, num_heads=2)
tokens = torch.randn(5, 3, 8)  # [T, B, D]: 3 sentences of 5 positions
target_padding = lengths_to_padding_mask(torch.tensor([5, 3, 2]), 5)  # [B, T], True = padding
one_mask = causal_mask(5) | target_padding[:, None, :]  # [B, T, T]: a query row hides the future and the pads
one_mask = one_mask.repeat_interleave(2, dim=0)  # [B * H, T, T]: sentence b's mask for each of its heads
with torch.no_grad():
    together, _ = self_attention(tokens, tokens, tokens, attn_mask=one_mask)
    apart, _ = self_attention(tokens, tokens, tokens, attn_mask=causal_mask(5), key_padding_mask=target_padding)
print(f"exercise 1: max |one mask - two masks| = {float((together - apart).abs().max()):.1e}")

# %% [markdown]
# The two give the same numbers: inside, the library merges the two masks into one with an OR
# (`masks.merge_masks`), just as you did. Along the `B * H` dimension the masks go sentence by
# sentence, each sentence's heads next to each other: the order PyTorch expects, and the one
# `repeat_interleave` gives.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: the float mask of torch.nn.Transformer against causal_mask.
float_mask = torch.nn.Transformer.generate_square_subsequent_mask(5)  # [T, T], -inf above the diagonal, else 0
same_positions = torch.equal(float_mask == float("-inf"), causal_mask(5))
with torch.no_grad():
    with_float, _ = self_attention(tokens, tokens, tokens, attn_mask=float_mask)
    with_bool, _ = self_attention(tokens, tokens, tokens, attn_mask=causal_mask(5))
print(f"exercise 2: the float mask hides the same positions: {same_positions}")
print(f"exercise 2: max |float mask - bool mask| = {float((with_float - with_bool).abs().max()):.1e}")

# %% [markdown]
# A float mask is *added* to the scores: `-inf` where a bool mask says True, 0 elsewhere. Both
# hide the positions above the diagonal and give the same output. A float mask can also hold
# finite values, to favour or penalise keys without hiding them.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 3: anything at sentence 1's padded memory position.
changed_memory = memory.clone()
changed_memory[3, 1] = 1000.0  # [S, B, D]: position 3 of sentence 1 is padding
with torch.no_grad():
    changed_output, _ = attention(query, changed_memory, changed_memory, key_padding_mask=key_padding_mask)
print(f"exercise 3: max |output change| = {float((changed_output - output).abs().max()):.1e}")

# %% [markdown]
# Nothing changes, in either sentence: the padded key's score is replaced by `-inf` whatever the
# key holds, so its weight is exactly 0 and its value is multiplied by 0. This is what makes the encoder's
# padded rows harmless: the decoder reads the memory only through such a mask.
#
# **Next:** chapter 2 builds the whole model from these attention calls.
