# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. 注意力与它的两种掩码
#
# 第 0 章画出了整个模型（[架构图](../../figures/architecture.png)：编码器、它的输出 *memory*、解码器、生成器及其 *logits*），并亲手写出了注意力。本章转向本库自己的注意力：从输入到输出跟踪一次注意力计算，沿途打印每个张量的形状；然后构造 Transformer 需要的两种掩码：**因果掩码**（causal mask），让一个位置看不到它之后的位置；**键填充掩码**（key padding mask），让所有位置都看不到填充。最后讨论一个常让读者困惑的结论：在编码器里把填充位置所在的*行*（查询）也遮住，对下游没有任何影响。我们不靠论证，而是把它算出来。
#
# 本章全部在 CPU 上几秒内跑完。每个代码单元之后都有一句话说明它应当输出什么；如果你看到的不一样，那就是哪里出了问题。
#
# 整个库只有一种掩码约定，与 PyTorch 相同：**布尔掩码中 True 表示遮住**。在键填充掩码里，True 标出的是填充位置。

# %%
import torch

from transformer_lab import nn as lab
from transformer_lab.nn import causal_mask, lengths_to_padding_mask, padding_mask

torch.manual_seed(0)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## 一次注意力调用的形状之旅
#
# `MultiheadAttention` 接收一个查询序列和一个键/值序列。在交叉注意力（架构图中紫色的方框）中，查询来自解码器（3 个目标位置），键和值来自编码器的输出，即 memory（4 个源位置）。批里有两个句子，第二个句子的最后一个源位置是填充。库里的模块在运行时会记录每个具名张量的形状：`explain_attention` 做一次这样的调用，`format_shape_walk` 把记录打印出来。

# %%
from transformer_lab.lab import explain_attention, format_shape_walk

print(format_shape_walk(explain_attention(d_model=8, nhead=2, src_len=4, tgt_len=3, batch=2, pad_last=1)))

# %% [markdown]
# 你应当看到查询 `[3, 2, 8]`（PyTorch 默认的 `[长度, 批, d_model]` 布局）先被转成批在前，投影成 Q、K、V，再拆成 2 个头、每头 4 维。得分 `Q K^T / sqrt(head_dim)` 的形状是 `[batch, heads, tgt_len, src_len]`：每个查询一行，每个键一列。掩码是 `[2, 1, 1, 4]`：每个键一列，在头和查询行两个维度上广播，所以一个填充的键对*每一个*查询都被遮住。softmax 之后，权重与 V 相乘，各头合并回 `[2, 3, 8]`，最后做输出投影。
#
# 同样的调用直接在 Python 里做，并取回注意力权重：

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
# 权重在各头之间取了平均（`[B, T, S]`），与 `torch.nn.MultiheadAttention` 一致。句子 1 的最后一列恰好全是 0：没有任何查询给填充的键分配权重，而每一行的和仍然是 1。

# %% [markdown]
# ## 因果掩码
#
# 在解码器的自注意力中，位置 `t` 只能读取位置 `0..t`：它被训练去预测第 `t + 1` 个词元，不能事先看到它。因果掩码遮住对角线以上的所有位置。

# %%
print(causal_mask(5).int())

# %% [markdown]
# 第 `i` 行是查询 `i`；第 `j` 列为 1（True）表示键 `j` 对它不可见。第 0 行只能看到自己，第 4 行能看到全部五个位置。`torch.nn.Transformer.generate_square_subsequent_mask` 返回的是同一个掩码的浮点形式（对角线以上为 `-inf`，加到得分上）；本库两种形式都接受。
#
# ## 键填充掩码
#
# 一个批里的句子长短不一，要用 `<pad>` 的编号（本库中为 0）补齐到最长句子的长度。键填充掩码直接由编号得到：

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
# 它的形状是 `[batch, keys]`：这是关于**列**的说明。在注意力内部它被变形为 `[B, 1, 1, S]`，并与任何 `[L, S]` 的注意力掩码合并，因此一个填充的键在它所在句子的每一个查询行、每一个头里都被遮住。
#
# ## 行与列
#
# 键填充掩码遮住的是填充的**列**（键），并不遮住填充的**行**（查询）：填充位置照样提出自己的查询，也照样得到回答，即真实词元的某种加权混合。下图给出一个含四个词、两个填充的句子的四种掩码：因果掩码、键填充掩码、两者合并（`torch.nn.Transformer` 的用户常把它传给解码器的自注意力，不过填充在右侧时，因果掩码已经对每个真实行遮住了它们：见第 4 章），以及行和列都遮住填充的情形。

