"""The numerical facts every exact count rests on, defined once: a precision's unit roundoff and
subnormal spacing, Higham's γ_n, the outward rounding of windows, the widening of a bound that was
itself evaluated in float64, the subnormal slack of a key's operations, and the grid criterion
(when a precision computes every key of a table on a binary grid without rounding). The ranking
engine (:mod:`.exact`) and the matrix pass (:mod:`.matrix`) both read them from here."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import torch

__all__ = ["UNIT_ROUNDOFF", "SUBNORMAL_SPACING", "U64", "BOUND_WIDENING", "unit_roundoff", "gamma",
           "subnormal_spacing", "subnormal_slack", "widened", "on_exact_grid", "round_outwards"]

UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 2.0 ** -24,
                 torch.float64: 2.0 ** -53}
# the spacing of subnormal numbers: the absolute error one operation may add near underflow
SUBNORMAL_SPACING = {torch.float16: 2.0 ** -24, torch.bfloat16: 2.0 ** -133, torch.float32: 2.0 ** -149,
                     torch.float64: 2.0 ** -1074}
U64 = 2.0 ** -53
# a bound evaluated in float64 is off by a few roundings of itself: 2^-30 relative covers them many times over
BOUND_WIDENING = 1 + 2.0 ** -30


def unit_roundoff(dtype: torch.dtype) -> float:
    """u of a floating dtype (complex: of its real part)."""
    return UNIT_ROUNDOFF[torch.empty(0, dtype=dtype).real.dtype]


def subnormal_spacing(dtype: torch.dtype) -> float:
    """The spacing of a floating dtype's subnormal numbers (complex: of its real part)."""
    return SUBNORMAL_SPACING[torch.empty(0, dtype=dtype).real.dtype]


def gamma(n: float, u: float) -> float:
    """γ_n = n·u / (1 - n·u): bounds the relative error of n roundings (Higham, §3.1)."""
    return n * u / (1.0 - n * u)


def widened(bound):
    """A bound computed in float64 (a number or an array), widened past its own rounding."""
    return bound * BOUND_WIDENING


def subnormal_slack(width: int, query_rounding: int, dtype: torch.dtype) -> float:
    """The absolute error subnormal results may add to a key of ``width`` terms whose query took
    ``query_rounding`` roundings: 4·(d + n + 8) times the dtype's subnormal spacing."""
    return 4 * (width + query_rounding + 8) * subnormal_spacing(dtype)


def on_exact_grid(size, degree: int, grid_bits: int, dtype: torch.dtype):
    """The grid criterion: whether ``dtype`` computes a key without rounding when its terms are
    multiples of 2^-(degree · grid_bits) and every partial sum is below ``size`` (a number or an
    array: the answer has its shape). The terms must also lie above the dtype's subnormal spacing
    (float32: 2^-149), below which a product underflows (a subnormal entry squared rounds to 0,
    tying what the definition orders); three bits below the significand leave room for SimplE's ½
    and L2's factor 2."""
    significand = 53 if dtype == torch.float64 else 24  # complex128 as float32: conservative, never wrong
    finest = -int(np.log2(subnormal_spacing(dtype)))
    if degree * grid_bits >= min(1000, finest + 1):
        return np.zeros(np.shape(size), dtype=bool) if np.ndim(size) else False
    with np.errstate(over="ignore"):  # a size beyond float64 is simply not on an exact grid
        return size * 2.0 ** (degree * grid_bits) < 2.0 ** (significand - 3)


def round_outwards(lows: np.ndarray, highs: np.ndarray, dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
    """float64 ``lows`` rounded down and ``highs`` rounded up to ``dtype``, as torch tensors."""
    if dtype == torch.float64:
        return torch.from_numpy(lows), torch.from_numpy(highs)
    if dtype == torch.float32:
        with np.errstate(over="ignore"):  # beyond float32's range: ±inf, and the outward step below
            down, up = lows.astype(np.float32), highs.astype(np.float32)
        down = np.where(down > lows, np.nextafter(down, np.float32(-np.inf)), down)
        up = np.where(up < highs, np.nextafter(up, np.float32(np.inf)), up)
        return torch.from_numpy(down), torch.from_numpy(up)
    low, high = torch.from_numpy(lows), torch.from_numpy(highs)
    rounded_down, rounded_up = low.to(dtype), high.to(dtype)
    rounded_down = torch.where(rounded_down.double() > low,
                               torch.nextafter(rounded_down, torch.full_like(rounded_down, -np.inf)), rounded_down)
    rounded_up = torch.where(rounded_up.double() < high,
                             torch.nextafter(rounded_up, torch.full_like(rounded_up, np.inf)), rounded_up)
    return rounded_down, rounded_up
