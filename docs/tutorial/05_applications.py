# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5. Applications: translation and couplets
#
# The same `Seq2SeqTransformer` serves every sequence-to-sequence task; what changes is the data,
# the tokenizer and the decoding rules. This chapter trains two **tiny** models on a slice of real
# data, in under a minute each on one core: German-to-English translation on Multi30k, and
# couplets (对联: given the upper line, write the lower line). They will not be good, and they are
# not meant to be: the point is to watch each piece work end to end, to read their attention, and
# then to know how the real presets are run and where their scores are recorded.
#
# ## The data folder
#
# The chapter trains on Multi30k and on couplets. Fetch both once, from a shell:
#
# ```bash
# transformer-lab download multi30k
# transformer-lab download couplets
# ```
#
# They land in the data folder: `$TRANSFORMER_LAB_DATA` if it is set, else
# `transformer_lab/data` in `$XDG_CACHE_HOME` (`~/.cache` where that is unset). With
# `data_dir = None`, as below, the chapter reads that folder, so nothing needs setting. To use
# another folder, write its path into `data_dir`. It must hold `multi30k/` (the files
# `train.de`, `train.en`, `val.de`, `val.en`) and `couplet/` (a training split such as
# `train_couplet_machine/`, with `in.txt` and `out.txt`).

# %%
import dataclasses
from pathlib import Path

import torch

from transformer_lab.data import resolve_multi30k_dir
from transformer_lab.lab.plotting import show_figure

torch.manual_seed(0)

data_dir = None  # None: $TRANSFORMER_LAB_DATA, else $XDG_CACHE_HOME (or ~/.cache)/transformer_lab/data
if data_dir is not None:
    data_dir = str(Path(data_dir).expanduser())
print("Multi30k files in:", resolve_multi30k_dir(data_dir))
figures = Path("runs/tutorial-figures")

# %% [markdown]
# The folder is printed; an error here names what is missing.
#
# ## A tiny translation model
#
# `transformer_lab.tasks.translation` holds the translation task: it learns a byte-level BPE
# shared by both languages (byte-pair encoding: starting from single bytes, it merges the most
# frequent adjacent pair into a new subword, again and again up to the vocabulary size, so that
# common words are one token and rare ones a few), builds the model, trains it with the `Trainer`
# of chapter 3 and scores validation BLEU. Its preset (`translation_train.default_config()`) is
# the model of [docs/results.md](../results.md);
# here every size is cut down: the first 3,000 training pairs, a vocabulary of 1,000 subwords,
# d_model 64 with 2 + 2 layers and no dropout, and 300 optimizer steps.

# %%
from transformer_lab.tasks.translation import train as translation_train

config = translation_train.default_config()
config = dataclasses.replace(
    config,
    data=dataclasses.replace(
        config.data, data_dir=data_dir, num_train=3000, num_validation=50, vocab_size=1000, max_tokens=1024
    ),
    model=dataclasses.replace(
        config.model,
        d_model=64,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=128,
        dropout=0.0,
        max_len=128,
    ),
    train=dataclasses.replace(
        config.train,
        epochs=0,
        max_steps=300,
        warmup_steps=100,
        lr_factor=1.0,
        cooldown_steps=0,
        eval_every_steps=300,
        keep_last=0,
        precision="fp32",
        progress_bar=False,
        seed=0,
    ),
    decode=dataclasses.replace(config.decode, precision="fp32"),
)
from transformer_lab.training.metrics_log import read_metrics

translation_run = Path("runs/tutorial-translation")
translation_result = translation_train.train(config, translation_run)
summary = translation_result.summary
losses = [row["train_loss"] for row in read_metrics(translation_run / "metrics.jsonl") if row["event"] == "train"]
print(f"translation: {summary['steps']} steps in {summary['wall_seconds']:.0f} s")
print(f"translation: training loss {losses[0]:.2f} -> {losses[-1]:.2f}")
print(f"translation: validation BLEU {summary['final_metrics']['val_bleu']:.1f}")

# %% [markdown]
# The run folder holds what every run holds: `metrics.jsonl`, and checkpoints `best/` and `last/`
# with the weights, the config and the tokenizer. `Translator` loads one the way an application
# would and translates lists of sentences:

# %%
from transformer_lab import Translator
from transformer_lab.data import load_multi30k
from transformer_lab.lab.result_plots import plot_training_curve

curve = plot_training_curve(figures / "translation-curve.png", translation_run / "metrics.jsonl")
print("figure:", show_figure(curve))

translator = Translator(translation_run)
validation = load_multi30k("val", data_dir)[:3]
outputs = translator.translate([source for source, _ in validation], beam=4)
for (source, reference), output in zip(validation, outputs):
    print(f"source:    {source}\nreference: {reference}\nmodel:     {output}\n")

