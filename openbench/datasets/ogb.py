"""OGB's link-prediction dataset folders (``ogbl-biokg``, ``ogbl-wikikg2``), read without running
anything their files contain.

OGB's ``LinkPropPredDataset`` leaves ``split/<split_type>/{train,valid,test}.pt``: each a
``torch.save``d dict of numpy arrays (``head``, ``relation``, ``tail``; ``head_neg`` and
``tail_neg`` (n, K) for valid/test; for ``ogbl-biokg`` also ``head_type``/``tail_type``). A ``.pt``
file is a pickle, and a pickle can name any function to call. These files are opened with torch's
weights-only unpickler, which builds only tensors and an allow-list of types: here numpy's array
reconstruction (under its numpy 2 and its older ``numpy.core`` name, which OGB's 2020 files use),
``numpy.ndarray`` and ``numpy.dtype``. A file that names anything else is refused before any of it
runs, with the names it asked for.

**Global entity ids.** ``ogbl-wikikg2`` numbers its entities globally. ``ogbl-biokg`` numbers them
per node type (``head_type``/``tail_type`` name each triple's types, and the negatives of a query
are of its answer's type); openbench maps them to one id space exactly as OGB's KGE example
(``examples/linkproppred/biokg/run.py``) does: types in the order of ``num_nodes_dict``, each
type's ids shifted by the counts of the types before it. OGB builds ``num_nodes_dict`` in *sorted*
type-name order (``ogb/io/read_graph_raw.py``: ``nodetype_list = sorted(...)``), with the counts
of ``raw/num-node-dict.csv.gz``, whatever that file's column order (a loader that follows the
columns merges nothing but shifts every id differently from OGB whenever they are unsorted).
Without that file the counts come from the largest id seen (a warning says so);
``--entity-offsets FILE`` (JSON ``{"type": offset}``) overrides both. Entities are labelled ``<type>:<local id>`` (biokg) or ``entity:<id>``, relations
``relation:<id>``; the fingerprint hashes the id triples of every split.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from openbench._io.inputs import read_text
from openbench.errors import InputError, option
from openbench.datasets.layouts import is_ogb_folder  # noqa: F401  (defined where no torch is needed)

__all__ = ["SAFE_NUMPY_GLOBALS", "OGB_SPLITS", "load_split_file", "is_ogb_folder", "split_types", "load_ogb_dataset", "num_node_dict",
           "IdLabels"]

logger = logging.getLogger(__name__)
OGB_SPLITS = {"train": "train.pt", "valid": "valid.pt", "test": "test.pt"}

_core = getattr(np, "_core", None) or np.core  # numpy 2 renamed numpy.core to numpy._core
_reconstruct = _core.multiarray._reconstruct
# numpy >= 1.25 rebuilds a dtype through its class (numpy.dtypes.Int64DType, …): every plain data
# type, never ObjectDType (an object array would carry arbitrary pickled objects)
_DTYPES = getattr(np, "dtypes", None)
_DTYPE_CLASSES = [getattr(_DTYPES, name) for name in dir(_DTYPES) if _DTYPES is not None and name.endswith("DType")
                  and name != "ObjectDType" and isinstance(getattr(_DTYPES, name), type)]
SAFE_NUMPY_GLOBALS = [np.ndarray, np.dtype, _reconstruct, (_reconstruct, "numpy.core.multiarray._reconstruct"),
                      *_DTYPE_CLASSES]


def load_split_file(path) -> Dict[str, object]:
    """The dict of one OGB split file: str keys, numpy arrays (or lists of type names) as values."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such OGB split file", path)
    try:
        with torch.serialization.safe_globals(SAFE_NUMPY_GLOBALS):
            data = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as error:  # the unpickler raises UnpicklingError, RuntimeError or worse on a bad file
        try:
            asked = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
        except Exception:
            asked = []
        allowed = {"numpy.ndarray", "numpy.dtype", "numpy._core.multiarray._reconstruct",
                   "numpy.core.multiarray._reconstruct"} | {f"numpy.dtypes.{c.__name__}" for c in _DTYPE_CLASSES}
        foreign = [name for name in asked if name not in allowed]
        reason = (f"it asks to run {', '.join(foreign[:5])}" if foreign
                  else f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")
        raise InputError(f"not a plain OGB split file ({reason}); refused without running it", path) from None
    if not isinstance(data, dict) or not all(isinstance(key, str) for key in data):
        raise InputError(f"expected a dict of arrays keyed by name, found {type(data).__name__}", path)
    for key in ("head", "relation", "tail"):
        if key not in data:
            raise InputError(f"the split has no {key!r} array; it holds {', '.join(sorted(data))}", path)
    return data


# ------------------------------------------------------------------------------------------
# the dataset folder


class IdLabels(Sequence[str]):
    """Labels ``<prefix><i>`` for ids 0 .. n - 1 (biokg: one prefix per type range), made on demand:
    wikikg2's 2.5 M entities need no list of 2.5 M strings."""

    def __init__(self, ranges: List[Tuple[str, int, int]]):
        self.ranges = ranges  # (prefix, first global id, count), in id order
        self.total = sum(count for _, _, count in ranges)

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.total))]
        if index < 0:
            index += self.total
        for prefix, first, count in self.ranges:
            if first <= index < first + count:
                return f"{prefix}{index - first}"
        raise IndexError(index)

    def __iter__(self):
        for prefix, _, count in self.ranges:
            for i in range(count):
                yield f"{prefix}{i}"


