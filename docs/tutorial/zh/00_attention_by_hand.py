# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 0. 亲手写出注意力
#
# Transformer 把一个序列变成另一个序列：把一句德语译成英语，或者由对联的上联写出下联。在本教程把库里的模型拆开之前，本章先给出整体的图景，然后请你用几行普通的 PyTorch 代码亲手写出它的核心运算：
#
# 1. 一张图看懂整个架构，以及后面各章称呼各个部件所用的名字；
# 2. 缩放点积注意力：得分、缩放、掩码、softmax、加权求和；
# 3. 为什么得分要除以 `sqrt(d_k)`，用实验量出来；
# 4. 用掩码遮住键；
# 5. 多头注意力，并在相同权重下与 `torch.nn.MultiheadAttention` 对照检查。
#
# 本章不需要库里的模型：只用 `torch`（画图和一道练习会用到本库）。在单个 CPU 核上几秒钟就能跑完。和每一章一样，本章最后有小结和练习，练习的参考答案紧随其后。

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
# ## 一张图看懂整个模型
#
# 下图是《Attention Is All You Need》中的编码器-解码器 Transformer，按本库的实现画出。后面每一章都会回头引用它；同一张图也在 [docs/figures/architecture.png](../../figures/architecture.png)。这个单元会打印图片写到了哪里；在笔记本中，它还会把图片显示出来。

# %%
print("figure:", show_figure(plot_architecture(figures / "architecture.png")))

# %% [markdown]
# 从下往上读这张图。
#
# - **词元与嵌入。** 一个句子以词元编号（整数）的形式进入模型。每个编号在一张大小为 `d_model` 的向量表中查出对应的向量（即*嵌入*），再加上一个编码位置的固定模式，因为注意力本身看不到顺序（练习 1 会说明这一点）。
# - **编码器**（左侧）是 `N` 个相同层的堆叠。每层有两个*子层*：自注意力，让每个源位置读取所有其他位置；以及对每个位置单独作用的前馈网络。每个子层都包在残差连接和层归一化里（图中的“add & norm”）。
# - **memory** 是编码器的输出：每个源词元一个向量，形状为 `[B, S, D]`（批量、源序列长度、`d_model`）。每个句子只计算一次。
# - **解码器**（右侧）是 `N` 个层的堆叠，每层有三个子层：对已写出的目标序列做*带掩码的*自注意力；**交叉注意力**，让每个目标位置向 memory 发出查询（每个解码器层读取的都是同一个 memory）；以及前馈网络。
# - **生成器**是一个从 `d_model` 到词表大小 `V` 的线性映射。它的输出就是 **logits**：在每个目标位置上，词表中每个词元一个分数；softmax 把它们变成下一个词元的概率。
#
# 训练时，解码器读入右移一位的目标序列（以 `<bos>` 开头），并要在所有位置上同时预测目标序列本身（以 `<eos>` 结尾）；损失函数把 logits 与正确的词元相比较，反向传播为每一个权重算出损失的*梯度*。使用时，模型一次写出一个词元，再把它送回输入（第 3 章）。
#
# 图中出现了三种注意力，各有自己的掩码：编码器的自注意力不能读取填充，解码器的自注意力不能读取未来，交叉注意力不能读取 memory 中的填充。本章余下的部分就来搭建注意力本身。
#
# ## 注意力：一种“软”查找
#
# 查字典时，拿查询与每一个键比较，返回匹配的那个键所对应的值。注意力做的是同一件事，只是“软”的：它用点积给查询和每个键打分，用 softmax 把分数变成和为 1 的权重，再返回各个值的加权和。把许多查询写成矩阵，一次算完：
#
# `attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`
#
# 其中 `d_k` 是查询（也是键）的维度。用 torch 写出来只有五行：


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
# 第一个查询与键 2 方向相同，所以键 2 几乎得到了它的全部权重，输出也几乎就是值 2，即 `[10, 10]`。第二个查询是零向量：所有得分都是 0，权重是均匀的（每个 0.25），输出就是各个值的平均。每一行权重都是键上的一个概率分布。
#
# ## 为什么要除以 sqrt(d_k)
#
# 设查询和键的各个分量相互独立，均值为 0、方差为 1（初始化合理的网络看到的大致就是这样）。它们的点积是 `d_k` 个乘积之和，每个乘积的方差为 1，所以点积的方差是 `d_k`：当 `d_k = 512` 时，得分通常在 ±23 左右。对相差这么大的分数做 softmax，几乎所有权重都会落在最大的那个上；而在 softmax 饱和的地方，它的梯度几乎为零，权重就学不动了。除以 `sqrt(d_k)` 之后，无论 `d_k` 多大，方差都回到 1。
#
# 下面用实验测量：500 个查询，每个查询对 16 个键，`d_k` 逐渐增大。对每种设置，这个单元打印得分的方差、每行 softmax 权重中的最大值（对各行取平均），以及从权重上的一个随机梯度传回到得分上的梯度的平均大小；每一对数字中，前者不缩放，后者缩放。

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
# 不缩放时（每对数字中的第一个），方差随 `d_k` 增长（在抽样误差范围内等于 `d_k`），最大权重逐渐逼近 1（softmax 只挑中一个键），梯度到 `d_k = 1024` 时缩小了十倍以上。缩放之后，方差保持在 1 附近，权重保持分散，梯度在每个 `d_k` 下都保持原有的大小。论文模型中 `d_k = 64`；图中可以看到不做除法时它会落在哪里。
#
# ## 掩码遮住键
#
# 掩码说明一个查询不能读取哪些键。在本库中，与 PyTorch 一样，布尔掩码中 **True 表示遮住**；被遮住的得分在 softmax 之前变成 `-inf`，于是它们的权重恰好为 0，其余权重之和仍然是 1。我们需要两种掩码。
#
# 解码器自注意力使用的**因果掩码**：位置 `t` 只能读取位置 `0..t`，因为训练时它要预测第 `t + 1` 个词元，不能事先看到它。因果掩码遮住对角线以上的所有位置：

