"""Leakage removal against plain-loop references, on hand cases and hypothesis-generated graphs."""
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from graphgen.edge_types import EDGE_TYPES
from splits.leakage import drop_hierarchy_leakage, drop_reverse_edges, drop_unseen_nodes, drop_unseen_relations

COLUMNS = ["id1", "relation", "id2", "qscore", "value", "source"]


def frame(rows):
    return pl.DataFrame([(a, r, b, "", v, "S") for a, r, b, v in rows], schema={c: pl.String for c in COLUMNS},
                        orient="row")


def test_hand_cases():
    train = frame([("G1", "GENE_DRUG", "D1", "1"), ("G2", "GENE_BINDING_GENE", "G3", "1"), ("G4", "IS_A", "G5", "1")])
    evaluation = frame([("D1", "DRUG_BINDING_GENE", "G1", "1"),   # child of GENE_DRUG, pair reversed: leak
                        ("G3", "GENE_GENE", "G2", "1"),           # parent of GENE_BINDING_GENE: leak
                        ("G2", "GENE_ACTIVATION_GENE", "G3", "1"),  # sibling: no leak
                        ("G5", "IS_A", "G4", "1"),                # reverse edge: not hierarchy
                        ("D1", "DRUG_BINDING_GENE", "G1", "0"),   # other value: no leak
                        ("G5", "IS_A", "G4", "0")])               # reverse edge with the other value: kept
    kept, removed = drop_hierarchy_leakage(evaluation, train)
    assert removed.select("id1", "relation", "id2").rows() == [("D1", "DRUG_BINDING_GENE", "G1"),
                                                             ("G3", "GENE_GENE", "G2")]
    assert kept.height == 4
    kept, removed = drop_reverse_edges(evaluation, train)
    assert removed.select("id1", "relation", "id2", "value").rows() == [("G5", "IS_A", "G4", "1")]
    assert ("G5", "IS_A", "G4", "0") in kept.select("id1", "relation", "id2", "value").rows()
    kept, unseen = drop_unseen_nodes(frame([("G1", "GENE_GENE", "G9", "1"), ("G1", "GENE_GENE", "G2", "1")]), train)
    assert kept.height == 1 and unseen.to_list() == ["G9"]
    with_negative = pl.concat([train, frame([("G9", "GENE_GENE", "G1", "0")])])  # G9 only in a training negative
    evaluation = frame([("G1", "GENE_GENE", "G9", "1")])
    assert drop_unseen_nodes(evaluation, with_negative, "positives")[0].height == 0
    assert drop_unseen_nodes(evaluation, with_negative, "any")[0].height == 1


RELATIONS = ["GENE_GENE", "GENE_BINDING_GENE", "GENE_ACTIVATION_GENE", "GENE_DRUG", "DRUG_BINDING_GENE", "IS_A"]
rows = st.lists(st.tuples(st.sampled_from(["A", "B", "C", "D"]), st.sampled_from(RELATIONS),
                          st.sampled_from(["A", "B", "C", "D"]), st.sampled_from(["0", "1"])), max_size=25)


@settings(max_examples=80, deadline=None)
@given(rows, rows)
def test_against_loop_references(train_rows, eval_rows):
    train, evaluation = frame(train_rows), frame(eval_rows)
    parent = {name: edge.parent for name, edge in EDGE_TYPES.items()}
    train_set = set(train_rows)

    def leaks(a, r, b, v):
        for ta, tr, tb, tv in train_set:
            if tv == v and {ta, tb} == {a, b} and tr != r and (tr == parent[r] or parent[tr] == r):
                return True
        return False

    kept, removed = drop_hierarchy_leakage(evaluation, train)
    expected_removed = [row for row in eval_rows if leaks(*row)]
    assert removed.select("id1", "relation", "id2", "value").rows() == expected_removed
    assert kept.height + removed.height == evaluation.height
    kept, removed = drop_reverse_edges(evaluation, train)
    assert removed.select("id1", "relation", "id2", "value").rows() == [
        (a, r, b, v) for a, r, b, v in eval_rows if (b, r, a, v) in train_set]
    for rule in ("positives", "any"):
        kept, unseen = drop_unseen_nodes(evaluation, train, rule)
        seen = {n for a, _, b, v in train_rows for n in (a, b) if rule == "any" or v == "1"}
        assert kept.select("id1", "relation", "id2", "value").rows() == [
            row for row in eval_rows if row[0] in seen and row[2] in seen]
        assert unseen.to_list() == sorted({n for a, _, b, _ in eval_rows for n in (a, b)} - seen)
        kept, dropped = drop_unseen_relations(evaluation, train, rule)
        relations = {r for _, r, _, v in train_rows if rule == "any" or v == "1"}
        assert kept.select("id1", "relation", "id2", "value").rows() == [row for row in eval_rows if row[1] in relations]
        assert dropped == sum(1 for row in eval_rows if row[1] not in relations)
