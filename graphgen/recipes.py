"""How each edge type is made from the sources: which file, which columns, which id mappings.

A :class:`Recipe` loads raw edges (``id1, id2, qscore`` as text) from parsed source tables and
names, per side, the mapping that turns a raw id into a graph id, the ontology whose alt_ids are
resolved, and the CURIE prefix of ids that carry none. A :class:`Mapping` loads a two-column
table ``source -> target`` (one-to-many allowed: each target yields an edge).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import polars as pl

from openbench._io.download import Remote
from graphgen.sources import bgee, ctd, disgenet, drugcentral, go, hpo, obo, sider, stitch, string, uniprot
from openbench.errors import InputError

__all__ = ["ONTOLOGY_REMOTES", "HPO_DISEASE_XREFS", "SOURCES", "SourceFiles", "Side", "Recipe", "Mapping", "MAPPINGS", "ALT_ID_SOURCES",
           "GENE", "STRING_PROTEIN", "DRUG", "RECIPES", "needed_sources"]

ONTOLOGY_REMOTES = {
    "GO": go.REMOTES["ontology"],
    "DO": Remote("DO", "https://raw.githubusercontent.com/DiseaseOntology/HumanDiseaseOntology/main/src/ontology/"
                 "doid.obo", "doid.obo"),
    "HPO": hpo.REMOTES["ontology"],
    "UBERON": Remote("UBERON", "http://purl.obolibrary.org/obo/uberon/ext.obo", "uberon-ext.obo"),
}

# short source name -> its downloadable files (key -> Remote)
SOURCES: Dict[str, Dict[str, Remote]] = {
    "STRING": string.REMOTES,
    "STITCH": stitch.REMOTES,
    "GO": go.REMOTES,
    "DisGeNet": disgenet.REMOTES,
    "HPO": hpo.REMOTES,
    "Bgee": bgee.REMOTES,
    "CTD": ctd.REMOTES,
    "SIDER": sider.REMOTES,
    "DrugCentral": drugcentral.REMOTES,
    "UniProt": uniprot.REMOTES,
    "DO": {"ontology": ONTOLOGY_REMOTES["DO"]},
    "UBERON": {"ontology": ONTOLOGY_REMOTES["UBERON"]},
}


class SourceFiles:
    """Parsed source tables from one folder of downloaded files, each parsed once (also when
    several threads ask for the same table: the build reads ahead on a second thread)."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self._cache: Dict[Tuple[str, str, str], object] = {}
        self._lock = threading.Lock()
        self._table_locks: Dict[Tuple[str, str, str], threading.Lock] = {}

    def path(self, source: str, key: str) -> Path:
        remote = SOURCES[source][key]
        path = self.folder / remote.filename
        if not path.exists():
            raise InputError(f"source file of {source} ({key}) is missing; expected {remote.filename} "
                             f"(from {remote.url})", self.folder)
        return path

    def table(self, source: str, key: str, reader: Callable, variant: str = ""):
        """``reader`` applied to the file ``key`` of ``source``, once per (source, key, variant)."""
        name = (source, key, variant)
        with self._lock:
            table_lock = self._table_locks.setdefault(name, threading.Lock())
        with table_lock:
            if name not in self._cache:
                try:
                    table = reader(self.path(source, key))
                except InputError as error:
                    if error.reason.startswith(f"{source} "):
                        raise
                    raise InputError(f"{source} {key}: {error.reason}", error.path, error.line) from error
                with self._lock:  # release() may be walking the cache on the other thread
                    self._cache[name] = table
                return table
            return self._cache[name]

    def release(self, source: str) -> None:
        with self._lock:
            for name in [name for name in self._cache if name[0] == source]:
                del self._cache[name]

    def ontology(self, name: str) -> obo.Ontology:
        source = {"GO": "GO", "HPO": "HPO"}.get(name, name)
        return self.table(source, "ontology", obo.parse_obo)


@dataclass(frozen=True)
class Side:
    """How one end of a raw edge becomes a graph id."""

    mapping: Optional[str] = None      # name in MAPPINGS
    prefix: Optional[str] = None       # CURIE prefix added when the id has none
    alt_ids: Optional[str] = None      # ontology whose alt_id -> id map applies
    unmapped_prefix: Optional[str] = None  # how an unmapped raw id is written in ids_no_mapping.tsv
    strip: Optional[str] = None        # regex removed from a raw id before it is reported unmapped


@dataclass(frozen=True)
class Recipe:
    edge_type: str
    source: str                        # the source column of the output (STRING, GO, …)
    needs: Tuple[str, ...]             # short source names whose files it reads
    load: Callable[[SourceFiles], pl.DataFrame] = field(repr=False)
    side1: Side = Side()
    side2: Side = Side()
    negative: bool = False


