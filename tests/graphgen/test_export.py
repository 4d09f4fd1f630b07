"""BEL and RDF exports of the sample graph: read back by PyBEL and rdflib, counts preserved."""
import gzip
import json
import shutil
import warnings
from collections import Counter

import polars as pl
import pytest
from click.testing import CliRunner

from graphgen.edge_types import EDGE_TYPES
from graphgen.export import read_graph_folder
from graphgen.writers import bel, rdf
from openbench.cli import main
from tests.helpers import needs_module

rdflib = needs_module("rdflib")
# rdflib's own N3 parser warns once per triple about its internal API
pytestmark = pytest.mark.filterwarnings("ignore:Dataset.default_context is deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def sample_graph(tmp_path_factory):
    out = tmp_path_factory.mktemp("graph")
    result = CliRunner().invoke(main, ["generate", "--sample", "--qual", "nq", "--output", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    return out / "graph_files"


def _export(graph, fmt, out):
    result = CliRunner().invoke(main, ["export", "--graph", str(graph), "--format", fmt, "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _tsv_counts(graph, name):
    edges = read_graph_folder(graph).edges if name == "edges" else read_graph_folder(graph).tn_edges
    return Counter(edges["edge_type"].to_list()), edges


@pytest.mark.parametrize("fmt,syntax", [("RDF-NT", "nt"), ("RDF-TTL", "turtle"), ("RDF-N3", "n3")])
def test_rdf_parses_with_one_triple_per_edge_and_real_score_triples(sample_graph, tmp_path, fmt, syntax):
    out = _export(sample_graph, fmt, tmp_path / fmt)
    extension = rdf.EXTENSIONS[fmt]
    for name, negative in (("edges", False), ("TN_edges", True)):
        expected, edges = _tsv_counts(sample_graph, name)
        graph = rdflib.Graph().parse(out / f"{name}.{extension}", format=syntax)
        per_predicate = Counter(str(p) for _, p, _ in graph)
        prefix = rdf.NEGATED_PREFIX if negative else ""
        assert {t: per_predicate[str(rdf.VOCAB[prefix + t])] for t in expected} == dict(expected)
        if negative:  # a true negative never asserts the positive fact
            assert not any(per_predicate[str(rdf.VOCAB[t])] for t in EDGE_TYPES)
        statements = set(graph.subjects(rdflib.RDF.type, rdflib.RDF.Statement))
        assert len(statements) == edges.height
        scored = edges.filter(pl.col("qscore") != "")
        assert per_predicate[str(rdf.VOCAB.qscore)] == scored.height
        assert per_predicate[str(rdf.VOCAB.source)] == edges.height
        first = scored.row(0, named=True)  # the score is attached to the right statement
        subject, obj = rdf.node_iri(first["id1"]), rdf.node_iri(first["id2"])
        matches = [s for s in statements if (s, rdflib.RDF.subject, subject) in graph
                   and (s, rdflib.RDF.object, obj) in graph
                   and (s, rdflib.RDF.predicate, rdf.VOCAB[prefix + first["edge_type"]]) in graph]
        assert [str(graph.value(s, rdf.VOCAB.qscore)) for s in matches] == [first["qscore"]]
    nodes = rdflib.Graph().parse(out / f"nodes.{extension}", format=syntax)
    tsv_nodes = read_graph_folder(sample_graph).nodes
    assert len(nodes) == tsv_nodes.height
    gene = tsv_nodes.filter(pl.col("node_type") == "GENE")["id"][0]
    assert (rdf.node_iri(gene), rdflib.RDF.type, rdf.VOCAB.GENE) in nodes


def test_iris_escape_characters_that_iris_cannot_hold(tmp_path):
    nodes = pl.DataFrame({"id": ['NCBIGENE:a b"<c>'], "node_type": ["GENE"]})
    rdf.write_nodes(nodes, tmp_path / "n.nt", "RDF-NT")
    parsed = rdflib.Graph().parse(tmp_path / "n.nt", format="nt")
    assert [str(s) for s in parsed.subjects()] == ["https://identifiers.org/NCBIGENE:a%20b%22%3Cc%3E"]


def _bel_counts(edges):
    relations = (bel.RELATIONS[t] for t in edges["edge_type"].to_list())
    return Counter(bel.STORED_RELATION.get(r, r) for r in relations)


def _expected_statement_edges(edges, pybel):
    """The (source, target, relation) edges PyBEL makes of the statements: two-way relations
    (association, correlations) in both directions; binding is written as the one-way statement
    ``A directlyIncreases complex(A, B)`` (how PyBEL stores it)."""
    from pybel.constants import TWO_WAY_RELATIONS

    expected = set()
    for id1, edge_type, id2 in edges.select("id1", "edge_type", "id2").rows():
        relation, u, v = bel.RELATIONS[edge_type], bel._node(id1), bel._node(id2)
        if relation == "binds":
            complex_ = pybel.dsl.ComplexAbundance([u, v])
            expected.add((u, complex_, "directlyIncreases"))
            continue
        expected.add((u, v, relation))
        if relation in TWO_WAY_RELATIONS:
            expected.add((v, u, relation))
    return expected


def test_pybel_imports_in_the_ci_environment():
    import os
    if os.environ.get("CI") != "true":
        pytest.skip("only required in CI, whose fresh environment installs the test extra")
    bel._pybel()  # raises if pkg_resources (setuptools < 81) is missing


def test_every_edge_type_has_a_bel_relation_and_the_corrections_hold():
    assert set(bel.RELATIONS) == set(EDGE_TYPES)
    assert bel.RELATIONS["GENE_BINDINH_GENE"] == "directlyDecreases"
    assert bel.RELATIONS["DRUG_PREDBIND_GENE"] == "association"


@pytest.mark.slow
def test_bel_reads_back_without_warnings_and_with_the_same_relations(sample_graph, tmp_path):
    pybel = needs_module("pybel")
    out = _export(sample_graph, "BEL", tmp_path / "bel")
    for name, table in (("positive", "edges"), ("negative", "TN_edges")):
        _, edges = _tsv_counts(sample_graph, table)
        script = tmp_path / f"{name}.bel"
        with gzip.open(out / f"{name}.bel.gz", "rb") as source, open(script, "wb") as target:
            shutil.copyfileobj(source, target)
        text = script.read_text()
        assert "PubMed" not in text and "pubmed" not in text  # no placeholder citations
        assert 'DOID:"DOID:' not in text and 'GO:"GO:' not in text  # no doubled prefixes
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = pybel.from_bel_script(str(script))
            linked = pybel.from_nodelink_gz(str(out / f"{name}.bel.nodelink.json.gz"))
        assert graph.warnings == []
        statements = {(u, v, d["relation"]) for u, v, d in graph.edges(data=True) if "line" in d}
        assert statements == _expected_statement_edges(edges, pybel)
        qualified = [d["relation"] for _, _, d in linked.edges(data=True) if "citation" in d]
        assert Counter(qualified) == _bel_counts(edges)  # one link per exported edge
        annotated = [d for _, _, d in linked.edges(data=True) if "QualityScore" in d.get("annotations", {})]
        assert len(annotated) == edges.filter(pl.col("qscore") != "").height
        if name == "negative":
            assert all("TrueNegative" in d["annotations"] for _, _, d in graph.edges(data=True))


def test_exports_are_byte_identical_when_repeated(sample_graph, tmp_path):
    for fmt in ("BEL", "RDF-TTL"):
        first, second = _export(sample_graph, fmt, tmp_path / f"{fmt}1"), _export(sample_graph, fmt, tmp_path / f"{fmt}2")
        for path in sorted(first.iterdir()):
            assert path.read_bytes() == (second / path.name).read_bytes(), path.name


def test_generate_writes_the_export_beside_the_tsv_graph(tmp_path):
    """Issue 37: the export replaced graph_files/'s TSV files, so the README's next command (export
    --graph graph_out/graph_files) failed. The TSV graph stays; the export goes beside it."""
    result = CliRunner().invoke(main, ["generate", "--sample", "--output", str(tmp_path), "--no-progress",
                                       "--output-format", "RDF-NT"])
    assert result.exit_code == 0, result.output
    exported = {p.name for p in (tmp_path / "rdf-nt").iterdir()}
    assert {"edges.nt", "nodes.nt", "TN_edges.nt", "ALL_nodes.nt", "graph_props.json"} <= exported
    assert {"edges.csv", "TN_edges.csv", "ALL_nodes.csv"} <= {p.name for p in (tmp_path / "graph_files").iterdir()}
    again = CliRunner().invoke(main, ["export", "--graph", str(tmp_path / "graph_files"), "--format", "RDF-TTL",
                                      "--output", str(tmp_path / "ttl")])
    assert again.exit_code == 0, again.output


def test_bad_graph_folders_give_clear_errors_and_write_nothing(sample_graph, tmp_path):
    incomplete = tmp_path / "incomplete"
    shutil.copytree(sample_graph, incomplete)
    (incomplete / "TN_nodes.csv").unlink()
    result = CliRunner().invoke(main, ["export", "--graph", str(incomplete), "--format", "RDF-NT",
                                       "--output", str(tmp_path / "out1")])
    assert result.exit_code == 1 and "TN_nodes.csv missing" in result.output
    assert not (tmp_path / "out1").exists()

    unknown = tmp_path / "unknown"
    shutil.copytree(sample_graph, unknown)
    lines = (unknown / "edges.csv").read_text().splitlines()
    lines[2] = lines[2].replace(lines[2].split("\t")[1], "GENE_FRIEND_GENE")
    (unknown / "edges.csv").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["export", "--graph", str(unknown), "--format", "BEL",
                                       "--output", str(tmp_path / "out2")])
    assert result.exit_code == 1 and "line 3" in result.output and "GENE_FRIEND_GENE" in result.output
    assert not (tmp_path / "out2").exists() and not any(p.name.startswith(".out2") for p in tmp_path.iterdir())


@pytest.mark.slow
def test_bel_files_do_not_depend_on_chunking_or_processes(sample_graph, tmp_path, monkeypatch):
    needs_module("pybel")
    edges = read_graph_folder(sample_graph).edges
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    bel.write_bel(edges, tmp_path / "one", "positive", False, workers=1)
    monkeypatch.setattr(bel, "CHUNK_EDGES", 97)  # several chunks, two spawned processes
    bel.write_bel(edges, tmp_path / "two", "positive", False, workers=2)
    for name in ("positive.bel.gz", "positive.bel.nodelink.json.gz"):
        one, two = (gzip.decompress((tmp_path / d / name).read_bytes()) for d in ("one", "two"))
        if name.endswith(".json.gz"):  # links come in each chunk's adjacency order
            one, two = json.loads(one), json.loads(two)
            assert one["nodes"] == two["nodes"] and one["graph"] == two["graph"]
            ordered = lambda links: sorted(json.dumps(link, sort_keys=True) for link in links)  # noqa: E731
            assert ordered(one["links"]) == ordered(two["links"])
        else:  # the same statements; PyBEL orders them by citation within a chunk
            statements = lambda text: sorted(line for line in text.decode().splitlines()  # noqa: E731
                                             if line and not line.startswith(("SET", "UNSET", "#")))
            assert statements(one) == statements(two)


def test_parquet_export_holds_the_same_tables(sample_graph, tmp_path):
    out = _export(sample_graph, "PARQUET", tmp_path / "parquet")
    tables = read_graph_folder(sample_graph)
    assert pl.read_parquet(out / "edges.parquet").equals(tables.edges)
    assert pl.read_parquet(out / "TN_nodes.parquet").equals(tables.tn_nodes)
    assert (out / "edges_list.csv").read_text() == (sample_graph / "edges_list.csv").read_text()


def test_bel_escapes_quotes_and_backslashes_so_pybel_reads_every_file(tmp_path):
    """Values holding ", \\, ; and non-ASCII text are written with BEL's escapes; PyBEL reads the
    files back without an error or a warning, and unescaping gives the values back."""
    pybel = needs_module("pybel")
    from graphgen.writers.bel import write_bel

    edges = pl.DataFrame({"id1": ['NCBIGENE:1"a', "NCBIGENE:2\\b", "NCBIGENE:3;c", "NCBIGENE:4é"],
                          "edge_type": ["GENE_GENE"] * 4,
                          "id2": ["NCBIGENE:5", "NCBIGENE:6", "NCBIGENE:7", "NCBIGENE:8"],
                          "qscore": ['9"00', "1\\2", "3;4", "5"], "source": ['ST"RING', "S\\T", "S;T", "Sé"]})
    write_bel(edges, tmp_path, "positive", negative=False, workers=1)
    script = tmp_path / "positive.bel"
    with gzip.open(tmp_path / "positive.bel.gz", "rb") as source, open(script, "wb") as target:
        shutil.copyfileobj(source, target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = pybel.from_bel_script(str(script))
        linked = pybel.from_nodelink_gz(str(tmp_path / "positive.bel.nodelink.json.gz"))
    assert graph.warnings == [] and linked.number_of_edges() == 4
    unescape = lambda text: text.replace('\\"', '"').replace("\\\\", "\\")  # noqa: E731
    names = {unescape(node.name) for node in graph.nodes() if node.namespace == "NCBIGENE"}
    assert {'1"a', "2\\b", "3;c", "4é"} <= names
    scores = {unescape(data["annotations"]["QualityScore"][0]["identifier"]) for _, _, data in graph.edges(data=True)}
    sources = {unescape(data["annotations"]["SourceDatabase"][0]["identifier"]) for _, _, data in graph.edges(data=True)}
    assert scores == {'9"00', "1\\2", "3;4", "5"} and sources == {'ST"RING', "S\\T", "S;T", "Sé"}
