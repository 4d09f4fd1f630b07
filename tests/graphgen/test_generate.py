"""The whole build on the embedded sample: golden cases, counts per edge type, outputs, CLI."""
import gzip
import json
import shutil

import polars as pl
import pytest
from click.testing import CliRunner

from graphgen.build import build_from_folder
from graphgen.edge_types import EDGE_TYPES
from graphgen.pipeline import SAMPLE_DIR, generate
from graphgen.sample.make_sample import make_sample
from openbench.cli import main
from openbench.errors import InputError
from tests.helpers import fixture, use_native

# regression counts of the committed sample (seed 7), per edge type
NQ_COUNTS = {
    "DIS_DRUG": 20, "DIS_PHENOTYPE": 37, "DRUG_ACTIVATION_GENE": 5, "DRUG_BINDACT_GENE": 5, "DRUG_BINDING_GENE": 14,
    "DRUG_BINDINH_GENE": 4, "DRUG_CATALYSIS_GENE": 6, "DRUG_EXPRESSION_GENE": 6, "DRUG_INHIBITION_GENE": 5,
    "DRUG_PHENOTYPE": 37, "DRUG_PREDBIND_GENE": 5, "DRUG_REACTION_GENE": 5, "GENE_ACTIVATION_GENE": 6,
    "GENE_BINDACT_GENE": 6, "GENE_BINDING_GENE": 10, "GENE_BINDINH_GENE": 6, "GENE_CATALYSIS_GENE": 3, "GENE_DIS": 30,
    "GENE_DRUG": 38, "GENE_EXPRESSED_ANATOMY": 38, "GENE_EXPRESSION_GENE": 7, "GENE_GENE": 100, "GENE_GO": 54,
    "GENE_INHIBITION_GENE": 5, "GENE_OVEREXPRESSED_ANATOMY": 15, "GENE_PATHWAY": 38, "GENE_PHENOTYPE": 40,
    "GENE_PTMOD_GENE": 12, "GENE_REACTION_GENE": 6, "GENE_UNDEREXPRESSED_ANATOMY": 13, "IS_A": 61, "PART_OF": 7}
HQ_COUNTS = dict(NQ_COUNTS, DIS_PHENOTYPE=31, DRUG_ACTIVATION_GENE=3, DRUG_BINDACT_GENE=4, DRUG_BINDING_GENE=10,
                 DRUG_BINDINH_GENE=2, DRUG_CATALYSIS_GENE=2, DRUG_EXPRESSION_GENE=2, DRUG_INHIBITION_GENE=3,
                 DRUG_PREDBIND_GENE=2, DRUG_REACTION_GENE=2, GENE_ACTIVATION_GENE=4, GENE_BINDACT_GENE=5,
                 GENE_BINDING_GENE=4, GENE_BINDINH_GENE=2, GENE_DIS=12, GENE_DRUG=17, GENE_EXPRESSED_ANATOMY=23,
                 GENE_EXPRESSION_GENE=6, GENE_GENE=54, GENE_GO=40, GENE_INHIBITION_GENE=2, GENE_OVEREXPRESSED_ANATOMY=12,
                 GENE_PTMOD_GENE=6, GENE_REACTION_GENE=3, GENE_UNDEREXPRESSED_ANATOMY=7)
TN_NQ = {"DIS_DRUG": 9, "DIS_PHENOTYPE": 12, "GENE_EXPRESSED_ANATOMY": 16, "GENE_GO": 3,
         "GENE_OVEREXPRESSED_ANATOMY": 13, "GENE_UNDEREXPRESSED_ANATOMY": 15}


@pytest.fixture(scope="module")
def graphs():
    return {q: build_from_folder(SAMPLE_DIR, quality=q, progress=False) for q in ("hq", "mq", "nq")}


def _counts(edges):
    return dict(edges.group_by("edge_type").len().iter_rows())