# %%
length = 4
causal = torch.ones(length, length, dtype=torch.bool).triu(diagonal=1)  # [T, T], True above the diagonal
sequence = torch.randn(length, 8)  # [T, D]: self-attention, so queries, keys and values are all this
_, causal_weights = attention(sequence, sequence, sequence, mask=causal)
print("causal mask (1 = hidden):\n", causal.int())
print("weights:\n", causal_weights)

# %% [markdown]
# 第 0 行只读取它自己（权重为 1），第 3 行读取全部四个位置；对角线以上的权重全是 0。
#
# **键填充掩码**：一个批量中的句子长短不一，要填充到最长句子的长度。填充位置不是词元，任何查询都不能读取它。这个掩码每个句子一行，形状为 `[B, S]`，填充处为 True；把它变形为 `[B, 1, S]` 后，它会在查询行上广播，于是一个填充的键对它所在句子的每一个查询都被遮住。

# %%
lengths = torch.tensor([4, 2])  # two sentences: 4 real tokens, and 2 real tokens + 2 pads
key_padding = torch.arange(4) >= lengths.unsqueeze(1)  # [B, S], True = padding
batch = torch.randn(2, 4, 8)  # [B, S, D]
_, padding_weights = attention(batch, batch, batch, mask=key_padding.unsqueeze(1))  # mask [B, 1, S]
print("key padding mask:\n", key_padding.int())
print("weights of sentence 1:\n", padding_weights[1])

