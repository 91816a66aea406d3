# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2. 由部件搭起整个模型
#
# 第 1 章看的是一次注意力调用的内部。本章围绕它一块一块地搭起完整的编码器-解码器，顺序与第 0 章的[架构图](../../figures/architecture.png)相同，自下而上，并把每个部件与论文的描述对照检查：乘以 `sqrt(d_model)` 的词嵌入、正弦位置编码表、逐位置前馈网络、编码器层与解码器层及其堆叠、后置归一化与前置归一化、生成器（generator），以及 Xavier 初始化。最后是本库能给出的最强的检查：载入相同的权重后，我们的 `Transformer` 与 `torch.nn.Transformer` 算出相同的数值。
#
# `transformer_lab.nn` 里的模块是 PyTorch 对应模块的孪生实现：类名相同，构造参数和前向参数相同，参数名也相同。`transformer_lab.models` 在它们外面补上应用所需的部分。本章几秒内跑完。

# %%
import math
import warnings

import torch

from transformer_lab import nn as lab
from transformer_lab.models import ModelConfig, Seq2SeqTransformer, SinusoidalPositionalEncoding, TokenEmbedding

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## 词嵌入乘以 sqrt(d_model)
#
# 词元编号通过查表变成向量。论文把这个向量再乘以 `sqrt(d_model)`。`Seq2SeqTransformer` 用 Xavier 初始化嵌入表，数值很小：对 `[V, d_model]` 的表，标准差为 `sqrt(2 / (V + d_model))`，翻译预设（V 8,000，d_model 256）约为 0.016。随后要加上的位置编码取值在 -1 到 1 之间（均方根 0.71）。乘以 sqrt(256) = 16 之后，嵌入约为 0.25，与位置编码同一量级，谁也不会淹没谁。像下面这样单独构建的 `TokenEmbedding` 保留 torch 默认的初始值（取自 N(0, 1)）；这里只看比值。

# %%
embedding = TokenEmbedding(vocab_size=10, d_model=16)
token_ids = torch.tensor([[4, 5, 6]])  # [B, T]
with torch.no_grad():
    scaled = embedding(token_ids)  # [B, T, D]
    looked_up = embedding.embedding(token_ids)  # the plain table
print("scale:", embedding.scale, "= sqrt(16)")
print("scaled / looked up:", (scaled / looked_up)[0, 0, :4])

# %% [markdown]
# 每个比值都是 4.0，即 16 的平方根。
#
# 下面的模块都有一个 `dropout=` 概率参数，本章把它设为 0.0。**Dropout** 是训练时用的正则化手段：它作用的每个激活值以该概率被置零，其余的乘以 `1 / (1 - p)`；在评估模式（`model.eval()`）下它什么也不做。论文用的是 0.1。
#
# ## 位置编码表
#
# 注意力本身对顺序一无所知：把键的顺序打乱，权重也只是跟着重新排列。模型靠加到嵌入上的一张表来获知顺序。位置 `pos` 的第 `2i` 维是 `sin(pos / 10000^(2i/d_model))`，第 `2i+1` 维是同一角度的余弦。靠前的维度变化快，靠后的维度变化慢，因此每个位置都有独一无二的模式，而且 `pos + k` 的模式是 `pos` 的模式的一个固定线性函数。

# %%
from pathlib import Path

from transformer_lab.lab.figures import plot_positions
from transformer_lab.lab.plotting import show_figure

positions = SinusoidalPositionalEncoding(d_model=16, max_len=50, dropout=0.0)
table = positions.table  # [max_len, D]
print("table", tuple(table.shape), "position 0:", table[0, :6])
print("PE[3, 0] = sin(3) =", round(math.sin(3), 4), "->", round(float(table[3, 0]), 4))

figures = Path("runs/tutorial-figures")
print("figure:", show_figure(plot_positions(figures / "positions.png", max_len=100, d_model=128)))

# %% [markdown]
# 位置 0 的取值在 0 和 1 之间交替（sin 0 与 cos 0），`[3, 0]` 处的值就是 `sin(3)`。图中（d_model 128，100 个位置）左侧的列沿着位置方向颜色变化很快，右侧的列几乎不变；右边的子图把其中四个维度画成曲线，维度越高，波长越长。
#
# ## 逐位置前馈网络
#
# 注意力之后，每个位置各自通过两个线性变换，中间夹一个 ReLU：`linear2(relu(linear1(x)))`，先从 `d_model` 升到 `dim_feedforward`（论文中为 2,048，即 512 的四倍），再降回来。“逐位置”的意思是每个位置用同一组权重，而且任何位置都看不到别的位置。这一点可以验证：改变一个位置的输入，只有那个位置的输出会变。

