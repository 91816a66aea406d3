# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3. Training and decoding
#
# Chapter 2 built the model of chapter 0's [architecture figure](../figures/architecture.png);
# this chapter trains it, and uses it the way the figure's top suggests: the generator's logits
# become probabilities of the next token, one token at a time. The paper trains with two devices
# that a first implementation tends to skip: **label smoothing**, which stops the model from
# becoming certain, and a **warm-up schedule** for the learning rate. This chapter looks at
# each, then trains a small model on the Annotated Transformer's **copy task** (the output must
# repeat the input) in well under a minute, decodes with **greedy** and **beam search**, and
# checks that the **key/value cache** that makes decoding fast gives exactly what decoding
# without it gives.
#
# About a minute on one CPU core, nearly all of it training.

# %%
import dataclasses

import torch
import torch.nn.functional as F

from transformer_lab.training import label_smoothed_cross_entropy, noam_lr

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## Label smoothing
#
# Plain cross-entropy asks the model to put probability 1 on the right token. With smoothing `e`
# the target is softer: `1 - e` on the right token and `e / (V - 1)` on each of the `V - 1`
# others. The model is then penalised for certainty as well as for error, which makes its
# probabilities better calibrated and, the paper reports, BLEU higher (BLEU counts the word
# n-grams a translation shares with a reference, 0-100) while perplexity gets worse (the
# exponential of the mean loss per token: how many tokens the model hesitates between).
#
# Four candidate predictions over a vocabulary of 5, the right answer being token 2:

# %%
vocabulary_size, smoothing, right = 5, 0.1, 2
target = torch.tensor([right])
candidates = {
    "uniform": torch.full((vocabulary_size,), 1 / vocabulary_size),
    "fairly sure (0.7)": torch.tensor([0.075, 0.075, 0.7, 0.075, 0.075]),
    "the smoothed target": torch.tensor([0.025, 0.025, 0.9, 0.025, 0.025]),
    "almost certain (0.999)": torch.tensor([0.00025, 0.00025, 0.999, 0.00025, 0.00025]),
}
print(f"{'prediction':<24} {'plain CE':>9} {'smoothed CE':>12}")
for name, probabilities in candidates.items():
    logits = probabilities.log().unsqueeze(0)  # [N, V]
    plain = label_smoothed_cross_entropy(logits, target, smoothing=0.0, ignore_index=-100)
    smoothed = label_smoothed_cross_entropy(logits, target, smoothing=smoothing, ignore_index=-100)
    print(f"{name:<24} {float(plain):>9.4f} {float(smoothed):>12.4f}")

# %% [markdown]
# Plain cross-entropy keeps falling as the prediction grows surer; the smoothed loss is lowest at
# the smoothed target itself (0.9 on the right token) and rises again for the almost certain
# prediction.
#
# Two details of the library's loss. PyTorch's `F.cross_entropy(label_smoothing=e)` spreads `e`
# over all `V` classes, the right one included, so the same target needs `e * V / (V - 1)` there.
# And positions whose target is `ignore_index` (the padding id in training) count for nothing,
# whatever their logits:

# %%
logits = torch.randn(2, 3, vocabulary_size)  # [B, T, V]
targets = torch.tensor([[1, 4, 2], [3, 0, 0]])  # [B, T], 0 = padding
ours = label_smoothed_cross_entropy(logits, targets, smoothing=0.1, ignore_index=0)
torchs = F.cross_entropy(
    logits.reshape(-1, vocabulary_size),
    targets.reshape(-1),
    ignore_index=0,
    label_smoothing=0.1 * vocabulary_size / (vocabulary_size - 1),
)
changed_padding = logits.clone()
changed_padding[1, 1:] = 100.0  # anything at the padded positions
print(f"ours {float(ours):.6f}  torch's {float(torchs):.6f}")
print(
    "padded logits changed, loss unchanged:",
    torch.equal(ours, label_smoothed_cross_entropy(changed_padding, targets, smoothing=0.1, ignore_index=0)),
)