def test_sample_yields_every_edge_type_at_every_level(graphs):
    assert _counts(graphs["nq"].edges) == NQ_COUNTS and _counts(graphs["hq"].edges) == HQ_COUNTS
    assert set(NQ_COUNTS) == set(EDGE_TYPES)
    assert _counts(graphs["nq"].tn_edges) == TN_NQ
    hq, nq = (set(graphs[q].edges.select("id1", "edge_type", "id2").rows()) for q in ("hq", "nq"))
    assert hq < nq


def _obo_terms(path):
    """id -> {"alt_id": [...], "is_a": [...], "xref": [...], "is_obsolete": [...]}, read plainly."""
    terms = {}
    for stanza in path.read_text().split("\n\n"):
        lines = stanza.strip().splitlines()
        if not lines or lines[0] != "[Term]":
            continue
        tags = {}
        for line in lines[1:]:
            tag, _, value = line.partition(": ")
            tags.setdefault(tag, []).append(value.split(" ")[0])
        terms[tags["id"][0]] = tags
    return terms


def _loop_counts(quality):
    """Edge counts of GENE_GENE, GENE_PHENOTYPE, DIS_PHENOTYPE (and its true negatives) and IS_A
    from HPO, by plain loops over the raw sample files: the independent reference for those rows
    of the regression tables above."""
    cutoff = {"hq": 700, "mq": 400, "nq": 0}[quality]
    to_gene = {}
    for line in gzip.open(SAMPLE_DIR / "human.entrez_2_string.2018.tsv.gz", "rt"):
        if not line.startswith("#"):
            _, genes, protein = line.rstrip("\n").split("\t")
            to_gene.setdefault(protein, []).extend("NCBIGENE:" + gene for gene in genes.split("|"))
    pairs = set()
    for a, b, score in _raw_string_links():
        if score > cutoff:
            pairs |= {frozenset((x, y)) for x in to_gene.get(a, []) for y in to_gene.get(b, [])}
    counts = {"GENE_GENE": sum(2 if len(pair) == 2 else 1 for pair in pairs)}
    hp, do = _obo_terms(SAMPLE_DIR / "hp.obo"), _obo_terms(SAMPLE_DIR / "doid.obo")
    current = {alt: term for terms in (hp, do) for term, tags in terms.items() for alt in tags.get("alt_id", [])}
    resolve = lambda term: current.get(term, term)  # noqa: E731
    genes = set()
    for line in (SAMPLE_DIR / "genes_to_phenotype.txt").read_text().splitlines()[1:]:
        gene, _, term, *_ = line.split("\t")
        genes.add(("NCBIGENE:" + gene, resolve(term)))
    counts["GENE_PHENOTYPE"] = len(genes)
    doids = {}
    for term, tags in do.items():
        for xref in tags.get("xref", []):
            db, _, accession = xref.partition(":")
            namespace = {"MIM": "OMIM", "OMIM": "OMIM", "ORDO": "ORPHA"}.get(db)
            if namespace:
                doids.setdefault(f"{namespace}:{accession}", set()).add(term)
    annotations = {False: set(), True: set()}
    for line in (SAMPLE_DIR / "phenotype.hpoa").read_text().splitlines():
        fields = line.split("\t")
        if line.startswith(("#", "database_id")) or (quality == "hq" and fields[5] == "IEA"):
            continue
        for doid in doids.get(fields[0], ()):
            annotations["NOT" in fields[2]].add((resolve(doid), resolve(fields[3])))
    counts["DIS_PHENOTYPE"], tn_dis_phenotype = len(annotations[False]), len(annotations[True])
    counts["IS_A from HPO"] = sum(len(tags.get("is_a", [])) for tags in hp.values() if "is_obsolete" not in tags)
    return counts, tn_dis_phenotype


@pytest.mark.parametrize("quality", ["hq", "mq", "nq"])
def test_counts_against_plain_loops_over_the_raw_files(graphs, quality):
    expected, tn_dis_phenotype = _loop_counts(quality)
    edges = graphs[quality].edges
    got = _counts(edges)
    for edge_type in ("GENE_GENE", "GENE_PHENOTYPE", "DIS_PHENOTYPE"):
        assert got[edge_type] == expected[edge_type], edge_type
    hpo_is_a = edges.filter((pl.col("edge_type") == "IS_A") & pl.col("id1").cast(pl.String).str.starts_with("HP:"))
    assert hpo_is_a.height == expected["IS_A from HPO"]
    assert _counts(graphs[quality].tn_edges)["DIS_PHENOTYPE"] == tn_dis_phenotype
    assert {"GENE_GENE", "DIS_PHENOTYPE"} <= set(expected) and expected["GENE_GENE"] > 0


