"""Loading link-prediction datasets into label maps and int64 triple tensors.

Two on-disk layouts are understood:

* OpenBioLink samples: ``train_sample.csv``, ``test_sample.csv`` and optionally ``val_sample.csv``,
  headerless TSV with 6 columns ``id1, relation, id2, qscore, value, source`` (rows with value 1
  are the triples; value 0 rows are negatives and ignored) or 3 columns ``id1, relation, id2``.
  The folder may also be a published archive holding ``train_test_data/`` (with ``fold_<i>/``
  sub-folders for cross-validation).
* Integer ids: ``entities.tsv`` and ``relations.tsv`` (``id<TAB>label``) plus ``train.tsv``,
  ``valid.tsv`` and ``test.tsv`` holding ``head<TAB>relation<TAB>tail`` ids.
* An inductive split in ILPC 2022's layout: ``train.txt`` (the training graph), ``inference.txt``
  (the graph of new entities a model reads at test time), ``inference_validation.txt`` and
  ``inference_test.txt``. Entities are those of both graphs (sorted), relations the training
  graph's; the inference graph is ``triples["inference"]``, and the evaluation ranks against its
  entities, filtered by the inference, validation and test triples (ILPC's protocol).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import hashlib
import io
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import polars as pl
import torch

from openbench.errors import InputError, option
from openbench.progress import stage
from openbench.datasets.cache import cached_dataset, dataset_files
from openbench.datasets.coding import code_splits, coded_fingerprint, first_occurrences, lookup_of
from openbench.datasets.negatives import find_negatives
from openbench.datasets.ogb import is_ogb_folder, load_ogb_dataset
from openbench.datasets.files import (TRIPLE_COLUMNS, read_id_array, read_id_map, read_sample_rows,
                                      read_sample_triples)
from openbench.datasets.layouts import ID_FILES, INDUCTIVE_FILES, SAMPLE_FILES, SPLITS, resolve_layout
from openbench.datasets.published.names import registry_of, resolve, split_info_of

if TYPE_CHECKING:
    from openbench.datasets.negatives import SampledNegatives

__all__ = ["TRIPLE_COLUMNS", "Dataset", "read_sample_rows", "read_sample_triples", "map_labels", "read_id_map", "read_id_triples",
           "triples_fingerprint", "id_map_fingerprint", "load_dataset", "read_dataset", "write_id_layout",
           "export_id_layout"]

logger = logging.getLogger(__name__)

INFERENCE = "inference"  # an inductive split's inference graph, in Dataset.triples
LARGE_INPUT_BYTES = 100_000_000  # split files this large get their loading steps announced on stderr
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
    # relations whose (h, r, t) and (t, r, h) are one fact, stored once (a split of a converted
    # published KG names them in its split_info.json): the filter holds both orientations
    undirected_relations: List[str] = field(default_factory=list)
    # what the split asks (split_info.json's kind): None for a transductive split (rand, time, a
    # published one); an entity-held-out split: {"kind": "entity", "heldout_entities": {"count",
    # "sha256"}, "relations": [...] or None}
    split: Optional[dict] = None
    # what wrote the split, in words, from its split_info.json ("openbench split rand, seed 0"), or None
    made_by: Optional[str] = None
    # a split by the edges' dates (openbench split time --cutoff): {"cutoff", "valid_cutoff", "dates_file",
    # "baseline"} from its split_info.json (time_cut_of); None for any other split
    time_cut: Optional[dict] = field(default=None, compare=False)
    cache_entry: Optional[Path] = field(default=None, repr=False, compare=False)  # its dataset-cache folder
    load_seconds: Optional[float] = field(default=None, repr=False, compare=False)  # load_dataset's wall time
    # sampled evaluation negatives that come with the dataset: OGB's, or *_negatives.npz of a split
    sampled: Dict[str, "SampledNegatives"] = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_entities(self) -> int:
        return len(self.entity_labels)

    @property
    def num_relations(self) -> int:
        return len(self.relation_labels)

    def unseen_entities(self, split: str = "test") -> int:
        """How many entities of ``split``'s triples no training triple has (0 on a transductive
        split; the held-out entities of a fully cold entity split)."""
        evaluated = self.triples[split]
        if evaluated.shape[0] == 0:
            return 0
        train = self.triples["train"]
        seen = torch.unique(torch.cat([train[:, 0], train[:, 2]]))
        ends = torch.unique(torch.cat([evaluated[:, 0], evaluated[:, 2]]))
        return int((~torch.isin(ends, seen)).sum())

    def counts(self) -> Dict[str, int]:
        counts = {"entities": self.num_entities, "relations": self.num_relations}
        counts.update({split: int(self.triples[split].shape[0]) for split in SPLITS})
        if INFERENCE in self.triples:
            counts[INFERENCE] = int(self.triples[INFERENCE].shape[0])
        return counts

    @property
    def inductive(self) -> bool:
        """An inductive split: the evaluation's entities are those of a separate inference graph."""
        return INFERENCE in self.triples

    def test_graph(self) -> torch.Tensor:
        """(G, 3) the triples a model may read when it answers the evaluation queries: the
        training triples, or an inductive split's inference graph."""
        return self.triples[INFERENCE] if self.inductive else self.triples["train"]

    def inference_entities(self) -> torch.Tensor:
        """(N,) sorted ids of the inference graph's entities (an inductive split's candidates)."""
        graph = self.triples.get(INFERENCE, torch.empty((0, 3), dtype=torch.long))
        return torch.unique(torch.cat([graph[:, 0], graph[:, 2]]))

    def known_sets(self) -> Tuple[str, ...]:
        """The names of the triple sets a filter may hold: train, valid, test (and inference)."""
        return SPLITS + ((INFERENCE,) if self.inductive else ())

    def default_filter_sets(self) -> Tuple[str, ...]:
        """The filter of the full protocol: every split; an inductive split's inference graph,
        validation and test triples (ILPC's: the training graph shares no entity with them)."""
        return (INFERENCE, "valid", "test") if self.inductive else SPLITS

    def triples_factory(self, split: str = "train"):
        """A PyKEEN ``TriplesFactory`` of ``split`` with this dataset's ids and label maps (a model
        trained on it evaluates here without any re-mapping)."""
        from pykeen.triples import TriplesFactory

        return TriplesFactory(mapped_triples=self.triples[split],
                              entity_to_id={label: i for i, label in enumerate(self.entity_labels)},
                              relation_to_id={label: i for i, label in enumerate(self.relation_labels)})