def split_types(path) -> List[str]:
    """The split types of an OGB folder (``random``, ``time``, …), sorted."""
    split = Path(path) / "split"
    return sorted(kind.name for kind in split.iterdir() if (kind / "train.pt").is_file())


def _ids(data: dict, key: str, path: Path) -> np.ndarray:
    values = np.asarray(data[key])
    if values.dtype.kind not in "iu":
        raise InputError(f"{key!r} holds {values.dtype} values; expected integer ids", path)
    if values.size and int(values.min()) < 0:
        raise InputError(f"{key!r} holds negative ids", path)
    return values.astype(np.int64)


def _types(data: dict, key: str, rows: int, path: Path) -> Optional[np.ndarray]:
    if key not in data:
        return None
    values = np.asarray(data[key])
    if values.shape != (rows,) or values.dtype.kind not in "UO":
        raise InputError(f"{key!r} must name one node type per triple ({rows}), found {values.shape}", path)
    return values.astype(str)


def num_node_dict(folder: Path) -> Optional[Dict[str, int]]:
    """OGB's ``raw/num-node-dict.csv.gz``: a header of type names and one row of counts (file order)."""
    path = folder / "raw" / "num-node-dict.csv.gz"
    if not path.is_file():
        return None
    lines = read_text(path).splitlines()  # bounded inflation, errors naming the file
    if len(lines) < 2:
        raise InputError("expected a header of node types and a row of counts", path)
    names, counts = lines[0].split(","), lines[1].split(",")
    if len(names) != len(counts) or not all(c.strip().isdigit() for c in counts):
        raise InputError("expected as many integer counts as node types on line 2", path, line=2)
    return {name.strip(): int(count) for name, count in zip(names, counts)}


def _offsets(folder: Path, offsets_file, seen: Dict[str, int], warnings: List[str]) -> Dict[str, Tuple[int, int]]:
    """{type: (first global id, count)} (see the module docstring)."""
    counts = num_node_dict(folder)
    if offsets_file is not None:
        from openbench._io import read_json
        given = read_json(offsets_file)
        if not isinstance(given, dict) or not all(isinstance(v, int) and v >= 0 for v in given.values()):
            raise InputError('expected a JSON object {"node type": offset}', offsets_file)
        missing = sorted(set(seen) - set(given))
        if missing:
            raise InputError(f"no offset for node type(s) {', '.join(missing)}", offsets_file)
        sizes = counts or seen
        return {name: (given[name], max(sizes.get(name, 0), seen.get(name, 0))) for name in given}
    if counts is None:
        counts = {name: seen[name] for name in sorted(seen)}
        warnings.append("no raw/num-node-dict.csv.gz: node types in sorted order, counts from the largest ids "
                        "seen (give --entity-offsets to match a model trained with other offsets)")
        logger.warning(warnings[-1])
    short = [name for name in seen if seen[name] > counts.get(name, -1)]
    if short:
        raise InputError(f"node type(s) {', '.join(short)} have ids beyond their counts in num-node-dict.csv.gz",
                         folder / "raw")
    result, first = {}, 0
    for name, count in sorted(counts.items()):  # OGB's num_nodes_dict order, not the CSV's columns
        result[name] = (first, count)
        first += count
    return result