def test_the_committed_sample_is_what_the_script_writes(tmp_path):
    make_sample(tmp_path)
    for path in SAMPLE_DIR.iterdir():
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


def _raw_string_links():
    rows = [line.split(" ") for line in gzip.open(SAMPLE_DIR / "9606.protein.links.v11.0.txt.gz", "rt")][1:]
    return [(a, b, int(s)) for a, b, s in rows]


def test_fan_out_alt_ids_and_symmetry(graphs):
    edges = graphs["nq"].edges
    gene_gene = set(edges.filter(pl.col("edge_type") == "GENE_GENE").select("id1", "id2").rows())
    # protein of gene 1002 maps to genes 1002 and 1039 (fan-out); 1039's own protein maps nowhere
    raw_partners = {b for a, b, _ in _raw_string_links() if a == "9606.ENSP00000001002"}
    for partner in raw_partners:
        gene = "NCBIGENE:" + str(int(partner.split("ENSP")[1]))
        if gene not in ("NCBIGENE:1038", "NCBIGENE:1039"):
            assert ("NCBIGENE:1002", gene) in gene_gene and ("NCBIGENE:1039", gene) in gene_gene
    assert all((b, a) in gene_gene for a, b in gene_gene)  # undirected type, directed graph: both ways
    go_targets = set(edges.filter(pl.col("edge_type") == "GENE_GO")["id2"])
    assert "GO:0000004" in go_targets and "GO:0099999" not in go_targets  # alt_id resolved
    unmapped = set(graphs["nq"].unmapped.rows())
    assert ("ENSEMBL:ENSP00000001038", "GENE_GENE") in unmapped and ("MIM:100000", "DIS_PHENOTYPE") in unmapped
    assert ("ORPHA:1", "DIS_PHENOTYPE") in unmapped and ("UNIPROT:Q99999", "GENE_GO") in unmapped


def test_cutoffs_per_level(graphs):
    scores = {}
    for a, b, s in _raw_string_links():
        scores[(a, b)] = s
    hq_scores = graphs["hq"].edges.filter(pl.col("edge_type") == "GENE_GENE")["qscore"].cast(pl.String).cast(int)
    assert hq_scores.min() > 700
    assert graphs["mq"].edges.filter(pl.col("edge_type") == "GENE_GENE")["qscore"].cast(pl.String).cast(int).min() > 400
    go_hq = graphs["hq"].edges.filter(pl.col("edge_type") == "GENE_GO")["qscore"]
    assert "IEA" not in set(go_hq) and "IEA" in set(graphs["mq"].edges.filter(pl.col("edge_type") == "GENE_GO")["qscore"])
    expressed = graphs["hq"].edges.filter(pl.col("edge_type") == "GENE_EXPRESSED_ANATOMY")["qscore"]
    assert set(expressed) == {"gold quality"}


def test_true_negatives_come_from_contradicting_calls(graphs):
    tn = graphs["nq"].tn_edges
    over_tn = set(tn.filter(pl.col("edge_type") == "GENE_OVEREXPRESSED_ANATOMY").select("id1", "id2").rows())
    under = set(graphs["nq"].edges.filter(pl.col("edge_type") == "GENE_UNDEREXPRESSED_ANATOMY")
                .select("id1", "id2").rows())
    assert over_tn == under
    assert set(tn.filter(pl.col("edge_type") == "DIS_PHENOTYPE")["source"]) == {"HPO"}


