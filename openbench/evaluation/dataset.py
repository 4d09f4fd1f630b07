"""Loading link-prediction datasets into label maps and int64 triple tensors.

Two on-disk layouts are understood:

* OpenBioLink samples: ``train_sample.csv``, ``test_sample.csv`` and optionally ``val_sample.csv``,
  headerless TSV with 6 columns ``id1, relation, id2, qscore, value, source`` (rows with value 1
  are the triples; value 0 rows are negatives and ignored) or 3 columns ``id1, relation, id2``.
  The folder may also be a published archive holding ``train_test_data/`` (with ``fold_<i>/``
  sub-folders for cross-validation).
* Integer ids: ``entities.tsv`` and ``relations.tsv`` (``id<TAB>label``) plus ``train.tsv``,
  ``valid.tsv`` and ``test.tsv`` holding ``head<TAB>relation<TAB>tail`` ids.
"""
from __future__ import annotations

import hashlib
import io
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import polars as pl
import torch

from openbench._io import line_of_row
from openbench.errors import InputError

logger = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")
SAMPLE_FILES = {"train": "train_sample.csv", "valid": "val_sample.csv", "test": "test_sample.csv"}
ID_FILES = {"train": "train.tsv", "valid": "valid.tsv", "test": "test.tsv"}
TRIPLE_COLUMNS = ("h", "r", "t")
_SHOWN_UNKNOWN = 10


@dataclass
class Dataset:
    """Triples of a dataset as int64 ids, with the label maps that give them meaning.

    ``triples[split]`` has shape (N_split, 3) holding (head, relation, tail) ids; a missing split
    is an empty (0, 3) tensor. ``entity_labels[i]`` is the label of entity id ``i``.
    """

    path: str
    layout: str
    entity_labels: List[str]
    relation_labels: List[str]
    triples: Dict[str, torch.Tensor]
    fingerprint: str
    id_map_sha256: str
    dropped: Dict[str, int] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)
    registry: Optional[dict] = None  # {"name", "version", "archive_sha256"} of a verified registry copy

    @property
    def num_entities(self) -> int:
        return len(self.entity_labels)

    @property
    def num_relations(self) -> int:
        return len(self.relation_labels)

    def counts(self) -> Dict[str, int]:
        counts = {"entities": self.num_entities, "relations": self.num_relations}
        counts.update({split: int(self.triples[split].shape[0]) for split in SPLITS})
        return counts


# --------------------------------------------------------------------------------------------
# reading files


def _read_tsv_strings(path: Path, required: int = 3) -> pl.DataFrame:
    """All columns of a headerless TSV as strings; fully empty lines dropped.

    ``required``: how many leading columns must be non-empty (used to word errors).
    """
    try:
        frame = pl.read_csv(path, separator="\t", has_header=False, quote_char=None, infer_schema=False)
    except pl.exceptions.NoDataError:
        return pl.DataFrame()
    except pl.exceptions.ComputeError:
        _raise_first_bad_line(path, allowed_widths=None, required=required)
        raise
    if frame.width == 0:
        return frame
    frame = frame.filter(~pl.all_horizontal(pl.all().is_null()))
    return frame if frame.height else pl.DataFrame()


def _raise_first_bad_line(path: Path, allowed_widths: Optional[Sequence[int]], required: int = 3,
                          flag_column: Optional[int] = None) -> None:
    """Scan ``path`` line by line and raise an InputError at the first malformed line.

    This is the slow, exact reference of the file format, run only once a fast reader found a
    problem, so that the message can name the line.
    """
    width = None
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.rstrip("\r\n")
            if line.strip() == "":
                continue
            fields = line.split("\t")
            if width is None:
                width = len(fields)
                if allowed_widths is not None and width not in allowed_widths:
                    shown = " or ".join(str(w) for w in allowed_widths)
                    raise InputError(f"expected {shown} tab-separated columns, found {width}", path, number)
            elif len(fields) != width:
                raise InputError(f"expected {width} tab-separated columns like the first line, found {len(fields)}",
                                 path, number)
            if len(fields) < required:
                raise InputError(f"expected at least {required} tab-separated columns, found {len(fields)}",
                                 path, number)
            for index in range(required):
                if fields[index].strip() == "":
                    raise InputError(f"column {index + 1} is empty; expected an identifier", path, number)
            if flag_column is not None and fields[flag_column] not in ("0", "1"):
                raise InputError(f"column {flag_column + 1} (value) is {fields[flag_column]!r}; expected 0 or 1",
                                 path, number)


