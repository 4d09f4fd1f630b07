"""The registry of published benchmark datasets: fetch by name, verify, unpack, reuse.

One table (:data:`REGISTRY`) names each published dataset with its URL, version, published
checksum and size where the provider gives them ("unknown" otherwise), the counts known from the
OpenBioLink README, a license note and the standard protocol the leaderboard compares against.

:func:`get` downloads an archive (resumable, retried, with a progress bar; through
:func:`openbench._io.download.fetch`), checks its size and md5 where published, checks the zip's own
CRCs, unpacks it beside the final folder and renames it into place only when everything passed,
writing a ``.openbench-verified.json`` marker (archive sha256, file sizes). Without a published
checksum the archive's sha256 is recorded on first use (``openbench-checksums.json`` in the
root) with a warning, and later downloads must match it. A folder without a valid marker (a
partial or altered copy) is refused. A second call reuses the verified copy.

The published biomedical KGs (Hetionet, PrimeKG, DRKG, ogbl-biokg, BioKG, PharmKG-8k) come in their
own formats and often as several files: an entry lists its files (:class:`RemoteFile`, each with
the checksum its publisher states: sha256, md5, size or a git blob id), and :func:`get` fetches
and verifies each, unpacks them into ``native/``, converts them once with the format's reader
(:mod:`openbench.datasets.native`) into ``graph/`` (what ``split rand --dataset NAME`` splits)
and, where the publisher has an official split, keeps it for ``evaluate --dataset NAME``; the
counts the publisher states are checked against what was read. Any failure keeps nothing.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from openbench._io import check_output_folder, printable, read_json, replace_folder, write_text_atomic
from openbench.datasets.native import NATIVE_FORMATS, OFFICIAL_SPLITS
from openbench.errors import InputError, OpenbenchError
from openbench.layouts import resolve_layout
from openbench.record import Protocol

__all__ = ["MARKER", "PINS", "ROOT_VARIABLE", "MIRROR_VARIABLE", "OBL2020_PROTOCOL", "OBL2021_PROTOCOL",
           "OBL2020_LICENSE", "RegisteredDataset", "REGISTRY", "DatasetError", "registry_table", "lookup",
           "data_root", "read_marker", "get", "registry_of", "resolve", "REGISTRY_VARIABLE", "read_registry_file",
           "use_registry_files", "registry", "RemoteFile", "NATIVE_DATASETS", "graph_folder", "FORMATS", "registered",
           "split_info_of"]

logger = logging.getLogger(__name__)

MARKER = ".openbench-verified.json"
PINS = "openbench-checksums.json"
ROOT_VARIABLE = "OPENBENCH_DATA_DIR"
MIRROR_VARIABLE = "OPENBENCH_DATASET_MIRROR"

# the protocol of OpenBioLink's own evaluation, and of its leaderboard (filtered, all entities)
OBL2020_PROTOCOL = Protocol(filter_sets=["train", "valid", "test"], hits_at=[1, 3, 10])
OBL2021_PROTOCOL = Protocol(filter_sets=["train", "valid", "test"], hits_at=[10],
                            extra={"top_k": 10, "metrics": ["hits@10", "mrr@10"],
                                   "ranking": "submitted top-10 lists (pred_top10), filtered by the submitter"})
OBL2020_LICENSE = ("see Zenodo record 3834052; the graph is derived from sources under their own licenses "
                   "(OpenBioLink README, source license table): check them before redistributing")


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset, with the checksums its publisher states (None where none is)."""

    url: str
    sha256: Optional[str] = None
    md5: Optional[str] = None
    size: Optional[int] = None
    git_sha1: Optional[str] = None  # a git blob id: what a GitHub repository publishes of its files
    filename: str = ""  # default: the URL's last part

    @property
    def name(self) -> str:
        return self.filename or self.url.rsplit("/", 1)[-1]

    @property
    def checked(self) -> bool:
        return bool(self.sha256 or self.md5 or self.git_sha1)


