"""One block's count against the windows: the C pass (:class:`_BlockPass`, ``openbench_matrix_count_*``
in ``csrc/matrix_pass.c``, one :class:`~openbench.evaluation.counting.matrix.c_pass.MatrixPassArgs` each call, with the float64 step inside it), its contract in numpy (no compiled helper) and in
torch (:class:`_TorchPass`: a GPU, or ``OPENBENCH_MATRIX_PASS=torch``), and the choice among them
(:func:`_passes`). Each returns (beyond (T + 1,), reached (T + 1,), undecided (n, 3), top positions)."""
from __future__ import annotations

import ctypes
import logging
import os
from typing import List, Optional

import numpy as np
import torch

from openbench._native import StaleLibrary
from openbench.errors import ScoreError
from openbench.evaluation.counting.kernels import COUNTING_LIBRARY
from openbench.evaluation.counting.matrix import c_pass, core
from openbench.evaluation.counting.matrix.windows import _floor_in, _grid, _Windows

__all__ = ["PASS_VARIABLE", "DEVICE_STEP_KEYS"]


logger = logging.getLogger(__name__)

PASS_VARIABLE = "OPENBENCH_MATRIX_PASS"  # "torch": the device pass on the CPU too; "plain": GEMM + C pass, never fused
DEVICE_STEP_KEYS = 1 << 16  # keys per float64 step of the device pass (their rows and columns gathered)


def _configure(library) -> None:
    c_pass.configure(library)
    if hasattr(library, "openbench_matrix_fused_available"):
        library.openbench_matrix_fused_available.argtypes = []
        library.openbench_matrix_fused_available.restype = ctypes.c_int


_CONFIGURED: set = set()


def _library():
    """The C helpers with the matrix passes declared, or None (not built, switched off, or built
    from other sources than this code's: then the numpy pass, with a warning)."""
    library = COUNTING_LIBRARY.get()
    if library is not None and id(library) not in _CONFIGURED:
        try:
            _configure(library)
        except (AttributeError, StaleLibrary) as error:
            logger.warning("the counting library's matrix passes are stale (%s); counting in numpy until it is "
                           "rebuilt (pip install -e .)", error)
            return None
        _CONFIGURED.add(id(library))
    return library


