"""Issue 63, item 8: every copy rule of every split kind, in both orientations, from the
definitions. A graph is planted with the copies a model could read an evaluation edge back from:
its reverse under the same relation, the same pair under a parent or a child relation (the pair in
the same orientation and reversed), its copy under a duplicate relation and its reverse under an
inverse one. After each split (rand, time, dated, entity, inductive), no evaluation edge is restated by
what a model reads (training; and for the inductive split, the inference graph too)."""
from collections import defaultdict

import numpy as np
import pytest
from click.testing import CliRunner

from openbench.cli import main
from tests.splits.reference import PARENT, loop_patterns

GENES = [f"NCBIGENE:{i}" for i in range(90)]
# GENE_ACTIVATION_GENE is a child of GENE_GENE; GENE_BINDING_GENE duplicates GENE_EXPRESSION_GENE
# (siblings: no hierarchy between them); GENE_REACTION_GENE is the inverse of GENE_PTMOD_GENE
PLANTED = ("GENE_GENE", "GENE_ACTIVATION_GENE", "GENE_BINDING_GENE", "GENE_EXPRESSION_GENE", "GENE_PTMOD_GENE",
           "GENE_REACTION_GENE")


def _planted_graph(seed: int):
    """(a, r, b) edges: every rule has many instances, the hierarchy in both orientations."""
    rng = np.random.default_rng(seed)
    pairs = sorted({(int(a), int(b)) for a, b in rng.integers(0, len(GENES), (1400, 2)) if a != b})
    edges = set()
    for index, (a, b) in enumerate(pairs):
        g, h = GENES[a], GENES[b]
        kind = index % 6
        if kind == 0:  # a reverse under the same relation
            edges |= {(g, "GENE_GENE", h), (h, "GENE_GENE", g)}
        elif kind == 1:  # parent and child, same orientation
            edges |= {(g, "GENE_GENE", h), (g, "GENE_ACTIVATION_GENE", h)}
        elif kind == 2:  # parent and child, reversed
            edges |= {(g, "GENE_GENE", h), (h, "GENE_ACTIVATION_GENE", g)}
        elif kind == 3:  # duplicates
            edges |= {(g, "GENE_BINDING_GENE", h), (g, "GENE_EXPRESSION_GENE", h)}
        elif kind == 4:  # inverses
            edges |= {(g, "GENE_PTMOD_GENE", h), (h, "GENE_REACTION_GENE", g)}
        else:
            edges.add((g, "GENE_GENE", h))
    return sorted(edges)


def _write(folder, edges):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "edges.csv").write_text("".join(f"{a}\t{r}\t{b}\t\tplanted\n" for a, r, b in edges))
    (folder / "TN_edges.csv").write_text("")
    (folder / "ALL_nodes.csv").write_text("".join(f"{g}\tGENE\n" for g in GENES))
    return folder


def _patterns(*sources):
    """The duplicate and inverse partners of each relation in any of ``sources`` (edge lists),
    by the audit's definitions (:func:`tests.splits.reference.loop_patterns`)."""
    duplicates, inverses = defaultdict(set), defaultdict(set)
    for source in sources:
        found_duplicates, found_inverses, _ = loop_patterns([(a, r, b, "1") for a, r, b in source])
        for mine, found in ((duplicates, found_duplicates), (inverses, found_inverses)):
            for relation, partners in found.items():
                mine[relation] |= partners
    return duplicates, inverses, set()


def _restated(evaluation, readable, patterns, directed=True):
    """Evaluation edges a model could read back from ``readable`` (the definitions, with sets)."""
    duplicates, inverses, _ = patterns
    readable_set = set(readable)
    by_pair = defaultdict(set)
    for a, r, b in readable:
        by_pair[frozenset((a, b))].add(r)
    found = []
    for a, r, b in evaluation:
        family = {other for other in by_pair[frozenset((a, b))] if other != r
                  and (other == PARENT.get(r) or PARENT.get(other) == r)}
        if ((directed and (b, r, a) in readable_set) or family
                or any((a, other, b) in readable_set for other in duplicates[r])
                or any((b, other, a) in readable_set for other in inverses[r])):
            found.append((a, r, b))
    return found


def _lines(path):
    return [tuple(line.split("\t")[:3]) for line in path.read_text().splitlines() if line] if path.is_file() else []


def _positives(path):
    return [tuple(fields[:3]) for fields in (line.split("\t") for line in path.read_text().splitlines() if line)
            if len(fields) < 5 or fields[4] == "1"] if path.is_file() else []


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("planted")
    edges = _planted_graph(3)
    graph = _write(root / "graph", edges)
    rng = np.random.default_rng(4)
    older = [edge for edge in edges if rng.random() > 0.1]  # the t-1 graph: a tenth of the edges are new at t
    tmo = _write(root / "tmo", older)
    # the same graph with a date per edge: about a tenth after the cut-off (2020-06-30), a twentieth
    # between the validation cut-off and it, and a few undated
    days = rng.integers(0, 2000, len(edges))
    dated = ["head\trelation\ttail\tdate"] + [
        f"{a}\t{r}\t{b}\t" + ("" if day % 97 == 0 else (np.datetime64("2015-07-01") + int(day)).astype(str))
        for (a, r, b), day in zip(edges, days)]
    (root / "graph" / "dated.tsv").write_text("\n".join(dated) + "\n")
    patterns = _patterns(edges)
    assert "GENE_EXPRESSION_GENE" in patterns[0]["GENE_BINDING_GENE"]
    assert "GENE_REACTION_GENE" in patterns[1]["GENE_PTMOD_GENE"]
    return root, graph, tmo, edges, patterns