@dataclass(frozen=True)
class RegisteredDataset:
    """One published dataset. ``md5``/``size`` are None where the provider publishes none.

    ``layout`` names what a zip archive unpacks to (``samples``/``ids``) or, with ``files``, the
    native format a reader converts (:data:`openbench.datasets.native.NATIVE_FORMATS`);
    ``counts["check"]`` holds the counts the reader's must equal (the publisher's)."""

    name: str
    family: str
    version: str
    url: str
    layout: str  # "samples" (OpenBioLink CSVs) or "ids" (integer-id TSVs)
    description: str
    counts: Dict[str, dict]
    license: str
    protocol: Protocol
    md5: Optional[str] = None
    size: Optional[int] = None
    notes: str = ""
    extra: dict = field(default_factory=dict)
    sha256: Optional[str] = None  # published (or, for a user's registry, stated) archive checksum
    citation: str = ""
    source: str = "openbench"  # "openbench", or the registry file an entry came from
    files: Tuple[RemoteFile, ...] = ()

    @property
    def archive(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    @property
    def native(self) -> bool:
        """True for a published KG in its own format (converted by a reader), not a split archive."""
        return self.layout not in ("samples", "ids")

    @property
    def remote_files(self) -> Tuple[RemoteFile, ...]:
        return self.files or (RemoteFile(url=self.url, sha256=self.sha256, md5=self.md5, size=self.size),)

    def as_row(self) -> dict:
        """The entry as ``datasets list --format json`` shows it: its text fields without control
        characters (an entry of someone's registry file is shared text)."""
        row = _printable_fields(asdict(self))
        row["md5"] = self.md5 or "unknown"
        row["sha256"] = self.sha256 or "unknown"
        row["size"] = self.size if self.size is not None else "unknown"
        return row


def _printable_fields(value):
    """Every string inside ``value`` (dicts and lists walked) through :func:`printable`."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {_printable_fields(key): _printable_fields(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_printable_fields(item) for item in value]
    return value


def _obl2020(name: str, description: str, counts: Dict[str, dict]) -> RegisteredDataset:
    return RegisteredDataset(
        name=name, family="OpenBioLink2020", version="Zenodo record 3834052",
        url=f"https://zenodo.org/record/3834052/files/{name}.zip", layout="samples", description=description,
        counts=counts, license=OBL2020_LICENSE, protocol=OBL2020_PROTOCOL)


FILTERED_PROTOCOL = Protocol(filter_sets=["train", "valid", "test"], hits_at=[1, 3, 10])


def _kg(name: str, version: str, files: Tuple[RemoteFile, ...], description: str, license: str, citation: str,
        graph: dict, check: dict, notes: str = "") -> RegisteredDataset:
    return RegisteredDataset(name=name, family="published KG", version=version, url=files[0].url, layout=name,
                             description=description, counts={"graph": graph, "check": check}, license=license,
                             protocol=FILTERED_PROTOCOL, md5=files[0].md5, size=files[0].size, notes=notes,
                             sha256=files[0].sha256, citation=citation, files=files)


_HETIONET = "https://github.com/hetio/hetionet/raw/8a6cc0c5604d0e2908786e4de38af67b8e46ee4a/hetnet/tsv/"
_PHARMKG = "https://raw.githubusercontent.com/biomed-AI/PharmKG/a7daec6b4d6c785c157b8cf693a4651756cb8647/data/PharmKG-8k/"
# the six published biomedical KGs: checksums and counts as their publishers state them
# (facts and sources: tests/data/kgs/*/SOURCE.md); no checksum published: the first verified download's is pinned
NATIVE_DATASETS: Tuple[RegisteredDataset, ...] = (
    _kg("hetionet", "v1.0 (hetio/hetionet@8a6cc0c)",
        (RemoteFile(_HETIONET + "hetionet-v1.0-edges.sif.gz", size=12_401_407,
                    sha256="611f0411ac666be4e0270e54bbca67407e14720bfc3099311f0f5eec25c5a947"),
         RemoteFile(_HETIONET + "hetionet-v1.0-nodes.tsv", size=2_509_984, md5="d2789861ab5b977dcee3c23ac9c9f7ce",
                    sha256="3ad9eb86c031df8bc7d5efefa6edc93562182eb9a6a71e5129d3f18b9d42c50e")),
        "Hetionet v1.0: 11 node kinds, 24 metaedges (only Gr>G directed); isolated nodes kept",
        "CC0 1.0 (original content); per-source licences in the JSON/Neo4j releases",
        "Himmelstein DS et al. Systematic integration of biomedical knowledge prioritizes drugs for repurposing. "
        "eLife 2017;6:e26726. doi:10.7554/eLife.26726",
        {"entities": 47_031, "relations": 24}, {"nodes": 47_031, "rows": 2_250_197}),
    _kg("primekg", "Dataverse doi:10.7910/DVN/IXA7BM V2.1",
        (RemoteFile("https://dataverse.harvard.edu/api/access/datafile/6180620", filename="kg.csv",
                    md5="aac8191d4fbc5bf09cdf8c3c78b4e75f", size=981_751_236),),
        "PrimeKG kg.csv: nodes by type+source+id; each edge stored twice (x/y swapped) read as one undirected edge",
        "CC0 1.0 per the Dataverse record (the code is MIT)",
        "Chandak P, Huang K, Zitnik M. Building a knowledge graph to enable precision medicine. Sci Data 10, 67 "
        "(2023). doi:10.1038/s41597-023-01960-3",
        {"entities": 129_375, "relations": 30}, {"rows": 8_100_498, "nodes": 129_375}),
    _kg("drkg", "gnn4dr/DRKG 2020 release",
        (RemoteFile("https://dgl-data.s3-us-west-2.amazonaws.com/dataset/DRKG/drkg.tar.gz"),),
        "DRKG drkg.tsv (headerless): 13 entity types, 107 relations; rows with empty ids refused",
        "Apache-2.0 (repository); the data under each source's licence (DrugBank, GNBR, STRING: CC BY-NC 4.0)",
        "Ioannidis VN et al. DRKG - Drug Repurposing Knowledge Graph for Covid-19. "
        "https://github.com/gnn4dr/DRKG (2020)",
        {"entities": 97_238, "relations": 107}, {"rows": 5_874_261, "relations": 107},
        notes="no checksum published: the first verified download's sha256 is pinned"),
    _kg("ogbl-biokg", "OGB v1",
        (RemoteFile("http://snap.stanford.edu/ogb/data/linkproppred/biokg.zip"),),
        "OGB's ogbl-biokg: per-type entity ids; the official random split is evaluated as published",
        "not stated by OGB (the ogb code is MIT)",
        "Hu W et al. Open Graph Benchmark: Datasets for Machine Learning on Graphs. NeurIPS 2020. arXiv:2005.00687",
        {"entities": 93_773, "relations": 51},
        {"train": 4_762_678, "valid": 162_886, "test": 162_870, "entities": 93_773},
        notes="no checksum published: the first verified download's sha256 is pinned"),
    _kg("biokg", "v1.0.0",
        (RemoteFile("https://github.com/dsi-bdi/biokg/releases/download/v1.0.0/biokg.zip"),),
        "BioKG biokg.links.tsv (headerless): node types implied by the 17 relations; DPI copies counted",
        "CC BY-NC 4.0 (per-source licences in the BioKG README)",
        "Walsh B, Mohamed SK, Novacek V. BioKG: A Knowledge Graph for Relational Learning On Biological Data. "
        "CIKM 2020. doi:10.1145/3340531.3412776",
        {"relations": 17}, {"relations": 17},
        notes="no checksum and no row count published: the first verified download's sha256 is pinned"),
    _kg("pharmkg8k", "biomed-AI/PharmKG@a7daec6",
        (RemoteFile(_PHARMKG + "train.tsv", git_sha1="9047084dd741eab80499c19a5d11d80143d99906"),
         RemoteFile(_PHARMKG + "valid.tsv", size=1_020_787,
                    sha256="200b1203e0ad1134f8096d6dc6fbe6d73450c21524429bfdf174a7c9f4d7eeb6"),
         RemoteFile(_PHARMKG + "test.tsv", size=1_029_308,
                    sha256="18a9f44871d19074208ccd741fb33aaf8cc71c90b5b4f7f26d70a8cf940f8d72")),
        "PharmKG-8k: the official split kept as published, its overlaps (test/valid, reverses) counted",
        "not stated by the repository",
        "Zheng S et al. PharmKG: a dedicated knowledge graph benchmark for biomedical data mining. Brief Bioinform "
        "22(4), 2021. doi:10.1093/bib/bbaa344",
        {"relations": 28}, {"train": 400_788, "valid": 49_536, "test": 50_036, "relations": 28},
        notes="the README swaps the valid and test counts; these are the files' line counts"),
)

# counts from the OpenBioLink README: per-split totals include the negative samples
REGISTRY: Dict[str, RegisteredDataset] = {entry.name: entry for entry in (
    _obl2020("HQ_DIR", "directed, high quality (the default benchmark)",
             {"positives": {"train": 4_192_002, "valid": 188_394, "test": 183_009},
              "negatives": {"train": 4_311_578, "valid": 208_672, "test": 218_892},
              "with_negatives": {"train": 8_503_580, "valid": 397_066, "test": 401_901},
              "graph": {"entities": 184_732, "relations": 28}}),
    _obl2020("HQ_UNDIR", "undirected, high quality",
             {"with_negatives": {"train": 7_559_921, "valid": 357_297, "test": 372_877},
              "graph": {"entities": 184_722, "relations": 28}}),
    _obl2020("ALL_DIR", "directed, no quality cutoff",
             {"with_negatives": {"train": 51_636_927, "valid": 2_474_921, "test": 2_079_139},
              "graph": {"entities": 486_998, "relations": 32}}),
    _obl2020("ALL_UNDIR", "undirected, no quality cutoff",
             {"with_negatives": {"train": 41_383_093, "valid": 1_932_436, "test": 2_010_662},
              "graph": {"entities": 486_998, "relations": 32}}),
    RegisteredDataset(
        name="KGID_HQ_DIR", family="OBL2021", version="Zenodo record 5361324",
        url="https://zenodo.org/record/5361324/files/KGID_HQ_DIR.zip", layout="ids",
        description="HQ_DIR in the integer-id layout, for OBL2021 top-10 submissions",
        counts={"positives": {"test": 180_964}}, license=OBL2020_LICENSE.replace("3834052", "5361324"),
        protocol=OBL2021_PROTOCOL,
        notes="test count implied by the submission shape (361,928 = 2 x 180,964)"),
    *NATIVE_DATASETS,
)}


class DatasetError(OpenbenchError):
    """A registry copy is missing, partial or altered."""


# ------------------------------------------------------------------------------------------
# a lab's own registry: a JSON list of entries in the same schema


REGISTRY_VARIABLE = "OPENBENCH_REGISTRY"  # registry files (os.pathsep-separated) added to the built-in one
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a folder name under the data root
USER_FIELDS = {"name": str, "url": str, "sha256": str, "layout": str, "format": str, "files": list, "size": int,
               "license": str, "version": str, "description": str, "family": str, "citation": str, "counts": dict}
REQUIRED_FIELDS = ("name", "license")
FILE_FIELDS = {"url": str, "sha256": str, "size": int, "filename": str}
FORMATS = ("samples", "ids", *NATIVE_FORMATS)
_KIND_NAMES = {str: "a string", int: "an integer", dict: "an object", list: "a list"}
_SHA256 = re.compile(r"[0-9a-f]{64}")
_added_files: list = []


def _user_file(item, where: str, path: Path) -> RemoteFile:
    """One object of an entry's ``files``: url and sha256 required, size and filename optional."""
    if not isinstance(item, dict) or not {"url", "sha256"} <= set(item) or set(item) - set(FILE_FIELDS):
        raise InputError(f"{where}: each of files must be an object with url and sha256 (optionally size, "
                         "filename) and nothing else", path)
    for key, kind in FILE_FIELDS.items():
        if key in item and (not isinstance(item[key], kind) or isinstance(item[key], bool)):
            raise InputError(f"{where}: files.{key} must be {_KIND_NAMES[kind]}", path)
    _check_url_and_checksum(item["url"], item["sha256"], where, path)
    if "size" in item and item["size"] <= 0:
        raise InputError(f"{where}: files.size must be a positive number of bytes", path)
    remote = RemoteFile(url=item["url"], sha256=item["sha256"], size=item.get("size"), filename=item.get("filename", ""))
    if not NAME_PATTERN.fullmatch(remote.name):
        raise InputError(f"{where}: the file name {remote.name!r} must be letters, digits, '_', '.' or '-' (give "
                         "filename when the URL does not end in one)", path)
    return remote


def _check_url_and_checksum(url: str, sha256: str, where: str, path: Path) -> None:
    if not re.fullmatch(r"https?://[^\s]+", url):
        raise InputError(f"{where}: url must be an http(s) URL", path)
    if not _SHA256.fullmatch(sha256):
        raise InputError(f"{where}: sha256 must be 64 lowercase hex digits (the file's checksum)", path)


def _user_entry(item, index: int, path: Path) -> RegisteredDataset:
    """One entry of a registry file, every field checked (the name becomes a folder name)."""
    where = f"entry {index + 1}"
    if not isinstance(item, dict):
        raise InputError(f"{where} is a {type(item).__name__}; expected an object with {', '.join(REQUIRED_FIELDS)}",
                         path)
    name = item.get("name")
    if isinstance(name, str):
        where = f"entry {index + 1} ({name!r})"
    missing = [key for key in REQUIRED_FIELDS if key not in item]
    if "files" not in item:
        missing += [key for key in ("url", "sha256") if key not in item]
    if "layout" not in item and "format" not in item:
        missing.append("format")
    unknown = sorted(set(item) - set(USER_FIELDS))
    if missing or unknown:
        problem = f"lacks {', '.join(missing)}" if missing else f"has unknown field(s) {', '.join(unknown)}"
        raise InputError(f"{where} {problem}; expected the fields {', '.join(USER_FIELDS)} (url and sha256, or "
                         "files)", path)
    for key, kind in USER_FIELDS.items():
        if key in item and (not isinstance(item[key], kind) or isinstance(item[key], bool)):
            raise InputError(f"{where}: {key} must be {_KIND_NAMES[kind]}", path)
    name = str(item["name"])  # a string: checked above
    if not NAME_PATTERN.fullmatch(name):
        raise InputError(f"{where}: the name must be letters, digits, '_', '.' or '-' (at most 64, not starting "
                         "with a dot): it names the dataset's folder", path)
    if "layout" in item and "format" in item and item["layout"] != item["format"]:
        raise InputError(f"{where}: layout and format differ; give one (format)", path)
    fmt = item.get("format", item.get("layout"))
    if fmt not in FORMATS:
        raise InputError(f"{where}: format {fmt!r}; expected samples (OpenBioLink split files) or ids (the KGID "
                         f"layout) in a zip archive, or a published KG's own format: {', '.join(NATIVE_FORMATS)}", path)
    if fmt in ("samples", "ids") and "files" in item:
        raise InputError(f"{where}: a {fmt} dataset is one zip archive: give url and sha256, not files", path)
    files = _entry_files(item, fmt, where, path)
    check = item.get("counts", {}).get("check", {})
    if not isinstance(check, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                              for v in check.values()):
        raise InputError(f"{where}: counts.check must map count names to non-negative integers", path)
    return RegisteredDataset(name=name, family=item.get("family", "user registry"),
                             version=item.get("version", "unversioned"), url=files[0].url, layout=fmt,
                             description=item.get("description", ""), counts=item.get("counts", {}),
                             license=item["license"], protocol=OBL2020_PROTOCOL if fmt in ("samples", "ids")
                             else FILTERED_PROTOCOL, size=files[0].size, sha256=files[0].sha256,
                             citation=item.get("citation", ""), source=str(path),
                             files=files if fmt in NATIVE_FORMATS else ())


def _entry_files(item: dict, fmt: str, where: str, path: Path) -> Tuple[RemoteFile, ...]:
    """An entry's files: ``files`` (native formats) or its one ``url``/``sha256`` (a zip archive)."""
    if "files" in item:
        if "url" in item or "sha256" in item or "size" in item:
            raise InputError(f"{where}: give url/sha256/size or files, not both", path)
        if not item["files"]:
            raise InputError(f"{where}: files is empty; expected the dataset's files", path)
        files = tuple(_user_file(one, where, path) for one in item["files"])
        names = [one.name for one in files]
        if len(set(names)) != len(names):
            raise InputError(f"{where}: two files have the same file name", path)
        return files
    _check_url_and_checksum(item["url"], item["sha256"], where, path)
    if "size" in item and item["size"] <= 0:
        raise InputError(f"{where}: size must be a positive number of bytes", path)
    remote = RemoteFile(url=item["url"], sha256=item["sha256"], size=item.get("size"))
    if not NAME_PATTERN.fullmatch(remote.name):  # '..' or '.' would name a folder above or the folder itself
        raise InputError(f"{where}: the url must end in the {'archive' if fmt in ('samples', 'ids') else 'file'}'s "
                         "name (letters, digits, '_', '.', '-', not starting with a dot)", path)
    return (remote,)


def read_registry_file(path) -> Dict[str, RegisteredDataset]:
    """The entries of a registry file: a JSON list of objects with ``name``, ``license``,
    ``format`` (``samples`` or ``ids`` for a zip archive of split files, or a published KG's
    format: ``hetionet``, ``primekg``, ``drkg``, ``ogbl-biokg``, ``biokg``, ``pharmkg8k``; ``layout``
    is the older name), the file(s): ``url`` and ``sha256`` (one file, optionally ``size``), or
    ``files`` (a list of {``url``, ``sha256``, optionally ``size``, ``filename``}), and optionally
    ``version``, ``description``, ``family``, ``citation``, ``counts`` (``counts.check``: counts
    the reader's must equal). A name may not repeat nor take a built-in one."""
    path = Path(path)
    items = read_json(path, "registry file")
    if not isinstance(items, list):
        raise InputError("expected a JSON list of dataset entries", path)
    entries: Dict[str, RegisteredDataset] = {}
    taken = {name.lower() for name in REGISTRY}
    for index, item in enumerate(items):
        entry = _user_entry(item, index, path)
        if entry.name.lower() in taken or entry.name.lower() in {n.lower() for n in entries}:
            raise InputError(f"entry {index + 1}: the name {entry.name!r} is taken (built-in or earlier entry)", path)
        entries[entry.name] = entry
    return entries


def use_registry_files(paths) -> None:
    """The registry files ``--registry`` named, for this command (checked now; ``()`` clears them)."""
    for path in paths:
        read_registry_file(path)
    _added_files[:] = [Path(path) for path in paths]


def registry() -> Dict[str, RegisteredDataset]:
    """The built-in entries, then those of ``--registry`` files and of ``$OPENBENCH_REGISTRY``."""
    entries = dict(REGISTRY)
    named = [p for p in os.environ.get(REGISTRY_VARIABLE, "").split(os.pathsep) if p.strip()]
    for path in [*_added_files, *map(Path, named)]:
        for name, entry in read_registry_file(path).items():
            if name.lower() in {n.lower() for n in entries}:
                raise InputError(f"the dataset name {name!r} is registered twice", path)
            entries[name] = entry
    return entries


def registry_table() -> str:
    """The registry as a fixed-width table (``openbench datasets list``)."""
    lines = [f"{'name':<12} {'family':<16} {'format':<10} {'version':<38} {'checksum':<15} {'entities':>9} "
             f"{'relations':>9}  url"]
    for entry in registry().values():
        graph = entry.counts.get("graph", {})
        first = entry.remote_files[0]
        checksum = (f"sha256 {first.sha256[:8]}" if first.sha256 else f"md5 {first.md5[:8]}" if first.md5
                    else f"git {first.git_sha1[:8]}" if first.git_sha1 else "pinned once")
        more = f" (+{len(entry.remote_files) - 1} files)" if len(entry.remote_files) > 1 else ""
        name, family, layout, version, url = (printable(value) for value in (entry.name, entry.family, entry.layout,
                                                                            entry.version, entry.url))
        entities, relations = (printable(graph.get(key, "?")) for key in ("entities", "relations"))
        lines.append(f"{name:<12} {family:<16} {layout:<10} {version:<38} {checksum:<15} {entities:>9} "
                     f"{relations:>9}  {url}{more}")
    return "\n".join(lines)


def lookup(name: str) -> RegisteredDataset:
    key = name.strip()
    entries = registry()
    match = entries.get(key) or next((e for n, e in entries.items() if n.lower() == key.lower()), None)
    if match is None:
        raise InputError(f"unknown dataset {name!r}{_closest(name)}; registered: {', '.join(entries)}")
    return match


def data_root(root=None) -> Path:
    """``root``, else $OPENBENCH_DATA_DIR, else the user's data directory (platformdirs)."""
    if root:
        return Path(root)
    if os.environ.get(ROOT_VARIABLE):
        return Path(os.environ[ROOT_VARIABLE])
    import platformdirs

    return platformdirs.user_data_path("openbench") / "datasets"


def _usable_root(root: Path) -> Path:
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"the datasets folder cannot be created ({error.strerror}); give --root or set "
                         f"${ROOT_VARIABLE} to a writable folder", root) from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise InputError(f"the datasets folder is not writable; give --root or set ${ROOT_VARIABLE}", root)
    return root