# %% [markdown]
# ## The warm-up schedule
#
# The paper's learning rate rises linearly for `warmup_steps` steps, then falls as the inverse
# square root of the step:
#
# `lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)`
#
# The two terms meet at `step = warmup_steps`, where the rate peaks. Early on, Adam's estimates of
# the gradients' scale are poor and the attention weights are near uniform; a small rate there
# keeps the first updates from throwing the model somewhere it cannot recover from.

# %%
from pathlib import Path

from transformer_lab.lab.figures import plot_lr_schedule
from transformer_lab.lab.plotting import show_figure

for step in (1, 1000, 4000, 8000, 20000):
    print(f"step {step:>5}: lr {noam_lr(step, d_model=512, warmup_steps=4000):.6f}")
peak = noam_lr(4000, d_model=512, warmup_steps=4000)
assert peak == max(noam_lr(step, 512, 4000) for step in range(1, 20001))

figures = Path("runs/tutorial-figures")
print("figure:", show_figure(plot_lr_schedule(figures / "lr-schedule.png")))

# %% [markdown]
# The rate peaks at step 4,000 (about 0.0007 for d_model 512) and halves by step 16,000. In the
# figure, a longer warm-up (8,000) peaks later and lower; a smaller model (d_model 256) has a
# higher curve, by `sqrt(2)`.
#
# ## The copy task
#
# Sources are random sequences of 1 to 8 symbols drawn from 10; the target is the same sequence.
# The task is trivial for a human and a real test for a model: the decoder must learn to find,
# at each step, the right source position through cross-attention. `transformer_lab.tasks.synthetic`
# holds the task; its preset is what `make demo` trains. Here it is smaller: d_model 32 and 1,500
# steps, with label smoothing 0.1 and the warm-up schedule. The 500 test sequences never occur in
# training. `synthetic_train.train` runs the library's training loop, `transformer_lab.training.Trainer`
# (batches, loss, Adam, the schedule, validation and checkpoints), which chapters 5 and 6 use too.
#
# Training is **teacher-forced**: the decoder reads the true target shifted right by one,
# `<bos>` and then the target (`tgt_in_ids`), and predicts each next token of it (`tgt_out_ids`,
# the target and then `<eos>`), all positions at once, never its own guesses. Chapter 4 looks at
# those two tensors closely.

# %%
from transformer_lab.tasks.synthetic import train as synthetic_train

config = synthetic_train.default_config("copy")
config = dataclasses.replace(
    config,
    data=dataclasses.replace(config.data, max_length=8, num_validation=100, num_test=500),
    model=dataclasses.replace(config.model, d_model=32, nhead=4, dim_feedforward=64),
    train=dataclasses.replace(
        config.train,
        max_steps=1500,
        warmup_steps=150,
        lr_factor=1.0,
        label_smoothing=0.1,
        eval_every_steps=1500,
        progress_bar=False,
        seed=0,
    ),
)
result = synthetic_train.train(config, "runs/tutorial-copy")
model = result.model.eval()
summary = result.summary
print(
    f"{summary['steps']} steps in {summary['wall_seconds']:.0f} s, last training loss {summary['final_train_loss']:.3f}"
)

# %% [markdown]
# The training loss does not go to 0: with smoothing 0.1 over 14 tokens its floor is the entropy
# of the smoothed target, about 0.58.
#
# ## Greedy search and beam search
#
# Greedy search takes the most probable token at each step. Beam search keeps the `k` most
# probable prefixes at each step and returns the best finished one; it can find a sequence whose
# first token was not the greedy choice. `DecodeConfig` chooses the search; `synthetic_train.exact_match`
# decodes every test source and counts the outputs equal to their targets.

# %%
greedy = dataclasses.replace(config.decode, strategy="greedy")
beam = dataclasses.replace(config.decode, strategy="beam", beam_size=4)
test_pairs = result.data.test
greedy_match = synthetic_train.exact_match(model, test_pairs, greedy)
beam_match = synthetic_train.exact_match(model, test_pairs, beam)
print(f"exact match on {len(test_pairs)} unseen sequences: greedy {greedy_match:.3f}, beam {beam_match:.3f}")
for (source, _), greedy_output, beam_output in zip(
    test_pairs[:4],
    synthetic_train.decode_pairs(model, test_pairs[:4], greedy),
    synthetic_train.decode_pairs(model, test_pairs[:4], beam),
):
    print(f"source {source}  greedy {greedy_output}  beam {beam_output}")