# --------------------------------------------------------------------------------------------
# reading files


def read_id_triples(path: Path, num_entities: int, num_relations: int) -> torch.Tensor:
    """Integer triples (N, 3) from a headerless ``head<TAB>relation<TAB>tail`` id file, range-checked
    (:func:`openbench.datasets.files.read_id_array`)."""
    return torch.from_numpy(read_id_array(path, num_entities, num_relations))


# --------------------------------------------------------------------------------------------
# layout detection: openbench.datasets.layouts (shared with the writers and the registry)


# --------------------------------------------------------------------------------------------
# mapping labels to ids


def _sorted_labels(values: pl.Series) -> List[str]:
    return values.unique().sort().to_list()


def _entity_labels(train: pl.DataFrame) -> List[str]:
    """The sorted distinct labels of the training heads and tails (each column made distinct
    first: 20 M rows hold a few million labels, and the union of two distinct sets is small)."""
    return _sorted_labels(pl.concat([train.get_column("h").unique(), train.get_column("t").unique()]))


def _label_table(labels, column: str) -> pl.LazyFrame:
    """(``column`` label, ``column``_id) of ``labels`` (a list or a Series), ids in list order."""
    series = labels if isinstance(labels, pl.Series) else pl.Series(labels, dtype=pl.String)
    return pl.LazyFrame({column: series.cast(pl.String), f"{column}_id": pl.int_range(0, len(series), eager=True,
                                                                                      dtype=pl.Int64)})