def read_marker(folder: Path) -> Optional[dict]:
    """The verification record of a registry copy, or None (not a registry copy, or unreadable)."""
    path = Path(folder) / MARKER
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return marker if isinstance(marker, dict) and isinstance(marker.get("files"), dict) else None


def _file_record(path: Path) -> dict:
    from openbench._io.download import sha256_of

    status = path.stat()
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, "sha256": sha256_of(path)}


def _altered_files(folder: Path, marker: dict) -> list:
    """Files missing or changed since verification. Size and modification time decide for most;
    a file whose time changed is hashed, so an edit that keeps the size is found too."""
    from openbench._io.download import sha256_of

    altered = []
    for name, record in sorted(marker.get("files", {}).items()):
        path = folder / name
        if not isinstance(record, dict) or not path.is_file():
            altered.append(name)
            continue
        status = path.stat()
        if status.st_size != record.get("size"):
            altered.append(name)
        elif status.st_mtime_ns != record.get("mtime_ns") and sha256_of(path) != record.get("sha256"):
            altered.append(name)
    return altered


def get(name: str, root=None, *, mirror: Optional[str] = None, force: bool = False, progress: bool = True) -> Path:
    """The verified local copy of registry dataset ``name`` under ``root``, downloading it if needed.

    :param mirror: base URL serving the archive instead of the provider (also $OPENBENCH_DATASET_MIRROR).
    :param force: download again even over a copy that fails verification; the old copy stays in
        place until the new one has passed every check.
    """
    from filelock import FileLock

    from openbench._io.download import sidecar_path

    entry = lookup(name)
    root = _usable_root(data_root(root))
    folder = root / entry.name
    with FileLock(str(root / f".{entry.name}.lock")):
        if folder.exists():
            marker = read_marker(folder)
            problem = ("it holds no verification record (a partial or foreign copy)" if marker is None else
                       _describe_altered(_altered_files(folder, marker)))
            if problem is None:
                logger.info("%s: reusing the verified copy in %s", entry.name, folder)
                return folder
            if not force:
                raise DatasetError(f"{folder}: not a verified copy of {entry.name}: {problem}; remove the folder "
                                   f"or pass --force to download it again")
            check_output_folder(folder, extra_markers=(MARKER,))  # never replace what openbench did not write
            logger.warning("%s: replacing %s once the new copy is verified (%s)", entry.name, folder, problem)
        fetched = _download_files(entry, root, mirror, progress)
        try:
            if entry.native:
                _convert_native(entry, fetched, folder)
            else:
                _unpack(entry, fetched[0][1], fetched[0][2], folder)
            for file, _, digest in fetched:
                _pin(entry, root, digest, file)  # only files that passed every check are pinned
        finally:
            for _, path, _ in fetched:
                path.unlink(missing_ok=True)
                sidecar_path(path).unlink(missing_ok=True)
    return folder