def _files(folder):
    return ["--edges", str(folder / "edges.csv"), "--tn-edges", str(folder / "TN_edges.csv"), "--nodes",
            str(folder / "ALL_nodes.csv")]


def _split(kind, planted, out):
    root, graph, tmo, _, _ = planted
    # evaluation shares small enough that training keeps each planted pattern above the audit's 80 %
    command = {"rand": ["split", "rand", *_files(graph), "--test-frac", "0.1", "--val", "0.05"],
               "time": ["split", "time", *_files(graph), "--tmo-edges", str(tmo / "edges.csv"), "--tmo-tn-edges",
                        str(tmo / "TN_edges.csv"), "--tmo-nodes", str(tmo / "ALL_nodes.csv"), "--val", "0.05"],
               # held-out relations whose copies live under other relations, which training keeps
               "dated": ["split", "time", "--edges", str(graph / "dated.tsv"), "--nodes", str(graph / "ALL_nodes.csv"),
                         "--cutoff", "2020-06-30", "--valid-cutoff", "2020-04-30"],
               "entity": ["split", "entity", *_files(graph), "--node-type", "GENE", "--fraction", "0.15",
                          "--val-fraction", "0.1", "--relations", "GENE_GENE,GENE_BINDING_GENE,GENE_PTMOD_GENE"],
               "inductive": ["split", "inductive", "--edges", str(graph / "edges.csv"), "--inference-fraction",
                             "0.3", "--test-fraction", "0.2", "--val-fraction", "0.1"]}[kind]
    done = CliRunner().invoke(main, [*command, "--seed", "5", "--output", str(out)])
    assert done.exit_code == 0, done.output
    if kind == "inductive":
        read = _lines(out / "train.txt") + _lines(out / "inference.txt")
        evaluated = _lines(out / "inference_test.txt") + _lines(out / "inference_validation.txt")
        return read, evaluated, _patterns(read)
    read = _positives(out / "train_sample.csv")
    validation = _positives(out / "val_sample.csv")
    evaluated = _positives(out / "test_sample.csv") + validation
    # whose patterns each split documents it cleans with: rand every non-test row, time its
    # training, entity the whole graph's and training's
    sources = {"rand": [read + validation], "time": [read], "dated": [read], "entity": [planted[3], read]}[kind]
    return read, evaluated, _patterns(*sources)


def _instances(evaluated, graph_edges, patterns):
    """How many evaluation edges the full graph restates, per rule and orientation: the planted
    copies really met the split (else the property below would hold trivially)."""
    graph = set(graph_edges)
    duplicates, inverses, _ = patterns
    counts = defaultdict(int)
    for a, r, b in evaluated:
        counts["reverse"] += (b, r, a) in graph
        for other in PARENT:
            if other != r and (other == PARENT.get(r) or PARENT.get(other) == r):
                counts["family, same orientation"] += (a, other, b) in graph
                counts["family, reversed"] += (b, other, a) in graph
        counts["duplicate"] += any((a, other, b) in graph for other in duplicates[r])
        counts["inverse"] += any((b, other, a) in graph for other in inverses[r])
    return counts


@pytest.mark.parametrize("kind", ["rand", "time", "dated", "entity", "inductive"])
def test_no_split_kind_leaves_an_evaluation_edge_restated_in_either_orientation(planted, tmp_path, kind):
    read, evaluated, patterns = _split(kind, planted, tmp_path / kind)
    edges = planted[3]
    assert evaluated and read
    assert patterns[0]["GENE_BINDING_GENE"] and patterns[1]["GENE_PTMOD_GENE"], kind  # each rule applies
    assert _restated(evaluated, read, patterns) == []
    if kind == "entity":  # the held-out edges keep their copies in the graph: each rule met them
        met = _instances(evaluated, edges, planted[4])
        assert all(met[rule] > 0 for rule in ("reverse", "family, same orientation", "family, reversed",
                                              "duplicate", "inverse")), dict(met)


@pytest.mark.parametrize("kind", ["rand", "time", "dated", "inductive"])
def test_the_removed_evaluation_edges_were_restated(planted, tmp_path, kind):
    """The splits that clean the evaluation sets removed edges under each rule (counted in
    split_info.json), so the planted copies did reach them."""
    import json

    _split(kind, planted, tmp_path / kind)
    info = json.loads((tmp_path / kind / "split_info.json").read_text())
    text = json.dumps(info)
    for key in ("hierarchy", "reverse", "pattern"):
        assert key in text, (kind, key)