# %% [markdown]
# 在句子 1 中，最后两列在每一行里都是 0。而最后两*行*，也就是填充位置自己的查询，仍然会得到回答：两个真实词元的混合。第 1 章会讨论这是否要紧（并不要紧），并详细展示本库的掩码及其形状。
#
# ## 多头注意力
#
# 一次注意力只给每个查询一个键上的分布。Transformer 并排运行 `H` 个注意力（即*头*），每个头作用在输入的一个各自学到的投影上，于是一个头可以关注比如前一个词，另一个头关注主语。即使只有一个头，投影也很重要：在上面的自注意力中，每个位置的查询就是它自己的键，所以它往往读取自己（较大的权重大多落在对角线上）；学到的 `W_q` 和 `W_k` 让查询可以去寻找自身以外的东西。取 `d_model = 16`、`H = 4` 个头、每头 `d_k = 4`：
#
# 1. 投影：`Q = query W_q^T + b_q`，K 和 V 同理，形状都是 `[B, L, d_model]`；
# 2. 拆分：把最后一维看成 `[H, d_k]`，再把头的维度移到前面，得到 `[B, H, L, d_k]`；
# 3. 注意力：用上面的函数，对所有头一次算完（它对任意多个前导维度都适用）；
# 4. 合并：把头的维度移回去并拼接，得到 `[B, T, d_model]`；
# 5. 再用 `W_o` 把结果投影一次。
#
# `torch.nn.MultiheadAttention` 持有的正是这些权重：`in_proj_weight` 是把 `W_q`、`W_k`、`W_v` 堆叠在一起的矩阵（`[3 d_model, d_model]`），`out_proj` 就是 `W_o`。所以我们可以用它的权重写出这五步，再与它比较。

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
# 最大差值为 0，或者只是浮点舍入误差（小于 `1e-6`）：亲手写出的这五步*就是*多头注意力。`torch.nn.MultiheadAttention` 返回的是在各头之间平均后的权重，`[B, T, S]`；我们的函数保留了每个头的权重，`[B, H, T, S]`。
#
# 本库的 `transformer_lab.nn.MultiheadAttention` 也是这五步，只是每一行都带着形状注释，使用 PyTorch 的参数和参数名，接受 PyTorch 接受的每一种掩码，有一条快速路径，还有解码用的键/值缓存。第 1 章会跟踪它的一次调用。
#
# ## 小结
#
# - Transformer 由三部分组成：编码器堆叠把源序列变成 **memory**；解码器堆叠读取自己已有的前缀和 memory；**生成器**把解码器的每个位置变成词表上的 **logits**。
# - 注意力就是 `softmax(Q K^T / sqrt(d_k)) V`：每个查询一行权重，每个键一列，每行之和为 1。
# - 如果不除以 `sqrt(d_k)`，得分的方差随 `d_k` 增长，softmax 饱和，梯度消失。
# - 布尔掩码（True 表示遮住）把得分设为 `-inf`：因果掩码遮住未来，键填充掩码遮住填充的键（列），而不遮填充的查询（行）。
# - 多头注意力先投影，再拆成多个头，做注意力，合并，最后再投影一次；使用 `torch.nn.MultiheadAttention` 的权重时，它给出完全相同的数值。
#
# ## 练习
#
# 1. **注意力看不到顺序。** 用同一个排列同时打乱键和值：输出会变吗？打乱查询：输出会怎样？这说明了模型为什么要在嵌入上加上位置？
# 2. **无可读取的查询。** 对某一个查询遮住所有的键（掩码的某一行全为 True），分别运行亲手写的 `attention`、`torch.nn.MultiheadAttention` 和 `transformer_lab.nn.MultiheadAttention`。这一行的输出在三者中各是什么？为什么？
# 3. **缩放过头。** 把得分除以 `d_k` 而不是 `sqrt(d_k)`。随着 `d_k` 增大，得分的方差和最大权重会怎样？
#
# ## 参考答案
#
# 请先自己做练习。在 Jupyter 中，答案单元是折叠的：点击左侧的竖条即可展开。每个答案都会打印它的结论；测试会检查这些输出。

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
# 输出是对键的加权*求和*，而求和与各项的顺序无关；每个查询各自得到回答，所以打乱查询只会打乱回答的顺序。注意力对顺序是“盲”的：如果没有位置编码，“狗咬人”和“人咬狗”得到的会是同一组向量，只是顺序不同。

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
# 这一行的每个得分都是 `-inf`，于是 softmax 要计算 `exp(-inf) / sum(exp(-inf)) = 0 / 0`：无论是亲手写的还是 torch 的，结果都是 NaN，而且 NaN 会传播到由它算出的一切（包括梯度）。本库则给这样的行全零的权重，于是它对值的加权和为零，`MultiheadAttention` 在那里返回 `out_proj.bias`（这里为零，因为 torch 初始化时把它设为零；训练之后就不是了）。在一个正常的批量中不会有整行被遮住的情况（每个句子至少有一个真实词元，因果掩码也总会给每个位置留下它自己的键）；第 1 章故意遮住填充的查询时，会遇到这样的行。

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 3: divide by d_k instead of sqrt(d_k).
for d_k in (16, 256, 1024):
    q = torch.randn(500, 1, d_k)
    k = torch.randn(500, 16, d_k)
    over_d_k = (q * k).sum(dim=-1) / d_k  # [N, S]
    largest = float(over_d_k.softmax(dim=-1).max(dim=-1).values.mean())
    print(f"exercise 3: d_k {d_k:>4}: variance {float(over_d_k.var()):.4f}, largest weight {largest:.3f}")

# %% [markdown]
# 方差变成 `1 / d_k`，所有得分都挤在 0 附近，于是 softmax 趋于均匀分布：有 16 个键时，最大权重趋于 `1/16 = 0.0625`。注意力再也无法偏向任何一个键，传回到查询和键上的梯度也按 `1 / sqrt(d_k)` 缩小。`sqrt(d_k)` 是唯一能让方差保持为 1 的除数。
#
# **下一章：** 第 1 章逐个形状地跟踪本库注意力的一次调用，并构造它的掩码。
