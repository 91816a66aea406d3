# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6. 用编码器做分类（选读）
#
# 翻译需要 Transformer 的两半；给一段文本分类只需要编码器。`TransformerClassifier` 就是这样的模型：嵌入与位置编码、一个编码器堆叠、一个把“每个词元一个向量”变成“每段文本一个向量”的**池化**（pooling）步骤，以及一个映射到各类别的线性层。本章在一个自拟的小任务上，用库里的部件手写一个训练循环来训练它，检查填充绝不会混进池化后的向量，最后指向真正的分类任务。单核上大约 20 秒。
#
# 任务：一个由 3 到 8 个符号（编号 4 到 23）组成的序列，若其中某个符号出现了两次，标签为 1，否则为 0。任何单个词元都无法泄露答案；每个词元都得与其他词元相比较，而这正是自注意力所做的事。

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
# 大约一半的序列含有重复符号，所以瞎猜的准确率约为 0.5。
#
# ## 模型与它的池化
#
# 编码器为每个位置返回一个向量，形状为 `[B, S, D]`。均值池化只在**真实**位置上取平均：在注意力内部遮住填充键的那个填充掩码，也把填充行挡在平均之外。（第 1 章说明过填充行里是些没有意义的值；这里是又一个绝不能读取它们的地方。）分类器的默认设置采用的是现在的常见做法，而不是论文的：前置归一化和 GELU。

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
# 同一个序列单独输入，与补齐到长度 8、和一个更长的序列放在同一批中输入，得到的 logits 相同（至多相差浮点舍入误差）。
#
# ## 用库里的部件写一个训练循环
#
# 各个任务用的是 `Trainer`（第 3 章）；把循环写出来，可以看到它每一步做了什么：采用论文中 betas 的 Adam（`build_optimizer`）、预热调度（`build_noam_scheduler`）、损失、反向传播、一次优化器更新和一次调度器更新。

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
# 损失降到 0.69（抛硬币的损失）以下，最后在 0.3 到 0.5 之间（打印的每个值只是一个批次的损失，所以会波动）；测试准确率最终约在 0.7 到 0.85 之间，明显高于瞎猜：模型学会了比较符号，只是 1,500 个小步还不足以做到完美。落在这个范围的哪里取决于 CPU：torch 的 AVX-512 和 AVX2 内核舍入不同，1,500 步会把这点差别放大。
#
# ## 真正的任务
#
# `transformer_lab.tasks.classification` 在文本上训练同样的模型：数据文件夹里的 AG News 新闻主题，或者你自己的任何带标签的 CSV、TSV 或 JSON Lines 文件；它使用子词分词器和 `Trainer`，并给出逐类别的指标：
#
# ```bash
# transformer-lab download ag-news
# transformer-lab train classification --out runs/news
# transformer-lab evaluate classification --checkpoint runs/news --confusion-png confusion.png
# transformer-lab classify --checkpoint runs/news "Stocks rallied after the Fed cut rates"
# ```
#
# 在 Python 里，`transformer_lab.Classifier("runs/news").classify(texts)` 返回每段文本的标签和各类概率。预设的成绩和训练耗时见 [docs/results.md](../../results.md)。
#
# ## 小结
#
# - `TransformerClassifier` 就是单独的编码器，加上一个池化步骤和一个线性输出层。
# - 平均池化只在真实位置上取平均：一段文本单独输入和在批量中填充后输入，得到的 logits 相同。
# - 训练循环就是优化器、学习率调度、损失、`backward()`、`step()`；`Trainer` 在它外面加上混合精度、梯度累积、检查点和日志。
#
# ## 练习
#
# 1. **另一种池化。** `TransformerClassifier(pooling="first")` 只用第一个位置的向量做分类。它单独输入和填充后输入，得到的 logits 也相同吗？
# 2. **按类别的准确率。** 分别计算有重复符号和没有重复符号的测试序列上的准确率。哪一类更难？两者怎样合成整体准确率？
#
# ## 参考答案
#
# 请先自己做练习。在 Jupyter 中，答案单元是折叠的：点击左侧的竖条即可展开。每个答案都会打印它的结论；测试会检查这些输出。

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
# 相同：第一个位置的向量由遮住了填充键的注意力算出，所以填充同样无法影响它。（使用这种池化时，通常会在最前面放一个特殊词元，比如 BERT 的 `[CLS]`，让它的向量学会概括整段文本。）

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: accuracy on each class, and the overall accuracy as their weighted mean.
correct = predictions == test_labels  # [N]
per_class = {label: float(correct[test_labels == label].float().mean()) for label in (0, 1)}
shares = {label: float((test_labels == label).float().mean()) for label in (0, 1)}
combined = sum(shares[label] * per_class[label] for label in (0, 1))
print(f"exercise 2: accuracy without a repeat {per_class[0]:.3f}, with a repeat {per_class[1]:.3f}")
print(f"exercise 2: weighted by the class shares {combined:.3f} = overall {accuracy:.3f}")

# %% [markdown]
# 整体准确率是各类准确率按各类出现频率加权的平均；当各类大小差不多时，模型只能部分地用强的一类掩盖弱的一类。正因为如此，真正的分类任务会报告每一类的精确率、召回率和 F1。
#
# 教程到此结束。README 列出了全部命令；[docs/masks.md](../../masks.md) 和 [docs/architecture.md](../../architecture.md) 是关于掩码和模型的参考文档。
