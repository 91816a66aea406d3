"""How many floats the teaching commands' random models and batches hold at once, and the bound on them.

Each size option has its own bound, but their product can still ask for more memory than a
machine has (12 layers of d_model 4,096 are about 4 billion weights): `explain` and `lab`
refuse such sizes before anything is allocated.
"""

from __future__ import annotations

# What the sizes together may ask for, in float32 numbers (1 GiB).
MAX_FLOATS = 2**28

# The explicit attention path holds a few copies of an attention map at once (scores, masked scores, weights).
ATTENTION_MAP_COPIES = 4

# A lab experiment compares the gradients of up to four forward passes: at its peak it holds
# about nine copies of the weights (measured, d_model 512 with 6 + 6 layers), so it gets twice
# the bound, which lets the paper's base sizes through.
LAB_WEIGHT_COPIES = 9
MAX_LAB_FLOATS = 2 * MAX_FLOATS


def _weights(d_model: int, num_layers: int) -> int:
    # With dim_feedforward 2 d_model: an encoder layer holds 8 d_model² weights, a decoder layer 12.
    return 20 * num_layers * d_model**2


def tensor_floats(d_model: int, nhead: int, src_len: int, tgt_len: int, batch: int, num_layers: int | None) -> int:
    """About how many floats the shape walk holds at once: weights, the largest attention map's copies, an activation.

    ``num_layers`` None is one attention call; else a whole encoder-decoder of that many
    layers per stack.
    """
    longest = max(src_len, tgt_len)
    if num_layers is None:
        weights, attention_map, activation = 4 * d_model**2, src_len * tgt_len, d_model
    else:
        weights, attention_map, activation = _weights(d_model, num_layers), longest**2, 2 * d_model
    return weights + batch * (ATTENTION_MAP_COPIES * nhead * attention_map + longest * activation)


def lab_floats(
    d_model: int, nhead: int, num_layers: int, longest: int, batch: int, src_vocab_size: int, tgt_vocab_size: int
) -> int:
    """About how many floats a lab experiment on a random model holds at its peak.

    The weights (with embeddings and generator) and their copies, plus what one run keeps
    for its backward pass: every attention call's maps (3 per layer pair) and the layers'
    activations, for sequences of ``longest`` positions.
    """
    weights = _weights(d_model, num_layers) + (src_vocab_size + 2 * tgt_vocab_size) * d_model
    attention_maps = 3 * num_layers * batch * ATTENTION_MAP_COPIES * nhead * longest**2
    activations = 2 * num_layers * batch * longest * 8 * d_model
    return LAB_WEIGHT_COPIES * weights + attention_maps + activations