def map_labels(frame: pl.DataFrame, entities, relations) -> Tuple[torch.Tensor, pl.Series]:
    """Map string triples to ids. Returns ids (N, 3) with -1 for unknown labels, and a mask of unknown rows.

    ``entities`` and ``relations``: the labels in id order (lists or Series; distinct).
    """
    # left joins on hash tables of the labels (in the frame's row order): at 4.6 M entities and
    # 20 M triples 2-3x faster than casting to an Enum of the labels (whose dtype alone costs a
    # second per cast)
    mapped = (frame.lazy().select(TRIPLE_COLUMNS)
              .join(_label_table(entities, "h"), on="h", how="left", maintain_order="left")
              .join(_label_table(relations, "r"), on="r", how="left", maintain_order="left")
              .join(_label_table(entities, "t"), on="t", how="left", maintain_order="left")
              .select([pl.col(f"{c}_id").fill_null(-1).alias(c) for c in TRIPLE_COLUMNS]).collect())
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

    Canonical form: one line ``split<TAB>head<TAB>relation<TAB>tail`` per distinct triple of a split (split is
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
        if not len(labels):
            continue
        lines = pl.DataFrame({"label": pl.Series(list(labels), dtype=pl.String)}).with_row_index("id").select(
            pl.format(f"{kind}\t{{}}\t{{}}", "id", "label"))
        buffer = io.BytesIO()  # polars writes the lines as given: no quoting, LF endings
        lines.write_csv(buffer, include_header=False, quote_style="never", line_terminator="\n")
        digest.update(buffer.getvalue())
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# public entry point


def load_dataset(path, fold: Optional[int] = None, entity_map=None, relation_map=None,
                 drop_unknown: bool = False, evaluation_split: str = "test", ogb_split: Optional[str] = None,
                 entity_offsets=None) -> Dataset:
    """Load a dataset folder (see the module docstring), or a registry name, into a :class:`Dataset`.

    Label maps: ``entity_map`` / ``relation_map`` (``id<TAB>label`` files) when given, else the
    sorted labels of the training split. Evaluation triples with labels the maps lack raise an
    InputError listing the first ten, unless ``drop_unknown``; unknown triples in the other splits
    can never be candidates and are dropped from the filter with a recorded warning.

    An OGB folder (``split/<type>/*.pt``, :mod:`openbench.datasets.ogb`) is read with
    ``ogb_split`` and ``entity_offsets``; its negatives, and those of a split's
    ``*_negatives.npz`` (:mod:`openbench.datasets.negatives`), land in ``Dataset.sampled``.
    """
    started = time.perf_counter()
    dataset = _load_dataset(path, fold, entity_map, relation_map, drop_unknown, evaluation_split, ogb_split,
                            entity_offsets)
    dataset.load_seconds = time.perf_counter() - started
    return dataset


def _load_dataset(path, fold, entity_map, relation_map, drop_unknown, evaluation_split, ogb_split,
                  entity_offsets) -> Dataset:
    folder = resolve(path)  # the registry look-up comes first: a name stands for its verified copy
    if is_ogb_folder(folder):
        if fold is not None or entity_map or relation_map:
            raise InputError(f"{option('fold')}, {option('entity_map')} and {option('relation_map')} do not apply to "
                             "an OGB folder", folder)
        fields, negatives = load_ogb_dataset(folder, ogb_split, entity_offsets)
        dataset = Dataset(**fields, sampled=negatives)
        dataset.registry = registry_of(folder)  # ogbl-biokg by name: its official split
        return dataset
    if ogb_split is not None or entity_offsets is not None:
        raise InputError(f"{option('ogb_split')} and {option('entity_offsets')} apply to OGB dataset folders "
                         "(split/<type>/*.pt)", folder)
    layout, files_folder = resolve_layout(Path(folder), fold)
    if layout == "inductive":
        return _load_inductive(folder, files_folder, entity_map, relation_map, drop_unknown, evaluation_split)
    kind = split_kind_of(files_folder) if layout == "samples" else None
    options = {"fold": fold, "drop_unknown": drop_unknown, "evaluation_split": evaluation_split,
               "maps": [str(m) for m in (entity_map, relation_map)],
               **({"all_entities": True} if kind in HELD_OUT_KINDS else {})}
    files = dataset_files(files_folder, layout, [entity_map, relation_map])
    dataset = cached_dataset(files, options, lambda: read_dataset(folder, fold, entity_map, relation_map,
                                                                  drop_unknown, evaluation_split,
                                                                  all_entities=kind in HELD_OUT_KINDS),
                             str(folder), Dataset)
    dataset.registry = registry_of(folder)
    if layout == "samples":
        dataset.sampled = find_negatives(files_folder, dataset)
        dataset.undirected_relations = undirected_relations_of(files_folder, dataset.relation_labels)
        dataset.split = split_description_of(files_folder)
        dataset.made_by = made_by_of(files_folder)
        dataset.time_cut = time_cut_of(files_folder)
    return dataset


HELD_OUT_KINDS = ("entity",)  # splits whose evaluation entities need not occur in training


def _load_inductive(folder, files_folder: Path, entity_map, relation_map, drop_unknown: bool,
                    evaluation_split: str) -> Dataset:
    if entity_map or relation_map:
        raise InputError(f"{option('entity_map')} and {option('relation_map')} do not apply to an inductive split: "
                         "its entities are those of its two graphs", files_folder)
    options = {"drop_unknown": drop_unknown, "evaluation_split": evaluation_split}
    files = dataset_files(files_folder, "inductive", [])
    dataset = cached_dataset(files, options, lambda: _read_inductive(Path(folder), files_folder, drop_unknown,
                                                                     evaluation_split), str(folder), Dataset)
    dataset.registry = registry_of(folder)
    info = split_info_of(files_folder) or {}
    dataset.split = {"kind": "inductive",
                     "inference_graph": {"entities": int(dataset.inference_entities().shape[0]),
                                         "triples": int(dataset.triples[INFERENCE].shape[0])},
                     **({"seed": info["parameters"].get("seed")} if isinstance(info.get("parameters"), dict) else {})}
    dataset.made_by = made_by_of(files_folder)
    return dataset


def _read_inductive(path: Path, folder: Path, drop_unknown: bool, evaluation_split: str) -> Dataset:
    """An ILPC-layout folder as a Dataset (see the module docstring): validation and test triples
    whose entity the inference graph lacks, or whose relation the training graph lacks, cannot be
    ranked (PyKEEN drops them silently): an error for the evaluated split unless ``drop_unknown``,
    a recorded warning for the other; inference triples of a relation training lacks are dropped
    with a warning."""
    labelled: Dict[str, pl.DataFrame] = {}
    warnings: List[str] = []
    for split, name in INDUCTIVE_FILES.items():
        file = folder / name
        labelled[split] = _without_duplicates(read_sample_triples(file), split, file, warnings,
                                              split == evaluation_split)
    for split in ("train", INFERENCE):
        if labelled[split].height == 0:
            raise InputError(f"the {split} graph holds no triples", folder / INDUCTIVE_FILES[split])
    entities = _entity_labels(pl.concat([labelled["train"], labelled[INFERENCE]]))
    relations = _sorted_labels(labelled["train"].get_column("r"))
    inference_labels = _entity_labels(labelled[INFERENCE])
    triples, dropped = {}, {}
    for split in ("train", INFERENCE, "valid", "test"):
        frame = labelled[split]
        ids, unknown = map_labels(frame, pl.Series(entities if split in ("train", INFERENCE) else inference_labels,
                                                   dtype=pl.String), relations)
        n_unknown = int(unknown.sum()) if len(unknown) else 0
        where = folder / INDUCTIVE_FILES[split]
        if n_unknown and split == evaluation_split and not drop_unknown:
            raise InputError(f"{n_unknown} {split} triple(s) have an entity the inference graph lacks or a relation the "
                             f"training graph lacks; first ones: {_describe_unknown(frame, unknown)}. Pass "
                             "--drop-unknown to drop them", where)
        if n_unknown:
            ids = ids[torch.from_numpy(~unknown.to_numpy())]
            dropped[split] = n_unknown
            warnings.append(f"dropped {n_unknown} {split} triple(s) outside the graphs' entities and relations "
                            f"(first: {_describe_unknown(frame, unknown)})")
            logger.warning(warnings[-1])
        if split in ("valid", "test"):  # ids among the inference graph's labels: to the dataset's
            positions = torch.tensor(pl.Series(inference_labels, dtype=pl.String)
                                     .cast(pl.Enum(entities)).to_physical().to_numpy().astype(np.int64))
            ids = torch.stack([positions[ids[:, 0]], ids[:, 1], positions[ids[:, 2]]], dim=1) if ids.shape[0] else ids
        triples[split] = ids
    if triples[evaluation_split].shape[0] == 0:
        raise InputError(f"no {evaluation_split} triples to evaluate", folder / INDUCTIVE_FILES[evaluation_split])
    return Dataset(path=str(path), layout="inductive", entity_labels=entities, relation_labels=relations,
                   triples=triples, fingerprint=triples_fingerprint(labelled),
                   id_map_sha256=id_map_fingerprint(entities, relations), dropped=dropped, warnings=warnings)


def split_kind_of(folder: Path) -> Optional[str]:
    """The kind ``split_info.json`` states (``"entity"``, ...), None where it states none (rand, time)."""
    info = split_info_of(folder)
    kind = info.get("kind") if info is not None else None
    if kind is not None and kind not in HELD_OUT_KINDS:
        raise InputError(f"split kind {str(kind)[:40]!r}: this openbench reads {', '.join(HELD_OUT_KINDS)} "
                         "(or none, a random or time split)", Path(folder) / "split_info.json")
    return kind


def made_by_of(folder: Path) -> Optional[str]:
    """What wrote the split in ``folder``, in words, from its ``split_info.json``: ``"openbench split
    rand, seed 0"`` (the kind it states, else a time split's new positives or a random split's test
    share tell it); None for a folder no openbench split wrote."""
    info = split_info_of(folder)
    if not isinstance(info, dict):
        return None
    stated_parameters, stated_input = info.get("parameters"), info.get("input")
    parameters: dict = stated_parameters if isinstance(stated_parameters, dict) else {}
    given: dict = stated_input if isinstance(stated_input, dict) else {}
    kind = info.get("kind") or ("time" if "new_positives" in given else "rand" if "test_frac" in parameters else None)
    if not isinstance(kind, str):
        return None
    seed = parameters.get("seed")
    dated = info.get("dated")
    cutoff = dated.get("cutoff") if isinstance(dated, dict) else None
    return (f"openbench split {kind}" + (f", cut-off {cutoff}" if isinstance(cutoff, str) else "")
            + (f", seed {seed}" if isinstance(seed, int) else ""))[:200]


POPULARITY_AT_CUTOFF = ("the popularity baseline of this split (--model popularity) counts the training edges, those "
                        "dated on or before the cut-off: the popularity known at the cut-off, which every table of "
                        "this split is read against")


def time_cut_of(folder: Path) -> Optional[dict]:
    """What a record says of a split by the edges' dates (:mod:`splits.dated_split`): its cut-offs,
    the file of the test edges' dates and what its popularity baseline counts; None for any other
    split. A cut-off that is not a date is an error naming the ``split_info.json``."""
    info = split_info_of(folder)
    dated = info.get("dated") if isinstance(info, dict) else None
    if not isinstance(dated, dict):
        return None
    where = (Path(folder) if (Path(folder) / "split_info.json").is_file() else Path(folder).parent) / "split_info.json"
    for key in ("cutoff", "valid_cutoff"):
        value = dated.get(key)
        if (value is not None or key == "cutoff") and not (isinstance(value, str)
                                                         and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value)):
            raise InputError(f"dated.{key} = {str(value)[:40]!r}: expected a date, YYYY-MM-DD", where)
    dates = where.parent / "test_dates.tsv"
    return {"cutoff": dated["cutoff"], "valid_cutoff": dated.get("valid_cutoff"),
            "dates_file": dates.name if dates.is_file() else None, "baseline": POPULARITY_AT_CUTOFF}