def _download_files(entry: RegisteredDataset, root: Path, mirror: Optional[str],
                    progress: bool) -> List[Tuple[RemoteFile, Path, str]]:
    """(file, downloaded path, sha256) of each of the entry's files, each verified against its
    published checksum or pinned one; a failure removes what this call fetched."""
    from openbench._io.download import sidecar_path

    fetched: List[Tuple[RemoteFile, Path, str]] = []
    try:
        for file in entry.remote_files:
            path = _download(entry, file, root, mirror, progress)
            fetched.append((file, path, sidecar_path(path).read_text().strip()))  # fetch hashed it once already
            _check_pin(entry, root, fetched[-1][2], path, file)
    except BaseException:
        for _, path, _ in fetched:
            path.unlink(missing_ok=True)
            sidecar_path(path).unlink(missing_ok=True)
        raise
    return fetched


def _describe_altered(altered: list) -> Optional[str]:
    if not altered:
        return None
    return f"{len(altered)} file(s) missing or changed since verification (first: {altered[0]})"


def _read_pins(root: Path) -> Dict[str, str]:
    path = root / PINS
    if not path.is_file():
        return {}
    pins = read_json(path, "checksum record")
    if not isinstance(pins, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in pins.items()):
        raise InputError("expected a JSON object of dataset name -> sha256; fix or remove the file", path)
    return pins


