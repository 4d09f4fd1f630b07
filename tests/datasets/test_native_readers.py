"""Each native reader's refusals: a file that breaks its format's rules is an InputError naming the
file and line, and what was expected (one case per check, so removing a check fails its case)."""
import gzip
import io

import numpy as np
import polars as pl
import pytest
import torch

from openbench.datasets.published.native import READERS, check_counts, CountMismatch
from openbench.datasets.published.native.graph import NativeGraph, finish_edges, write_graph
from openbench.errors import InputError
from graphgen.graph_files import read_nodes

NODES = "id\tname\tkind\r\nGene::1\tA1BG\tGene\r\nGene::2\tA2M\tGene\r\nAnatomy::UBERON:1\tx\tAnatomy\r\n"
SIF = "source\tmetaedge\ttarget\nGene::1\tGiG\tGene::2\nAnatomy::UBERON:1\tAeG\tGene::1\n"


def _hetionet(folder, nodes=NODES, sif=SIF):
    (folder / "hetionet-v1.0-nodes.tsv").write_text(nodes, newline="")
    (folder / "hetionet-v1.0-edges.sif.gz").write_bytes(gzip.compress(sif.encode()))


def test_hetionet_reads_a_valid_pair_of_files(tmp_path):
    _hetionet(tmp_path)
    graph = READERS["hetionet"](tmp_path)
    assert graph.counts == {"nodes": 3, "rows": 2} and graph.problems == {"isolated_nodes_kept": 0}
    assert graph.nodes.rows() == [("Gene::1", "Gene"), ("Gene::2", "Gene"), ("Anatomy::UBERON:1", "Anatomy")]


@pytest.mark.parametrize("nodes, sif, file, line, expected", [
    (NODES.replace("Gene::2\tA2M\tGene", "Gene::2\tA2M\tAnatomy"), SIF, "nodes", 3, "with the row's kind"),
    (NODES.replace("Gene::2\tA2M", "Gene::\tA2M"), SIF, "nodes", 3, "'<kind>::<identifier>'"),
    (NODES + "Gene::1\tdup\tGene\r\n", SIF, "nodes", 5, "listed twice"),
    (NODES, SIF.replace("GiG", "GxG"), "edges", 2, "expected one of Hetionet v1.0's 24"),
    (NODES, SIF.replace("Gene::2\n", "Gene::3\n"), "edges", 2, "'Gene::3' is not in"),
    (NODES, SIF.replace("Anatomy::UBERON:1\tAeG", "Anatomy::UBERON:1\tGiG"), "edges", 3,
     "GiG joins Gene to Gene, not Anatomy to Gene")])
def test_hetionet_refusals(tmp_path, nodes, sif, file, line, expected):
    _hetionet(tmp_path, nodes, sif)
    with pytest.raises(InputError, match=expected) as info:
        READERS["hetionet"](tmp_path)
    assert file in info.value.path and info.value.line == line


PRIMEKG = ("relation,display_relation,x_index,x_id,x_type,x_name,x_source,y_index,y_id,y_type,y_name,y_source\n"
           'drug_drug,synergistic interaction,1,DB1,drug,"a, b",DrugBank,2,DB2,drug,NA,DrugBank\n')


def test_primekg_ids_are_type_source_and_id_and_names_stay_strings(tmp_path):
    (tmp_path / "kg.csv").write_text(PRIMEKG)
    graph = READERS["primekg"](tmp_path)
    assert graph.edges.rows() == [("drug::DrugBank::DB1", "drug_drug", "drug::DrugBank::DB2")]
    assert graph.names is not None and graph.names.rows() == [("drug::DrugBank::DB1", "a, b"), ("drug::DrugBank::DB2", "NA")]


@pytest.mark.parametrize("text, expected", [
    (PRIMEKG.replace("x_source", "x_origin"), "x_source"),
    (PRIMEKG.replace(",DB1,", ",,"), "empty or missing")])
def test_primekg_refusals(tmp_path, text, expected):
    (tmp_path / "kg.csv").write_text(text)
    with pytest.raises(InputError, match=expected) as info:
        READERS["primekg"](tmp_path)
    assert "kg.csv" in info.value.path