# %%
from pathlib import Path

from transformer_lab.lab.figures import plot_masks
from transformer_lab.lab.plotting import show_figure

figures = Path("runs/tutorial-figures")
print("figure:", show_figure(plot_masks(figures / "masks.png", length=6, real_length=4)))

# %% [markdown]
# 深色格子表示被遮住。第二幅图里两个 `<pad>` 列是深色的，但两个 `<pad>` 行不是：它们的查询仍然读取 `w0..w3`。若要把这些行也遮住（最后一幅图），需要一个按句子区分的 `[B*H, L, S]` 注意力掩码，`transformer_lab.nn.masks.padded_query_rows_mask` 负责构造它。一整行都被遮住时，softmax 会除以零（torch 在这里返回 NaN）；本库在这种情况下返回全零的加权和（`MultiheadAttention` 的输出因此就是 `out_proj.bias`），因此下面的问题才能问得出来。

# %%
from transformer_lab.nn import masks

row_mask = masks.padded_query_rows_mask(source_padding, num_heads=1)  # [B*H, S, S]
print("sentence 2, rows and columns hidden:\n", (row_mask[2] | source_padding[2]).int())

# %% [markdown]
# 句子 2 有两个真实词元：只有左上角 2 x 2 的区域可见。
#
# ## 为什么遮住填充行对下游毫无影响
#
# 编码器的填充行确实会产出向量，所以编码器的输出（即 *memory*）在填充位置上是一些没有意义的值。这会不会损害模型？只有在有人读取它们时才会。解码器通过交叉注意力读取 memory，而在那里，同一个源端键填充掩码（`memory_key_padding_mask`）遮住了 memory 中填充的**列**。所以无论填充行里是什么，都没有谁会读到它。
#
# 实验室（lab）把这一点变成一次测量。`build_lab_setup` 构造一个小的随机模型（固定种子；第 2 章会用部件把它搭起来）和一批长度各不相同的序列；`run_experiment("encoder-row-mask", ...)` 把模型运行两次，一次在每个编码器层里遮住填充行，一次不遮，并比较所有会传到损失函数的量。

# %%
from transformer_lab.lab.mask_experiments import build_lab_setup, run_experiment
from transformer_lab.lab.mask_report import format_lab_result

setup = build_lab_setup(seed=0)
rows_result = run_experiment("encoder-row-mask", setup)
print(format_lab_result(rows_result))
assert rows_result.holds

# %% [markdown]
# 按 `expect` 列来读这张表。前五行写着 *equal*，差值为 0（或低于 `1e-05` 的浮点噪声）：真实位置上的 memory、每一个 logit、损失以及每个参数的梯度，遮不遮行都完全一样。下一行写着 *differ*：填充位置上的 memory 确实变了，而这恰恰是没有人读取的部分。最后两行把解码器的 `memory_key_padding_mask` 去掉：这时填充的 memory 会被读到，logits 随之改变，行掩码也就有了影响。`holds` 列全部是 `yes`，最后一行是 **claim holds**（结论成立）。
#
# 把不同来源的代码混在一起之前，有一个细节值得知道：各家实现在这里并不一致。Annotated Transformer 的掩码中 **True = 可以关注**，而 PyTorch（以及本库）的掩码中 **True = 遮住**。`run_experiment("key-padding-polarity", ...)` 把两者放在一起比较。

# %%
polarity_result = run_experiment("key-padding-polarity", setup)
print(format_lab_result(polarity_result))
assert polarity_result.holds