@dataclass(frozen=True)
class Mapping:
    needs: Tuple[str, ...]
    load: Callable[[SourceFiles], pl.DataFrame] = field(repr=False)  # columns: source, target


def _edges(frame: pl.DataFrame, id1: str, id2: str, qscore: Optional[str] = None) -> pl.DataFrame:
    score = pl.col(qscore) if qscore else pl.lit(None, dtype=pl.String)
    return frame.select(pl.col(id1).alias("id1"), pl.col(id2).alias("id2"), score.alias("qscore"))


# -- loaders ----------------------------------------------------------------------------------

def _ontology_edges(name: str, relation: Optional[str], anatomy_only: bool = False):
    def load(files: SourceFiles) -> pl.DataFrame:
        ontology = files.ontology(name)
        if relation is None:
            frame = ontology.is_a.rename({"parent": "target"})
        else:
            frame = ontology.relationships.filter(pl.col("relation") == relation).select("id", "target")
        if anatomy_only:
            keep = pl.col("id").str.contains("^(UBERON|CL):") & pl.col("target").str.contains("^(UBERON|CL):")
            frame = frame.filter(keep)
        return _edges(frame, "id", "target")
    return load


def _string_links(files):
    return _edges(files.table("STRING", "links", string.read_links), "protein1", "protein2", "score")


def _rows_where(source: str, key: str, reader: Callable, column: str, value, id1: str, id2: str,
                qscore: Optional[str] = None, variant: str = ""):
    """A loader: the rows of a parsed table whose ``column`` equals ``value``, as raw edges."""
    def load(files: SourceFiles) -> pl.DataFrame:
        frame = files.table(source, key, reader, variant)
        return _edges(frame.filter(pl.col(column) == value), id1, id2, qscore)
    return load


def _typed_string_actions(path):
    return string.action_edges(string.read_actions(path))


def _string_actions(edge_type):
    return _rows_where("STRING", "actions", _typed_string_actions, "edge_type", edge_type, "id1", "id2", "score",
                       variant="typed")


def _stitch_actions(edge_type):
    return _rows_where("STITCH", "actions", stitch.read_action_edges, "edge_type", edge_type, "drug", "protein",
                       "score")


def _go_annotations(negated: bool):
    return _rows_where("GO", "annotations", go.read_annotations, "negated", negated, "uniprot", "go", "evidence")


def _hpo_diseases(negated: bool):
    return _rows_where("HPO", "annotations", hpo.read_disease_phenotype, "negated", negated, "disease", "hpo",
                       "evidence")


def _bgee_expression(call: str):
    return _rows_where("Bgee", "expression", bgee.read_expression, "expression", call, "gene", "anatomy", "quality")


def _bgee_differential(direction: str):
    return _rows_where("Bgee", "differential", bgee.read_differential, "direction", direction, "gene", "anatomy",
                       "quality")


def _drugcentral(kind: str):
    def load(files):
        tables = files.table("DrugCentral", "dump", drugcentral.read_indications)
        return _edges(tables[kind], "umls", "struct_id")
    return load


# -- mappings ---------------------------------------------------------------------------------

def _xrefs(ontology: str, dbs: Tuple[str, ...], key_prefix: str = ""):
    def load(files):
        xrefs = files.ontology(ontology).xrefs.filter(pl.col("db").is_in(list(dbs)))
        return xrefs.select((pl.lit(key_prefix) + pl.col("accession")).alias("source"), pl.col("id").alias("target"))
    return load


# How HPO's annotation files name a disease -> the xref prefixes the Disease Ontology has used for
# that identifier system. Current doid.obo releases write MIM: and ORDO:, older ones OMIM: (all
# OpenBioLink looked for) and Orphanet/ORPHANET:. DO cross-references no DECIPHER id in any release
# seen: DECIPHER-annotated diseases stay unmapped (counted in mapping_stats.tsv).
HPO_DISEASE_XREFS = {"OMIM": ("OMIM", "MIM"), "ORPHA": ("ORDO", "ORPHA", "Orphanet", "ORPHANET"),
                     "DECIPHER": ("DECIPHER",)}


def _hpo_disease_xrefs(files):
    """HPO disease id (``OMIM:…``, ``ORPHA:…``, ``DECIPHER:…``) -> DOID, through DO's xrefs."""
    parts = [_xrefs("DO", dbs, f"{namespace}:")(files) for namespace, dbs in HPO_DISEASE_XREFS.items()]
    return pl.concat(parts).unique(maintain_order=True)