def _download(entry: RegisteredDataset, file: RemoteFile, root: Path, mirror: Optional[str], progress: bool) -> Path:
    """One file, fetched (resumable) and checked against its published size/md5/sha256/git id."""
    from openbench._io.download import Remote, fetch

    base = mirror or os.environ.get(MIRROR_VARIABLE)
    url = f"{base.rstrip('/')}/{file.name}" if base else file.url
    remote = Remote(source=entry.name, url=url, filename=file.name, sha256=file.sha256, version=entry.version,
                    md5=file.md5, size=file.size, git_sha1=file.git_sha1)
    # a split archive keeps its old place; a KG's files (train.tsv, …) get the entry's own folder
    cache = root / ".downloads" / entry.name if entry.native else root / ".downloads"
    return fetch(remote, cache, progress=progress)


def _pin_key(entry: RegisteredDataset, file: RemoteFile) -> str:
    return entry.name if len(entry.remote_files) == 1 else f"{entry.name}/{file.name}"


def _check_pin(entry: RegisteredDataset, root: Path, digest: str, archive: Path, file: RemoteFile) -> None:
    pinned = _read_pins(root).get(_pin_key(entry, file))
    if pinned is not None and pinned != digest:
        raise DatasetError(f"{archive}: sha256 {digest} differs from the one recorded at the first verified "
                           f"download ({pinned}, in {root / PINS}); the file changed or is corrupt")