def read_sample_triples(path: Path) -> pl.DataFrame:
    """Positive triples of one OpenBioLink sample file as a frame with string columns h, r, t.

    Accepts the 6-column layout (``id1, relation, id2, qscore, value, source``; value 1 marks a
    triple, value 0 a negative) and the 3-column layout.
    """
    frame = _read_tsv_strings(path)
    if frame.width == 0:
        return pl.DataFrame({name: [] for name in TRIPLE_COLUMNS}, schema={n: pl.String for n in TRIPLE_COLUMNS})
    if frame.width not in (3, 6):
        _raise_first_bad_line(path, allowed_widths=(3, 6))
        raise InputError(f"expected 3 or 6 tab-separated columns, found {frame.width}", path)
    columns = frame.columns
    flag = columns[4] if frame.width == 6 else None
    problems = pl.any_horizontal([pl.col(c).is_null() for c in columns[:3]])
    if flag is not None:
        problems = problems | ~pl.col(flag).is_in(["0", "1"]) | pl.col(flag).is_null()
    if frame.select(problems.any()).item():
        _raise_first_bad_line(path, allowed_widths=(3, 6), flag_column=4 if flag else None)
        raise InputError("malformed rows (empty identifier or value not 0/1)", path)
    if flag is not None:
        frame = frame.filter(pl.col(flag) == "1")
    return frame.select([pl.col(c).alias(n) for c, n in zip(columns[:3], TRIPLE_COLUMNS)])


