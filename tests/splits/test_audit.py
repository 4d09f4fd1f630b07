"""The leakage audit on graphs with every kind of leak planted (and none), exact counts."""
import json

import pytest
from click.testing import CliRunner

from openbench.cli import main
from splits.audit import REPORT_KEYS, SCHEMA_VERSION, audit


def _write(path, triples):
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples))
    return path


def _e(i):
    return f"E:{i}"


# every pattern once: "sym" stored both ways, fwd/bwd inverse, dupA ~ dupB, "cart" a full product,
# one self-loop, one repeated row
PLANTED = ([(_e(a), "sym", _e(b)) for a, b in ((0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4))]
           + [(_e(a), "fwd", _e(b)) for a, b in ((0, 2), (1, 3), (4, 6), (5, 7))]
           + [(_e(b), "bwd", _e(a)) for a, b in ((0, 2), (1, 3), (4, 6), (5, 7))]
           + [(_e(a), "dupA", _e(9)) for a in range(4)] + [(_e(4), "dupA", _e(8))]
           + [(_e(a), "dupB", _e(9)) for a in range(4)]
           + [(_e(a), "cart", _e(b)) for a in (0, 1, 2) for b in (7, 8)]
           + [(_e(5), "loop", _e(5)), (_e(0), "fwd", _e(2))])


def test_every_planted_pattern_is_found_with_exact_counts(tmp_path):
    report = audit(_write(tmp_path / "graph.tsv", PLANTED))
    assert report["schema_version"] == SCHEMA_VERSION and set(REPORT_KEYS) <= set(report)
    assert report["input"]["triples"] == {"graph": len(PLANTED)} and report["patterns_from"] == "graph"
    assert report["duplicates"]["count"] == 1 and report["duplicates"]["examples"] == [["E:0", "fwd", "E:2"]]
    assert report["self_loops"]["count"] == 1 and report["self_loops"]["by_relation"] == {
        "loop": {"count": 1, "fraction": 1.0}}
    reverse = report["reverse_duplicates"]
    assert (reverse["count"], reverse["pairs"]) == (6, 3)
    assert reverse["by_relation"] == {"sym": {"count": 6, "fraction": 1.0}}
    assert report["inverse_pairs"] == [{"relation": "bwd", "inverse": "fwd", "shared": 4, "coverage": 1.0,
                                        "converse_coverage": 1.0}]
    assert report["duplicate_relations"] == [{"relation": "dupA", "duplicate": "dupB", "shared": 4,
                                              "coverage": 0.8, "converse_coverage": 1.0}]
    assert report["symmetric_relations"] == [{"relation": "sym", "coverage": 1.0, "triples": 6}]
    assert report["cartesian_relations"] == [{"relation": "cart", "density": 1.0, "heads": 3, "tails": 2,
                                              "triples": 6}]
    assert report["trivially_inferable"] is None and report["unseen"] is None  # a graph, not a split


def test_a_threshold_above_a_coverage_drops_the_pattern(tmp_path):
    """dupA ~ dupB covers 80 % of dupA and 100 % of dupB: reported while either share reaches θ."""
    path = _write(tmp_path / "graph.tsv", PLANTED)
    assert audit(path, 0.8)["duplicate_relations"] and audit(path, 1.0)["duplicate_relations"]
    without_b = [row for row in PLANTED if row[1] != "dupB"] + [(_e(a), "dupB", _e(9)) for a in range(3)] \
        + [(_e(7), "dupB", _e(6)), (_e(6), "dupB", _e(5))]  # 3 of dupB's 5, 3 of dupA's 5
    assert audit(_write(tmp_path / "other.tsv", without_b), 0.8)["duplicate_relations"] == []
    assert audit(_write(tmp_path / "other.tsv", without_b), 0.6)["duplicate_relations"][0]["shared"] == 3