@pytest.mark.parametrize("row, expected", [
    ("Compound::DB1\tDRUGBANK::treats\tDisease::D1", "expected 'SOURCE::name::Head:Tail'"),
    ("Compound::DB1\ttreats::Compound:Disease:x:\tDisease::D1", "expected 'SOURCE::name::Head:Tail'"),
    ("DB1\tDRUGBANK::treats::Compound:Disease\tDisease::D1", "expected 'Type::id' on both sides")])
def test_drkg_refusals(tmp_path, row, expected):
    good = "Compound::DB2\tDRUGBANK::treats::Compound:Disease\tDisease::D2\n"
    (tmp_path / "drkg.tsv").write_text(good + row + "\n")
    with pytest.raises(InputError, match=expected) as info:
        READERS["drkg"](tmp_path)
    assert info.value.line == 2


def test_drkg_counts_relation_type_mismatches_and_reads_bioarx_relations(tmp_path):
    rows = ["Compound::DB2\tbioarx::DrugHumGen:Compound:Gene\tGene::1",
            "Gene::1\tDRUGBANK::treats::Compound:Disease\tDisease::D2"]
    (tmp_path / "drkg.tsv").write_text("\n".join(rows) + "\n")
    graph = READERS["drkg"](tmp_path)
    assert graph.problems["relation_type_mismatches"] == 1 and graph.counts["rows"] == 2


def test_biokg_refuses_an_unknown_predicate_and_counts_type_conflicts(tmp_path):
    (tmp_path / "biokg.links.tsv").write_text("DB1\tDPI\tP1\nP1\tINTERACTS\tP2\n")
    with pytest.raises(InputError, match="predicate 'INTERACTS'") as info:
        READERS["biokg"](tmp_path)
    assert info.value.line == 2
    (tmp_path / "biokg.links.tsv").write_text("DB1\tDPI\tP1\nDB1\tPPI\tP2\n")  # DB1: a drug, then a protein
    assert READERS["biokg"](tmp_path).problems["node_type_conflicts"] == 1


def _ogb(folder, heads, types=("protein", "drug")):
    (folder / "raw").mkdir(parents=True)
    (folder / "raw" / "num-node-dict.csv.gz").write_bytes(gzip.compress(b"protein,drug\n3,2\n"))
    (folder / "split" / "random").mkdir(parents=True)
    for split in ("train", "valid", "test"):
        data = {"head": np.array(heads), "relation": np.zeros(len(heads), dtype=np.int64),
                "tail": np.zeros(len(heads), dtype=np.int64), "head_type": [types[0]] * len(heads),
                "tail_type": [types[1]] * len(heads)}
        buffer = io.BytesIO()
        torch.save(data, buffer)
        (folder / "split" / "random" / f"{split}.pt").write_bytes(buffer.getvalue())


def test_ogbl_biokg_lists_every_entity_and_refuses_ids_beyond_their_type(tmp_path):
    _ogb(tmp_path / "ok", [0, 2])
    graph = READERS["ogbl-biokg"](tmp_path / "ok")
    assert graph.nodes.get_column("id").to_list() == ["drug:0", "drug:1", "protein:0", "protein:1", "protein:2"]
    assert graph.counts == {"train": 2, "valid": 2, "test": 2, "entities": 5}
    _ogb(tmp_path / "bad", [0, 3])
    with pytest.raises(InputError, match="beyond their type's count"):
        READERS["ogbl-biokg"](tmp_path / "bad")
    _ogb(tmp_path / "unknown", [0], types=("gene", "drug"))
    with pytest.raises(InputError, match="unknown type"):
        READERS["ogbl-biokg"](tmp_path / "unknown")


def test_counts_are_checked_against_the_publishers():
    check_counts({"rows": 3}, {"rows": 3, "nodes": 2}, "x")
    with pytest.raises(CountMismatch, match="rows 2 .the publisher states 3."):
        check_counts({"rows": 3}, {"rows": 2}, "x")
    with pytest.raises(CountMismatch, match="does not produce"):
        check_counts({"edges": 3}, {"rows": 3}, "x")


