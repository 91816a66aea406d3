"""Every attention mask in the project is built and combined here.

The convention is PyTorch's: a **bool mask marks what is hidden** (True = this query may
NOT attend to this key; in a key padding mask True = padding), and a float mask is added
to the attention scores (``-inf`` hides). ``scaled_dot_product_attention`` wants the
opposite polarity for bool masks (True = may attend); the conversion happens only in
:func:`to_sdpa_mask`. Masks in that opposite polarity written by other code (the Annotated
Transformer's ``src != pad``) come in through :func:`keep_to_hidden` only.

Shapes use the legend B batch, H heads, L query length, S key length.
"""

from __future__ import annotations

import numbers
import operator

import torch
from torch import Tensor

from transformer_lab.nn import arguments

__all__ = [
    "causal_mask",
    "padding_mask",
    "lengths_to_padding_mask",
    "square_subsequent_mask",
    "check_attn_mask",
    "check_key_padding_mask",
    "merge_masks",
    "fully_hidden_rows",
    "unhide_rows",
    "to_sdpa_mask",
    "folded_additive_key_mask",
    "padded_query_rows_mask",
    "keep_to_hidden",
    "MAX_MASK_LENGTH",
]

# The longest side of a mask built here. A cap rather than torch's allocator error: past it the
# allocation fails, or with memory overcommitted the process is killed while filling it; the
# models' position tables stop at 65,536 too, and a 65,536-square bool mask is already 4 GiB.
MAX_MASK_LENGTH = 65_536


def _check_length(function: str, name: str, value: object, minimum: int) -> None:
    """Raise ``TypeError`` unless ``value`` is an int, ``ValueError`` unless it is in [minimum, MAX_MASK_LENGTH]."""
    if isinstance(value, torch.SymInt) or (isinstance(value, Tensor) and torch.jit.is_tracing()):
        return  # a symbolic or traced size: reading its value here would freeze it into the graph
    try:
        length = None if isinstance(value, bool) else operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        length = None
    if length is None:
        raise TypeError(f"{function}: {name}: expected an int, got {value!r}")
    if not minimum <= length <= MAX_MASK_LENGTH:
        raise ValueError(f"{function}: {name}: expected an int in [{minimum}, {MAX_MASK_LENGTH:,}], got {length:,}")