# %% [markdown]
# The training loss falls steeply (left of the figure) while the learning rate warms up and
# decays. After 300 small steps on Multi30k the model writes fluent but generic English: one of
# the openings the corpus repeats most ("A man in a blue shirt is ..."), often the same sentence
# whatever the source. Validation BLEU is a few points. That is what a model learns first: the
# target language's most frequent patterns, before it learns to follow the source.
#
# ### Its attention
#
# The cross-attention of the last decoder layer, averaged over the heads: each row is a target
# token the model wrote, each column a source subword, and a row shows where the model looked
# when it chose that token.

# %%
print("figure:", show_figure(translator.plot_attention(validation[0][0], figures / "translation.png")))

# %% [markdown]
# In a model this young the rows are broad and alike: it has barely begun to align. A trained
# model shows a rough diagonal, bending where German and English order differ (the verb at the
# end of a German clause, for instance); `transformer-lab translate --checkpoint RUN "..."
# --plot-attention out.png` draws the same map for any checkpoint.
#
# ## A tiny couplet model
#
# A couplet's lower line answers the upper one character by character: the same length, a tone
# contrast, parallel grammar, and no character of the upper line repeated. The couplet task reads
# characters (no subwords), and its decoding enforces the form: the length, the punctuation, the
# repetitions that mirror those of the upper line. The model is cut down as before (3,000 pairs,
# d_model 64, 2 + 2 layers), and trains for 200 steps.

# %%
from transformer_lab.tasks.couplet import data as couplet_data
from transformer_lab.tasks.couplet import train as couplet_train

couplet_config = couplet_train.default_config()
couplet_config = dataclasses.replace(
    couplet_config,
    data=dataclasses.replace(
        couplet_config.data, data_dir=data_dir, num_train=3000, num_validation=50, max_tokens=1024
    ),
    model=dataclasses.replace(
        couplet_config.model,
        d_model=64,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=128,
        dropout=0.0,
    ),
    train=dataclasses.replace(
        couplet_config.train,
        epochs=0,
        max_steps=200,
        warmup_steps=80,
        lr_factor=1.0,
        cooldown_steps=0,
        eval_every_steps=200,
        keep_last=0,
        precision="fp32",
        progress_bar=False,
        seed=0,
    ),
    decode=dataclasses.replace(couplet_config.decode, precision="fp32"),
)
couplet_run = Path("runs/tutorial-couplet")
couplet_result = couplet_train.train(couplet_config, couplet_run)
couplet_summary = couplet_result.summary
couplet_losses = [row["train_loss"] for row in read_metrics(couplet_run / "metrics.jsonl") if row["event"] == "train"]
print(f"couplet: {couplet_summary['steps']} steps in {couplet_summary['wall_seconds']:.0f} s")
print(f"couplet: training loss {couplet_losses[0]:.2f} -> {couplet_losses[-1]:.2f}")

# %% [markdown]
# `CoupletWriter` is the couplet task's `Translator`. Three upper lines from the validation pairs,
# each with the reference lower line and the model's:

# %%
from transformer_lab import CoupletWriter

writer = CoupletWriter(couplet_run)
couplet_validation = couplet_data.load_validation_pairs(couplet_result.config.data, data_dir)[:3]
written = writer.write([upper for upper, _ in couplet_validation])
for (upper, lower), answer in zip(couplet_validation, written):
    print(f"upper: {upper}   reference: {lower}   model: {answer.candidates[0].text}")
    assert len(answer.candidates[0].text) == len(upper)

# %% [markdown]
# Every answer has exactly the length of its upper line and keeps its punctuation: the decoding
# rules guarantee that, not the model. After 200 steps the characters themselves are mostly the
# corpus's most frequent ones (一, 十, 千, 万, 大, 人 ...), put together without much sense yet.
#
# ### Its attention
#
# The couplet preset adds the encoder's vector of upper character `t` to the decoder's input at
# position `t` (`model.aligned_decoder_input`), since lower character `t` answers upper
# character `t`. The cross-attention of the last layer, averaged over the heads, shows where the
# decoder still looks beyond that.

# %%
from transformer_lab.lab.checkpoints import sentence_attention
from transformer_lab.lab.figures import plot_attention_heatmap

upper = couplet_validation[0][0]
lower_ids = written[0].candidates[0].ids
vocabulary = writer.vocabulary
attention = sentence_attention(
    writer.model, vocabulary.encode(list(upper)), lower_ids, source_vocabulary=vocabulary, target_vocabulary=vocabulary
)
last_layer = f"decoder.layers.{couplet_config.model.num_decoder_layers - 1}.multihead_attn"
weights = attention.maps[last_layer][0].mean(dim=0)  # [T, S], mean over heads
print("each row sums to 1:", torch.allclose(weights.sum(dim=-1), torch.ones(weights.shape[0])))
heatmap = plot_attention_heatmap(
    weights,
    attention.source_labels,
    attention.target_labels,
    figures / "couplet.png",
    title="couplet: cross-attention, last layer",
)
print("figure:", show_figure(heatmap))