# %%
layer = lab.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=64, dropout=0.0)
x = torch.randn(5, 1, 16)  # [T, B, D]
feed_forward = lambda inputs: layer.linear2(torch.relu(layer.linear1(inputs)))  # noqa: E731
changed = x.clone()
changed[2] += 1.0
with torch.no_grad():
    moved = (feed_forward(changed) - feed_forward(x)).abs().amax(dim=(1, 2))  # [T]
print("linear1", tuple(layer.linear1.weight.shape), "linear2", tuple(layer.linear2.weight.shape))
print("change per position after changing position 2:", moved)

# %% [markdown]
# 只有位置 2 变了，其余位置的变化恰好为 0。
#
# ## 编码器层与解码器层
#
# 一个编码器层由两个子层组成：自注意力和前馈网络，每个子层都包在残差连接和层归一化里。解码器层有三个子层：带掩码的自注意力、对编码器输出的交叉注意力、前馈网络。打印一个解码器层，可以看到它的各个部件，名字与 PyTorch 相同（`self_attn`、`multihead_attn`、`linear1`、`linear2`、`norm1..3`、`dropout1..3`）。

# %%
model = lab.Transformer(
    d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=64, dropout=0.0
)
print(model.decoder.layers[0])

# %% [markdown]
# ## 每个解码器层读取同一份 memory
#
# 编码器只运行一次；它的输出，即 *memory*，送给**每一个**解码器层的交叉注意力，而不只是第一层。在每个交叉注意力上挂一个钩子（hook），记录它收到的键。

# %%
handed = {}
for number, decoder_layer in enumerate(model.decoder.layers):
    decoder_layer.multihead_attn.register_forward_hook(
        lambda module, args, output, number=number: handed.__setitem__(number, args[1])
    )
source = torch.randn(7, 2, 32)  # [S, B, D]
target = torch.randn(5, 2, 32)  # [T, B, D]
with torch.no_grad():
    model(source, target, tgt_mask=lab.causal_mask(5))
    memory = model.encoder(source)  # [S, B, D]
for number, keys in handed.items():
    print(f"decoder layer {number}: keys {tuple(keys.shape)}, the encoder's memory: {torch.equal(keys, memory)}")

# %% [markdown]
# 三层都输出 `True`：是同一个 `[7, 2, 32]` 的张量。
#
# ## 后置归一化与前置归一化
#
# 论文在残差相加之后做归一化：`x = norm(x + sublayer(x))`（后置归一化，post-norm，`norm_first=False`，本库和 PyTorch 的默认值）。Annotated Transformer 在子层之前做归一化：`x = x + sublayer(norm(x))`（前置归一化，pre-norm，`norm_first=True`），并在整个堆叠之后再加一个归一化。前置归一化在深层堆叠中训练更稳定；后置归一化是论文的做法。两者的区别体现在层与层之间传递的东西上：后置归一化交给每一层的是归一化过的向量，前置归一化则让残差流逐层变大。`Transformer` 类（本库与 PyTorch 都是如此）无论 `norm_first` 取何值，都在每个堆叠之后加一个最终的归一化：前置归一化需要它；后置归一化时，它只是对已经归一化的输出再做一次归一化（论文的堆叠没有它）。练习 2 会数它的参数。

# %%
for norm_first in (False, True):
    torch.manual_seed(0)
    stack = lab.TransformerEncoder(
        lab.TransformerEncoderLayer(32, 4, 64, dropout=0.0, norm_first=norm_first), num_layers=6
    )
    hidden = torch.randn(7, 2, 32)
    sizes = []
    with torch.no_grad():
        for encoder_layer in stack.layers:
            hidden = encoder_layer(hidden)
            sizes.append(round(float(hidden.std(dim=-1).mean()), 2))
    print(f"norm_first={norm_first!s:<5}  std of each layer's output: {sizes}")

# %% [markdown]
# 后置归一化时，每一层输出的标准差都在 1 左右；前置归一化时，它一层比一层大（这也是前置归一化的堆叠最后需要一个归一化的原因）。
#
# ## 生成器与 Xavier 初始化
#
# `Seq2SeqTransformer` 把这一切组装起来：两个嵌入、位置编码表、`Transformer`，以及**生成器**，即一个从 `d_model` 映射到目标词表的线性层。它输出 logits；Annotated Transformer 的 `Generator` 所做的 log-softmax 放到了损失函数里（第 3 章），这样在浮点运算上更精确。每个矩阵都用 Xavier 均匀分布初始化，其标准差为 `sqrt(2 / (fan_in + fan_out))`。