def test_finish_edges_drops_duplicates_and_collapses_only_undirected_reverses():
    edges = pl.DataFrame({"h": ["a", "b", "a", "b", "c"], "r": ["u", "u", "u", "d", "d"],
                          "t": ["b", "a", "b", "a", "c"]})
    kept, counts = finish_edges(edges, frozenset({"u"}))
    assert kept.rows() == [("a", "u", "b"), ("b", "d", "a"), ("c", "d", "c")]
    assert counts == {"exact_duplicates_dropped": 1, "reverse_copies_collapsed": 1, "self_loops_kept": 1}


def test_an_id_with_a_tab_or_line_break_is_refused_before_writing(tmp_path):
    nodes = pl.DataFrame({"id": ["a", "b\tc"], "node_type": ["x", "x"]})
    edges = pl.DataFrame({"h": ["a"], "r": ["r"], "t": ["b\tc"]})
    graph = NativeGraph(nodes=nodes, edges=edges, undirected=frozenset(), id_scheme="", counts={})
    with pytest.raises(InputError, match="holds a TAB or line break"):
        write_graph(graph, edges, tmp_path / "g", "test", {})
    assert not (tmp_path / "g" / "edges.csv").exists()


def test_a_converted_graphs_nodes_must_have_its_node_types(tmp_path):
    path = tmp_path / "nodes.csv"
    path.write_text("Gene::1\tGene\nGene::2\tProtein\n")
    with pytest.raises(InputError, match="type 'Protein'.*expected one of") as info:
        read_nodes(path, node_types=["Gene"])
    assert info.value.line == 2


# -- issue 49: one line bound for every reader, and the file and line in every error -----------

from openbench._io import inputs as reading_layer


def test_a_quoted_primekg_field_with_a_line_break_names_kg_csv_and_its_line(tmp_path):
    rows = PRIMEKG + 'drug_drug,x,3,DB3,drug,"two\nlines",DrugBank,4,DB4,drug,y,DrugBank\n'
    (tmp_path / "kg.csv").write_text(rows)
    with pytest.raises(InputError, match="a quoted field holds a line break") as info:
        READERS["primekg"](tmp_path)
    assert info.value.path.endswith("kg.csv") and info.value.line == 3


@pytest.mark.parametrize("reader, files, bad_file, line", [
    ("pharmkg8k", {"train.tsv": "a\tr\tb\nb\tr\tc\n", "valid.tsv": "a\tr\tc\n", "test.tsv": "b\tr\ta\nc\tr\ta\tx\n"},
     "test.tsv", 2),
    ("drkg", {"drkg.tsv": "Compound::DB2\tDRUGBANK::treats::Compound:Disease\tDisease::D2\n"
                          "Compound::DB3\tDRUGBANK::treats::Compound:Disease\tDisease::D3\textra\n"}, "drkg.tsv", 2)])
def test_a_row_wider_than_the_first_names_its_file_and_line(tmp_path, reader, files, bad_file, line):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match="expected 3 tab-separated columns like the first line, found 4") as info:
        READERS[reader](tmp_path)
    assert info.value.path.endswith(bad_file) and info.value.line == line
    assert "truncate_ragged_lines" not in str(info.value)


def test_a_plain_file_with_a_line_past_the_bound_is_refused_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(reading_layer, "MAX_LINE_BYTES", 1 << 16)
    good = "Compound::DB2\tDRUGBANK::treats::Compound:Disease\tDisease::D2\n"
    (tmp_path / "drkg.tsv").write_text(good + "Compound::" + "x" * (1 << 17) + "\tR\tDisease::D3\n" + good)
    monkeypatch.setattr(pl, "read_csv", lambda *a, **k: pytest.fail("polars was given the file"))
    with pytest.raises(InputError, match=f"a line longer than {1 << 16} bytes") as info:
        READERS["drkg"](tmp_path)
    assert info.value.path.endswith("drkg.tsv") and info.value.line == 2
