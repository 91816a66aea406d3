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
# This chapter follows one attention call from its inputs to its output, printing the shape of
# every tensor on the way, then builds the two masks a Transformer needs: the **causal mask**,
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
# A `MultiheadAttention` takes a query sequence and a key/value sequence. In cross-attention the
# queries come from the decoder (3 target positions) and the keys and values from the encoder's
# output (4 source positions). With two sentences in the batch, the second sentence's last source
# position is padding. The library's modules record the shape of every named tensor while they
# run; `explain_attention` makes one such call and `format_shape_walk` prints the record.

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
# mask, the key padding mask, the two together (what the decoder's self-attention would use), and
# padding hidden in both rows and columns.

# %%
from pathlib import Path

from IPython.display import Image, display

from transformer_lab.lab.figures import plot_masks

figures = Path("runs/tutorial-figures")
display(Image(filename=str(plot_masks(figures / "masks.png", length=6, real_length=4))))

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
# The lab turns this into a measurement. `build_lab_setup` makes a small random
# `Seq2SeqTransformer` (seeded) and a batch of sequences of different lengths;
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
# unconverted, it hides the real tokens instead of the padding, and the subsequent mask shows the
# future instead of hiding it (the rows marked *mixed* differ). The guards show the mistakes the
# library can refuse (a `[B, 1, S]` mask, an integer mask); a bool `[B, S]` mask of the wrong
# polarity has the right shape and type, and only numbers like these can catch it.
#
# **Next:** chapter 2 builds the whole model from these attention calls.