def test_undirected_graph_writes_symmetric_types_once(tmp_path):
    graph = generate(tmp_path, sources_dir=SAMPLE_DIR, steps=("parse", "build"), directed=False, progress=False,
                     edge_types=["GENE_GENE", "GENE_BINDING_GENE"])
    pairs = graph.edges.select("id1", "id2").rows()
    assert not any((b, a) in set(pairs) for a, b in pairs if a != b)


def test_outputs_layout_determinism_and_steps(tmp_path):
    first = generate(tmp_path / "a", sources_dir=SAMPLE_DIR, steps=("parse", "build"), progress=False,
                     keep_in_files=True)
    generate(tmp_path / "b", sources_dir=SAMPLE_DIR, steps=("parse", "build"), progress=False)
    files = sorted(p.name for p in (tmp_path / "a" / "graph_files").iterdir())
    assert files == [".openbench-output.json", "ALL_nodes.csv", "TN_edges.csv", "TN_edges_list.csv", "TN_nodes.csv", "TN_nodes_list.csv",
                     "edges.csv", "edges_list.csv", "graph_props.json", "ids_no_mapping.tsv", "mapping_stats.tsv", "nodes.csv",
                     "nodes_list.csv", "stats.txt", "tn_ids_no_mapping.tsv", "tn_stats.txt"]
    for name in files:
        assert (tmp_path / "a" / "graph_files" / name).read_bytes() == (tmp_path / "b" / "graph_files" / name).read_bytes()
    edge_lines = (tmp_path / "a" / "graph_files" / "edges.csv").read_text().splitlines()
    assert len(edge_lines) == first.edges.height and all(len(line.split("\t")) == 5 for line in edge_lines)
    assert not (tmp_path / "a" / "graph_files" / "edges_list.csv").read_text().endswith("\n")
    props = json.loads((tmp_path / "a" / "graph_files" / "graph_props.json").read_text())
    assert props["DIRECTED"] is True and props["QUALITY"] == "HQ" and len(props["EDGE_TYPES"]) == 32
    assert not (tmp_path / "b" / "in_files").exists()
    # build alone, from the parse step's tables, gives the same files
    shutil.rmtree(tmp_path / "a" / "graph_files")
    generate(tmp_path / "a", sources_dir=SAMPLE_DIR, steps=("build",), progress=False)
    assert (tmp_path / "a" / "graph_files" / "edges.csv").read_bytes() == \
        (tmp_path / "b" / "graph_files" / "edges.csv").read_bytes()


def test_multi_file_separator_and_no_qscore(tmp_path):
    generate(tmp_path, sources_dir=SAMPLE_DIR, steps=("parse", "build"), multi_file=True, sep=",", no_qscore=True,
             progress=False)
    folder = tmp_path / "graph_files"
    assert (folder / "edges_GENE_GENE.csv").exists() and (folder / "nodes_GENE.csv").exists()
    assert (folder / "TN_edges_DIS_DRUG.csv").exists() and (folder / "ALL_nodes.csv").exists()
    line = (folder / "edges_GENE_GENE.csv").read_text().splitlines()[0].split(",")
    assert line[1] == "GENE_GENE" and line[3] == "" and line[4] == "STRING"


def test_selection_closure_and_errors(tmp_path, caplog):
    graph = generate(tmp_path, sources_dir=SAMPLE_DIR, steps=("parse", "build"), sources=["HPO"], progress=False)
    assert set(graph.edges["edge_type"]) == {"IS_A", "GENE_PHENOTYPE", "DIS_PHENOTYPE"}
    assert "also reading DO" in caplog.text
    with pytest.raises(InputError, match="unknown source\\(s\\) HP0; valid: STRING"):
        generate(tmp_path, sources_dir=SAMPLE_DIR, sources=["HP0"], steps=("build",))
    with pytest.raises(InputError, match="unknown edge type\\(s\\) GENE_FOO"):
        generate(tmp_path, sources_dir=SAMPLE_DIR, edge_types=["GENE_FOO"])
    with pytest.raises(InputError, match="only the download stage was asked for.*nothing to run"):
        generate(tmp_path, sources_dir=SAMPLE_DIR, steps=("download",))