assert greedy_match >= 0.9 and beam_match >= 0.9

# %% [markdown]
# Both searches copy nearly every unseen sequence (the cell above asserts an exact-match rate of
# at least 0.9 for each; the rates it prints are the measurement). On a task this easy the model is sure of
# every token, so beam search rarely changes anything; its gain shows on real text (chapter 5,
# and [docs/results.md](../results.md)). To see the searches differ, look at what each one
# scores: `greedy_search` and `beam_search` return every hypothesis with its log-probability.

# %%
from transformer_lab.data import BOS_ID, EOS_ID, PAD_ID, collate_pairs
from transformer_lab.decoding import beam_search, greedy_search

batch = collate_pairs(test_pairs[:8], PAD_ID, BOS_ID, EOS_ID)
with torch.no_grad():
    greedy_output = greedy_search(model, batch.src_ids, max_len=12)
    beam_output = beam_search(model, batch.src_ids, beam_size=4, max_len=12, length_penalty=0.0)
greedy_scores = [sentence[0].log_prob for sentence in greedy_output.hypotheses]
beam_scores = [sentence[0].log_prob for sentence in beam_output.hypotheses]
print("greedy log-probs:", [round(score, 3) for score in greedy_scores])
print("beam log-probs:  ", [round(score, 3) for score in beam_scores])
at_least_as_high = all(b >= g - 1e-5 for g, b in zip(greedy_scores, beam_scores))
print("beam scores at least as high on every sentence here:", at_least_as_high)

# %% [markdown]
# A search's `length_penalty` divides a hypothesis's log-probability by a power of its length
# (the GNMT penalty, chapter 5), so that long outputs are not ranked down for their many
# negative terms. With `length_penalty=0.0` beam search ranks by log-probability alone, and
# here its best hypothesis scores at least as high as the greedy one for every sentence (on this
# model the two mostly coincide). That is usual, not guaranteed: when `k` other prefixes score
# higher at some step, the greedy prefix falls out of the beam, and the search can end on a
# lower score than greedy search would have. The log-probabilities are well below 0 although
# every output is right: label smoothing taught the model to keep about a tenth of its
# probability for the other tokens.
#
# ## The key/value cache, checked against decoding without it
#
# Decoding token `t` the plain way runs the decoder over the whole prefix `0..t` again: quadratic
# work. But with the causal mask, the keys and values of positions `0..t-1` do not change when
# position `t` arrives, so they can be kept: each step then computes one new row. The
# cross-attention's keys and values, projected from the memory, are computed once per sentence.
# Equal outputs are the whole point, so the library checks them both ways: the tokens of a whole
# search, and the logits of each step.

# %%
with torch.no_grad():
    cached = greedy_search(model, batch.src_ids, max_len=12, use_cache=True)
    uncached = greedy_search(model, batch.src_ids, max_len=12, use_cache=False)
print("same tokens with and without the cache:", torch.equal(cached.best_ids, uncached.best_ids))

source_ids = batch.src_ids  # [B, S]
prefix = batch.tgt_in_ids  # [B, T], teacher-forced prefixes
with torch.no_grad():
    memory = model.encode(source_ids)  # [B, S, D]
    cache = model.new_cache()
    step_difference = 0.0
    for length in range(1, prefix.shape[1] + 1):
        with_cache = model.decode_step(prefix[:, :length], memory, source_ids, cache=cache)  # [B, V]
        without_cache = model.decode_step(prefix[:, :length], memory, source_ids)  # [B, V]
        step_difference = max(step_difference, float((with_cache - without_cache).abs().max()))
print(f"cache check: max |logits with cache - without| over {prefix.shape[1]} steps = {step_difference:.2e}")
assert torch.equal(cached.best_ids, uncached.best_ids) and step_difference < 1e-4

