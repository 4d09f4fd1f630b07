"""One rule for non-finite stored values, the same for every model source.

**Every value a model stores must be finite.** An embedding row, a relation vector, a TransR
projection, a PyKEEN or PyG model's parameter: one ``+inf``, ``-inf`` or NaN among them makes the
scores that read it infinite or NaN, and no order of those says which candidate is better (an
infinite query ties every candidate at infinity; exact ranks' rounding bounds, which grow with
the largest norm, become infinite or NaN). So openbench refuses such a model before anything is
scored, under exact and fast ranks, for every task, device, kernel and sharding alike, with one
line naming the table, the row (and its label) and the column of the first non-finite value
(:func:`refuse_nonfinite`, called by the door on every model it loads).

Scores a model computes itself from no stored table openbench reads (a user's scoring function,
a ranked list) are ranked as given; a NaN score is refused where it is met.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional, Sequence, Tuple

import torch

from openbench.errors import InputError

__all__ = ["StoredTable", "first_nonfinite", "refuse_nonfinite", "nonfinite_error", "module_tables",
           "CHECK_CHUNK_ELEMENTS"]

CHECK_CHUNK_ELEMENTS = 1 << 24  # values tested at a time (a bool mask of 16 MB)


class StoredTable(NamedTuple):
    """One table of stored values: what a message calls it, the values (N, ...) (real or complex),
    what its rows are (``"entity"``, ``"relation"`` or ``"row"``), the file it came from and, for
    complex values read from a real file, that file's layout (``"halves"``: [Re | Im];
    ``"interleaved"``: Re, Im pairs), so that a message names the file's own column."""

    name: str
    values: torch.Tensor
    rows: str = "row"
    path: Optional[str] = None
    layout: Optional[str] = None


def first_nonfinite(values: torch.Tensor, chunk: int = CHECK_CHUNK_ELEMENTS) -> Optional[Tuple[Tuple[int, ...], float]]:
    """(the index of the first non-finite value of ``values`` in row-major order, that value), or
    None when every value is finite. Complex tables are read as (..., 2) real and imaginary parts.
    Reads ``chunk`` values at a time (no mask of the whole table)."""
    if not values.is_floating_point() and not values.is_complex():
        return None
    real = torch.view_as_real(values) if values.is_complex() else values
    flat = real.detach().reshape(-1)
    for start in range(0, flat.numel(), chunk):
        part = flat[start:start + chunk]
        finite = torch.isfinite(part)
        if bool(finite.all()):
            continue
        offset = start + int((~finite).nonzero()[0, 0])
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(offset), real.shape))
        return index, float(flat[offset])
    return None


def _spelled(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+inf" if value > 0 else "-inf")


def nonfinite_error(table: StoredTable, index: Tuple[int, ...], value: float,
                    labels: Optional[Sequence[str]] = None) -> InputError:
    """The one-line error of ``table``'s non-finite ``value`` at ``index`` (row, column[, part]);
    ``labels``: the dataset's labels of the table's rows, where it has them."""
    row = index[0]
    where = f"row {row}"
    if labels is not None and row < len(labels):
        where += f" ({table.rows} {labels[row]!r})"
    where += _column(table, index[1:])
    return InputError(f"{table.name}, {where}, holds {_spelled(value)}: every stored value of a model must be finite "
                      "(a non-finite one makes the scores that read it infinite or NaN, which no order decides); "
                      "fix or re-export the model", table.path)


def _column(table: StoredTable, index: Tuple[int, ...]) -> str:
    """How a message names the column ``index`` (after the row) of ``table``: a real table's
    column (a RESCAL matrix's entry), a complex table's column in its file's layout."""
    if not table.values.is_complex():
        return "" if not index else f", column {index[0]}" if len(index) == 1 else f", entry {index}"
    *position, part = index
    spelled = "real" if part == 0 else "imaginary"
    if len(position) != 1:
        return f", entry {tuple(position)} ({spelled} part)"
    column, width = position[0], table.values.shape[-1]
    if table.layout == "halves":
        return f", column {column + part * width} (the {spelled} part of complex column {column})"
    if table.layout == "interleaved":
        return f", column {2 * column + part} (the {spelled} part of complex column {column})"
    return f", column {column} ({spelled} part)"


def refuse_nonfinite(model, dataset=None) -> None:
    """Raise :func:`nonfinite_error` for the first non-finite value of ``model``'s stored tables
    (``model.stored_tables()``, where it has any), naming rows by ``dataset``'s labels."""
    tables = getattr(model, "stored_tables", None)
    if tables is None:
        return
    for table in tables():
        found = first_nonfinite(table.values)
        if found is None:
            continue
        labels = None
        if dataset is not None and table.rows in ("entity", "relation"):
            labels = dataset.entity_labels if table.rows == "entity" else dataset.relation_labels
            if len(labels) != table.values.shape[0]:
                labels = None
        raise nonfinite_error(table, found[0], found[1], labels)


def module_tables(module, owner: str) -> list:
    """A torch module's floating parameters (what it learnt; buffers may hold masks) as
    :class:`StoredTable` s named ``"{owner} parameter {name}"`` (PyKEEN and PyG models)."""
    return [StoredTable(f"{owner} parameter {name}", tensor) for name, tensor in module.named_parameters()
            if (tensor.is_floating_point() or tensor.is_complex()) and tensor.ndim]
