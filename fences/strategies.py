"""Hypothesis strategies for :func:`fences.forall` that reach the edges: shapes with 0-d, size-0
and size-1 dimensions; layouts contiguous, transposed, stepped, expanded (stride 0) and offset;
floats with NaN, ±inf, ±0, subnormals and the extremes."""
from __future__ import annotations

from math import prod

from hypothesis import strategies as st

LAYOUTS = ("contiguous", "transposed", "stepped", "expanded", "offset")


def shapes(max_dims: int = 4, max_side: int = 4):
    """Tensor shapes: 0-d included, sides from 0 to ``max_side``."""
    return st.lists(st.integers(0, max_side), min_size=0, max_size=max_dims).map(tuple)


def floats(width: int = 32):
    """Python floats representable at ``width`` bits, with NaN, ±inf and subnormals."""
    return st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)


@st.composite
def layouts(draw, shape_strategy=None, dtype=None):
    """``(tensor, layout)``: a tensor of a drawn shape in a drawn layout, its values ``arange``
    over the storage (distinct except where ``expanded`` overlaps)."""
    import torch

    dtype = dtype or torch.float32
    shape = draw(shape_strategy if shape_strategy is not None else shapes())
    layout = draw(st.sampled_from(LAYOUTS))
    n = prod(shape)
    if layout == "transposed" and len(shape) >= 2:
        base = torch.arange(n, dtype=dtype).reshape(shape[::-1]) if n else torch.empty(shape[::-1], dtype=dtype)
        return base.permute(*reversed(range(len(shape)))), layout
    if layout == "stepped" and len(shape) >= 1:
        big = (shape[0] * 2,) + tuple(shape[1:])
        return torch.arange(prod(big), dtype=dtype).reshape(big)[::2], layout
    if layout == "expanded" and len(shape) >= 1:
        row = torch.arange(prod(shape[1:]), dtype=dtype)
        return row.reshape((1,) + tuple(shape[1:])).expand(shape), layout
    if layout == "offset":
        return torch.arange(n + 3, dtype=dtype)[3:].reshape(shape), layout
    return torch.arange(n, dtype=dtype).reshape(shape), "contiguous"
