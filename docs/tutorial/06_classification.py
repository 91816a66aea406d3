# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6. Classification with the encoder (optional)
#
# Translation needs both halves of the Transformer; classifying a text needs only the encoder.
# `TransformerClassifier` is that model: embeddings and positions, an encoder stack, a
# **pooling** step that turns one vector per token into one vector per text, and a linear head
# to the classes. This chapter trains one on a small made-up task with a plain training loop
# built from the library's pieces, checks that padding never leaks into the pooled vector, and
# then points to the real classification task. About 20 seconds on one core.
#
# The task: a sequence of 3 to 8 symbols (ids 4 to 23) is labelled 1 when some symbol occurs
# twice, else 0. No single token gives the answer away; every token has to be compared with the
# others, which is what self-attention does.

# %%
import random

import torch

from transformer_lab.data import PAD_ID, pad_sequences
from transformer_lab.models import TransformerClassifier
from transformer_lab.training import build_noam_scheduler, build_optimizer, label_smoothed_cross_entropy

torch.manual_seed(0)
generator = random.Random(0)


def example() -> tuple[list[int], int]:
    symbols = [generator.randint(4, 23) for _ in range(generator.randint(3, 8))]
    return symbols, int(len(set(symbols)) < len(symbols))


train_examples = [example() for _ in range(12000)]
test_examples = [example() for _ in range(1000)]
print("share of label 1 in the test set:", sum(label for _, label in test_examples) / len(test_examples))
print("examples:", train_examples[:3])

# %% [markdown]
# About half the sequences hold a repeated symbol, so guessing scores about 0.5.
#
# ## The model and its pooling
#
# The encoder returns one vector per position, `[B, S, D]`. Mean pooling averages them over the
# **real** positions only: the padding mask that hides padded keys inside attention also keeps
# the padded rows out of the average. (Chapter 1 showed that the padded rows hold meaningless
# values; here is a second place where they must not be read.) The classifier's defaults follow
# current practice rather than the paper: pre-norm and GELU.

# %%
model = TransformerClassifier(
    vocab_size=24, num_classes=2, d_model=32, nhead=4, num_layers=2, dim_feedforward=64, dropout=0.0, max_len=16
)
alone = torch.tensor([[5, 9, 5]])  # [1, S]
padded = pad_sequences([[5, 9, 5], [4, 6, 8, 10, 12, 14, 16, 18]], PAD_ID)  # [2, 8], the first row padded
model.eval()
with torch.no_grad():
    padding_difference = float((model(alone)[0] - model(padded)[0]).abs().max())
print("padded batch:\n", padded)
print(f"pooling check: max |logits alone - logits padded| = {padding_difference:.2e}")
assert padding_difference < 1e-5

# %% [markdown]
# The same sequence gives the same logits alone and padded to length 8 beside a longer one
# (a difference of float rounding at most).
#
# ## A training loop from the library's pieces
#
# The tasks use the `Trainer` (chapter 3); a loop written out shows what it does at each step:
# Adam with the paper's betas (`build_optimizer`), the warm-up schedule (`build_noam_scheduler`),
# the loss, a backward pass, an optimizer step and a schedule step.

# %%
optimizer = build_optimizer(model.parameters())
scheduler = build_noam_scheduler(optimizer, d_model=32, warmup_steps=200, factor=2.0)
batch_size, steps = 64, 1500
model.train()
for step in range(steps):
    start = (step * batch_size) % len(train_examples)
    chosen = train_examples[start : start + batch_size]
    token_ids = pad_sequences([symbols for symbols, _ in chosen], PAD_ID)  # [B, S]
    labels = torch.tensor([label for _, label in chosen])  # [B]
    loss = label_smoothed_cross_entropy(model(token_ids), labels, smoothing=0.0, ignore_index=-100)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    if step % 300 == 0 or step == steps - 1:
        print(f"step {step:>4}: loss {loss.item():.3f}, lr {scheduler.get_last_lr()[0]:.5f}")

model.eval()
with torch.no_grad():
    test_ids = pad_sequences([symbols for symbols, _ in test_examples], PAD_ID)  # [N, S]
    predictions = model(test_ids).argmax(dim=-1)  # [N]