def split_description_of(folder: Path) -> Optional[dict]:
    """What a result records of the split's question (see :attr:`Dataset.split`): the kind, the
    held-out entities' count and the sha256 of their file (checked against the file itself)."""
    import hashlib as _hashlib

    info = split_info_of(folder)
    if info is None or info.get("kind") is None:
        return None
    base = Path(folder) if (Path(folder) / "split_info.json").is_file() else Path(folder).parent
    heldout = info.get("heldout")
    if not isinstance(heldout, dict) or not isinstance(heldout.get("file"), str):
        raise InputError("an entity split's split_info.json names its held-out entities' file (heldout.file)",
                         base / "split_info.json")
    path = base / Path(heldout["file"]).name
    if not path.is_file():
        raise InputError(f"{path.name} is missing: the split names its held-out entities there", path)
    digest = _hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != heldout.get("sha256"):
        raise InputError(f"the held-out entities changed since the split was written (sha256 {digest[:12]}…, "
                         f"split_info.json says {str(heldout.get('sha256'))[:12]}…)", path)
    relations = heldout.get("relations")
    return {"kind": info["kind"], "heldout_entities": {"count": int(heldout.get("test", 0)) + int(heldout.get("valid", 0)),
                                                       "test": int(heldout.get("test", 0)), "sha256": digest},
            "relations": relations if isinstance(relations, list) else None}