# %% [markdown]
# 用 `masks.keep_to_hidden` 转换之后，“保留”式掩码给出与本库掩码完全相同的数值。若不加转换直接传入，它遮住的就变成了真实词元而不是填充，而它的下三角（因果）掩码也变成暴露未来、而不是遮住未来（标着 *mixed* 的行：输出和因果 logits 与本库的不同，真实的键得不到任何权重，输出也没有 NaN）。guard 行列出了库能够拒绝的错误用法（`[B, 1, S]` 形状的掩码、整数掩码）；而一个极性弄反的布尔 `[B, S]` 掩码，形状和类型都对，只有像这样的数值检查才能发现它。
#
# ## 小结
#
# - 本库的 `MultiheadAttention` 接受 PyTorch 的参数和布局；在内部，得分的形状是 `[batch, heads, queries, keys]`：每个查询一行，每个键一列。
# - 因果掩码（`causal_mask`）对解码器的自注意力遮住未来；键填充掩码（`padding_mask`、`lengths_to_padding_mask`，True 表示填充）对每一个查询遮住填充的键，也就是列。
# - 填充的查询（行）没有被遮住，它们也会产出向量；在编码器中没有任何东西读取它们，因为交叉注意力遮住了 memory 中填充的列：行掩码不改变任何 logit、损失或梯度，正如实验所算出的。
# - 极性相反的掩码（True 表示保留，如 Annotated Transformer）形状和类型都对：要用 `masks.keep_to_hidden` 转换。
#
# ## 练习
#
# 1. **两个掩码合成一个。** 为一个带填充的批量构造解码器自注意力的掩码，把它写成形状为 `[B * H, T, T]` 的单个布尔 `attn_mask`（因果掩码与键填充掩码合在一起），并检查 `MultiheadAttention` 的输出与分别传入 `attn_mask=causal_mask(T)` 和 `key_padding_mask` 时相同。
# 2. **浮点掩码。** `torch.nn.Transformer.generate_square_subsequent_mask(5)` 返回一个浮点掩码。它遮住了哪些位置？用它和用 `causal_mask(5)` 时，注意力的输出相同吗？
# 3. **没有人读取的部分。** 在“一次注意力调用的形状之旅”一节的那次调用中，把句子 1 填充位置上的 memory 向量换成任意值。哪些输出会改变？
#
# ## 参考答案
#
# 请先自己做练习。在 Jupyter 中，答案单元是折叠的：点击左侧的竖条即可展开。每个答案都会打印它的结论；测试会检查这些输出。

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
# 两者给出相同的数值：在内部，本库正是用“或”运算把两个掩码合成一个（`masks.merge_masks`），和你的做法一样。沿着 `B * H` 这一维，掩码按句子依次排列，同一个句子的各个头相邻：这是 PyTorch 期望的顺序，也正是 `repeat_interleave` 给出的顺序。

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
# 浮点掩码是*加*到得分上的：布尔掩码为 True 的地方是 `-inf`，其余地方是 0。两者遮住的都是对角线以上的位置，输出也相同。浮点掩码还可以取有限值，用来偏向或抑制某些键，而不必把它们完全遮住。

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 3: anything at sentence 1's padded memory position.
changed_memory = memory.clone()
changed_memory[3, 1] = 1000.0  # [S, B, D]: position 3 of sentence 1 is padding
with torch.no_grad():
    changed_output, _ = attention(query, changed_memory, changed_memory, key_padding_mask=key_padding_mask)
print(f"exercise 3: max |output change| = {float((changed_output - output).abs().max()):.1e}")

# %% [markdown]
# 两个句子的输出都没有任何变化：无论填充位置的键是什么，它的得分都被替换成 `-inf`，所以它的权重恰好为 0，它的值乘上的也是 0。这正是编码器的填充行无害的原因：解码器只通过这样的掩码读取 memory。
#
# **下一章：** 第 2 章用这些注意力调用搭起整个模型。