test_labels = torch.tensor([label for _, label in test_examples])
accuracy = float((predictions == test_labels).float().mean())
print(f"test accuracy: {accuracy:.3f}")
assert accuracy > 0.7

# %% [markdown]
# The loss falls below 0.69 (the loss of a coin toss) to between 0.3 and 0.5 (each printed value
# is one batch's loss, so it wobbles), and the test accuracy ends between about 0.7 and 0.85,
# well above guessing: the model has learnt to compare symbols, though not perfectly in 1,500
# small steps. Where in those ranges a run lands depends on the CPU: torch's AVX-512 and AVX2
# kernels round differently, and 1,500 steps amplify the difference.
#
# ## The real task
#
# `transformer_lab.tasks.classification` trains the same model on text: AG News topics from the
# data folder, or any labelled CSV, TSV or JSON Lines file of yours, with a subword tokenizer, the
# `Trainer`, and per-class metrics:
#
# ```bash
# transformer-lab download ag-news
# transformer-lab train classification --out runs/news
# transformer-lab evaluate classification --checkpoint runs/news --confusion-png confusion.png
# transformer-lab classify --checkpoint runs/news "Stocks rallied after the Fed cut rates"
# ```
#
# From Python, `transformer_lab.Classifier("runs/news").classify(texts)` returns each text's label
# and probabilities. What the preset scores, and how long it trains, is in
# [docs/results.md](../results.md).
#
# ## Summary
#
# - `TransformerClassifier` is the encoder alone, a pooling step and a linear head.
# - Mean pooling averages over the real positions only: a text gives the same logits alone and
#   padded in a batch.
# - A training loop is the optimizer, the schedule, the loss, `backward()`, `step()`; the
#   `Trainer` adds mixed precision, accumulation, checkpoints and logs around it.
#
# ## Exercises
#
# 1. **Another pooling.** `TransformerClassifier(pooling="first")` classifies from the first
#    position's vector alone. Does it also give the same logits alone and padded?
# 2. **Accuracy per class.** Compute the test accuracy on the sequences with a repeated symbol
#    and on those without. Which class is harder, and how do the two combine into the overall
#    accuracy?
#
# ## Solutions
#
# Try the exercises first. In Jupyter the solution cells are collapsed: click the bar to open
# one. Each prints its finding; the tests check these lines.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 1: first-position pooling, alone and padded.
first_pooling = TransformerClassifier(
    vocab_size=24,
    num_classes=2,
    d_model=32,
    nhead=4,
    num_layers=2,
    dim_feedforward=64,
    dropout=0.0,
    max_len=16,
    pooling="first",
).eval()
with torch.no_grad():
    first_difference = float((first_pooling(alone)[0] - first_pooling(padded)[0]).abs().max())
print(f"exercise 1: pooling='first': max |logits alone - logits padded| = {first_difference:.2e}")

# %% [markdown]
# The same: the first position's vector is computed by attention that hides the padded keys, so
# padding cannot reach it either. (With this pooling one usually puts a special token first,
# like BERT's `[CLS]`, whose vector learns to summarise the text.)

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: accuracy on each class, and the overall accuracy as their weighted mean.
correct = predictions == test_labels  # [N]
per_class = {label: float(correct[test_labels == label].float().mean()) for label in (0, 1)}
shares = {label: float((test_labels == label).float().mean()) for label in (0, 1)}
combined = sum(shares[label] * per_class[label] for label in (0, 1))
print(f"exercise 2: accuracy without a repeat {per_class[0]:.3f}, with a repeat {per_class[1]:.3f}")
print(f"exercise 2: weighted by the class shares {combined:.3f} = overall {accuracy:.3f}")

# %% [markdown]
# The overall accuracy is the mean of the per-class accuracies weighted by how often each class
# occurs; with classes of about equal size, a model can hide a weak class behind a strong one
# only partly. The real classification task reports per-class precision, recall and F1 for
# this reason.
#
# This is the end of the tutorial. The README lists every command; [docs/masks.md](../masks.md)
# and [docs/architecture.md](../architecture.md) are the reference for the masks and the model.