def test_a_clean_graph_reports_nothing(tmp_path):
    clean = [(_e(i), "r", _e(i + 1)) for i in range(20)] + [(_e(i), "s", _e(i + 3)) for i in range(0, 20, 2)]
    report = audit(_write(tmp_path / "clean.tsv", clean))
    assert report["duplicates"]["count"] == report["self_loops"]["count"] == report["reverse_duplicates"]["count"] == 0
    for key in ("inverse_pairs", "duplicate_relations", "symmetric_relations", "cartesian_relations"):
        assert report[key] == [], key


def _split(folder, splits):
    folder.mkdir()
    names = {"train": "train_sample.csv", "valid": "val_sample.csv", "test": "test_sample.csv"}
    for split, triples in splits.items():
        (folder / names[split]).write_text("".join(f"{h}\t{r}\t{t}\t0\t1\tx\n" for h, r, t in triples))
    return folder


SPLIT = {
    "train": [(_e(a), "fwd", _e(b)) for a, b in ((0, 2), (1, 3), (4, 6), (5, 7))]
    + [(_e(b), "bwd", _e(a)) for a, b in ((0, 2), (1, 3), (4, 6))]
    + [(_e(a), "sym", _e(b)) for a, b in ((0, 1), (1, 0), (2, 3), (3, 2), (4, 5))]
    + [(_e(a), "dupA", _e(9)) for a in range(5)] + [(_e(a), "dupB", _e(9)) for a in range(4)]
    + [("NCBIGENE:1", "GENE_DRUG", "PUBCHEM.COMPOUND:2"), (_e(8), "fwd", _e(9))],
    "valid": [(_e(0), "sym", _e(2))],
    "test": [(_e(7), "bwd", _e(5)),  # fwd (5, 7) in training: an inverse partner
             (_e(5), "sym", _e(4)),  # its reverse in training
             (_e(4), "dupB", _e(9)),  # dupA (4, 9) in training
             (_e(0), "fwd", _e(2)),  # in training itself, and bwd (2, 0)
             ("PUBCHEM.COMPOUND:2", "DRUG_ACTIVATION_GENE", "NCBIGENE:1"),  # its parent GENE_DRUG on the pair
             (_e(3), "fwd", _e(9)), (_e(3), "fwd", _e(9)),  # clean, stored twice
             (_e(0), "fwd", "E:new")],  # an entity training never saw
}


def test_a_split_reports_what_training_answers_trivially(tmp_path):
    report = audit(_split(tmp_path / "split", SPLIT))
    assert report["input"]["layout"] == "split" and report["patterns_from"] == "train"
    test = report["trivially_inferable"]["test"]
    assert test["triples"] == 7 and test["count"] == 5  # distinct triples; 5 answered by training
    assert test["by_rule"] == {"in_training": 1, "reverse_duplicate": 1, "inverse_relation": 2,
                               "duplicate_relation": 1, "super_property": 1}
    assert test["by_relation"]["fwd"] == {"triples": 3, "count": 1, "fraction": 1 / 3,
                                          "by_rule": {"in_training": 1, "reverse_duplicate": 0, "inverse_relation": 1,
                                                      "duplicate_relation": 0, "super_property": 0}}
    assert "DRUG_ACTIVATION_GENE" in test["by_relation"]
    assert report["trivially_inferable"]["valid"]["count"] == 0
    assert report["duplicates"]["by_split"] == {"train": 0, "valid": 0, "test": 1}
    # the hierarchy leak's relation is itself new to training (its parent is not)
    assert report["unseen"]["test"] == {"entities": 1, "relations": 1, "triples": 2, "fraction": 2 / 8,
                                        "examples": [["E:0", "fwd", "E:new"],
                                                     ["PUBCHEM.COMPOUND:2", "DRUG_ACTIVATION_GENE", "NCBIGENE:1"]]}
    assert report["unseen"]["valid"]["triples"] == 0


