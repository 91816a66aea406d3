# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5. 应用：翻译与对联
#
# 同一个 `Seq2SeqTransformer` 可以用于所有序列到序列的任务；变化的只是数据、分词方式和解码规则。本章在一小部分真实数据上训练两个**极小**的模型，单核上各不到一分钟：在 Multi30k 上做德译英，以及对联（给出上联，写出下联）。它们不会好，也不打算好：目的是亲眼看到每个环节从头到尾跑通，读一读它们的注意力，然后知道真正的预设怎样运行、它们的成绩记录在哪里。
#
# ## 数据文件夹
#
# 本章用 Multi30k 和对联数据训练。先在终端里把两者各下载一次：
#
# ```bash
# transformer-lab download multi30k
# transformer-lab download couplets
# ```
#
# 它们会放进数据文件夹：设置了 `TRANSFORMER_LAB_DATA` 时是它指向的文件夹，否则是 `$XDG_CACHE_HOME`（未设置时为 `~/.cache`）下的 `transformer_lab/data`。像下面这样让 `data_dir = None`，本章就读取这个文件夹，什么都不用设置。要用别的文件夹，就把它的路径写进 `data_dir`；其中要有 `multi30k/`（文件 `train.de`、`train.en`、`val.de`、`val.en`）和 `couplet/`（一个训练集划分，例如 `train_couplet_machine/`，内含 `in.txt` 和 `out.txt`）。

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
# 这里会打印出文件夹的位置；如果出错，错误信息会指出缺了什么。
#
# ## 一个极小的翻译模型
#
# 翻译任务在 `transformer_lab.tasks.translation` 里：它学习一个两种语言共用的字节级 BPE（字节对编码：从单个字节出发，反复把最常见的相邻一对合并成新的子词，直到词表达到预定大小，于是常见的词是一个词元，罕见的词是几个），构建模型，用第 3 章的 `Trainer` 训练，并在验证集上计算 BLEU。它的预设（`translation_train.default_config()`）就是 [docs/results.md](../../results.md) 里的那个模型；这里把所有规模都缩小了：只用前 3,000 个训练句对、1,000 个子词的词表、d_model 64、2 + 2 层、不用 dropout，训练 300 步。

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
# 运行文件夹里有每次训练都会留下的东西：`metrics.jsonl`，以及检查点 `best/` 和 `last/`，其中有权重、配置和分词器。`Translator` 像一个应用程序那样载入检查点，翻译一组句子：

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
# 训练损失迅速下降（图的左侧），学习率则先升后降。在 Multi30k 上训练 300 个小步之后，模型写出的英语通顺但千篇一律：语料中最常见的开头之一（“A man in a blue shirt is ...”），而且不管源句是什么，往往都是同一句话。验证集 BLEU 只有几分。这正是模型最先学到的东西：目标语言中最常见的模式，然后才学会跟着源句走。
#
# ### 它的注意力
#
# 最后一个解码器层的交叉注意力，各头取平均：每一行是模型写出的一个目标词元，每一列是一个源端子词，一行显示模型在选这个词元时看向了哪里。

# %%
print("figure:", show_figure(translator.plot_attention(validation[0][0], figures / "translation.png")))

# %% [markdown]
# 在这样一个刚起步的模型里，各行都很分散，而且彼此相似：它几乎还没开始对齐。训练好的模型会呈现一条大致的对角线，并在德语和英语语序不同的地方弯折（例如德语从句末尾的动词）；`transformer-lab translate --checkpoint RUN "..." --plot-attention out.png` 可以为任何检查点画出同样的图。
#
# ## 一个极小的对联模型
#
# 对联的下联逐字回应上联：字数相同，平仄相对，词性相当，而且不重复上联的字。对联任务以字为单位（不用子词），解码时强制保证格式：字数、标点，以及与上联对应的重字。模型像上面一样缩小（3,000 个句对、d_model 64、2 + 2 层），训练 200 步。

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
# `CoupletWriter` 之于对联任务，就像 `Translator` 之于翻译。取验证集里的三副上联，每副给出参考下联和模型写的下联：

# %%
from transformer_lab import CoupletWriter

writer = CoupletWriter(couplet_run)
couplet_validation = couplet_data.load_validation_pairs(couplet_result.config.data, data_dir)[:3]
written = writer.write([upper for upper, _ in couplet_validation])
for (upper, lower), answer in zip(couplet_validation, written):
    print(f"upper: {upper}   reference: {lower}   model: {answer.candidates[0].text}")
    assert len(answer.candidates[0].text) == len(upper)