def read_id_map(path: Path, kind: str) -> List[str]:
    """Read an ``id<TAB>label`` file whose ids are exactly 0..N-1; return labels indexed by id."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{kind} map file does not exist", path)
    frame = _read_tsv_strings(path, required=2)
    if frame.width < 2:
        _raise_first_bad_line(path, allowed_widths=(2,), required=2)
        raise InputError("expected 2 tab-separated columns: id and label", path)
    if frame.width > 2:
        _raise_first_bad_line(path, allowed_widths=(2,), required=2)
    ids_text, labels = frame.get_column(frame.columns[0]), frame.get_column(frame.columns[1])
    ids = ids_text.cast(pl.Int64, strict=False)
    bad = (ids.is_null() | labels.is_null()).arg_true()
    if len(bad):
        _raise_first_bad_line(path, allowed_widths=(2,), required=2)
        row = int(bad[0])
        raise InputError(f"expected an integer id and a label, found {ids_text[row]!r}, {labels[row]!r}", path,
                         line_of_row(path, row))
    n = len(ids)
    ids_np = ids.to_numpy()
    if ids_np.min() < 0 or ids_np.max() >= n or len(np.unique(ids_np)) != n:
        seen = np.zeros(n, dtype=bool)
        for row, value in enumerate(ids_np):
            if value < 0 or value >= n or seen[value]:
                raise InputError(f"id {value} is out of range or repeated; expected each id 0..{n - 1} exactly once",
                                 path, line_of_row(path, row))
            seen[value] = True
    repeated = ~labels.is_first_distinct()
    if repeated.any():
        row = int(repeated.arg_true()[0])
        raise InputError(f"label {labels[row]!r} appears more than once; labels must be unique", path,
                         line_of_row(path, row))
    return labels.gather(np.argsort(ids_np)).to_list()  # ids are a permutation of 0..n-1


def read_id_triples(path: Path, num_entities: int, num_relations: int) -> torch.Tensor:
    """Integer triples (N, 3) from a headerless ``head<TAB>relation<TAB>tail`` id file, range-checked."""
    frame = _read_tsv_strings(path)
    if frame.width == 0:
        return torch.empty((0, 3), dtype=torch.long)
    if frame.width != 3:
        _raise_first_bad_line(path, allowed_widths=(3,))
        raise InputError(f"expected 3 tab-separated integer ids, found {frame.width} columns", path)
    numbers = frame.select([pl.col(c).cast(pl.Int64, strict=False) for c in frame.columns])
    bad_mask = pl.any_horizontal([pl.col(c).is_null() for c in numbers.columns])
    limits = (num_entities, num_relations, num_entities)
    for column, limit in zip(numbers.columns, limits):
        bad_mask = bad_mask | (pl.col(column) < 0) | (pl.col(column) >= limit)
    bad_rows = numbers.select(bad_mask.arg_true()).to_series()
    if len(bad_rows):
        row = int(bad_rows[0])
        raise InputError(
            f"expected integer ids head < {num_entities}, relation < {num_relations}, tail < {num_entities}; "
            f"found {frame.row(row)}", path, line_of_row(path, row))
    return torch.from_numpy(numbers.to_numpy().astype(np.int64, copy=False).reshape(-1, 3).copy())


# --------------------------------------------------------------------------------------------
# layout detection


def resolve_layout(path: Path, fold: Optional[int]) -> Tuple[str, Path]:
    """Return (layout, folder) for a dataset path; layout is ``"samples"`` or ``"ids"``."""
    path = Path(path)
    if not path.is_dir():
        raise InputError("dataset path is not a directory", path)
    if all((path / name).is_file() for name in ("entities.tsv", "relations.tsv", *ID_FILES.values())):
        if fold is not None:
            raise InputError("--fold applies to OpenBioLink sample folders, not to the integer-id layout", path)
        return "ids", path
    candidates = [path, path / "train_test_data"]
    for folder in candidates:
        if fold is not None:
            fold_dir = folder / f"fold_{fold}"
            if fold_dir.is_dir():
                folder = fold_dir
            elif folder.is_dir() and any(folder.glob("fold_*")):
                folds = sorted(p.name for p in folder.glob("fold_*"))
                raise InputError(f"fold {fold} not found; available: {', '.join(folds)}", folder)
            else:
                continue
        if (folder / SAMPLE_FILES["train"]).is_file() and (folder / SAMPLE_FILES["test"]).is_file():
            return "samples", folder
    raise InputError(
        "no dataset found: expected train_sample.csv and test_sample.csv (optionally val_sample.csv), "
        "a train_test_data/ folder holding them, or entities.tsv, relations.tsv, train.tsv, valid.tsv and test.tsv",
        path)


# --------------------------------------------------------------------------------------------
# mapping labels to ids


def _sorted_labels(values: pl.Series) -> List[str]:
    return values.unique().sort().to_list()


def _map_labels(frame: pl.DataFrame, entities: List[str], relations: List[str]) -> Tuple[torch.Tensor, pl.Series]:
    """Map string triples to ids. Returns ids (N, 3) with -1 for unknown labels, and a mask of unknown rows."""
    # an Enum's physical code is the label's position in the (unique, id-ordered) list: its id;
    # a label outside the list becomes null. About 5x faster than replace_strict on 184k labels.
    entity_enum, relation_enum = pl.Enum(entities), pl.Enum(relations)

    def ids_of(column: str, enum: pl.Enum) -> pl.Expr:
        return pl.col(column).cast(enum, strict=False).to_physical().cast(pl.Int64).fill_null(-1)

    mapped = frame.select(ids_of("h", entity_enum), ids_of("r", relation_enum), ids_of("t", entity_enum))
    unknown = mapped.select(pl.any_horizontal([pl.col(c) < 0 for c in TRIPLE_COLUMNS])).to_series()
    ids = torch.from_numpy(mapped.to_numpy().astype(np.int64, copy=False).reshape(-1, 3).copy())
    return ids, unknown


def _describe_unknown(frame: pl.DataFrame, unknown: pl.Series) -> str:
    rows = frame.filter(unknown).head(_SHOWN_UNKNOWN).rows()
    return "; ".join("\t".join(row) for row in rows)


# --------------------------------------------------------------------------------------------
# fingerprints


def triples_fingerprint(labelled: Dict[str, pl.DataFrame]) -> str:
    """sha256 of the positive triples in canonical form.

    Canonical form: one line ``split<TAB>head<TAB>relation<TAB>tail`` per triple (split is
    train/valid/test), lines sorted by byte order, each ending in a newline. It does not depend
    on separators, file layout or row order.
    """
    parts = [frame.select(pl.concat_str([pl.lit(split), *TRIPLE_COLUMNS], separator="\t").alias("line"))
             for split, frame in labelled.items() if frame.height]
    digest = hashlib.sha256()
    if parts:
        canonical = pl.concat(parts).sort("line")  # one string key sorts far faster than four
        buffer = io.BytesIO()
        canonical.write_csv(buffer, include_header=False, quote_style="never", line_terminator="\n")
        digest.update(buffer.getvalue())
    return digest.hexdigest()


def id_map_fingerprint(entities: Sequence[str], relations: Sequence[str]) -> str:
    """sha256 over ``entity<TAB>id<TAB>label`` and ``relation<TAB>id<TAB>label`` lines."""
    digest = hashlib.sha256()
    for kind, labels in (("entity", entities), ("relation", relations)):
        digest.update("".join(f"{kind}\t{i}\t{label}\n" for i, label in enumerate(labels)).encode("utf-8"))
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# public entry point


def load_dataset(path, fold: Optional[int] = None, entity_map=None, relation_map=None,
                 drop_unknown: bool = False, evaluation_split: str = "test") -> Dataset:
    """Load a dataset folder (see the module docstring), or a registry name, into a :class:`Dataset`.

    Label maps: ``entity_map`` / ``relation_map`` (``id<TAB>label`` files) when given, else the
    sorted labels of the training split. Evaluation triples with labels the maps lack raise an
    InputError listing the first ten, unless ``drop_unknown``; unknown triples in the other splits
    can never be candidates and are dropped from the filter with a recorded warning.
    """
    from openbench.datasets import registry_of, resolve

    path = resolve(path)  # a registry name (HQ_DIR, ...) stands for its verified local copy
    layout, folder = resolve_layout(Path(path), fold)
    if layout == "ids":
        dataset = _load_id_layout(Path(path), folder, entity_map, relation_map)
    else:
        dataset = _load_sample_layout(Path(path), folder, entity_map, relation_map, drop_unknown, evaluation_split)
    dataset.registry = registry_of(Path(path))
    return dataset


def _load_sample_layout(path: Path, folder: Path, entity_map, relation_map, drop_unknown: bool,
                        evaluation_split: str) -> Dataset:
    labelled: Dict[str, pl.DataFrame] = {}
    for split, name in SAMPLE_FILES.items():
        file = folder / name
        if file.is_file():
            labelled[split] = read_sample_triples(file)
            logger.info("read %d triples from %s", labelled[split].height, file)
        else:
            labelled[split] = pl.DataFrame(schema={n: pl.String for n in TRIPLE_COLUMNS})
    if labelled["train"].height == 0:
        raise InputError("the training file holds no triples (no rows with value 1)", folder / SAMPLE_FILES["train"])
    train = labelled["train"]
    entities = (read_id_map(entity_map, "entity") if entity_map
                else _sorted_labels(pl.concat([train.get_column("h"), train.get_column("t")])))
    relations = read_id_map(relation_map, "relation") if relation_map else _sorted_labels(train.get_column("r"))
    triples, dropped, warnings = {}, {}, []
    for split in SPLITS:
        frame = labelled[split]
        ids, unknown = _map_labels(frame, entities, relations)
        n_unknown = int(unknown.sum()) if len(unknown) else 0
        if n_unknown and split == evaluation_split and not drop_unknown:
            raise InputError(
                f"{n_unknown} {split} triple(s) use labels missing from the "
                f"{'given maps' if entity_map or relation_map else 'training split'}; first ones: "
                f"{_describe_unknown(frame, unknown)}. Pass --drop-unknown to drop them",
                folder / SAMPLE_FILES[split])
        if n_unknown:
            keep = torch.from_numpy(~unknown.to_numpy())
            ids = ids[keep]
            dropped[split] = n_unknown
            warnings.append(f"dropped {n_unknown} {split} triple(s) with labels missing from the label maps "
                            f"(first: {_describe_unknown(frame, unknown)})")
            logger.warning(warnings[-1])
        triples[split] = ids
    if triples[evaluation_split].shape[0] == 0:
        raise InputError(f"no {evaluation_split} triples to evaluate", folder / SAMPLE_FILES[evaluation_split])
    return Dataset(path=str(path), layout="samples", entity_labels=entities, relation_labels=relations,
                   triples=triples, fingerprint=triples_fingerprint(labelled),
                   id_map_sha256=id_map_fingerprint(entities, relations), dropped=dropped, warnings=warnings)


def _load_id_layout(path: Path, folder: Path, entity_map, relation_map) -> Dataset:
    if entity_map or relation_map:
        raise InputError("--entity-map/--relation-map do not apply: the integer-id layout carries its own "
                         "entities.tsv and relations.tsv", folder)
    entities = read_id_map(folder / "entities.tsv", "entity")
    relations = read_id_map(folder / "relations.tsv", "relation")
    triples = {split: read_id_triples(folder / name, len(entities), len(relations)) for split, name in ID_FILES.items()}
    if triples["train"].shape[0] == 0:
        raise InputError("the training file holds no triples", folder / ID_FILES["train"])
    if triples["test"].shape[0] == 0:
        raise InputError("no test triples to evaluate", folder / ID_FILES["test"])
    entity_series, relation_series = pl.Series(entities), pl.Series(relations)
    labelled = {}
    for split, ids in triples.items():
        array = ids.numpy()
        labelled[split] = pl.DataFrame({
            "h": entity_series.gather(array[:, 0]), "r": relation_series.gather(array[:, 1]),
            "t": entity_series.gather(array[:, 2])})
    return Dataset(path=str(path), layout="ids", entity_labels=entities, relation_labels=relations,
                   triples=triples, fingerprint=triples_fingerprint(labelled),
                   id_map_sha256=id_map_fingerprint(entities, relations))


# --------------------------------------------------------------------------------------------
# the integer-id layout, written


def write_id_layout(dataset: Dataset, folder, sep: str = "\t") -> Path:
    """Write ``dataset`` in the integer-id layout (OBL2021's KGID): ``entities.tsv`` and
    ``relations.tsv`` (``id<sep>label``) and ``train.tsv``/``valid.tsv``/``test.tsv`` (id triples),
    into a temporary folder renamed onto ``folder``. Reading it back gives the same fingerprint."""
    from openbench._io import replace_folder

    if sep not in ("\t", ","):
        raise InputError(f"separator {sep!r}: expected a tab or a comma")

    def fill(staging: Path) -> None:
        for name, labels in (("entities.tsv", dataset.entity_labels), ("relations.tsv", dataset.relation_labels)):
            bad = next((label for label in labels if sep in label or "\n" in label), None)
            if bad is not None:
                raise InputError(f"label {bad!r} contains the separator or a newline; it cannot be written", name)
            pl.DataFrame({"id": np.arange(len(labels)), "label": labels}).write_csv(
                staging / name, separator=sep, include_header=False, quote_style="never")
        for split, name in ID_FILES.items():
            ids = dataset.triples[split].numpy()
            pl.DataFrame({"h": ids[:, 0], "r": ids[:, 1], "t": ids[:, 2]}).write_csv(
                staging / name, separator=sep, include_header=False)

    return replace_folder(Path(folder), fill)
