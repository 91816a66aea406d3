# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3. 训练与解码
#
# 第 2 章搭起了第 0 章[架构图](../../figures/architecture.png)中的模型；本章训练它，并按架构图顶端所示的方式使用它：生成器的 logits 变成下一个词元的概率，一次一个词元。论文的训练用到两个初次实现时常被略过的手段：**标签平滑**（label smoothing），让模型不至于变得过分确定；以及学习率的**预热调度**（warm-up）。本章先分别看这两者，然后在 Annotated Transformer 的**复制任务**（输出必须重复输入）上用不到一分钟训练一个小模型，分别用**贪心搜索**和**束搜索**（beam search）解码，最后检查让解码变快的**键/值缓存**（KV cache）与不用缓存的解码结果完全一致。
#
# 单个 CPU 核上大约一分钟，几乎全部花在训练上。

# %%
import dataclasses

import torch
import torch.nn.functional as F

from transformer_lab.training import label_smoothed_cross_entropy, noam_lr

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## 标签平滑
#
# 普通的交叉熵要求模型把概率 1 放在正确的词元上。平滑系数为 `e` 时，目标分布变得柔和：正确词元得到 `1 - e`，其余 `V - 1` 个词元各得 `e / (V - 1)`。这样模型不仅会因为出错受罚，也会因为过分确定受罚，它给出的概率因此更可信；论文报告 BLEU 也更高（BLEU 统计译文与参考译文共有的词 n 元组，取值 0-100），困惑度则变差（每个词元平均损失的指数：模型在多少个词元之间犹豫）。
#
# 在大小为 5 的词表上比较四种预测，正确答案是词元 2：

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
# 普通交叉熵随着预测越来越确定而一路下降；平滑后的损失则在平滑目标本身（正确词元 0.9）处最低，对几乎完全确定的预测反而又升高了。
#
# 本库的损失函数有两个细节。PyTorch 的 `F.cross_entropy(label_smoothing=e)` 把 `e` 分摊到全部 `V` 个类别上，包括正确的那个，所以要得到同样的目标分布，那里要传 `e * V / (V - 1)`。另外，目标为 `ignore_index`（训练中即填充编号）的位置不计入损失，无论它们的 logits 是什么：

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
# ## 预热调度
#
# 论文的学习率在前 `warmup_steps` 步线性上升，之后按步数的平方根倒数下降：
#
# `lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)`
#
# 两项在 `step = warmup_steps` 处相等，学习率在此达到峰值。训练刚开始时，Adam 对梯度尺度的估计还很粗糙，注意力权重也接近均匀；这时用小的学习率，可以避免最初几次更新就把模型推到无法恢复的地方。

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
# 学习率在第 4,000 步达到峰值（d_model 为 512 时约 0.0007），到第 16,000 步降为一半。图中，更长的预热（8,000 步）峰值来得更晚也更低；更小的模型（d_model 256）整条曲线高出 `sqrt(2)` 倍。
#
# ## 复制任务
#
# 源序列是从 10 个符号中随机抽取的 1 到 8 个符号，目标就是同一个序列。这个任务对人来说微不足道，对模型却是真正的考验：解码器必须学会在每一步通过交叉注意力找到对应的源位置。任务在 `transformer_lab.tasks.synthetic` 里，它的预设就是 `make demo` 所训练的。这里用更小的配置：d_model 32、1500 步，标签平滑 0.1，加上预热调度。500 条测试序列都没有在训练中出现过。`synthetic_train.train` 运行本库的训练循环 `transformer_lab.training.Trainer`（批量、损失、Adam、学习率调度、验证和检查点），第 5、6 章也用它。
#
# 训练采用**教师强制**（teacher forcing）：解码器读入右移一位的真实目标，即 `<bos>` 加上目标（`tgt_in_ids`），并一次性地为所有位置预测下一个词元（`tgt_out_ids`，即目标加上 `<eos>`），从不读入自己的猜测。第 4 章会仔细看这两个张量。

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
# 训练损失不会降到 0：在 14 个词元上做 0.1 的平滑时，它的下限是平滑目标分布的熵，约 0.58。
#
# ## 贪心搜索与束搜索
#
# 贪心搜索每一步都取概率最高的词元。束搜索每一步保留概率最高的 `k` 个前缀，最后返回最好的已完成序列；它可能找到一个第一个词元并非贪心选择的序列。`DecodeConfig` 决定用哪种搜索；`synthetic_train.exact_match` 解码每条测试源序列，统计输出与目标完全相同的比例。

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
# 两种搜索几乎都能复制每一条没见过的序列（上面的单元断言两者的完全匹配率都不低于 0.9；它打印出的比例才是这次的测量结果）。在这么简单的任务上，模型对每个词元都很确定，所以束搜索很少改变什么；它的好处要在真实文本上才显现（第 5 章，以及 [docs/results.md](../../results.md)）。要看两种搜索的差别，可以看它们各自给出的分数：`greedy_search` 和 `beam_search` 返回每个假设及其对数概率。

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
# 搜索的 `length_penalty` 把假设的对数概率除以其长度的某个幂（GNMT 长度惩罚，见第 5 章），使长输出不至于因为负项多而排在后面。`length_penalty=0.0` 时束搜索只按对数概率排序，在这里它给出的最优假设在每个句子上的得分都不低于贪心搜索的结果（在这个模型上两者多半相同）。这是常见情形，并无保证：某一步若有 `k` 个别的前缀得分更高，贪心的前缀就会被挤出束外，搜索最后的得分可能低于贪心搜索。虽然每个输出都正确，对数概率却明显小于 0：标签平滑让模型习惯于给其他词元留出大约十分之一的概率。
#
# ## 键/值缓存，与不用缓存的解码对照检查
#
# 按朴素的方法解码第 `t` 个词元，要把整个前缀 `0..t` 重新过一遍解码器：计算量是平方级的。但有因果掩码在，位置 `0..t-1` 的键和值在位置 `t` 到来时不会改变，因此可以保存下来：每一步只需计算新的一行。交叉注意力的键和值由 memory 投影而来，每个句子只需计算一次。缓存的全部意义在于输出不变，所以本库从两方面检查：整次搜索得到的词元，以及每一步的 logits。

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
# 词元完全相同，logits 在浮点舍入误差内一致（约 `1e-6`）：带缓存的一步以不同的顺序做了同样的加法。在真实句子上，缓存让解码快好几倍（测量结果见 [docs/results.md](../../results.md)）。
#
# ## 小结
#
# - 标签平滑的训练目标在正确词元上是 `1 - e`，在其余每个词元上是 `e / (V - 1)`；损失函数忽略填充位置。
# - 预热调度在前 `warmup_steps` 步内线性提高学习率，之后按 `1 / sqrt(step)` 降低。
# - 一个小模型不到一分钟就学会了复制任务；贪心搜索每一步取最好的词元，束搜索保留最好的 `k` 个前缀，通常（并非总是）得到更高的得分。
# - 键/值缓存每一步只计算新的一行，得到的词元与不用缓存时相同，logits 也在舍入误差内相同。
#
# ## 练习
#
# 1. **平滑损失的下限。** 在平滑系数 0.1 下，复制任务的训练损失最低能达到多少？由词表大小算出它，并与这次训练最后的训练损失比较。
# 2. **调度的峰值。** 写出预热调度峰值学习率的闭式表达式，在上面的训练（`d_model` 32，预热 150 步）上检验它，并找出学习率降到峰值一半时是第几步。
# 3. **宽度为一的束。** 在 `batch` 上运行 `beam_size=1` 的 `beam_search`：它找到的和 `greedy_search` 找到的一样吗？
#
# ## 参考答案
#
# 请先自己做练习。在 Jupyter 中，答案单元是折叠的：点击左侧的竖条即可展开。每个答案都会打印它的结论；测试会检查这些输出。

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
# 平滑损失是相对于平滑目标的交叉熵，所以它不低于这个目标分布的熵，当预测恰好等于目标时取到。词表有 14 个词元时约为 0.58；这次训练最终略高于它，这就是它的损失“不会降到 0”的原因。

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: the peak is factor * d_model^-0.5 * warmup^-0.5, at step = warmup_steps.
d_model, warmup, factor = 32, 150, 1.0
closed_form = factor * d_model**-0.5 * warmup**-0.5
rates = [noam_lr(step, d_model, warmup, factor) for step in range(1, 2001)]
half = next(step for step, rate in enumerate(rates, start=1) if step > warmup and rate <= closed_form / 2)
print(f"exercise 2: peak {closed_form:.5f} = highest rate {max(rates):.5f}: {math.isclose(closed_form, max(rates))}")
print(f"exercise 2: the rate is half its peak at step {half} = 4 x warmup")

# %% [markdown]
# 在 `step = warmup` 处，`min` 中的两项相等，都是 `warmup^-0.5`。峰值之后学习率为 `peak * sqrt(warmup / step)`，在 `step = 4 * warmup` 时减半：这次训练是第 600 步，论文的 4,000 步预热则是第 16,000 步。

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 3: beam search with a single beam.
with torch.no_grad():
    one_beam = beam_search(model, batch.src_ids, beam_size=1, max_len=12, length_penalty=0.0)
same = [beam[0].ids for beam in one_beam.hypotheses] == [greedy[0].ids for greedy in greedy_output.hypotheses]
print(f"exercise 3: a beam of one finds the greedy tokens for every sentence: {same}")

# %% [markdown]
# 只有一个束时，每一步都为唯一的前缀保留唯一最好的延续：这就是贪心搜索。束搜索把这个选择放宽为：`k` 个前缀的 `k` 个最好的延续。
#
# **下一章：** 第 4 章讨论为什么解码器不需要为自己的填充加掩码。