def undirected_relations_of(folder: Path, relation_labels: Sequence[str]) -> List[str]:
    """The relations a split's ``split_info.json`` declares undirected (``dataset.undirected_relations``:
    a split of a converted published KG), those the dataset has, sorted; [] for any other split."""
    info = split_info_of(folder)
    dataset = info.get("dataset") if info is not None else None
    declared = dataset.get("undirected_relations", []) if isinstance(dataset, dict) else []
    if not isinstance(declared, list) or not all(isinstance(name, str) for name in declared):
        raise InputError("dataset.undirected_relations must be a list of relation labels",
                         Path(folder) / "split_info.json")
    known = set(relation_labels)
    return sorted(name for name in declared if name in known)


def read_dataset(path, fold: Optional[int] = None, entity_map=None, relation_map=None,
                 drop_unknown: bool = False, evaluation_split: str = "test", all_entities: bool = False) -> Dataset:
    """Read a dataset folder (no registry names: see :func:`load_dataset`) into a :class:`Dataset`.

    :param all_entities: map every entity of every split (sorted), not only the training ones: a
        split whose evaluation entities need not occur in training (an entity-held-out split)."""
    layout, folder = resolve_layout(Path(path), fold)
    if layout == "ids":
        return _load_id_layout(Path(path), folder, entity_map, relation_map)
    return _load_sample_layout(Path(path), folder, entity_map, relation_map, drop_unknown, evaluation_split,
                               all_entities)


