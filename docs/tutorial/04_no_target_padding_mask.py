# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. The decoder needs no target key padding mask
#
# The encoder hides its padded keys with `src_key_padding_mask`, and every cross-attention
# hides the padded memory with `memory_key_padding_mask`. Many implementations also pass a
# `tgt_key_padding_mask` to the decoder's self-attention, and `torch.nn.Transformer` accepts one.
# This chapter shows that, **as long as the loss ignores padded positions**, that mask changes
# nothing that training ever sees: not the loss, not a single gradient. `Seq2SeqTransformer`
# therefore never builds it.
#
# The argument takes three steps, and each is computed: what the causal mask already hides,
# what the lab's experiment measures, and the question left over, about the decoder's padded
# rows. A few seconds on one core.

# %%
import torch

from transformer_lab.lab.mask_experiments import build_lab_setup, run_experiment
from transformer_lab.lab.mask_report import format_lab_result
from transformer_lab.nn import causal_mask, padding_mask

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## A batch of targets
#
# The lab's setup is a small random `Seq2SeqTransformer` and six "reverse" pairs of different
# lengths. The decoder reads `tgt_in_ids` (`<bos>` then the target) and is trained to predict
# `tgt_out_ids` (the target then `<eos>`), both padded on the **right** with `<pad>` = 0.

# %%
setup = build_lab_setup(seed=0)
model, batch = setup.model, setup.batch
print(setup.description)
print("tgt_in_ids:\n", batch.tgt_in_ids)
print("tgt_out_ids:\n", batch.tgt_out_ids)

# %% [markdown]
# Every padded position of `tgt_in_ids` sits where `tgt_out_ids` is also padding: a row of
# padding in the input is a row of padding in the labels.
#
# ## Step 1: the causal mask already hides the padded keys from every real query
#
# Take one sentence. Its real positions are `0..n-1` and its padding is `n..T-1`. A real query
# at position `t < n` may read keys `0..t` under the causal mask; all of them are real. The
# padded keys lie in its future, hidden already. So adding the key padding mask can only change
# rows whose query is itself padding.

# %%
target_padding = padding_mask(batch.tgt_in_ids, model.pad_id)  # [B, T], True = padding
causal = causal_mask(batch.tgt_in_ids.shape[1])  # [T, T], True = hidden
sentence = int(target_padding.sum(dim=1).argmax())  # the sentence with the most padding
with_padding_mask = causal | target_padding[sentence].unsqueeze(0)  # [T, T]
changed_rows = (with_padding_mask != causal).any(dim=1)  # [T]
real_length = int((~target_padding[sentence]).sum())
print(f"sentence {sentence}: {real_length} real positions of {causal.shape[0]}")
print("rows the key padding mask changes:", changed_rows.nonzero().flatten().tolist())
assert not changed_rows[:real_length].any()

# %% [markdown]
# Only rows from the first padded position on change. The padded rows produce logits for
# positions whose label is `<pad>`, and the loss skips exactly those positions (`ignore_index`
# equal to the padding id).
#
# ## Step 2: the claim, measured
#
# `run_experiment("tgt-padding-mask", ...)` runs the model twice, with and without
# `tgt_key_padding_mask`, takes the loss (padding ignored) and the gradient of every parameter,
# and compares. Two more runs count the padded positions in the loss, to show that the claim
# depends on ignoring them.

# %%
tgt_result = run_experiment("tgt-padding-mask", setup)
print(format_lab_result(tgt_result))
assert tgt_result.holds