# %% [markdown]
# The rows are alike: most of each row's weight falls on one upper character, the same for every
# position. After 200 steps the cross-attention has not yet learnt an alignment, and the aligned
# input alone carries upper character `t` to position `t`. The tick labels
# are the Chinese characters of both lines; they draw with an installed CJK font (the library
# picks one, such as Noto Sans CJK, and warns once, naming what to install, where there is none).
#
# ## The real models
#
# Both tasks have presets sized for a laptop-class CPU, and the same commands train them. They
# read the data folder that `transformer-lab download` filled:
#
# ```bash
# transformer-lab train translation --out runs/de-en
# transformer-lab evaluate translation --checkpoint runs/de-en/best --split test_2016_flickr --beam 5
# transformer-lab train couplet --out runs/couplet
# transformer-lab evaluate couplet --checkpoint runs/couplet/best
# ```
#
# [docs/results.md](../results.md) records what each preset scores (BLEU, and for couplets the
# form and antithesis rates), with the exact command, the machine, the date and the time it took;
# the dated pages in [docs/experiments/](../experiments/README.md) tell what was tried on the way.
# `--preset base` is the paper's base model, for GPUs. From Python, `Translator`, `CoupletWriter`
# and `Classifier` load any checkpoint, as above.
#
# ## Summary
#
# - One `Seq2SeqTransformer` serves translation and couplets; the data, the tokenizer (subwords
#   for translation, characters for couplets) and the decoding rules change.
# - A training run leaves `metrics.jsonl` and the checkpoints `best/` and `last/`; `Translator`
#   and `CoupletWriter` load a checkpoint and decode with it.
# - A young model writes the target language's most frequent patterns first, and its
#   cross-attention is broad; the couplet's length and punctuation come from the decoding rules.
# - The real presets are trained with `transformer-lab train`, and their scores are recorded in
#   docs/results.md.
#
# ## Exercises
#
# 1. **Subwords.** Split the first validation source sentence into the translation model's
#    subwords (`translator.tokenizers.source`). How many subwords does it take, against how many
#    words, and does decoding the ids give the sentence back?
# 2. **The n best.** Ask `translator.candidates` for the three best translations of that
#    sentence with a beam of 4. In what order do they come, and by what number?
# 3. **The couplet's rules.** Ask `writer` for three candidates for one upper line (`beam=4,
#    num_candidates=3`): do they all keep its length? What does it answer for a line of Latin
#    letters?
#
# ## Solutions
#
# Try the exercises first. In Jupyter the solution cells are collapsed: click the bar to open
# one. Each prints its finding; the tests check these lines.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 1: the sentence as the model reads it.
from transformer_lab.data.subword import token_labels

tokenizer = translator.tokenizers.source
sentence = validation[0][0]
subword_ids = tokenizer.encode(sentence)
print("subwords:", token_labels(tokenizer, subword_ids))
print(f"exercise 1: {len(subword_ids)} subwords for {len(sentence.split())} words")
round_trip = tokenizer.decode(subword_ids) == tokenizer.normalize(sentence)
print(f"exercise 1: decode(encode(sentence)) gives the sentence back: {round_trip}")

# %% [markdown]
# Frequent words are one subword each; rarer ones are cut into pieces the vocabulary knows, so no
# word is ever unknown. The tokenizer is byte-level and lossless: decoding gives the (normalised)
# sentence back exactly.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: three candidates from a beam of 4, best first.
candidates = translator.candidates(sentence, nbest=3, beam=4)
for candidate in candidates:
    print(f"score {candidate.score:8.3f}  log-prob {candidate.log_prob:8.3f}  {candidate.text}")
scores = [candidate.score for candidate in candidates]
print(f"exercise 2: {len(candidates)} candidates, best first by score: {scores == sorted(scores, reverse=True)}")

# %% [markdown]
# They come best first by `score`: the sum of the token log-probabilities divided by a length
# penalty, the number beam search ranks by. Without the penalty, short outputs would win (every
# extra token adds a negative log-probability).

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 3: three candidates for one upper line, and a line the model cannot answer.
answer = writer.write(upper, beam=4, num_candidates=3)
lengths_kept = all(len(candidate.text) == len(upper) for candidate in answer.candidates)
for candidate in answer.candidates:
    print(f"upper: {upper}   candidate: {candidate.text}")
print(f"exercise 3: {len(answer.candidates)} candidates, each as long as the upper line: {lengths_kept}")
latin = writer.write("hello world")
print(f"exercise 3: for 'hello world': {len(latin.candidates)} candidates, error: {latin.error}")

# %% [markdown]
# Every candidate keeps the upper line's length: the rules are applied at every step of the
# search, to every beam. A line the vocabulary cannot read gets no candidates and an `error`
# that says why, not an exception, so that one bad line in a batch does not cost the others.
#
# **Next (optional):** chapter 6 uses the encoder alone to classify text.