def _uniprot(which: int):
    def load(files):
        folder = files.folder
        selected = folder / uniprot.REMOTES["selected"].filename
        reader, key = (uniprot.read_selected, "selected") if selected.exists() else (uniprot.read_dat, "dat")
        frame = files.table("UniProt", key, reader)[which]
        return frame.rename({frame.columns[0]: "source", "gene": "target"})
    return load


MAPPINGS: Dict[str, Mapping] = {
    "string_to_gene": Mapping(("STRING",), lambda f: f.table("STRING", "entrez", string.read_entrez_mapping)
                              .rename({"string": "source", "gene": "target"})),
    "uniprot_to_gene": Mapping(("UniProt",), _uniprot(0)),
    "ensembl_to_gene": Mapping(("UniProt",), _uniprot(1)),
    "umls_to_doid": Mapping(("DisGeNet",), lambda f: f.table("DisGeNet", "mappings", disgenet.read_do_mappings)
                            .rename({"umls": "source", "doid": "target"})),
    "hpo_disease_to_doid": Mapping(("DO",), _hpo_disease_xrefs),
    "umls_to_hp": Mapping(("HPO",), _xrefs("HPO", ("UMLS",))),
    "struct_to_pubchem": Mapping(("DrugCentral",), lambda f: f.table("DrugCentral", "dump", drugcentral.read_indications)
                                 ["pubchem"].rename({"struct_id": "source", "drug": "target"})),
}

ALT_ID_SOURCES = {"GO": "GO", "DO": "DO", "HPO": "HPO", "UBERON": "UBERON"}

GENE = Side(prefix="NCBIGENE")
STRING_PROTEIN = Side(mapping="string_to_gene", prefix="NCBIGENE", unmapped_prefix="ENSEMBL", strip=r"^\d+\.")
DRUG = Side(prefix="PUBCHEM.COMPOUND")