# %% [markdown]
# The tokens are identical and the logits agree to float rounding (around `1e-6`): the cached
# step adds the same numbers in a different order. On real sentences the cache makes decoding
# several times faster ([docs/results.md](../results.md) has the measurements).
#
# ## Summary
#
# - Label smoothing trains towards a target with `1 - e` on the right token and `e / (V - 1)`
#   on each other; the loss ignores padded positions.
# - The warm-up schedule raises the learning rate linearly for `warmup_steps`, then lowers it
#   as `1 / sqrt(step)`.
# - A small model learns the copy task in well under a minute; greedy search takes the best
#   token at each step, beam search keeps the `k` best prefixes, which usually (not always) ends
#   on a higher score.
# - The key/value cache computes one new row per step and gives the same tokens, and the same
#   logits up to rounding, as decoding without it.
#
# ## Exercises
#
# 1. **The floor of the smoothed loss.** What is the lowest value the training loss of the copy
#    task can reach with smoothing 0.1? Compute it from the vocabulary size, and compare it with
#    the last training loss of the run.
# 2. **The peak of the schedule.** Write the peak learning rate of the warm-up schedule in closed
#    form, check it for the run above (`d_model` 32, 150 warm-up steps), and find the step at
#    which the rate has fallen to half its peak.
# 3. **A beam of one.** Run `beam_search` with `beam_size=1` on `batch`: does it find what
#    `greedy_search` finds?
#
# ## Solutions
#
# Try the exercises first. In Jupyter the solution cells are collapsed: click the bar to open
# one. Each prints its finding; the tests check these lines.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 1: the entropy of the smoothed target is the lowest smoothed loss.
import math

vocabulary = model.generator.out_features
spread = 0.1 / (vocabulary - 1)  # on each wrong token
floor = -(0.9 * math.log(0.9) + (vocabulary - 1) * spread * math.log(spread))
at_target = torch.full((1, vocabulary), spread)
at_target[0, 3] = 0.9  # a prediction equal to the smoothed target of token 3
reached = float(label_smoothed_cross_entropy(at_target.log(), torch.tensor([3]), smoothing=0.1, ignore_index=-100))
print(f"exercise 1: floor {floor:.3f} for a vocabulary of {vocabulary}; the loss at the smoothed target {reached:.3f}")
last_loss = summary["final_train_loss"]
print(f"exercise 1: last training loss {last_loss:.3f}, above the floor: {last_loss > floor}")

# %% [markdown]
# The smoothed loss is a cross-entropy against the smoothed target, so it is at least that
# target's entropy, reached when the prediction equals the target. With 14 tokens it is about
# 0.58; the run ends a little above it, which is why its loss "does not go to 0".

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: the peak is factor * d_model^-0.5 * warmup^-0.5, at step = warmup_steps.
d_model, warmup, factor = 32, 150, 1.0
closed_form = factor * d_model**-0.5 * warmup**-0.5
rates = [noam_lr(step, d_model, warmup, factor) for step in range(1, 2001)]
half = next(step for step, rate in enumerate(rates, start=1) if step > warmup and rate <= closed_form / 2)
print(f"exercise 2: peak {closed_form:.5f} = highest rate {max(rates):.5f}: {math.isclose(closed_form, max(rates))}")
print(f"exercise 2: the rate is half its peak at step {half} = 4 x warmup")

# %% [markdown]
# At `step = warmup` the two terms of the `min` are equal, `warmup^-0.5`. After the peak the rate
# is `peak * sqrt(warmup / step)`, which halves when `step = 4 * warmup`: 600 for this run, 16,000
# for the paper's 4,000 warm-up steps.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 3: beam search with a single beam.
with torch.no_grad():
    one_beam = beam_search(model, batch.src_ids, beam_size=1, max_len=12, length_penalty=0.0)
same = [beam[0].ids for beam in one_beam.hypotheses] == [greedy[0].ids for greedy in greedy_output.hypotheses]
print(f"exercise 3: a beam of one finds the greedy tokens for every sentence: {same}")

# %% [markdown]
# With one beam, each step keeps the single best continuation of the single prefix: that is
# greedy search. Beam search widens that choice: the `k` best continuations of `k` prefixes.
#
# **Next:** chapter 4 asks why the decoder needs no mask for its own padding.