def test_bad_source_file_names_it_and_keeps_the_old_output(tmp_path):
    sources = tmp_path / "sources"
    shutil.copytree(SAMPLE_DIR, sources)
    generate(tmp_path / "out", sources_dir=sources, steps=("parse", "build"), progress=False)
    before = (tmp_path / "out" / "graph_files" / "edges.csv").read_bytes()
    text = (sources / "genes_to_phenotype.txt").read_text().splitlines()
    text[3] = "1001\tG1001"
    (sources / "genes_to_phenotype.txt").write_text("\n".join(text) + "\n")
    with pytest.raises(InputError, match=r"genes_to_phenotype\.txt, line 4: HPO genes: expected 6 tab-separated columns, found 2"):
        generate(tmp_path / "out", sources_dir=sources, steps=("parse", "build"), progress=False)
    assert (tmp_path / "out" / "graph_files" / "edges.csv").read_bytes() == before
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]


def test_cli_generate_sample_and_lists(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["generate", "--sample", "--output", str(tmp_path), "--no-progress", "--qual", "nq"])
    assert result.exit_code == 0, result.output
    assert len((tmp_path / "graph_files" / "edges.csv").read_text().splitlines()) == sum(NQ_COUNTS.values())
    listed = runner.invoke(main, ["generate", "--list-edge-types"]).output.splitlines()
    assert len(listed) == 32 and listed[2].startswith("GENE_GENE\tGENE->GENE\tundirected")
    assert "STRING\tlinks" in runner.invoke(main, ["generate", "--list-sources"]).output
    bad = runner.invoke(main, ["generate", "--sample", "--output", str(tmp_path), "--qual", "best"])
    assert bad.exit_code == 1 and "unknown quality level 'best'" in bad.output


def test_generate_downloads_from_a_local_mirror(tmp_path):
    from tests.http_server import FileServer

    files = {f"/{path.name}": path.read_bytes() for path in SAMPLE_DIR.iterdir()}
    with FileServer(files) as server:
        result = CliRunner().invoke(main, ["generate", "--output", str(tmp_path / "out"), "--cache",
                                           str(tmp_path / "cache"), "--mirror", server.base_url, "--no-progress",
                                           "--sources", "HPO,CTD"])
        assert result.exit_code == 0, result.output
        fetched = {path for path, _ in server.requests}
    assert fetched == {"/phenotype.hpoa", "/genes_to_phenotype.txt", "/hp.obo", "/doid.obo",
                       "/CTD_genes_pathways.tsv.gz"}
    assert (tmp_path / "cache" / "hp.obo.sha256").exists()
    edges = (tmp_path / "out" / "graph_files" / "edges.csv").read_text()
    assert "\tGENE_PATHWAY\t" in edges and "\tDIS_PHENOTYPE\t" in edges


