"""Issue 63, items 3 and 5: a label no split file can hold (a tab or a line break, read from a
comma-separated input) is refused by every writer with its file and line before anything is
written; a node listed with two types is refused naming both lines (the same type twice is one
node)."""
import pytest
from click.testing import CliRunner

from openbench.cli import main
from tests.helpers import snapshot

GENES = [f"NCBIGENE:{i}" for i in range(1, 41)]


def _graph(folder, bad_edge=None, bad_node=None, twice=None):
    """A comma-separated GENE_GENE graph: edges, true negatives, nodes; ``bad_edge`` replaces the
    head of edge line 7, ``bad_node`` the id of node line 5, ``twice`` adds a node line (id, type)."""
    folder.mkdir(parents=True, exist_ok=True)
    edges = [(GENES[i], "GENE_GENE", GENES[(i * step + 3) % len(GENES)]) for step in (5, 7, 11)
             for i in range(len(GENES))]
    edges = [edge for edge in dict.fromkeys(edges) if edge[0] != edge[2]]
    if bad_edge is not None:
        edges[6] = (bad_edge, *edges[6][1:])
    nodes = [(gene, "GENE") for gene in GENES]
    if bad_node is not None:
        nodes[4] = (bad_node, "GENE")
    if twice is not None:
        nodes.append(twice)
    (folder / "edges.csv").write_text("".join(f"{h},{r},{t},,STRING\n" for h, r, t in edges))
    (folder / "tn.csv").write_text(f"{GENES[0]},GENE_GENE,{GENES[-1]},,NEG\n")
    (folder / "nodes.csv").write_text("".join(f"{n},{kind}\n" for n, kind in nodes))
    (folder / "TN_edges.csv").write_bytes((folder / "tn.csv").read_bytes())  # the names export reads
    (folder / "TN_nodes.csv").write_bytes((folder / "nodes.csv").read_bytes())
    return folder


def _commands(graph, out):
    files = ["--edges", str(graph / "edges.csv"), "--tn-edges", str(graph / "tn.csv"), "--nodes",
             str(graph / "nodes.csv")]
    older = ["--tmo-edges", str(graph / "edges.csv"), "--tmo-tn-edges", str(graph / "tn.csv"), "--tmo-nodes",
             str(graph / "nodes.csv")]
    (graph / "held.txt").write_text(f"{GENES[2]}\n")
    return {"rand": ["split", "rand", *files, "--test-frac", "0.2", "--sep", ",", "--output", str(out)],
            "time": ["split", "time", *files, *older, "--sep", ",", "--output", str(out)],
            "entity": ["split", "entity", *files, "--entities", str(graph / "held.txt"), "--sep", ",",
                       "--output", str(out)],
            "inductive": ["split", "inductive", "--edges", str(graph / "edges.csv"), "--sep", ",",
                          "--inference-fraction", "0.5", "--test-fraction", "0.3", "--output", str(out)],
            "export": ["export", "--graph", str(graph), "--sep", ",", "--format", "PARQUET", "--output", str(out)]}


KINDS = ["rand", "time", "entity", "inductive"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("label", ["NCBIGENE:1\tx", "NCBIGENE:1\rx"])
def test_a_label_holding_a_tab_or_line_break_is_refused_with_file_and_line(tmp_path, kind, label):
    graph = _graph(tmp_path / "graph", bad_edge=label)
    out = tmp_path / "out"
    command = _commands(graph, out)[kind]
    before = snapshot(graph)
    done = CliRunner().invoke(main, command)
    assert done.exit_code == 1, done.output
    assert f"{graph / 'edges.csv'}, line 7: id1" in done.output and "holds a tab or a line break" in done.output
    assert len(done.output.strip().splitlines()) == 1
    assert not out.exists() and snapshot(graph) == before


@pytest.mark.parametrize("kind", ["rand", "time", "entity"])
def test_a_node_label_holding_a_tab_is_refused(tmp_path, kind):
    graph = _graph(tmp_path / "graph", bad_node="NCBIGENE:99\tGENE")
    done = CliRunner().invoke(main, _commands(graph, tmp_path / "out")[kind])
    assert done.exit_code == 1 and f"{graph / 'nodes.csv'}, line 5: id" in done.output, done.output
    assert not (tmp_path / "out").exists()


def test_the_honest_comma_graph_splits_every_way(tmp_path):
    """The same files without the bad label: every kind writes well-formed six-column rows."""
    graph = _graph(tmp_path / "graph")
    for kind in KINDS:
        out = tmp_path / kind
        done = CliRunner().invoke(main, _commands(graph, out)[kind])
        assert done.exit_code == 0, (kind, done.output)
        for path in out.rglob("*.csv"):
            for line in path.read_text().splitlines():
                assert len(line.split("\t")) in (1, 2, 3, 6), (path, line)


@pytest.mark.parametrize("kind", ["rand", "time", "entity", "export"])
def test_a_node_with_two_types_is_refused_naming_both_lines(tmp_path, kind):
    graph = _graph(tmp_path / "graph", twice=(GENES[3], "GENE_OTHER"))
    done = CliRunner().invoke(main, _commands(graph, tmp_path / "out")[kind])
    assert done.exit_code == 1, done.output
    assert (f"node '{GENES[3]}' is listed with two types, 'GENE' (line 4) and 'GENE_OTHER'" in done.output
            and f"{graph / 'nodes.csv'}, line {len(GENES) + 1}" in done.output), done.output
    assert not (tmp_path / "out").exists()


def test_a_node_listed_twice_with_one_type_is_one_node(tmp_path):
    graph = _graph(tmp_path / "graph", twice=(GENES[3], "GENE"))
    done = CliRunner().invoke(main, _commands(graph, tmp_path / "out")["rand"])
    assert done.exit_code == 0, done.output


@pytest.mark.parametrize("sep, label", [(",", "DOID:1,2")])
def test_the_integer_id_writer_refuses_a_label_it_cannot_write_before_writing(tmp_path, sep, label):
    from openbench.datasets.loader import load_dataset, write_id_layout
    from openbench.errors import InputError
    from tests.helpers import write_samples

    splits = {"train": [("DOID:0", "R", label), (label, "R", "DOID:3"), ("DOID:0", "R", "DOID:3")],
              "valid": [], "test": [("DOID:3", "R", "DOID:0")]}
    dataset = load_dataset(write_samples(tmp_path / "split", splits, negatives=False))
    row = dataset.entity_labels.index(label)
    with pytest.raises(InputError, match=rf"entities.tsv, line {row + 1}: label .* holds the separator"):
        write_id_layout(dataset, tmp_path / "kgid", sep=sep)
    assert not (tmp_path / "kgid").exists()
