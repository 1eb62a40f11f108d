"""Hypothesis strategies that reach the edges a universal claim must survive.

Used with :func:`fences.forall`. Shapes include 0-d, size-0 and size-1
dimensions; layouts include contiguous, transposed (non-dense order),
stepped slices (gaps), expanded (stride 0: overlapping) and a storage
offset; float values include NaN, ±inf, ±0, subnormals and the extremes.
"""
from __future__ import annotations

from hypothesis import strategies as st

LAYOUTS = ("contiguous", "transposed", "stepped", "expanded", "offset")


def shapes(max_dims: int = 4, max_side: int = 4):
    """Tensor shapes: 0-d included, sides from 0 to ``max_side``."""
    return st.lists(st.integers(0, max_side), min_size=0, max_size=max_dims).map(tuple)


def floats(width: int = 32):
    """Python floats representable at ``width`` bits, with NaN, ±inf and subnormals."""
    return st.floats(width=width, allow_nan=True, allow_infinity=True,
                     allow_subnormal=True)


@st.composite
def layouts(draw, shape_strategy=None, dtype=None):
    """A tensor of a drawn shape in a drawn layout; returns ``(tensor, layout)``.

    Values are ``arange`` over the storage, so every element is distinct
    except where the layout overlaps (``expanded``).
    """
    import torch

    dtype = dtype or torch.float32
    shape = draw(shape_strategy if shape_strategy is not None else shapes())
    layout = draw(st.sampled_from(LAYOUTS))
    n = 1
    for side in shape:
        n *= side
    if layout == "transposed" and len(shape) >= 2:
        base = torch.arange(n, dtype=dtype).reshape(shape[::-1]) if n else \
            torch.empty(shape[::-1], dtype=dtype)
        return base.permute(*reversed(range(len(shape)))), layout
    if layout == "stepped" and len(shape) >= 1:
        big = (shape[0] * 2,) + tuple(shape[1:])
        m = 1
        for side in big:
            m *= side
        base = torch.arange(m, dtype=dtype).reshape(big)
        return base[::2], layout
    if layout == "expanded" and len(shape) >= 1:
        inner = 1
        for side in shape[1:]:
            inner *= side
        row = torch.arange(inner, dtype=dtype)
        return row.reshape((1,) + tuple(shape[1:])).expand(shape), layout
    if layout == "offset":
        flat = torch.arange(n + 3, dtype=dtype)
        return flat[3:].reshape(shape), layout
    return torch.arange(n, dtype=dtype).reshape(shape), "contiguous"