def test_every_sort_and_writer_path_writes_the_same_files(tmp_path, monkeypatch):
    """C sort and writer, polars sort and writer: byte-identical outputs, in the order the spec
    gives (the sort's own paths are compared in test_order.py)."""
    from graphgen import order
    from graphgen.writers import coded

    def written(name):
        generate(tmp_path / name, sources_dir=SAMPLE_DIR, steps=("parse", "build"), progress=False)
        folder = tmp_path / name / "graph_files"
        return {path.name: path.read_bytes() for path in folder.iterdir()}

    expected = written("default")
    use_native(monkeypatch, order.SORT_LIBRARY, "OPENBENCH_SORT", "polars")
    use_native(monkeypatch, coded.ROWS_LIBRARY, "OPENBENCH_WRITER", "polars")
    assert written("polars") == expected
    nodes = dict(pl.read_csv(tmp_path / "default" / "graph_files" / "nodes.csv", separator="\t", has_header=False,
                             infer_schema=False).iter_rows())
    lines = [line.split("\t") for line in expected["edges.csv"].decode().splitlines()]
    keys = [(nodes[a], a, edge_type, nodes[b], b) for a, edge_type, b, *_ in lines]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_source_tables_are_parsed_once_when_threads_ask_together(tmp_path):
    """The build reads ahead on a second thread: concurrent requests for one table share one parse."""
    import threading
    import time

    from graphgen.recipes import SourceFiles

    shutil.copy(SAMPLE_DIR / "go-basic.obo", tmp_path / "go-basic.obo")
    files, calls = SourceFiles(tmp_path), []

    def slow_reader(path):
        calls.append(path)
        time.sleep(0.2)  # long enough that every thread asks while the first parse runs
        return path.read_text()

    results = []
    threads = [threading.Thread(target=lambda: results.append(files.table("GO", "ontology", slow_reader, "t")))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(results) == 4 and len(set(results)) == 1
    files.release("GO")
    files.table("GO", "ontology", slow_reader, "t")
    assert len(calls) == 2  # released tables are parsed again on request


def test_an_empty_true_negative_set_gives_complete_empty_files_and_a_warning(tmp_path, caplog):
    """Today's HPO release has no NOT annotation that maps to DO: the TN graph of an HPO-only
    build is empty, which must give empty (but complete) files, never a crash."""
    import shutil

    sources = tmp_path / "sources"
    shutil.copytree(SAMPLE_DIR, sources)
    hpoa = sources / "phenotype.hpoa"
    hpoa.write_text("".join(line for line in hpoa.read_text().splitlines(keepends=True)
                            if line.split("\t")[2:3] != ["NOT"]))
    graph = generate(tmp_path / "out", sources_dir=sources, steps=("parse", "build"), sources=["HPO"],
                     progress=False)
    files = tmp_path / "out" / "graph_files"
    assert graph.tn_edge_table.height == 0 and graph.edge_table.height > 0
    for name in ("TN_edges.csv", "TN_nodes.csv", "TN_edges_list.csv", "TN_nodes_list.csv", "tn_stats.txt"):
        assert (files / name).is_file(), name
    assert (files / "TN_edges.csv").read_text() == ""
    assert "no edges" in caplog.text


def test_every_stage_on_an_empty_selection(tmp_path):
    """Sources whose files hold headers only: generate writes every file, empty, with a warning per
    recipe; every export format writes its files; the split refuses with the file named."""
    sources = tmp_path / "sources"
    sources.mkdir()
    real = fixture("sources", "hpo_2025")
    for name, keep in (("doid.obo", 3), ("phenotype.hpoa", 5), ("genes_to_phenotype.txt", 1)):
        (sources / name).write_text("".join((real / name).read_text().splitlines(keepends=True)[:keep]))
    (sources / "hp.obo").write_text((real / "hp.obo").read_text().split("\n[Term]")[0])
    result = CliRunner().invoke(main, ["generate", "--sources", "HPO", "--sources-dir", str(sources),
                                       "--no-download", "--output", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "0 edges and 0 nodes, 0 true-negative edges" in result.output
    assert result.output.count("no edges") == 4  # IS_A, GENE_PHENOTYPE, DIS_PHENOTYPE and its TN recipe
    files = tmp_path / "out" / "graph_files"
    for name in ("edges.csv", "nodes.csv", "TN_edges.csv", "TN_nodes.csv", "ALL_nodes.csv", "ids_no_mapping.tsv"):
        assert (files / name).read_text() == "", name
    assert (files / "stats.txt").read_text().count("\n") == 4  # the header and one row per positive recipe
    for fmt in ("BEL", "RDF-TTL", "RDF-NT", "PARQUET"):
        result = CliRunner().invoke(main, ["export", "--graph", str(tmp_path / "out"), "--format", fmt, "--output",
                                           str(tmp_path / fmt)])
        assert result.exit_code == 0 and (tmp_path / fmt / ".openbench-output.json").is_file(), (fmt, result.output)
    result = CliRunner().invoke(main, ["split", "rand", "--edges", str(files / "edges.csv"), "--tn-edges",
                                       str(files / "TN_edges.csv"), "--nodes", str(files / "ALL_nodes.csv"),
                                       "--output", str(tmp_path / "split")])
    assert result.exit_code == 1 and "edges.csv: the graph has no positive edges: nothing to split" in result.output
    assert not (tmp_path / "split").exists()
