"""What evaluation reads of a candidate table once: bounds on each row's norms, the largest
magnitude and the binary grid the values lie on (:func:`table_summary`, :func:`fraction_bits`),
in one pass of the C kernel where it is built."""
from __future__ import annotations

import ctypes
from typing import NamedTuple, Optional

import numpy as np
import torch

from openbench.evaluation.counting.exact_keys import norm_bounds, widened_norms
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY, split_rows

__all__ = ["fraction_bits", "TableSummary", "table_summary"]

ctypes_double, ctypes_int64, ctypes_address = ctypes.c_double, ctypes.c_int64, ctypes.addressof
NORM_CHUNK_ELEMENTS = 1 << 22  # candidate-table values converted to float64 at a time


def fraction_bits(*tables: torch.Tensor, chunk: int = 1 << 20) -> Optional[int]:
    """The fewest binary fraction digits f such that every value of ``tables`` is a multiple of 2^-f
    (0 for integers); None when a value is not finite. Reads ``chunk`` values at a time."""
    bits = 0
    library = COUNTING_LIBRARY.get()
    for table in tables:
        flat = table.detach().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        if (library is not None and flat.device.type == "cpu" and flat.dtype in (torch.float32, torch.float64)
                and flat.is_contiguous()):  # one pass over the bit patterns
            function = (library.openbench_fraction_bits_f32 if flat.dtype == torch.float32
                        else library.openbench_fraction_bits_f64)
            found = int(function(flat.data_ptr(), flat.numel())) if flat.numel() else 0
            if found < 0:
                return None
            bits = max(bits, found)
            continue
        for start in range(0, flat.numel(), chunk):
            values = flat[start:start + chunk].cpu().to(torch.float64).numpy()
            if not np.isfinite(values).all():
                return None
            values = values[values != 0]
            if not values.size:
                continue
            mantissa, exponent = np.frexp(values)  # value = mantissa · 2^exponent, 0.5 <= |mantissa| < 1
            integer = np.abs(mantissa * 2.0 ** 53).astype(np.int64)  # exact: 53 significant bits
            lowest = integer & -integer  # the lowest set bit, a power of two
            _, lowest_exponent = np.frexp(lowest.astype(np.float64))
            # value = integer · 2^(exponent - 53), and integer's lowest bit is 2^(lowest_exponent - 1)
            bits = max(bits, int((53 - exponent - (lowest_exponent - 1)).max()))
    return bits


class TableSummary(NamedTuple):
    """What evaluation needs of a candidate table once, from :func:`table_summary`: bounds
    ``norm2``/``norm1`` (N,) float64 on each row's norms (as :func:`norm_bounds`), the
    ``largest`` magnitude (NaN when a value is NaN) and the table's :func:`fraction_bits`."""

    norm2: torch.Tensor
    norm1: torch.Tensor
    largest: float
    bits: Optional[int]


def table_summary(table: torch.Tensor) -> TableSummary:
    """:class:`TableSummary` of the rows of ``table`` (N, d): one read of the table by the C
    kernel (rows split over threads), else :func:`norm_bounds` in chunks, a min/max pass and
    :func:`fraction_bits`."""
    rows, width = table.shape
    library = COUNTING_LIBRARY.get()
    if (library is None or table.device.type != "cpu" or table.dtype not in (torch.float32, torch.float64)
            or not rows or (width > 1 and table.stride(1) != 1)):
        norm2 = torch.zeros(rows, dtype=torch.float64, device=table.device)
        norm1 = torch.zeros_like(norm2)
        step = max(1, NORM_CHUNK_ELEMENTS // max(1, width))
        for start in range(0, rows, step):
            norm2[start:start + step], norm1[start:start + step] = norm_bounds(table[start:start + step])
        if not table.numel():
            largest = 0.0
        else:
            extremes = torch.aminmax(table)
            low, high = float(extremes.min), float(extremes.max)
            largest = float("nan") if np.isnan(low) or np.isnan(high) else max(-low, high)
        return TableSummary(norm2, norm1, largest, fraction_bits(table.contiguous()))
    norm2, norm1 = torch.empty(rows, dtype=torch.float64), torch.empty(rows, dtype=torch.float64)
    function = library.openbench_table_summary_f32 if table.dtype == torch.float32 else library.openbench_table_summary_f64
    parts: list = []

    def run(bounds):
        largest, bits = ctypes_double(), ctypes_int64()
        function(table.data_ptr(), table.stride(0) if rows > 1 else width, width, bounds[0], bounds[1],
                 norm2.data_ptr(), norm1.data_ptr(), ctypes_address(largest), ctypes_address(bits))
        parts.append((largest.value, bits.value))

    split_rows(rows, rows * width, run)
    largest = float("nan") if any(np.isnan(part[0]) for part in parts) else max(part[0] for part in parts)
    bits = None if any(part[1] < 0 for part in parts) else max(part[1] for part in parts)
    two, one = widened_norms(norm2, norm1, width)
    return TableSummary(two, one, largest, bits)