# %%
config = ModelConfig(
    src_vocab_size=100,
    tgt_vocab_size=100,
    d_model=32,
    nhead=4,
    num_encoder_layers=2,
    num_decoder_layers=2,
    dim_feedforward=64,
)
seq2seq = Seq2SeqTransformer.from_config(config)
print("generator:", seq2seq.generator)
print("parameters:", sum(parameter.numel() for parameter in seq2seq.parameters()))
weight = seq2seq.transformer.encoder.layers[0].linear1.weight.detach()  # [dim_feedforward, D]
print(
    f"linear1 std {float(weight.std()):.4f} against Xavier's {math.sqrt(2 / (weight.shape[0] + weight.shape[1])):.4f}"
)
source_ids = torch.tensor([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]])  # [B, S], 0 = <pad>, 3 = <eos>
target_in_ids = torch.tensor([[2, 5, 6, 7], [2, 8, 9, 0]])  # [B, T], 2 = <bos>
with torch.no_grad():
    logits = seq2seq.eval()(source_ids, target_in_ids)  # [B, T, V]
print("logits:", tuple(logits.shape), "= [batch, target length, vocabulary]")

# %% [markdown]
# 实测的标准差与 Xavier 的理论值很接近；模型把 `[2, 5]` 的源编号和 `[2, 4]` 的目标编号映射为 `[2, 4, 100]` 的 logits。`Seq2SeqTransformer` 自己根据编号构造掩码：给编码器和每个交叉注意力用的源端键填充掩码，给解码器用的因果掩码，而不构造目标端键填充掩码（第 4 章说明为什么不需要）。
#
# ## 孪生检查
#
# 最后一项检查最有说服力。构造 `torch.nn.Transformer`，用 `strict=True` 把它的 `state_dict` 载入我们的模型（每个参数名都必须对得上），然后在同一批数据上、用同样的掩码（包括填充）运行两者。

# %%
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # torch's note on its nested-tensor fast path, unused here
    reference = torch.nn.Transformer(
        d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=64, dropout=0.0
    )
model.load_state_dict(reference.state_dict(), strict=True)
model.eval()
reference.eval()

source_padding = lab.lengths_to_padding_mask(torch.tensor([7, 5]), 7)  # [B, S], True = padding
masks = dict(tgt_mask=lab.causal_mask(5), src_key_padding_mask=source_padding, memory_key_padding_mask=source_padding)
with torch.no_grad():
    ours = model(source, target, **masks)  # [T, B, D]
    theirs = reference(source, target, **masks)
twin_difference = float((ours - theirs).abs().max())
print(f"twin check: max |ours - torch.nn.Transformer| = {twin_difference:.2e}")
assert twin_difference < 1e-5