def _check_integer_tensor(function: str, name: str, value: object, dims: int, layout: str) -> None:
    """Raise ``TypeError`` unless ``value`` is a tensor, ``ValueError`` unless it is ``dims``-D of an integer dtype."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{function}: {name}: expected a torch.Tensor, got {type(value).__name__}")
    # bool and complex are not lengths or token ids either, though they are not floating.
    integer = not (value.is_floating_point() or value.is_complex() or value.dtype == torch.bool)
    if value.dim() != dims or not integer:
        raise ValueError(
            f"{function}: {name} must be an integer tensor of shape {layout}, "
            f"got dtype {value.dtype} and shape {tuple(value.shape)}"
        )


def causal_mask(
    query_len: int,
    key_len: int | None = None,
    *,
    device: torch.device | str | None = None,
) -> Tensor:
    """Bool mask that hides the future: query ``i`` may not see key ``j`` when ``j > i + offset``.

    With ``key_len > query_len`` the queries are the *last* ``query_len`` positions of a
    sequence of ``key_len`` (incremental decoding with a cache), so the offset is
    ``key_len - query_len``.

    Shape:
        returns ``[L, S]`` bool, True above the (shifted) diagonal.
    """
    key_len = query_len if key_len is None else key_len
    _check_length("causal_mask", "query_len", query_len, minimum=1)
    _check_length("causal_mask", "key_len", key_len, minimum=1)
    if query_len < 1 or key_len < query_len:
        raise ValueError(
            f"causal_mask: expected 1 <= query_len <= key_len, got query_len={query_len}, " f"key_len={key_len}"
        )
    offset = key_len - query_len
    query_positions = torch.arange(query_len, device=device).unsqueeze(1) + offset  # [L, 1]
    key_positions = torch.arange(key_len, device=device).unsqueeze(0)  # [1, S]
    return key_positions > query_positions  # [L, S]


def square_subsequent_mask(
    size: int, *, device: torch.device | str | None = None, dtype: torch.dtype | None = None
) -> Tensor:
    """Float causal mask, ``-inf`` above the diagonal and 0 elsewhere (torch's format).

    Shape:
        returns ``[size, size]`` float.
    """
    _check_length("square_subsequent_mask", "size", size, minimum=1)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"square_subsequent_mask: dtype: expected a torch.dtype such as torch.float32, got {dtype!r}")
    if not dtype.is_floating_point:
        # -inf has no integer form (torch's "cannot be converted" from inside masked_fill), and a
        # bool mask of this name would be the other kind of mask: causal_mask builds that one.
        raise ValueError(
            f"square_subsequent_mask: dtype: expected a floating dtype (the mask is added to the scores; "
            f"causal_mask gives the bool mask), got {dtype}"
        )
    hidden = causal_mask(size, device=device)  # [L, L]
    return torch.zeros(size, size, device=device, dtype=dtype).masked_fill(hidden, float("-inf"))


def padding_mask(token_ids: Tensor, pad_id: int) -> Tensor:
    """Key padding mask from token ids: True where the token is padding.

    Shape:
        token_ids ``[B, S]`` integer; returns ``[B, S]`` bool.
    """
    _check_integer_tensor("padding_mask", "token_ids", token_ids, 2, "[batch, seq_len]")
    # Compared with None (a tokenizer without a pad token), `==` gives the bool False: "nothing padded".
    if isinstance(pad_id, bool) or not isinstance(pad_id, numbers.Integral):
        raise TypeError(f"padding_mask: pad_id: expected an int, got {pad_id!r}")
    # Else torch casts it to the ids' type: 256 compared with uint8 ids wraps to 0 and marks token 0 as padding.
    low, high = torch.iinfo(token_ids.dtype).min, torch.iinfo(token_ids.dtype).max
    if not low <= pad_id <= high:
        raise ValueError(
            f"padding_mask: pad_id: expected an int in [{low}, {high}] (the range of {token_ids.dtype} token_ids), "
            f"got {pad_id}"
        )
    return token_ids == pad_id


def lengths_to_padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """Key padding mask from sequence lengths: True at positions ``>= length``.

    Shape:
        lengths ``[B]`` integer; returns ``[B, max_len]`` bool.
    """
    _check_integer_tensor("lengths_to_padding_mask", "lengths", lengths, 1, "[batch]")
    if max_len is not None:
        _check_length("lengths_to_padding_mask", "max_len", max_len, minimum=0)
    shortest, longest = torch.stack(torch.aminmax(lengths)).tolist() if lengths.numel() else (0, 0)
    if shortest < 0:
        # A negative length would give a row of padding only, as if it were 0.
        index = int((lengths < 0).nonzero()[0])
        raise ValueError(
            f"lengths_to_padding_mask: lengths: expected non-negative ints, got {int(lengths[index])} at index {index}"
        )
    if max_len is None and longest > MAX_MASK_LENGTH:
        raise ValueError(
            f"lengths_to_padding_mask: lengths: expected lengths of at most {MAX_MASK_LENGTH:,} "
            f"(the mask's width), got {longest:,}"
        )
    max_len = longest if max_len is None else max_len
    if longest > max_len:
        raise ValueError(f"lengths_to_padding_mask: max_len must be >= the longest length {longest}, got {max_len}")
    positions = torch.arange(max_len, device=lengths.device).unsqueeze(0)  # [1, S]
    return positions >= lengths.unsqueeze(1)  # [B, S]


def _check_mask_dtype(name: str, mask: Tensor) -> None:
    arguments.check_tensor(name, mask)
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(
            f"{name} must be a bool (True = hidden) or floating (added to the scores) tensor, "
            f"got dtype {mask.dtype}"
        )


def _check_mask_device(name: str, mask: Tensor, device: torch.device | None) -> None:
    # Else torch fails deep in the attention ("Tensor on device cpu is not on the expected device"), naming no mask.
    if device is not None and mask.device != device:
        raise ValueError(f"{name}: expected a mask on the inputs' device ({device}), got one on {mask.device}")


def check_attn_mask(
    attn_mask: Tensor,
    *,
    batch_size: int,
    num_heads: int,
    query_len: int,
    key_len: int,
    device: torch.device | None = None,
) -> None:
    """Raise ``ValueError`` unless ``attn_mask`` is ``[L, S]`` or ``[B*H, L, S]``, bool or float, on ``device``."""
    _check_mask_dtype("attn_mask", attn_mask)
    _check_mask_device("attn_mask", attn_mask, device)
    expected_2d = (query_len, key_len)
    expected_3d = (batch_size * num_heads, query_len, key_len)
    if tuple(attn_mask.shape) not in (expected_2d, expected_3d):
        raise ValueError(
            f"attn_mask must have shape {list(expected_2d)} or {list(expected_3d)} "
            f"([tgt_len, src_len] or [batch*num_heads, tgt_len, src_len]), "
            f"got {list(attn_mask.shape)}"
        )


def check_key_padding_mask(
    key_padding_mask: Tensor, *, batch_size: int, key_len: int, device: torch.device | None = None
) -> None:
    """Raise ``ValueError`` unless ``key_padding_mask`` is ``[B, S]``, bool or float, on ``device``."""
    _check_mask_dtype("key_padding_mask", key_padding_mask)
    _check_mask_device("key_padding_mask", key_padding_mask, device)
    if tuple(key_padding_mask.shape) != (batch_size, key_len):
        raise ValueError(
            f"key_padding_mask must have shape [batch, src_len] = {[batch_size, key_len]}, "
            f"got {list(key_padding_mask.shape)}"
        )


def merge_masks(
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    *,
    batch_size: int,
    num_heads: int,
    dtype: torch.dtype,
) -> Tensor | None:
    """Combine an attention mask and a key padding mask into one mask over the scores.

    Two bool masks stay bool (hidden where either hides); otherwise both become additive
    float masks in ``dtype`` (bool True -> ``-inf``) and are summed, as torch does.

    Shape:
        attn_mask ``[L, S]`` or ``[B*H, L, S]``; key_padding_mask ``[B, S]``;
        returns ``[1 or B, 1 or H, L or 1, S]``, broadcastable to the scores ``[B, H, L, S]``.
    """
    parts: list[Tensor] = []
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            parts.append(attn_mask.view(1, 1, *attn_mask.shape))  # [1, 1, L, S]
        else:
            parts.append(attn_mask.view(batch_size, num_heads, *attn_mask.shape[1:]))  # [B, H, L, S]
    if key_padding_mask is not None:
        parts.append(key_padding_mask.view(batch_size, 1, 1, key_padding_mask.shape[-1]))  # [B, 1, 1, S]
    if not parts:
        return None
    if all(part.dtype == torch.bool for part in parts):
        merged = parts[0]
        for part in parts[1:]:
            merged = merged | part
        return merged
    merged_float: Tensor | None = None
    for part in parts:
        additive = (
            torch.zeros(part.shape, dtype=dtype, device=part.device).masked_fill(part, float("-inf"))
            if part.dtype == torch.bool
            else part.to(dtype)
        )
        merged_float = additive if merged_float is None else merged_float + additive
    return merged_float


def fully_hidden_rows(mask: Tensor) -> Tensor:
    """Where a query row has every key hidden (softmax over nothing would give NaN).

    Shape:
        mask ``[..., L, S]`` bool (True = hidden) or float (``-inf`` = hidden);
        returns ``[..., L, 1]`` bool.
    """
    hidden = mask if mask.dtype == torch.bool else torch.isneginf(mask)
    return hidden.all(dim=-1, keepdim=True)


def unhide_rows(mask: Tensor, rows: Tensor) -> Tensor:
    """Clear the mask on ``rows`` so that softmax stays finite; the caller zeroes those rows after.

    Shape:
        mask ``[..., L, S]``; rows ``[..., L, 1]`` bool; returns the mask's shape
        broadcast with ``rows``.
    """
    if mask.dtype == torch.bool:
        return mask & ~rows
    return mask.masked_fill(rows, 0.0)


def to_sdpa_mask(mask: Tensor | None) -> Tensor | None:
    """The one polarity conversion: our bool "hidden" mask to SDPA's bool "may attend" mask.

    Float masks are additive in both conventions and pass through unchanged.
    """
    if mask is None or mask.dtype != torch.bool:
        return mask
    return ~mask


def folded_additive_key_mask(key_padding_mask: Tensor, num_heads: int, dtype: torch.dtype) -> Tensor:
    """A key padding mask as the additive mask of one query per (sentence, head): 0 visible, ``-inf`` hidden.

    For products whose batch is sentences times heads, batch-major (row ``b * H + h``),
    as the single-position decoder step computes its cross-attention scores.

    Shape:
        key_padding_mask ``[B, S]`` bool (True = hidden); returns ``[B*H, 1, S]`` of ``dtype``.
    """
    arguments.check_tensor("folded_additive_key_mask: key_padding_mask", key_padding_mask)
    if key_padding_mask.dim() != 2 or key_padding_mask.dtype != torch.bool:
        raise ValueError(
            "folded_additive_key_mask: key_padding_mask must be a bool tensor of shape [batch, src_len], "
            f"got dtype {key_padding_mask.dtype} and shape {list(key_padding_mask.shape)}"
        )
    _check_length("folded_additive_key_mask", "num_heads", num_heads, minimum=1)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:  # -inf has no integer form
        raise ValueError(f"folded_additive_key_mask: dtype: expected a floating dtype, got {dtype}")
    batch_size, key_len = key_padding_mask.shape
    additive = torch.zeros(batch_size, 1, key_len, dtype=dtype, device=key_padding_mask.device)  # [B, 1, S]
    additive.masked_fill_(key_padding_mask.unsqueeze(1), float("-inf"))
    return additive.repeat_interleave(num_heads, dim=0)  # [B*H, 1, S]


def padded_query_rows_mask(query_padding_mask: Tensor, num_heads: int, attn_mask: Tensor | None = None) -> Tensor:
    """3-D bool ``attn_mask`` that hides every key of each padded query *row*.

    A key padding mask hides padded *columns* (keys); this hides padded *rows* (queries)
    as well, which the tutorials discuss but the model never needs (the lab shows why).
    A fully hidden row gives a zero mixture in this package's attention (not NaN). With
    ``attn_mask`` (e.g. :func:`causal_mask`) the result hides what either hides.

    Shape:
        query_padding_mask ``[B, L]`` bool (True = padding); attn_mask ``[L, L]`` bool;
        returns ``[B*H, L, L]`` bool.
    """
    arguments.check_tensor("padded_query_rows_mask: query_padding_mask", query_padding_mask)
    if query_padding_mask.dim() != 2 or query_padding_mask.dtype != torch.bool:
        raise ValueError(
            "padded_query_rows_mask: query_padding_mask must be a bool tensor of shape "
            f"[batch, query_len], got dtype {query_padding_mask.dtype} and shape "
            f"{list(query_padding_mask.shape)}"
        )
    _check_length("padded_query_rows_mask", "num_heads", num_heads, minimum=1)
    batch_size, query_len = query_padding_mask.shape
    if attn_mask is not None:
        arguments.check_tensor("padded_query_rows_mask: attn_mask", attn_mask)
    if attn_mask is not None and (attn_mask.dtype != torch.bool or tuple(attn_mask.shape) != (query_len, query_len)):
        raise ValueError(
            f"padded_query_rows_mask: attn_mask must be a bool tensor of shape {[query_len, query_len]}, "
            f"got dtype {attn_mask.dtype} and shape {list(attn_mask.shape)}"
        )
    rows = query_padding_mask.view(batch_size, 1, query_len, 1)  # [B, 1, L, 1]
    hidden = rows.expand(batch_size, num_heads, query_len, query_len)  # [B, H, L, L]
    if attn_mask is not None:
        hidden = hidden | attn_mask.view(1, 1, query_len, query_len)  # [B, H, L, L]
    return hidden.reshape(batch_size * num_heads, query_len, query_len)  # [B*H, L, L], batch-major as torch


def keep_to_hidden(keep_mask: Tensor) -> Tensor:
    """Convert a "True = may attend" bool mask (the Annotated Transformer's) to ours.

    The Annotated Transformer builds ``(src != pad).unsqueeze(-2)`` (``[B, 1, S]``, True =
    a real token) and a lower-triangular "subsequent" mask (True = may attend); this
    package's masks say True = hidden. Only bool masks have a polarity: a 0/1 integer or
    float mask is refused rather than guessed at (a float mask would be *added* to the
    scores).

    Shape:
        keep_mask any shape, bool; returns the same shape, bool.
    """
    arguments.check_tensor("keep_to_hidden: keep_mask", keep_mask)
    if keep_mask.dtype != torch.bool:
        raise ValueError(
            "keep_to_hidden: keep_mask must be a bool tensor (True = may attend), " f"got dtype {keep_mask.dtype}"
        )
    return ~keep_mask
