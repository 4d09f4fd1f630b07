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


def _reference_patterns(rows, threshold=0.8, involving=None):
    """The audit's pair and symmetric patterns by plain set arithmetic over distinct positive triples:
    for relations r < r2 (label order), the node pairs of r that r2 holds again reversed (inverse) or
    as they are (duplicate), listed when either relation's share reaches the threshold."""
    triples = {(a, r, b) for a, r, b, v in rows if v == "1"}
    by_relation = {}
    for a, r, b in triples:
        by_relation.setdefault(r, set()).add((a, b))
    names = sorted(by_relation)
    keep = (lambda *rs: True) if involving is None else (lambda *rs: any(r in involving for r in rs))
    found = {"inverse_pairs": [], "duplicate_relations": [], "symmetric_relations": []}
    for key, partner, turn in (("inverse_pairs", "inverse", True), ("duplicate_relations", "duplicate", False)):
        for i, r in enumerate(names):
            for r2 in names[i + 1:]:
                other = {(b, a) for a, b in by_relation[r2]} if turn else by_relation[r2]
                shared = len(by_relation[r] & other)
                coverage, converse = shared / len(by_relation[r]), shared / len(by_relation[r2])
                if shared and max(coverage, converse) >= threshold and keep(r, r2):
                    found[key].append({"relation": r, partner: r2, "shared": shared, "coverage": coverage,
                                       "converse_coverage": converse})
        found[key].sort(key=lambda item: (-item["shared"], item["relation"], item[partner]))
    for r in names:
        pairs = by_relation[r]
        count = sum(1 for a, b in pairs if a != b and (b, a) in pairs)
        if count / len(pairs) >= threshold and keep(r):
            found["symmetric_relations"].append({"relation": r, "coverage": count / len(pairs), "triples": len(pairs)})
    return found


_PATTERN_ROWS = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["R1", "R2", "R3", "S"]),
                                   st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["1", "1", "0"])),
                         min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(rows=_PATTERN_ROWS, involving=st.one_of(st.none(), st.sets(st.sampled_from(["R1", "R2", "R3", "S", "X"]))),
       threshold=st.sampled_from([0.5, 0.8, 1.0]))
def test_relation_patterns_match_the_set_reference(rows, involving, threshold):
    """The split's relation patterns (entities compared by categorical code, optionally only the
    pairs and symmetry of ``involving`` relations, as the entity split asks of its training set)
    equal the plain-set reference, and the string-keyed audit's on the same triples."""
    from splits.audit import relation_patterns_of
    from splits.leakage import categorical_ids, relation_patterns

    table = categorical_ids(frame(rows))
    got = relation_patterns(table, threshold, involving=sorted(involving) if involving is not None else None)
    assert got == _reference_patterns(rows, threshold, involving)
    positives = [(a, r, b) for a, r, b, v in rows if v == "1"]
    if positives and involving is None:
        assert got == relation_patterns_of(pl.DataFrame(positives, schema=["h", "r", "t"], orient="row"), threshold)