def _recipes() -> List[Recipe]:
    recipes = [
        Recipe("IS_A", "GO", ("GO",), _ontology_edges("GO", None)),
        Recipe("IS_A", "DO", ("DO",), _ontology_edges("DO", None)),
        Recipe("IS_A", "HPO", ("HPO",), _ontology_edges("HPO", None)),
        Recipe("IS_A", "UBERON", ("UBERON",), _ontology_edges("UBERON", None, anatomy_only=True)),
        Recipe("PART_OF", "GO", ("GO",), _ontology_edges("GO", "part_of")),
        Recipe("PART_OF", "UBERON", ("UBERON",), _ontology_edges("UBERON", "part_of", anatomy_only=True)),
        Recipe("GENE_GENE", "STRING", ("STRING",), _string_links, STRING_PROTEIN, STRING_PROTEIN),
        Recipe("GENE_GO", "GO", ("GO", "UniProt"), _go_annotations(False),
               Side(mapping="uniprot_to_gene", prefix="NCBIGENE", unmapped_prefix="UNIPROT"), Side(alt_ids="GO")),
        Recipe("GENE_DIS", "DisGeNet", ("DisGeNet", "DO"),
               lambda f: _edges(f.table("DisGeNet", "curated", disgenet.read_associations), "gene", "umls", "score"),
               GENE, Side(mapping="umls_to_doid", alt_ids="DO", unmapped_prefix="UMLS")),
        Recipe("GENE_DRUG", "STITCH", ("STITCH", "STRING"),
               lambda f: _edges(f.table("STITCH", "links", stitch.read_links), "protein", "drug", "score"),
               STRING_PROTEIN, DRUG),
        Recipe("GENE_PHENOTYPE", "HPO", ("HPO",),
               lambda f: _edges(f.table("HPO", "genes", hpo.read_gene_phenotype), "gene", "hpo"),
               GENE, Side(alt_ids="HPO")),
        Recipe("GENE_PATHWAY", "CTD", ("CTD",),
               lambda f: _edges(f.table("CTD", "pathways", ctd.read_gene_pathways), "gene", "pathway"), GENE),
        Recipe("GENE_EXPRESSED_ANATOMY", "Bgee", ("Bgee", "UniProt", "UBERON"), _bgee_expression("present"),
               Side(mapping="ensembl_to_gene", prefix="NCBIGENE", unmapped_prefix="ENSEMBL"), Side(alt_ids="UBERON")),
        Recipe("GENE_OVEREXPRESSED_ANATOMY", "Bgee", ("Bgee", "UniProt", "UBERON"), _bgee_differential("over-expression"),
               Side(mapping="ensembl_to_gene", prefix="NCBIGENE", unmapped_prefix="ENSEMBL"), Side(alt_ids="UBERON")),
        Recipe("GENE_UNDEREXPRESSED_ANATOMY", "Bgee", ("Bgee", "UniProt", "UBERON"),
               _bgee_differential("under-expression"),
               Side(mapping="ensembl_to_gene", prefix="NCBIGENE", unmapped_prefix="ENSEMBL"), Side(alt_ids="UBERON")),
        Recipe("DIS_DRUG", "DrugCentral", ("DrugCentral", "DisGeNet", "DO"), _drugcentral("indications"),
               Side(mapping="umls_to_doid", alt_ids="DO", unmapped_prefix="UMLS"),
               Side(mapping="struct_to_pubchem", prefix="PUBCHEM.COMPOUND", unmapped_prefix="DRUGCENTRAL")),
        Recipe("DIS_PHENOTYPE", "HPO", ("HPO", "DO"), _hpo_diseases(False),
               Side(mapping="hpo_disease_to_doid", alt_ids="DO"), Side(alt_ids="HPO")),
        Recipe("DRUG_PHENOTYPE", "SIDER", ("SIDER", "HPO"),
               lambda f: _edges(f.table("SIDER", "side_effects", sider.read_side_effects), "drug", "umls"),
               DRUG, Side(mapping="umls_to_hp", alt_ids="HPO", unmapped_prefix="UMLS")),
    ]
    for action in ("ACTIVATION", "BINDING", "CATALYSIS", "EXPRESSION", "INHIBITION", "PTMOD", "REACTION",
                   "BINDACT", "BINDINH"):
        name = f"GENE_{action}_GENE"
        recipes.append(Recipe(name, "STRING", ("STRING",), _string_actions(name), STRING_PROTEIN, STRING_PROTEIN))
    for action in ("ACTIVATION", "BINDING", "CATALYSIS", "EXPRESSION", "INHIBITION", "PREDBIND", "REACTION",
                   "BINDACT", "BINDINH"):
        name = f"DRUG_{action}_GENE"
        recipes.append(Recipe(name, "STITCH", ("STITCH", "STRING"), _stitch_actions(name), DRUG, STRING_PROTEIN))
    # true negatives: the edge type of the positive relation they contradict
    recipes += [
        Recipe("DIS_DRUG", "DrugCentral", ("DrugCentral", "DisGeNet", "DO"), _drugcentral("contraindications"),
               Side(mapping="umls_to_doid", alt_ids="DO", unmapped_prefix="UMLS"),
               Side(mapping="struct_to_pubchem", prefix="PUBCHEM.COMPOUND", unmapped_prefix="DRUGCENTRAL"),
               negative=True),
        Recipe("DIS_PHENOTYPE", "HPO", ("HPO", "DO"), _hpo_diseases(True),
               Side(mapping="hpo_disease_to_doid", alt_ids="DO"), Side(alt_ids="HPO"), negative=True),
        Recipe("GENE_GO", "GO", ("GO", "UniProt"), _go_annotations(True),
               Side(mapping="uniprot_to_gene", prefix="NCBIGENE", unmapped_prefix="UNIPROT"), Side(alt_ids="GO"),
               negative=True),
        Recipe("GENE_EXPRESSED_ANATOMY", "Bgee", ("Bgee", "UniProt", "UBERON"), _bgee_expression("absent"),
               Side(mapping="ensembl_to_gene", prefix="NCBIGENE", unmapped_prefix="ENSEMBL"), Side(alt_ids="UBERON"),
               negative=True),
        Recipe("GENE_OVEREXPRESSED_ANATOMY", "Bgee", ("Bgee", "UniProt", "UBERON"),
               _bgee_differential("under-expression"),
               Side(mapping="ensembl_to_gene", prefix="NCBIGENE", unmapped_prefix="ENSEMBL"), Side(alt_ids="UBERON"),
               negative=True),
        Recipe("GENE_UNDEREXPRESSED_ANATOMY", "Bgee", ("Bgee", "UniProt", "UBERON"),
               _bgee_differential("over-expression"),
               Side(mapping="ensembl_to_gene", prefix="NCBIGENE", unmapped_prefix="ENSEMBL"), Side(alt_ids="UBERON"),
               negative=True),
    ]
    return recipes


RECIPES: List[Recipe] = _recipes()


def needed_sources(recipes: List[Recipe]) -> List[str]:
    """Every source the recipes read, mapping and alt-id sources included, in registry order."""
    names = set()
    for recipe in recipes:
        names.update(recipe.needs)
        for side in (recipe.side1, recipe.side2):
            if side.mapping:
                names.update(MAPPINGS[side.mapping].needs)
            if side.alt_ids:
                names.add(ALT_ID_SOURCES[side.alt_ids])
    return [name for name in SOURCES if name in names]