def test_the_sample_split_of_openbench_has_nothing_trivially_inferable(tmp_path):
    """openbench's own splitter removes reverse edges and hierarchy leaks: its sample split's audit
    finds no test triple training answers through those patterns or holds itself."""
    from splits.random_split import random_split
    from tests.bases import sample_graph

    positives, negatives, nodes = sample_graph(tmp_path / "graph")
    random_split(positives, negatives, nodes, tmp_path / "split", seed=0)
    report = audit(tmp_path / "split")
    assert report["input"]["triples"]["test"] > 10
    for split in ("valid", "test"):
        by_rule = report["trivially_inferable"][split]["by_rule"]
        assert report["trivially_inferable"][split]["count"] == 0 and set(by_rule.values()) == {0}, split
        assert report["unseen"][split]["triples"] == 0


def test_audit_command_writes_the_json_schema_and_a_table(tmp_path):
    path = _write(tmp_path / "graph.tsv", PLANTED)
    done = CliRunner().invoke(main, ["audit", str(path), "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == audit(path)
    table = CliRunner().invoke(main, ["audit", str(path)])
    assert table.exit_code == 0 and "reverse duplicates: 6" in table.output and "bwd ~ fwd" in table.output


@pytest.mark.parametrize("content, expected", [("a\tb\n", "expected 3"), ("", "no triples"),
                                               ("a\tb\tc\td\n", "expected 3")])
def test_bad_triples_files_are_one_clear_line(tmp_path, content, expected):
    path = tmp_path / "bad.tsv"
    path.write_text(content)
    done = CliRunner().invoke(main, ["audit", str(path)])
    assert done.exit_code == 1 and str(path) in done.output and expected in done.output, done.output


def _primekg_layout_rows():
    """PrimeKG's kg.csv rows (the fixture's), keyed as openbench reads PrimeKG: an entity is its
    x_type, x_source and x_id (names collide), and every edge stored twice, x and y swapped, as
    the published file stores it (build_graph.ipynb: kg_rev concatenated)."""
    import polars as pl

    from tests.helpers import fixture

    verbatim = pl.read_csv(fixture("kgs", "primekg", "kg.head6.verbatim.csv"), infer_schema=False)
    transcribed = pl.read_csv(fixture("kgs", "primekg", "kg.rows.from-autism-notebook.csv"),
                              infer_schema=False).drop("notebook_cell", "dataframe_row_index")
    rows = pl.concat([verbatim, transcribed])
    entity = {side: pl.concat_str([pl.col(f"{side}_type"), pl.col(f"{side}_source"), pl.col(f"{side}_id")],
                                  separator="::") for side in ("x", "y")}
    forward = rows.select(entity["x"].alias("h"), pl.col("relation").alias("r"), entity["y"].alias("t"))
    return pl.concat([forward, forward.select(pl.col("t").alias("h"), "r", pl.col("h").alias("t"))]).unique().rows()


def test_a_naive_random_split_of_a_primekg_layout_excerpt_leaks_its_reverse_copies(tmp_path):
    import random

    rows = sorted(_primekg_layout_rows())
    graph = audit(_write(tmp_path / "primekg.tsv", rows))
    assert graph["reverse_duplicates"]["count"] == len(rows)  # every edge has its swapped copy
    assert {item["relation"] for item in graph["symmetric_relations"]} == set(graph["reverse_duplicates"]["by_relation"])
    random.Random(0).shuffle(rows)  # a triple-level random split, as PyKEEN's loader makes of PrimeKG
    cut = len(rows) // 5
    train = rows[cut:]
    seen = {e for h, _, t in train for e in (h, t)}
    test = [row for row in rows[:cut] if row[0] in seen and row[2] in seen]
    report = audit(_split(tmp_path / "split", {"train": train, "test": test}))
    leaked = {(t, r, h) for h, r, t in test} & set(train)
    assert report["trivially_inferable"]["test"]["by_rule"]["reverse_duplicate"] == len(leaked) > 0
    kept = set(train) | set(test)  # test rows with an entity training lacks were left out
    assert report["reverse_duplicates"]["count"] == sum((t, r, h) in kept for h, r, t in kept)


def test_the_library_refuses_a_threshold_outside_zero_one_and_a_split_without_training(tmp_path):
    from openbench.errors import InputError
    from splits.audit import AuditInput, audit_frames

    path = _write(tmp_path / "graph.tsv", PLANTED)
    for threshold in (0.0, -0.1, 1.01):
        with pytest.raises(InputError, match="threshold"):
            audit(path, threshold)
    assert audit(path, 1.0)["threshold"] == 1.0
    import polars as pl

    test_only = {"test": pl.DataFrame({"h": ["a"], "r": ["r"], "t": ["b"]})}
    with pytest.raises(InputError, match="without training triples"):
        audit_frames(AuditInput("x", "split", test_only))
    done = CliRunner().invoke(main, ["audit", str(path), "--threshold", "0"])
    assert done.exit_code == 2 and "threshold" in done.output.lower()


def test_a_file_with_a_line_past_the_bound_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    """Issue 49: the audit of a plain file with one 200 MB line exited 0 and wrote 210 MB of JSON."""
    from click.testing import CliRunner

    from openbench._io import inputs
    from openbench.cli import main

    monkeypatch.setattr(inputs, "MAX_LINE_BYTES", 4096)
    path = tmp_path / "triples.tsv"
    path.write_text("a\tR\tb\n" + "c" * 10_000 + "\tR\td\n" + "b\tR\tc\n")
    done = CliRunner().invoke(main, ["audit", str(path), "--format", "json"])
    assert done.exit_code == 1 and f"{path}, line 2: a line longer than 4096 bytes" in done.output, done.output
    assert len(done.output) < 400


# -- issue 56: every section against an independent set computation, both orientations ---------

HIERARCHY_SPLIT = {
    "train": [("PUBCHEM.COMPOUND:3", "GENE_DRUG", "NCBIGENE:4"),  # parent, same orientation as a test child
              ("PUBCHEM.COMPOUND:6", "DRUG_BINDING_GENE", "NCBIGENE:5"),  # child, reversed against a test parent
              ("NCBIGENE:7", "GENE_DRUG", "PUBCHEM.COMPOUND:8"),  # parent, reversed against a test child
              ("PUBCHEM.COMPOUND:10", "DRUG_BINDING_GENE", "NCBIGENE:9"),  # child, same orientation as a test sibling
              ("NCBIGENE:11", "GENE_GENE", "NCBIGENE:12")],  # an unrelated relation on a test pair
    "test": [("PUBCHEM.COMPOUND:3", "DRUG_INHIBITION_GENE", "NCBIGENE:4"),
             ("NCBIGENE:5", "GENE_DRUG", "PUBCHEM.COMPOUND:6"),
             ("PUBCHEM.COMPOUND:8", "DRUG_ACTIVATION_GENE", "NCBIGENE:7"),
             ("PUBCHEM.COMPOUND:10", "DRUG_INHIBITION_GENE", "NCBIGENE:9"),  # siblings: not parent and child
             ("NCBIGENE:11", "GENE_DRUG", "NCBIGENE:12"),
             ("PUBCHEM.COMPOUND:3", "DRUG_BINDING_GENE", "NCBIGENE:99")],  # a related relation on another pair
}


def _super_property_reference(splits):
    """{relation: count} of test triples whose unordered pair training holds under the relation's
    parent or one of its children (OpenBioLink's edge-type hierarchy)."""
    from graphgen.edge_types import EDGE_TYPES

    related = {(name, edge.parent) for name, edge in EDGE_TYPES.items() if edge.parent != name}
    related |= {(parent, child) for child, parent in related}
    training = {(r, frozenset((h, t))) for h, r, t in splits["train"]}
    counts = {}
    for h, r, t in set(splits["test"]):
        hit = any((r, r2) in related and (r2, frozenset((h, t))) in training for r2 in {x for x, _ in training})
        counts[r] = counts.get(r, 0) + int(hit)
    return counts


def test_super_property_leakage_is_found_in_both_orientations(tmp_path):
    report = audit(_split(tmp_path / "split", {**HIERARCHY_SPLIT, "valid": []}))
    test = report["trivially_inferable"]["test"]
    expected = _super_property_reference(HIERARCHY_SPLIT)
    assert sum(expected.values()) == 3  # the same orientation, and reversed each way
    assert test["by_rule"]["super_property"] == 3
    for relation, count in expected.items():
        found = test["by_relation"].get(relation, {}).get("by_rule", {}).get("super_property", 0)
        assert found == count, relation


def test_a_graph_storing_every_edge_both_ways_is_all_reverse_copies(tmp_path):
    """``reverse_duplicates.fraction`` is the share of distinct triples whose reverse is stored:
    1.0 here, as ``by_relation`` says (halved it read 0.5)."""
    edges = [(_e(a), r, _e(b)) for a, b, r in ((0, 1, "x"), (2, 3, "x"), (4, 5, "y"), (1, 2, "y"), (6, 9, "x"))]
    both = edges + [(t, r, h) for h, r, t in edges]
    reverse = audit(_write(tmp_path / "both.tsv", both))["reverse_duplicates"]
    distinct = set(both)
    affected = {(h, r, t) for h, r, t in distinct if h != t and (t, r, h) in distinct}
    assert reverse["count"] == len(affected) == 10 and reverse["pairs"] == 5
    assert reverse["fraction"] == len(affected) / len(distinct) == 1.0
    assert reverse["by_relation"] == {"x": {"count": 6, "fraction": 1.0}, "y": {"count": 4, "fraction": 1.0}}
    half = edges + [(t, r, h) for h, r, t in edges[:2]]  # two of five stored both ways
    reverse = audit(_write(tmp_path / "half.tsv", half))["reverse_duplicates"]
    assert reverse["count"] == 4 and reverse["fraction"] == 4 / 7


def test_the_rules_baselines_answers_are_the_patterns_definitions(tmp_path):
    """implied_triples: the reverse of each triple of a symmetric relation, the reverse of each
    inverse partner's triple, each duplicate partner's triple, against sets built from PLANTED's
    pattern definitions; the rules model ranks a symmetric relation's reverses first."""
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.rules import rules_model
    from splits.audit import implied_triples

    train_triples = PLANTED + [(_e(6), "sym", _e(7))]  # sym: 6 of 7 triples stored both ways, coverage 0.86
    folder = _split(tmp_path / "split", {"train": train_triples, "valid": [], "test": [(_e(7), "sym", _e(6))]})
    dataset = load_dataset(folder)
    report = audit(folder)
    assert [item["relation"] for item in report["symmetric_relations"]] == ["sym"]
    index = {label: i for i, label in enumerate(dataset.relation_labels)}
    train = {(h, r, t) for h, r, t in dataset.triples["train"].tolist()}
    expected = set()
    for item in report["symmetric_relations"]:
        expected |= {(t, r, h) for h, r, t in train if r == index[item["relation"]]}
    for item in report["inverse_pairs"]:
        r, partner = index[item["relation"]], index[item["inverse"]]
        expected |= {(t, r, h) for h, r2, t in train if r2 == partner}
        expected |= {(t, partner, h) for h, r2, t in train if r2 == r}
    for item in report["duplicate_relations"]:
        r, partner = index[item["relation"]], index[item["duplicate"]]
        expected |= {(h, r, t) for h, r2, t in train if r2 == partner}
        expected |= {(h, partner, t) for h, r2, t in train if r2 == r}
    implied = {tuple(row) for row in implied_triples(dataset.triples["train"], dataset.relation_labels).tolist()}
    assert implied == expected and len(expected) > len(train & expected)
    # the test triple is the reverse of a training triple of the symmetric relation: ranked first both ways
    record = evaluate(dataset, rules_model(dataset), device="cpu")
    assert record.metric("both.realistic.mrr") == 1.0