def _pin(entry: RegisteredDataset, root: Path, digest: str, file: RemoteFile) -> None:
    if file.checked:  # a checksum stated by the entry and checked by the download: nothing to record
        return
    pins = _read_pins(root)
    key = _pin_key(entry, file)
    if key not in pins:
        pins[key] = digest
        write_text_atomic(root / PINS, json.dumps(pins, indent=2, sort_keys=True) + "\n")
        logger.warning("%s: no published checksum for %s; recorded the verified file's sha256 in %s, and later "
                       "downloads must match it", entry.name, file.name, root / PINS)


def _unpack(entry: RegisteredDataset, archive: Path, digest: str, folder: Path) -> None:
    """Check the zip's CRCs, extract, check the layout, write the record, swap into place."""
    try:
        with zipfile.ZipFile(archive) as bundle:
            _check_zip(bundle, archive)

            def fill(staging: Path) -> None:
                with tempfile.TemporaryDirectory(dir=staging.parent, prefix=f".{entry.name}.unzip.") as scratch:
                    bundle.extractall(scratch)
                    top = [p for p in Path(scratch).iterdir()]
                    inner = top[0] if len(top) == 1 and top[0].is_dir() and top[0].name == entry.name else None
                    source = inner or Path(scratch)
                    for item in source.iterdir():
                        shutil.move(str(item), str(staging / item.name))
                layout, _ = resolve_layout(staging, None)
                if layout != entry.layout:
                    raise DatasetError(f"{archive}: unpacked into the {layout!r} layout, expected {entry.layout!r}")
                files = {str(p.relative_to(staging)): _file_record(p) for p in sorted(staging.rglob("*"))
                         if p.is_file()}
                record = {"name": entry.name, "family": entry.family, "version": entry.version, "url": entry.url,
                          "archive_sha256": digest, "files": files}
                (staging / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

            replace_folder(folder, fill, kind=f"dataset {entry.name}", extra_markers=(MARKER,), checked=False)
    except zipfile.BadZipFile as error:
        raise DatasetError(f"{archive}: not a readable zip archive ({error})") from None
    except InputError as error:
        raise DatasetError(f"{archive}: the archive does not hold a {entry.layout!r} dataset: {error}") from None


def _convert_native(entry: RegisteredDataset, fetched: List[Tuple[RemoteFile, Path, str]], folder: Path) -> None:
    """Unpack the verified files into ``native/``, convert them (:func:`openbench.datasets.native.convert`),
    write the verification record, swap the folder into place; a failure keeps nothing."""
    from openbench.datasets.native import convert

    checksums = {file.name: digest for file, _, digest in fetched}

    def fill(staging: Path) -> None:
        native = staging / "native"
        native.mkdir()
        for file, path, _ in fetched:
            _place(path, native)
        _flatten(native)
        dataset = {"name": entry.name, "version": entry.version, "format": entry.layout, "url": entry.url,
                   "files_sha256": checksums}
        try:
            info = convert(entry.layout, native, staging, dataset, entry.counts.get("check", {}))
        except InputError as error:  # named by the file as published, not by the staging folder
            where = error.path or ""
            shown = str(Path(where).relative_to(native)) if where.startswith(str(native) + os.sep) else where
            place = f"{shown}, line {error.line}: " if shown and error.line else f"{shown}: " if shown else ""
            raise DatasetError(f"{entry.name}: {place}{error.reason}; nothing was kept") from None
        files = {str(p.relative_to(staging)): _file_record(p) for p in sorted(staging.rglob("*")) if p.is_file()}
        record = {"name": entry.name, "family": entry.family, "version": entry.version, "url": entry.url,
                  "format": entry.layout, "archive_sha256": fetched[0][2], "files_sha256": checksums,
                  "evaluation": info["evaluation"], "counts": info["counts"], "problems": info["problems"],
                  "files": files}
        (staging / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

    replace_folder(folder, fill, kind=f"dataset {entry.name}", extra_markers=(MARKER,), checked=False)


def _place(path: Path, native: Path) -> None:
    """A downloaded file into ``native``: a zip or tar archive unpacked (CRCs checked, no member
    outside the folder, macOS resource forks skipped), any other file (``.gz`` too: the readers
    inflate it) moved as it is."""
    name = path.name
    if name.endswith(".zip"):
        try:
            with zipfile.ZipFile(path) as bundle:
                _check_zip(bundle, path)
                bundle.extractall(native, members=[m for m in bundle.namelist() if not _resource_fork(m)])
        except zipfile.BadZipFile as error:
            raise DatasetError(f"{path}: not a readable zip archive ({error})") from None
    elif name.endswith((".tar.gz", ".tgz", ".tar")):
        import tarfile

        try:
            with tarfile.open(path) as bundle:
                members = [m for m in bundle.getmembers() if not _resource_fork(m.name)]
                bundle.extractall(native, members=members, filter="data")  # refuses links and paths outside
        except tarfile.FilterError as error:
            raise DatasetError(f"{path}: {error}: a member would unpack outside the dataset folder, or is a link "
                               "or device; refused") from None
        except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
            raise DatasetError(f"{path}: not a readable tar archive ({error})") from None
    else:
        shutil.move(str(path), str(native / name))


def _resource_fork(member: str) -> bool:
    parts = Path(member).parts
    return any(part == "__MACOSX" or part.startswith("._") for part in parts)


def _flatten(native: Path) -> None:
    """An archive that holds one folder (ogbl-biokg's ``biokg/``): its contents take its place."""
    entries = list(native.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        inner = entries[0].rename(native / f".{entries[0].name}.unpacked")  # may hold its own name
        for item in list(inner.iterdir()):
            shutil.move(str(item), str(native / item.name))
        inner.rmdir()


def _check_zip(bundle: zipfile.ZipFile, archive: Path) -> None:
    """Every member's CRC, and no member that would unpack outside the folder."""
    try:
        broken = bundle.testzip()
    except (zlib.error, EOFError) as error:  # damaged compressed data fails before its CRC
        broken = f"(undecodable: {error})"
    if broken is not None:
        raise DatasetError(f"{archive}: member {broken!r} fails its CRC check; the archive is corrupted")
    _check_member_names(bundle, archive)


def _check_member_names(bundle: zipfile.ZipFile, archive: Path) -> None:
    for member in bundle.namelist():
        parts = Path(member).parts
        if member.startswith("/") or ".." in parts:
            raise DatasetError(f"{archive}: member {member!r} would unpack outside the dataset folder")


def registry_of(folder) -> Optional[dict]:
    """``{"name", "version", "archive_sha256", …}`` when ``folder`` (or its parent, for
    train_test_data/ and a KG's official split) is a verified copy, or a split that ``split rand``
    made of one (then ``split`` says how, from its ``split_info.json``)."""
    folder = Path(folder)
    for candidate in (folder, folder.parent):
        marker = read_marker(candidate)
        if marker and "name" in marker:
            found = {"name": marker["name"], "version": marker.get("version", "unknown"),
                     "archive_sha256": marker.get("archive_sha256")}
            if "files_sha256" in marker:
                found["files_sha256"] = marker["files_sha256"]
                found["split"] = "official, as published"
            return found
    return _split_of_registry_graph(folder)


def split_info_of(folder) -> Optional[dict]:
    """The ``split_info.json`` of the split whose files lie in ``folder`` (or, for a fold, in its
    parent), or None; a damaged one is an InputError naming it."""
    for candidate in (Path(folder), Path(folder).parent):
        path = candidate / "split_info.json"
        if path.is_file():
            info = read_json(path, "split description")
            if not isinstance(info, dict):
                raise InputError("expected a JSON object (written by openbench split)", path)
            return info
    return None


def _split_of_registry_graph(folder: Path) -> Optional[dict]:
    info = split_info_of(folder) or {}
    dataset = info.get("dataset")
    if not isinstance(dataset, dict) or not isinstance(dataset.get("name"), str):
        return None
    parameters = info.get("parameters")
    seed = parameters.get("seed") if isinstance(parameters, dict) else None
    stated = dataset.get("files_sha256")
    files: dict = stated if isinstance(stated, dict) else {}
    return {"name": dataset["name"], "version": str(dataset.get("version", "unknown")),
            "archive_sha256": next(iter(files.values()), None), "files_sha256": files,
            "split": f"openbench split rand, seed {seed}"}


def registered(path_or_name) -> Optional[RegisteredDataset]:
    """The registry entry ``path_or_name`` names (case-insensitively), or None: an existing path is a
    path, never a name."""
    path = Path(path_or_name)
    if path.exists() or path.is_symlink():
        return None
    key = str(path_or_name).strip().lower()
    return next((entry for name, entry in registry().items() if name.lower() == key), None)


def resolve(path_or_name, root=None, **options) -> Path:
    """A dataset argument: an existing path as given, a registry name as its verified copy (fetched
    by :func:`get` when missing; a published KG's official split); anything else unchanged, for the
    loader to report."""
    path = Path(path_or_name)
    entry = registered(path_or_name)
    if entry is None:
        if path.exists() or path.is_symlink():
            return path
        entries = registry()
        raise InputError(f"no such folder, and not a dataset name of the registry{_closest(str(path_or_name))}; "
                         f"the registry knows {', '.join(entries)} (openbench datasets list)", path)
    if entry.native and entry.layout not in OFFICIAL_SPLITS:  # refused before any download
        raise InputError(f"{entry.name} is a graph without an official split: split it first (openbench split rand "
                         f"--dataset {entry.name} --output DIR) and evaluate DIR")
    folder = get(entry.name, root, **options)
    if not entry.native:
        return folder
    evaluation = (read_marker(folder) or {}).get("evaluation")
    if evaluation not in ("split", "native"):
        raise DatasetError(f"{folder}: its verification record names no official split; remove the folder and "
                           f"fetch {entry.name} again")
    return folder / evaluation


def graph_folder(path_or_name, root=None, **options) -> Path:
    """The graph folder (``graph_files`` layout with ``graph_info.json``) of a registry name (its
    verified copy, fetched when missing), of a copy's folder, or the folder itself."""
    from graphgen.graph_files import GRAPH_INFO

    entry = registered(path_or_name)
    if entry is not None:
        if not entry.native:
            raise InputError(f"{entry.name} is a published split, not a graph; evaluate it by name")
        return get(entry.name, root, **options) / "graph"
    path = Path(path_or_name)
    for candidate in (path, path / "graph"):
        if (candidate / GRAPH_INFO).is_file():
            return candidate
    if not path.exists():
        raise InputError(f"no such folder, and not a dataset name of the registry{_closest(str(path_or_name))} "
                         "(openbench datasets list)", path)
    raise InputError(f"not a converted graph: expected {GRAPH_INFO} here or in graph/ (openbench datasets get "
                     "writes them); for OpenBioLink's graph_files give --edges, --tn-edges and --nodes", path)


def _closest(name: str) -> str:
    """' (did you mean X?)' for the registry name closest to ``name``, or ''."""
    import difflib

    by_lower = {known.lower(): known for known in registry()}
    found = difflib.get_close_matches(name.strip().lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[found[0]]}?)" if found else ""
