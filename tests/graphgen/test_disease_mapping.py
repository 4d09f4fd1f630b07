"""HPO diseases map to DOID through every identifier system DO cross-references (issue 25).

Real excerpts (tests/data/SOURCES.md): HPO's 2025-01-16 release, where every NOT annotation is an
ORPHA disease, and DO's rare-disease slim with the OMIM and ORDO xrefs of two of its diseases.
"""
import polars as pl
from click.testing import CliRunner

from graphgen.recipes import HPO_DISEASE_XREFS
from openbench.cli import main
from tests.helpers import fixture

EXCERPT = fixture("sources", "hpo_2025")


def _do_xrefs() -> dict:
    """HPO-style disease id -> DOIDs, read plainly from the DO excerpt."""
    mapping, term = {}, None
    prefixes = {db: namespace for namespace, dbs in HPO_DISEASE_XREFS.items() for db in dbs}
    for line in (EXCERPT / "doid.obo").read_text().splitlines():
        if line.startswith("id: "):
            term = line[4:]
        elif line.startswith("xref: ") and ":" in line[6:]:
            db, accession = line[6:].split(" ")[0].split(":", 1)
            if db in prefixes:
                mapping.setdefault(f"{prefixes[db]}:{accession}", set()).add(term)
    return mapping


def _hpoa_rows():
    lines = (EXCERPT / "phenotype.hpoa").read_text().splitlines()
    return [line.split("\t") for line in lines if not line.startswith(("#", "database_id"))]


def _edges(path):
    return {tuple(line.split("\t")[:3]) for line in path.read_text().splitlines()}


def test_orpha_and_omim_diseases_map_and_true_negatives_survive(tmp_path):
    result = CliRunner().invoke(main, ["generate", "--sources", "HPO", "--sources-dir", str(EXCERPT), "--no-download",
                                       "--output", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / "graph_files"
    xrefs = _do_xrefs()
    expected = {False: set(), True: set()}
    for disease, _, qualifier, hpo, *_ in _hpoa_rows():
        for doid in xrefs.get(disease, ()):
            expected[qualifier == "NOT"].add((doid, "DIS_PHENOTYPE", hpo))
    written = {False: {e for e in _edges(folder / "edges.csv") if e[1] == "DIS_PHENOTYPE"},
               True: _edges(folder / "TN_edges.csv")}
    assert written == expected
    assert expected[True] == {("DOID:0050489", "DIS_PHENOTYPE", "HP:0000836")}  # an ORPHA NOT annotation
    assert any(d.startswith("ORPHA:") for d, *_ in _hpoa_rows()) and len(expected[False]) > 10
    unmapped = {tuple(line.split("\t")) for line in (folder / "ids_no_mapping.tsv").read_text().splitlines()}
    assert unmapped == {(d, "DIS_PHENOTYPE") for d, *_ in _hpoa_rows() if d not in xrefs}  # DECIPHER:16


def test_mapping_stats_count_rows_per_namespace(tmp_path):
    assert CliRunner().invoke(main, ["generate", "--sources", "HPO", "--sources-dir", str(EXCERPT), "--no-download",
                                     "--output", str(tmp_path / "out"), "--no-progress"]).exit_code == 0
    stats = pl.read_csv(tmp_path / "out" / "graph_files" / "mapping_stats.tsv", separator="\t",
                        schema_overrides={"Namespace": pl.String})
    xrefs, rows = _do_xrefs(), _hpoa_rows()
    for negated, kind in ((False, "positive"), (True, "true negative")):
        chosen = [r for r in rows if (r[2] == "NOT") == negated]
        for namespace in sorted({r[0].split(":")[0] for r in chosen}):
            in_namespace = [r for r in chosen if r[0].split(":")[0] == namespace]
            row = stats.filter((pl.col("Set") == kind) & (pl.col("Namespace") == namespace)).row(0, named=True)
            assert (row["Rows"], row["Rows mapped"]) == (len(in_namespace),
                                                        sum(1 for r in in_namespace if r[0] in xrefs))
            assert (row["Ids"], row["Ids mapped"]) == (len({r[0] for r in in_namespace}),
                                                      len({r[0] for r in in_namespace if r[0] in xrefs}))
            assert (row["Edge Type"], row["Source"], row["Side"], row["Mapping"]) == (
                "DIS_PHENOTYPE", "HPO", 1, "hpo_disease_to_doid")
