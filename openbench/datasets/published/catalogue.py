"""The built-in catalogue of published benchmark datasets: one entry per dataset (:data:`REGISTRY`)
with its URL(s), version, the checksums and counts its publisher states, a licence note, the
citation and the standard protocol the leaderboard compares against.

OpenBioLink's split archives (HQ_DIR, ALL_DIR, ..., KGID_HQ_DIR) are zip archives of split files;
the published biomedical KGs (Hetionet, PrimeKG, DRKG, ogbl-biokg, BioKG, PharmKG-8k) come in
their own formats, often as several files (:class:`RemoteFile`, each with the checksum its
publisher states: sha256, md5, size or a git blob id), converted by a reader per format
(:mod:`openbench.datasets.published.native`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Dict, Optional, Tuple

from openbench._io import visible
from openbench.errors import OpenbenchError
from openbench.record import Protocol

__all__ = ["OBL2020_PROTOCOL", "OBL2021_PROTOCOL", "OBL2020_LICENSE", "FILTERED_PROTOCOL", "RemoteFile",
           "RegisteredDataset", "REGISTRY", "NATIVE_DATASETS", "DatasetError"]

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
    native format a reader converts (:data:`openbench.datasets.published.native.NATIVE_FORMATS`);
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
    """Every string inside ``value`` (dicts and lists walked) through :func:`visible`."""
    if isinstance(value, str):
        return visible(value)
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