# %% [markdown]
# 每个回答的字数都与上联完全相同，标点也保留了：这是解码规则保证的，而不是模型学会的。训练 200 步之后，用到的字多半是语料中最常见的那些（一、十、千、万、大、人……），组合在一起还谈不上意思。
#
# ### 它的注意力
#
# 对联预设把编码器在上联第 `t` 个字上的向量加到解码器第 `t` 个位置的输入上（`model.aligned_decoder_input`），因为下联第 `t` 个字回应的正是上联第 `t` 个字。最后一层的交叉注意力（各头取平均）显示，除此之外解码器还在看哪里。

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
# 各行彼此相似：每一行的大部分权重都落在上联的同一个字上，无论是哪个位置。训练 200 步之后，交叉注意力还没有学会对齐，把上联第 `t` 个字送到第 `t` 个位置的，只有对齐的输入。坐标轴上的刻度就是上下联的汉字；它们用系统中已安装的中日韩（CJK）字体绘制（库会自动选用一种，例如 Noto Sans CJK；如果一种都没有，会警告一次，并说明应当安装什么）。
#
# ## 真正的模型
#
# 两个任务都有按笔记本电脑级 CPU 规模设计的预设，用同样的命令训练。它们读取 `transformer-lab download` 填好的数据文件夹：
#
# ```bash
# transformer-lab train translation --out runs/de-en
# transformer-lab evaluate translation --checkpoint runs/de-en/best --split test_2016_flickr --beam 5
# transformer-lab train couplet --out runs/couplet
# transformer-lab evaluate couplet --checkpoint runs/couplet/best
# ```
#
# [docs/results.md](../../results.md) 记录了每个预设的成绩（BLEU；对联还有格式和对仗方面的指标），附有确切的命令、机器、日期和耗时；[docs/experiments/](../../experiments/README.md) 中按日期排列的页面记录了一路上尝试过什么。`--preset base` 是论文的 base 模型，适合在 GPU 上训练。在 Python 里，`Translator`、`CoupletWriter` 和 `Classifier` 可以载入任何检查点，用法如上。
#
# ## 小结
#
# - 同一个 `Seq2SeqTransformer` 既能做翻译也能写对联；变化的是数据、分词器（翻译用子词，对联用字）和解码规则。
# - 一次训练会留下 `metrics.jsonl` 以及检查点 `best/` 和 `last/`；`Translator` 和 `CoupletWriter` 载入检查点并用它解码。
# - 刚开始训练的模型先写出目标语言中最常见的模式，交叉注意力也很分散；对联的长度和标点来自解码规则。
# - 真正的预设用 `transformer-lab train` 训练，成绩记录在 docs/results.md 中。
#
# ## 练习
#
# 1. **子词。** 用翻译模型的子词分词器（`translator.tokenizers.source`）切分第一个验证集源句。它用了多少个子词，对应多少个单词？把编号解码回来能得到原句吗？
# 2. **最好的 n 个。** 让 `translator.candidates` 用宽度为 4 的束给出这个句子最好的三个译文。它们按什么顺序排列，依据的是哪个数？
# 3. **对联的规则。** 让 `writer` 为一个上联给出三个候选（`beam=4, num_candidates=3`）：它们都保持了上联的长度吗？对一行拉丁字母，它又如何回答？
#
# ## 参考答案
#
# 请先自己做练习。在 Jupyter 中，答案单元是折叠的：点击左侧的竖条即可展开。每个答案都会打印它的结论；测试会检查这些输出。

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
# 常见的词各占一个子词；较少见的词被切成词表认识的几段，所以不会有未知的词。这个分词器是字节级的、无损的：解码后恰好得到（规范化后的）原句。

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: three candidates from a beam of 4, best first.
candidates = translator.candidates(sentence, nbest=3, beam=4)
for candidate in candidates:
    print(f"score {candidate.score:8.3f}  log-prob {candidate.log_prob:8.3f}  {candidate.text}")
scores = [candidate.score for candidate in candidates]
print(f"exercise 2: {len(candidates)} candidates, best first by score: {scores == sorted(scores, reverse=True)}")

# %% [markdown]
# 它们按 `score` 从好到差排列：各词元对数概率之和除以长度惩罚，也就是束搜索用来排序的数。如果没有长度惩罚，短的输出会占便宜（每多一个词元，就多加一个负的对数概率）。

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
# 每个候选都保持了上联的长度：这些规则在搜索的每一步、对每一个束都起作用。词表读不懂的一行得不到候选，而是得到一个说明原因的 `error`，而不是抛出异常，这样一批中有一行出错，不会连累其他行。
#
# **下一章（选读）：** 第 6 章只用编码器做文本分类。