def _without_duplicates(frame: pl.DataFrame, split: str, path: Path, warnings: List[str],
                        evaluated: bool) -> pl.DataFrame:
    """The frame's first occurrence of each row. Repeats of the evaluated split would count a query
    twice: a warning counts them; elsewhere (filter sets, training) a repeat changes nothing."""
    unique = frame.unique(maintain_order=True)
    _warn_repeats(frame.height - unique.height, split, path, warnings, evaluated)
    return unique


def _load_sample_layout(path: Path, folder: Path, entity_map, relation_map, drop_unknown: bool,
                        evaluation_split: str, all_entities: bool = False) -> Dataset:
    labelled: Dict[str, pl.DataFrame] = {}
    warnings: List[str] = []
    size = sum((folder / name).stat().st_size for name in SAMPLE_FILES.values() if (folder / name).is_file())
    announce = stage if size >= LARGE_INPUT_BYTES else logger.info  # a long parse gets its steps named
    for split, name in SAMPLE_FILES.items():
        file = folder / name
        if file.is_file():
            announce("reading %s (%.0f MB)", file, file.stat().st_size / 1e6)
            labelled[split] = read_sample_triples(file)
            logger.info("read %d triples from %s", labelled[split].height, file)
        else:
            labelled[split] = pl.DataFrame(schema={n: pl.String for n in TRIPLE_COLUMNS})
    if labelled["train"].height == 0:
        raise InputError("the training file holds no triples (no rows with value 1)", folder / SAMPLE_FILES["train"])
    announce("coding the labels")
    coded = code_splits(labelled)
    if coded is None:  # two labels share a hash: the string path, a few times slower
        logger.info("two labels share a 64-bit hash; mapping the labels as text")
        return _load_sample_strings(path, folder, labelled, entity_map, relation_map, drop_unknown, evaluation_split,
                                    all_entities, warnings)
    keys = {}
    for split in SPLITS:
        keys[split] = coded.key(split)
        keep = first_occurrences(coded, split, keys[split])
        if keep is not None:
            labelled[split] = labelled[split].filter(pl.Series(keep))
            coded.filter(split, keep)
            key = keys[split]
            keys[split] = key[keep] if key is not None else None
            _warn_repeats(len(keep) - int(keep.sum()), split, folder / SAMPLE_FILES[split], warnings,
                          split == evaluation_split)
    every = SPLITS if all_entities else ("train",)
    if entity_map:
        entities = read_id_map(entity_map, "entity")
        entity_lookup = lookup_of(coded.entities, entities)
    else:
        entity_lookup, entities = _present(coded, every, (0, 2), len(coded.entities), coded.entities)
    if relation_map:
        relations = read_id_map(relation_map, "relation")
        relation_lookup = lookup_of(coded.relations, relations)
    else:
        relation_lookup, relations = _present(coded, ("train",), (1,), len(coded.relations), coded.relations)
    announce("mapping %d entities and %d relations to ids", len(entities), len(relations))
    mapped = {}
    # where every label has an id, in code order (every entity in training, no map), ids are codes
    lookups = [None if _is_identity(lookup) else lookup for lookup in (entity_lookup, relation_lookup)]
    for split in SPLITS:
        ids = np.empty((coded.columns[split][0].shape[0], 3), dtype=np.int64)
        for column, (codes, lookup) in enumerate(zip(coded.columns[split], (lookups[0], lookups[1], lookups[0]))):
            if lookup is None:
                ids[:, column] = codes
            else:
                np.take(lookup, codes, out=ids[:, column])
        unknown = (pl.Series(np.zeros(ids.shape[0], dtype=bool)) if lookups[0] is None and lookups[1] is None
                   else pl.Series(ids.min(axis=1) < 0))
        mapped[split] = (torch.from_numpy(ids), unknown)
    triples, dropped = _known_triples(folder, labelled, mapped, entity_map, relation_map, drop_unknown,
                                      evaluation_split, warnings)
    announce("fingerprinting the triples")
    fingerprint = coded_fingerprint(coded, keys)
    return Dataset(path=str(path), layout="samples", entity_labels=entities, relation_labels=relations,
                   triples=triples, fingerprint=fingerprint if fingerprint is not None else triples_fingerprint(labelled),
                   id_map_sha256=id_map_fingerprint(entities, relations), dropped=dropped, warnings=warnings)