# %% [markdown]
# What you should see:
#
# | quantity | expect | what it means |
# |---|---|---|
# | loss (ignore_index = pad) | equal | the number that training minimises does not move |
# | every parameter's gradient | equal | so no update moves either: training is the same |
# | logits at real target positions | equal | what the model predicts for real tokens is the same |
# | weight from real queries to padded keys (no mask) | equal (0) | step 1, measured in every layer |
# | logits at padded target positions | differ | the mask does change the padded rows ... |
# | loss summed with padded positions counted | differ | ... which matters only if the loss reads them |
#
# The verdict line reads **claim holds**. The same check runs on real sentences from the command
# line (`transformer-lab lab tgt-padding-mask --data-dir DIR`, where DIR is the `multi30k` folder
# that `transformer-lab download multi30k` fills, its path printed by that command) or on a trained
# model (`--checkpoint runs/NAME`).
#
# ## Step 3: the closing question, the decoder's padded rows
#
# Chapter 1 showed that the encoder's padded rows need no mask because cross-attention hides
# their columns. The decoder has no such second stage: its padded rows go straight to the
# generator and become logits. So what hides them? The loss does. `ignore_index` drops every
# position whose label is padding, and a padded row of `tgt_in_ids` is always such a position.
# `run_experiment("decoder-rows", ...)` hides the decoder's padded rows explicitly (a
# `[B*H, T, T]` mask that is causal and hides those rows) and compares with the causal mask alone,
# with and without `ignore_index`.

# %%
rows_result = run_experiment("decoder-rows", setup)
print(format_lab_result(rows_result))
assert rows_result.holds

# %% [markdown]
# With `ignore_index` the loss and every gradient are equal whether the padded rows are hidden or
# not; without it (the last two rows) both change. In the decoder, ignoring padded labels in the
# loss **is** the row mask. A target key padding mask would hide the padded *columns*, which the
# causal mask already hides from every row that matters.
#
# ## Summary
#
# - Under the causal mask a real target query reads only earlier positions, all real: a target
#   key padding mask can change only the rows of padded queries.
# - Those rows give logits at positions whose label is padding, and the loss ignores them
#   (`ignore_index` = the padding id): loss and gradients are the same with and without the
#   mask, as the lab measured.
# - In the decoder, ignoring padded labels plays the part of a row mask; counting them would
#   make the mask matter.
#
# ## Exercises
#
# 1. **Every sentence of the batch.** Step 1 looked at the sentence with the most padding. Check
#    the claim for every sentence: the first row the target key padding mask changes is the
#    sentence's first padded position (or no row changes, for a sentence without padding).
# 2. **The loss by hand.** Compute the loss of `setup`'s model on its batch without
#    `ignore_index`: the cross-entropy of every position (`reduction="none"`), multiplied by a
#    mask of the real positions, averaged over the real positions. Compare it with
#    `label_smoothed_cross_entropy(..., smoothing=0.0, ignore_index=pad_id)`.
#
# ## Solutions
#
# Try the exercises first. In Jupyter the solution cells are collapsed: click the bar to open
# one. Each prints its finding; the tests check these lines.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 1: the first changed row of every sentence.
holds = []
for index in range(batch.tgt_in_ids.shape[0]):
    changed = ((causal | target_padding[index].unsqueeze(0)) != causal).any(dim=1)  # [T]
    length = int((~target_padding[index]).sum())
    first_changed = int(changed.nonzero()[0]) if changed.any() else None
    holds.append(first_changed == (length if length < causal.shape[0] else None))
    print(f"sentence {index}: {length} real positions, first changed row {first_changed}")
print(f"exercise 1: in every sentence only padded rows change: {all(holds)}")

# %% [markdown]
# In every sentence the changed rows begin exactly at the first padded position; a sentence
# without padding has none. The argument of step 1 holds sentence by sentence, since the masks
# are per sentence.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: the loss over real positions only, by hand.
import torch.nn.functional as F

from transformer_lab.training import label_smoothed_cross_entropy

with torch.no_grad():
    logits = model(batch.src_ids, batch.tgt_in_ids)  # [B, T, V]
per_position = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out_ids, reduction="none")  # [B, T]
real = (batch.tgt_out_ids != model.pad_id).float()  # [B, T], 1 = a real label
by_hand = (per_position * real).sum() / real.sum()
library = label_smoothed_cross_entropy(logits, batch.tgt_out_ids, smoothing=0.0, ignore_index=model.pad_id)
print(f"exercise 2: by hand {float(by_hand):.6f}, with ignore_index {float(library):.6f}")

# %% [markdown]
# The two agree: `ignore_index` is exactly "multiply by the mask of real labels and average over
# the real positions". Whatever the padded rows' logits are, they are multiplied by 0, which is
# why no mask on the decoder's padding can change the loss.
#
# **Next:** chapter 5 trains the applications.
