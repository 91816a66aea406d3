# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. 解码器不需要目标端键填充掩码
#
# 编码器用 `src_key_padding_mask` 遮住填充的键，每个交叉注意力用 `memory_key_padding_mask` 遮住填充的 memory。许多实现还会给解码器的自注意力传一个 `tgt_key_padding_mask`，`torch.nn.Transformer` 也接受这个参数。本章说明：**只要损失函数忽略填充位置**，这个掩码对训练所能看到的一切都没有影响：损失不变，没有一个梯度会变。所以 `Seq2SeqTransformer` 从不构造它。
#
# 论证分三步，每一步都用计算来验证：因果掩码本身已经遮住了什么；实验室的实验测出了什么；以及剩下的那个问题，关于解码器的填充行。单核上几秒钟。

# %%
import torch

from transformer_lab.lab.mask_experiments import build_lab_setup, run_experiment
from transformer_lab.lab.mask_report import format_lab_result
from transformer_lab.nn import causal_mask, padding_mask

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## 一批目标序列
#
# 实验室的设置是一个小的随机 `Seq2SeqTransformer` 和六个长度各不相同的“反转”序列对。解码器读入 `tgt_in_ids`（`<bos>` 加目标序列），被训练去预测 `tgt_out_ids`（目标序列加 `<eos>`），两者都在**右侧**用 `<pad>` = 0 补齐。

# %%
setup = build_lab_setup(seed=0)
model, batch = setup.model, setup.batch
print(setup.description)
print("tgt_in_ids:\n", batch.tgt_in_ids)
print("tgt_out_ids:\n", batch.tgt_out_ids)

# %% [markdown]
# `tgt_in_ids` 中每个填充位置，在 `tgt_out_ids` 的同一位置上也是填充：输入里的一行填充，就是标签里的一行填充。
#
# ## 第一步：因果掩码已经对每个真实查询遮住了填充的键
#
# 取一个句子。它的真实位置是 `0..n-1`，填充是 `n..T-1`。位于 `t < n` 的真实查询，在因果掩码下只能读取键 `0..t`，而这些键全是真实的；填充的键位于它的“未来”，早已被遮住。所以再加上键填充掩码，只可能改变那些查询本身就是填充的行。

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
# 只有从第一个填充位置开始的那些行发生了变化。填充行产生的 logits 对应的标签是 `<pad>`，而损失函数恰好跳过这些位置（`ignore_index` 等于填充编号）。
#
# ## 第二步：测量这个结论
#
# `run_experiment("tgt-padding-mask", ...)` 把模型运行两次，一次带 `tgt_key_padding_mask`，一次不带，计算损失（忽略填充）和每个参数的梯度并加以比较。另外两次运行把填充位置也计入损失，用来说明这个结论依赖于忽略填充。

# %%
tgt_result = run_experiment("tgt-padding-mask", setup)
print(format_lab_result(tgt_result))
assert tgt_result.holds

# %% [markdown]
# 你应当看到：
#
# | 量 | 期望 | 含义 |
# |---|---|---|
# | loss (ignore_index = pad) | equal | 训练要最小化的那个数没有变 |
# | every parameter's gradient | equal | 所以任何一次更新也不会变：训练过程完全相同 |
# | logits at real target positions | equal | 模型对真实词元的预测不变 |
# | weight from real queries to padded keys (no mask) | equal（为 0） | 第一步的论断，在每一层里实测 |
# | logits at padded target positions | differ | 掩码确实改变了填充行…… |
# | loss summed with padded positions counted | differ | ……但只有当损失读取这些行时才有影响 |
#
# 最后一行结论是 **claim holds**（结论成立）。同样的检查也可以在命令行上用真实句子运行（`transformer-lab lab tgt-padding-mask --data-dir DIR`，DIR 是 `transformer-lab download multi30k` 填好的 `multi30k` 文件夹，该命令会打印它的路径），或者用于一个训练好的模型（`--checkpoint runs/NAME`）。
#
# ## 第三步：最后的问题，解码器的填充行
#
# 第 1 章说明了编码器的填充行不需要掩码，因为交叉注意力遮住了它们对应的列。解码器后面没有这样的第二道关卡：它的填充行直接送进生成器，变成 logits。那么是什么遮住了它们？是损失函数。`ignore_index` 丢掉了所有标签为填充的位置，而 `tgt_in_ids` 中的填充行总是这样的位置。`run_experiment("decoder-rows", ...)` 显式地遮住解码器的填充行（一个 `[B*H, T, T]` 的掩码，既是因果的，又遮住这些行），与只用因果掩码的情形比较，分别在使用和不使用 `ignore_index` 时各做一次。

# %%
rows_result = run_experiment("decoder-rows", setup)
print(format_lab_result(rows_result))
assert rows_result.holds

# %% [markdown]
# 使用 `ignore_index` 时，无论填充行遮不遮，损失和每个梯度都相同；不用它时（最后两行），两者都会改变。在解码器里，损失函数忽略填充标签，**就是**行掩码。目标端键填充掩码遮住的是填充的*列*，而对于每一个要紧的行，因果掩码早已把这些列遮住了。
#
# ## 小结
#
# - 在因果掩码下，一个真实的目标查询只读取它之前的位置，而这些位置都是真实的：目标端键填充掩码只能改变填充查询所在的行。
# - 这些行给出的 logits 所在位置的标签都是填充，而损失函数忽略它们（`ignore_index` 等于填充编号）：有没有这个掩码，损失和梯度都相同，正如实验所测得的。
# - 在解码器中，忽略填充标签起到了行掩码的作用；如果把它们计入损失，这个掩码就会有影响。
#
# ## 练习
#
# 1. **批量中的每一个句子。** 第 1 步只看了填充最多的那个句子。请对每个句子检验这个结论：目标端键填充掩码改变的第一行，就是该句子的第一个填充位置（对于没有填充的句子，则没有任何行改变）。
# 2. **亲手算损失。** 不用 `ignore_index`，计算 `setup` 中的模型在它的批量上的损失：先算出每个位置的交叉熵（`reduction="none"`），乘以真实位置的掩码，再在真实位置上取平均。把它与 `label_smoothed_cross_entropy(..., smoothing=0.0, ignore_index=pad_id)` 比较。
#
# ## 参考答案
#
# 请先自己做练习。在 Jupyter 中，答案单元是折叠的：点击左侧的竖条即可展开。每个答案都会打印它的结论；测试会检查这些输出。

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
# 在每个句子中，被改变的行都恰好从第一个填充位置开始；没有填充的句子没有行被改变。由于掩码是按句子给出的，第 1 步的论证对每个句子分别成立。

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
# 两者一致：`ignore_index` 正是“乘以真实标签的掩码，再在真实位置上取平均”。无论填充行的 logits 是什么，它们都乘上了 0，所以解码器填充上的任何掩码都不可能改变损失。
#
# **下一章：** 第 5 章训练实际应用。