def _is_identity(lookup: np.ndarray) -> bool:
    """Whether the code-to-id ``lookup`` (U,) maps every code to itself."""
    return bool(np.array_equal(lookup, np.arange(lookup.shape[0], dtype=lookup.dtype)))


def _present(coded, splits: Sequence[str], columns: Sequence[int], size: int, labels: pl.Series):
    """((size,) int64 lookup from code to id, the labels in id order): the codes occurring in
    ``columns`` of ``splits``, numbered in code order (the labels' sorted order)."""
    present = np.zeros(size, dtype=bool)
    for split in splits:
        for column in columns:
            present[coded.columns[split][column]] = True
    lookup = np.where(present, np.cumsum(present) - 1, -1)
    return lookup, labels.filter(pl.Series(present)).to_list()


def _warn_repeats(repeats: int, split: str, path: Path, warnings: List[str], evaluated: bool) -> None:
    if repeats and evaluated:
        warnings.append(f"removed {repeats} repeated {split} triple(s) of {path.name} (each triple counts once)")
        logger.warning(warnings[-1])


def _known_triples(folder: Path, labelled: Dict[str, pl.DataFrame], mapped: Dict[str, tuple], entity_map,
                   relation_map, drop_unknown: bool, evaluation_split: str, warnings: List[str]):
    """({split: (n, 3) ids of the triples whose labels are all known}, {split: dropped count}):
    unknown labels in the evaluated split are an error unless ``drop_unknown``."""
    triples, dropped = {}, {}
    for split in SPLITS:
        frame = labelled[split]
        ids, unknown = mapped[split]
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
    return triples, dropped