# %% [markdown]
# 最大差值小于 `1e-5`（往往恰好是 0：两者以相同的顺序做相同的加法）。本库的测试对每个模块、两种布局、每一类掩码都做这项检查；[docs/architecture.md](../../architecture.md) 带着一批数据走完整个模型，列出每个张量的形状。
#
# ## 小结
#
# - 词嵌入乘以 `sqrt(d_model)`，使它与位置编码表（取值在 [-1, 1] 之间）大小相当。
# - 正弦位置编码表给每个位置一个独特的正弦、余弦模式：前面的维度变化快，后面的维度变化慢。
# - 前馈网络对每个位置单独作用；编码器层有两个子层，解码器层有三个，每个子层都带有残差连接和层归一化。
# - 每个解码器层读取的是同一个 memory。后置归一化（论文的做法）让层与层之间传递的信号保持归一化；前置归一化让它逐层增长，因此需要一个最终的归一化。
# - 生成器把解码器的每个位置映射为词表上的 logits；矩阵用 Xavier 初始化；载入相同的权重后，我们的 `Transformer` 与 `torch.nn.Transformer` 算出相同的结果。
#
# ## 练习
#
# 1. **相对位置。** 论文选择正弦函数，是因为 `PE[pos + k]` 是 `PE[pos]` 的线性函数，而且对所有 `pos` 都是同一个函数。取 `k = 5`，由各个频率构造出这个函数（每一对维度 `(2i, 2i+1)` 转过角度 `k * w_i`），并在 `positions` 的编码表上检验它。
# 2. **数参数。** 把一个编码器层和一个解码器层的参数个数写成 `d_model` 和 `dim_feedforward` 的公式，用 `model`（上面的 `lab.Transformer`）检验它们，再用它们数一数论文 base 模型的参数（d_model 512，dim_feedforward 2,048，6 + 6 层，不计嵌入）。
# 3. **前置归一化堆叠的最终归一化。** 给上面六层的前置归一化堆叠加上一个最终的 `LayerNorm`（`TransformerEncoder` 的 `norm=` 参数）：它的输出标准差是多少？
#
# ## 参考答案
#
# 请先自己做练习。在 Jupyter 中，答案单元是折叠的：点击左侧的竖条即可展开。每个答案都会打印它的结论；测试会检查这些输出。

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 1: PE[pos + k] = R_k PE[pos], where R_k turns each (sin, cos) pair by the angle k * w_i.
k = 5
frequencies = 1.0 / 10000 ** (torch.arange(0, 16, 2) / 16)  # [D/2], w_i of the pair (2i, 2i+1)
sin_k, cos_k = torch.sin(k * frequencies), torch.cos(k * frequencies)  # [D/2]
now_sin, now_cos = table[:-k, 0::2], table[:-k, 1::2]  # [max_len - k, D/2] each
later = torch.empty_like(table[k:])  # [max_len - k, D]
later[:, 0::2] = now_sin * cos_k + now_cos * sin_k  # sin(a + b) = sin a cos b + cos a sin b
later[:, 1::2] = now_cos * cos_k - now_sin * sin_k  # cos(a + b) = cos a cos b - sin a sin b
print(
    f"exercise 1: max |R_5 PE[pos] - PE[pos + 5]| over {table.shape[0] - k} positions = "
    f"{float((later - table[k:]).abs().max()):.1e}"
)

# %% [markdown]
# 每一对维度都是圆上的一个点，随着位置增加以各自的速度转动，所以移动 `k` 个位置，就是把每一对维度转过一个固定的角度，与 `pos` 无关：这是一个线性映射，注意力可以学会用它来表示“往回数第 `k` 个词”。差值只是浮点舍入误差。


# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 2: parameters of a layer, as formulas.
def encoder_layer_parameters(d, f):
    attention = 4 * d * d + 4 * d  # W_q, W_k, W_v, W_o and their biases
    feed_forward = 2 * d * f + f + d  # linear1 and linear2 with biases
    return attention + feed_forward + 2 * 2 * d  # two layer norms, each a weight and a bias


def decoder_layer_parameters(d, f):
    return encoder_layer_parameters(d, f) + 4 * d * d + 4 * d + 2 * d  # cross-attention and a third norm


def transformer_parameters(d, f, encoder_layers, decoder_layers):
    final_norms = 2 * 2 * d  # the stacks' final norms
    return (
        encoder_layers * encoder_layer_parameters(d, f) + decoder_layers * decoder_layer_parameters(d, f) + final_norms
    )


counted = sum(parameter.numel() for parameter in model.parameters())
print(f"exercise 2: formula {transformer_parameters(32, 64, 2, 3)}, model.parameters() {counted}")
print(f"exercise 2: the base model without embeddings: {transformer_parameters(512, 2048, 6, 6) / 1e6:.1f} M")

# %% [markdown]
# 一个注意力有四个 `d x d` 矩阵，前馈网络有两个 `d x f` 矩阵；按论文的尺寸，各层共有 4400 万个参数。论文所说的 6500 万还包括嵌入：约 37,000 个子词的共享词表乘以 512。

# %% tags=["solution"] jupyter={"source_hidden": true}
# Exercise 3: a pre-norm stack with a final LayerNorm.
torch.manual_seed(0)
normed_stack = lab.TransformerEncoder(
    lab.TransformerEncoderLayer(32, 4, 64, dropout=0.0, norm_first=True), num_layers=6, norm=torch.nn.LayerNorm(32)
)
with torch.no_grad():
    normed = normed_stack(torch.randn(7, 2, 32))  # [S, B, D]
print(f"exercise 3: std of the pre-norm stack's output with a final norm: {float(normed.std(dim=-1).mean()):.2f}")

# %% [markdown]
# 约为 1：最终的归一化把增长了的残差流重新缩放，于是解码器（或生成器）收到的是通常大小的向量。在后置归一化的堆叠中，每一层已经以归一化结尾，再加一个最终的归一化变化不大。
#
# **下一章：** 第 3 章训练这个模型。