def load_ogb_dataset(path, split_type: Optional[str] = None, entity_offsets=None):
    """(the fields of a :class:`~openbench.datasets.loader.Dataset`, {"valid"/"test":
    SampledNegatives}) of an OGB folder (see the module docstring); ``load_dataset`` builds the
    Dataset (this module does not import the loader, which imports it)."""
    from openbench.datasets.negatives import SampledNegatives

    folder = Path(path)
    kinds = split_types(folder)
    if split_type is None:
        if len(kinds) != 1:
            raise InputError(f"several split types ({', '.join(kinds)}): choose one with {option('ogb_split')}",
                             folder)
        split_type = kinds[0]
    if split_type not in kinds:
        raise InputError(f"no split type {split_type!r}; available: {', '.join(kinds)}", folder / "split")
    files = {split: folder / "split" / split_type / name for split, name in OGB_SPLITS.items()}
    data = {split: load_split_file(file) for split, file in files.items() if file.is_file()}
    if "test" not in data:
        raise InputError("no test.pt to evaluate", folder / "split" / split_type)
    warnings: List[str] = []
    columns: Dict[str, dict] = {}
    seen: Dict[str, int] = {}
    typed = "head_type" in data["train"]
    for split, values in data.items():
        rows = len(np.asarray(values["head"]))
        parts = {key: _ids(values, key, files[split]) for key in ("head", "relation", "tail")}
        for key in ("head_neg", "tail_neg"):
            if key in values:
                parts[key] = _ids(values, key, files[split])
                if parts[key].ndim != 2 or parts[key].shape[0] != rows:
                    raise InputError(f"{key!r} must be (n, K) with one row per triple; found {parts[key].shape}",
                                     files[split])
        if any(parts[key].shape != (rows,) for key in ("head", "relation", "tail")):
            raise InputError("head, relation and tail must be 1-d arrays of one length", files[split])
        if typed:
            for key in ("head_type", "tail_type"):
                types = _types(values, key, rows, files[split])
                if types is None:
                    raise InputError(f"the train split names node types but this one has no {key!r}", files[split])
                parts[key] = types
            for side in ("head", "tail"):
                for name in np.unique(parts[f"{side}_type"]):
                    chosen = parts[f"{side}_type"] == name
                    top = int(parts[side][chosen].max()) + 1
                    if f"{side}_neg" in parts:
                        top = max(top, int(parts[f"{side}_neg"][chosen].max()) + 1)
                    seen[str(name)] = max(seen.get(str(name), 0), top)
        columns[split] = parts
    if typed:
        offsets = _offsets(folder, entity_offsets, seen, warnings)
        ranges = [(f"{name}:", first, count) for name, (first, count) in sorted(offsets.items(), key=lambda x: x[1])]
    else:
        if entity_offsets is not None:
            raise InputError(f"{option('entity_offsets')} applies to datasets with per-type ids (ogbl-biokg)",
                             entity_offsets)
        top = max(int(max(p["head"].max(initial=0), p["tail"].max(initial=0),
                          *(p[k].max(initial=0) for k in ("head_neg", "tail_neg") if k in p)))
                  for p in columns.values()) + 1
        offsets = {}
        ranges = [("entity:", 0, top)]
    triples, negatives = {}, {}
    for split in ("train", "valid", "test"):
        split_columns = columns.get(split)
        if split_columns is None:
            triples[split] = torch.zeros((0, 3), dtype=torch.long)
            continue
        shift = {side: _shift(split_columns, side, offsets) for side in ("head", "tail")}
        stacked = np.stack([split_columns["head"] + shift["head"], split_columns["relation"],
                            split_columns["tail"] + shift["tail"]], axis=1)
        triples[split] = torch.from_numpy(stacked)
        if "head_neg" in split_columns and "tail_neg" in split_columns:
            negatives[split] = SampledNegatives(torch.from_numpy(split_columns["head_neg"] + shift["head"][:, None]),
                                                torch.from_numpy(split_columns["tail_neg"] + shift["tail"][:, None]))
    relations = int(max(t[:, 1].max() for t in triples.values() if t.numel())) + 1
    entity_labels = IdLabels(ranges)
    digest = hashlib.sha256()
    for split in ("train", "valid", "test"):
        digest.update(split.encode() + triples[split].numpy().astype("<i8").tobytes())
    id_map = hashlib.sha256(json.dumps({"ranges": ranges, "relations": relations}).encode()).hexdigest()
    fields = dict(path=str(folder), layout="ogb", entity_labels=entity_labels,
                  relation_labels=[f"relation:{i}" for i in range(relations)], triples=triples,
                  fingerprint=digest.hexdigest(), id_map_sha256=id_map, warnings=warnings)
    for split, chosen in negatives.items():
        chosen.check(triples[split], len(entity_labels), files[split])
    return fields, negatives


def _shift(parts: dict, side: str, offsets: Dict[str, Tuple[int, int]]) -> np.ndarray:
    """(n,) the global-id offset of each triple's ``side`` entity (zeros without node types)."""
    rows = parts["head"].shape[0]
    if not offsets:
        return np.zeros(rows, dtype=np.int64)
    types = parts[f"{side}_type"]
    shift = np.zeros(rows, dtype=np.int64)
    for name in np.unique(types):
        if str(name) not in offsets:
            raise InputError(f"node type {name!r} has no offset")
        shift[types == name] = offsets[str(name)][0]
    return shift