def _load_sample_strings(path: Path, folder: Path, labelled: Dict[str, pl.DataFrame], entity_map, relation_map,
                         drop_unknown: bool, evaluation_split: str, all_entities: bool, warnings: List[str]) -> Dataset:
    """The sample layout mapped by label text (joins and a text sort): where labels cannot be coded."""
    for split in SPLITS:
        labelled[split] = _without_duplicates(labelled[split], split, folder / SAMPLE_FILES[split], warnings,
                                              split == evaluation_split)
    train = labelled["train"]
    every = pl.concat([labelled[split] for split in SPLITS]) if all_entities else train
    entities = read_id_map(entity_map, "entity") if entity_map else _entity_labels(every)
    relations = read_id_map(relation_map, "relation") if relation_map else _sorted_labels(train.get_column("r"))
    entity_series = pl.Series(entities, dtype=pl.String)  # once for the three splits
    mapped = {split: map_labels(labelled[split], entity_series, relations) for split in SPLITS}
    triples, dropped = _known_triples(folder, labelled, mapped, entity_map, relation_map, drop_unknown,
                                      evaluation_split, warnings)
    return Dataset(path=str(path), layout="samples", entity_labels=entities, relation_labels=relations,
                   triples=triples, fingerprint=triples_fingerprint(labelled),
                   id_map_sha256=id_map_fingerprint(entities, relations), dropped=dropped, warnings=warnings)


def _load_id_layout(path: Path, folder: Path, entity_map, relation_map) -> Dataset:
    if entity_map or relation_map:
        raise InputError(f"{option('entity_map')} and {option('relation_map')} do not apply: the integer-id "
                         "layout carries its own entities.tsv and relations.tsv", folder)
    entities = read_id_map(folder / "entities.tsv", "entity")
    relations = read_id_map(folder / "relations.tsv", "relation")
    triples, warnings = {}, []
    for split, name in ID_FILES.items():
        ids = read_id_triples(folder / name, len(entities), len(relations))
        if ids.shape[0]:
            _, first = np.unique(ids.numpy(), axis=0, return_index=True)
            if len(first) < ids.shape[0] and split == "test":
                warnings.append(f"removed {ids.shape[0] - len(first)} repeated {split} triple(s) of {name} (each "
                                "triple counts once)")
                logger.warning(warnings[-1])
            ids = ids[torch.from_numpy(np.sort(first))]
        triples[split] = ids
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
                   id_map_sha256=id_map_fingerprint(entities, relations), warnings=warnings)


# --------------------------------------------------------------------------------------------
# the integer-id layout, written


def write_id_layout(dataset: Dataset, folder, sep: str = "\t", inputs: Sequence = ()) -> Path:
    """Write ``dataset`` in the integer-id layout (OBL2021's KGID): ``entities.tsv`` and
    ``relations.tsv`` (``id<sep>label``) and ``train.tsv``/``valid.tsv``/``test.tsv`` (id triples),
    into a temporary folder renamed onto ``folder``. Reading it back gives the same fingerprint."""
    from openbench._io import replace_folder

    if sep not in ("\t", ","):
        raise InputError(f"separator {sep!r}: expected a tab or a comma")

    for name, labels in (("entities.tsv", dataset.entity_labels), ("relations.tsv", dataset.relation_labels)):
        bad = next((row for row, label in enumerate(labels) if sep in label or "\n" in label or "\r" in label), None)
        if bad is not None:  # before anything is written
            raise InputError(f"label {labels[bad]!r} of {dataset.path} holds the separator or a line break; it cannot "
                             f"be written as line {bad + 1} of {name}", Path(folder) / name, bad + 1)

    def fill(staging: Path) -> None:
        for name, labels in (("entities.tsv", dataset.entity_labels), ("relations.tsv", dataset.relation_labels)):
            pl.DataFrame({"id": np.arange(len(labels)), "label": labels}).write_csv(
                staging / name, separator=sep, include_header=False, quote_style="never")
        for split, name in ID_FILES.items():
            ids = dataset.triples[split].numpy()
            pl.DataFrame({"h": ids[:, 0], "r": ids[:, 1], "t": ids[:, 2]}).write_csv(
                staging / name, separator=sep, include_header=False)

    return replace_folder(Path(folder), fill, inputs=inputs, kind="kgid")


def export_id_layout(dataset_path, output) -> Dict[str, int]:
    """Load a dataset (folder or registry name) and write it in the integer-id layout into
    ``output``; returns its counts. The output is checked before the dataset is read."""
    from openbench._io import check_output_folder

    folder = resolve(dataset_path)
    check_output_folder(output, [folder])
    dataset = load_dataset(folder)
    write_id_layout(dataset, output, inputs=[folder])
    return dataset.counts()