class _BlockPass:
    """One block's C pass (``openbench_matrix_count_*``), capacities grown and the pass repeated
    where a block records more; with float64 windows, exact ranks' float64 step inside it: a key
    inside a fast window is recomputed in float64 from the block's float64 query rows and the stored
    columns and placed among the float64 windows, and only what stays undecided is recorded, with
    its range of thresholds."""

    KINDS = {"dot": 0, "l2": 1, "l1": 2}

    def __init__(self, windows: _Windows, record: bool, library, kind: str = "dot",
                 queries64: Optional[torch.Tensor] = None, columns: Optional[torch.Tensor] = None,
                 lows64: Optional[np.ndarray] = None, highs64: Optional[np.ndarray] = None):
        self.windows, self.record, self.library = windows, record, library
        self.count = int(windows.lows.shape[0])
        self.grid = _grid(windows, record)
        self.kind = self.KINDS.get(kind, 0)
        self.queries64 = None if queries64 is None else queries64.contiguous()
        self.columns = None if columns is None else columns.contiguous()
        self.lows64 = None if lows64 is None else np.ascontiguousarray(lows64)
        self.highs64 = None if highs64 is None else np.ascontiguousarray(highs64)

    def __call__(self, keys: torch.Tensor, floor: Optional[float], first: int = 0):
        """(beyond (T + 1,), reached (T + 1,), undecided (n, 3): position, first and last undecided
        threshold, top positions) of the rows ``keys`` (B, S) of the block, its first row ``first``."""
        windows, grid = self.windows, self.grid
        rows, width = keys.shape
        most = max(1, core.COUNTER_LIMIT // max(1, width))  # the pass's int32 counters hold rows * width keys
        if rows > most:
            return self._in_parts(keys, floor, first, most)
        capacity, top_capacity = 1 << 16, 1 << 16  # untouched pages cost nothing; a pass repeated costs a pass
        f32 = keys.dtype == torch.float32
        function = self.library.openbench_matrix_count_f32 if f32 else self.library.openbench_matrix_count_f64
        floor = _floor_in(keys.dtype, floor)
        refine: dict = {}  # the float64 step's queries, width, columns, windows
        if self.queries64 is not None and self.columns is not None and self.lows64 is not None \
                and self.highs64 is not None:
            refine = dict(queries64=self.queries64[first:first + rows].data_ptr(), dims=self.queries64.shape[1],
                          columns=self.columns.data_ptr(), keys64_lo=self.lows64.ctypes.data,
                          keys64_hi=self.highs64.ctypes.data)
        counts = np.empty(grid.cells + 2, np.int32)  # this call's own counters (calls run on several threads)
        while True:
            beyond, reached = np.zeros(self.count + 1, np.int64), np.zeros(self.count + 1, np.int64)
            pairs, tops = np.empty(3 * capacity, np.int64), np.empty(top_capacity, np.int64)
            top_count = np.zeros(1, np.int64)
            found = function(ctypes.byref(c_pass.MatrixPassArgs(
                keys=keys.data_ptr(), stride=keys.stride(0), rows=rows, width=width, lows=windows.lows.data_ptr(),
                highs=windows.highs.data_ptr(), count=self.count, **grid.arguments(), cell_counts=counts.ctypes.data,
                beyond=beyond.ctypes.data, reached=reached.ctypes.data, record=int(self.record),
                pairs=pairs.ctypes.data, capacity=capacity, floor=-np.inf if floor is None else floor,
                tops=tops.ctypes.data if floor is not None else None, top_capacity=top_capacity,
                top_count=top_count.ctypes.data, kind=self.kind, **refine)))
            if found < 0:
                position = -1 - found
                raise ScoreError(f"the model gave a NaN score to pair (row {position // width} of a block, column "
                                 f"{position % width}); a repurposing matrix ranks finite scores")
            kept = int(top_count[0]) if floor is not None else 0
            if found <= capacity and kept <= top_capacity:
                recorded = pairs[:3 * found].reshape(-1, 3)
                # row order, whatever order the pass visits the keys in (column spans)
                return beyond, reached, recorded[np.argsort(recorded[:, 0], kind="stable")], np.sort(tops[:kept])
            capacity, top_capacity = max(capacity, int(found)), max(top_capacity, kept)

    def _in_parts(self, keys: torch.Tensor, floor: Optional[float], first: int, most: int):
        """The pass over ``most`` rows at a time, its results merged (positions within ``keys``)."""
        width = keys.shape[1]
        return _merged_parts([self(keys[r0:r0 + most], floor, first + r0) for r0 in range(0, keys.shape[0], most)],
                             [r0 * width for r0 in range(0, keys.shape[0], most)])


def _merged_parts(parts: list, offsets: List[int]) -> tuple:
    """One pass's result from its parts' (beyond, reached, recorded (n, 3), top positions[, their
    keys]), each part's positions moved by its offset: histograms summed, the rest concatenated."""
    merged = (sum(part[0] for part in parts), sum(part[1] for part in parts),
              np.concatenate([part[2] + np.array([offset, 0, 0]) for part, offset in zip(parts, offsets)]),
              np.concatenate([part[3] + offset for part, offset in zip(parts, offsets)]))
    return merged + tuple(np.concatenate([part[k] for part in parts]) for k in range(4, len(parts[0])))


def _numpy_pass(windows: _Windows, record: bool):
    """The C pass's contract in numpy (no compiled helper, or ``OPENBENCH_KERNEL=torch``): no
    float64 step, every key inside a window recorded with its range of thresholds."""
    lows, highs = windows.lows.double().numpy(), windows.highs.double().numpy()
    count = lows.shape[0]

    def run(keys: torch.Tensor, floor: Optional[float], first: int = 0):
        flat = keys.double().reshape(-1).numpy()
        if np.isnan(flat).any():
            position = int(np.flatnonzero(np.isnan(flat))[0])
            raise ScoreError(f"the model gave a NaN score to pair (row {position // keys.shape[1]} of a block, "
                             f"column {position % keys.shape[1]}); a repurposing matrix ranks finite scores")
        a = np.searchsorted(highs, flat, "left")
        b = np.searchsorted(lows, flat, "right")
        beyond = np.bincount(a, minlength=count + 1).astype(np.int64)
        reached = np.bincount(b, minlength=count + 1).astype(np.int64)
        inside = np.flatnonzero(a < b) if record else np.zeros(0, np.int64)
        triples = np.stack([inside, a[inside], b[inside]], axis=1) if inside.size else np.zeros((0, 3), np.int64)
        tops = np.flatnonzero(flat >= floor) if floor is not None else np.zeros(0, np.int64)
        return beyond, reached, triples, tops

    return run


class _TorchPass:
    """The C pass's contract in torch, on the keys' device (a GPU): each key placed among the
    windows by binary search (``a``: the highs below it, ``b``: the lows at or below it, as
    ``count_below_*``), a key inside a window (a < b) recomputed in float64 from the float64 query
    rows and the stored columns (``DEVICE_STEP_KEYS`` at a time) and placed among the float64
    windows within its [a, b] (the windows are non-decreasing: a clamp of the whole search), what
    stays undecided recorded with its range, the histograms by ``bincount``."""

    def __init__(self, windows: _Windows, record: bool, device: torch.device, kind: str = "dot",
                 queries64: Optional[torch.Tensor] = None, columns: Optional[torch.Tensor] = None,
                 lows64: Optional[np.ndarray] = None, highs64: Optional[np.ndarray] = None):
        self.record, self.kind, self.device = record, kind, device
        self.count = int(windows.lows.shape[0])
        self.lows, self.highs = windows.lows.to(device), windows.highs.to(device)
        self.refine = queries64 is not None and columns is not None and lows64 is not None and highs64 is not None
        if self.refine:
            assert queries64 is not None and columns is not None and lows64 is not None and highs64 is not None
            self.queries64 = queries64.to(device=device, dtype=torch.float64)
            self.columns64 = columns.to(device=device, dtype=torch.float64)  # float32 values: exact
            self.lows64 = torch.from_numpy(np.ascontiguousarray(lows64, np.float64)).to(device)
            self.highs64 = torch.from_numpy(np.ascontiguousarray(highs64, np.float64)).to(device)

    def inside(self, keys: torch.Tensor) -> int:
        """How many of ``keys`` lie inside a window (the probe of :func:`_crowded`)."""
        flat = keys.reshape(-1)
        return int((torch.searchsorted(self.highs, flat) < torch.searchsorted(self.lows, flat, right=True)).sum())

    def __call__(self, keys: torch.Tensor, floor: Optional[float], first: int = 0):
        """As :meth:`_BlockPass.__call__`: (beyond (T + 1,), reached (T + 1,), undecided (n, 3), top
        positions), numpy arrays on the host, positions within ``keys`` (B, S)."""
        rows, width = keys.shape
        flat = keys.reshape(-1)
        floor = _floor_in(keys.dtype, floor)
        nan = torch.isnan(flat)
        if bool(nan.any()):
            position = int(torch.nonzero(nan)[0, 0])
            raise ScoreError(f"the model gave a NaN score to pair (row {position // width} of a block, column "
                             f"{position % width}); a repurposing matrix ranks finite scores")
        a = torch.searchsorted(self.highs, flat)
        b = torch.searchsorted(self.lows, flat, right=True)
        undecided = torch.zeros((0, 3), dtype=torch.int64, device=flat.device)
        if self.record:
            inside = torch.nonzero(a < b)[:, 0]
            if self.refine and inside.numel():
                for start in range(0, inside.numel(), DEVICE_STEP_KEYS):
                    part = inside[start:start + DEVICE_STEP_KEYS]
                    key = self._float64_keys(first + part // width, part % width)
                    low, high = a[part], b[part]
                    narrowed = torch.maximum(torch.minimum(torch.searchsorted(self.highs64, key), high), low)
                    b[part] = torch.maximum(torch.minimum(torch.searchsorted(self.lows64, key, right=True), high),
                                            narrowed)
                    a[part] = narrowed
                inside = inside[a[inside] < b[inside]]
            undecided = torch.stack([inside, a[inside], b[inside]], dim=1)
        beyond = torch.bincount(a, minlength=self.count + 1)
        reached = torch.bincount(b, minlength=self.count + 1)
        tops = torch.nonzero(flat >= floor)[:, 0] if floor is not None else torch.zeros(0, dtype=torch.int64)
        return (beyond.cpu().numpy().astype(np.int64), reached.cpu().numpy().astype(np.int64),
                undecided.cpu().numpy(), tops.cpu().numpy())

    def _float64_keys(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """(n,) float64 keys of the pairs (rows, cols) (matrix indexes): the C pass's float64 step
        (any order of the sum is within the float64 windows' bound)."""
        queries, columns = self.queries64[rows], self.columns64[cols]
        if self.kind == "dot":
            return (queries * columns).sum(dim=1)
        if self.kind == "l2":
            return -((queries - columns) ** 2).sum(dim=1)
        return -(queries - columns).abs().sum(dim=1)


def _pass_on_device(device: Optional[torch.device]) -> bool:
    """Whether the blocks are counted by :class:`_TorchPass`: on a GPU, or forced on the CPU."""

    return (device is not None and device.type != "cpu") or os.environ.get(PASS_VARIABLE, "").lower() == "torch"


def _passes(windows: _Windows, record: bool, device: Optional[torch.device] = None, **refine):
    """The block pass: torch's on a GPU (or forced), else the C helper's (with the float64 step
    where ``refine`` gives its inputs), else numpy's."""
    if _pass_on_device(device):
        return _TorchPass(windows, record, device or torch.device("cpu"), **refine)
    library = _library()
    return _BlockPass(windows, record, library, **refine) if library is not None else _numpy_pass(windows, record)
