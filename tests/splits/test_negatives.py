"""Negative sampling: counts, true negatives first, never a known positive, seeded, independent siblings."""
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from graphgen.graph_files import SPLIT_COLUMNS as COLUMNS
from splits.negatives import sample_negatives

GENES = [f"NCBIGENE:{i}" for i in range(30)]
DRUGS = [f"PUBCHEM.COMPOUND:{i}" for i in range(20)]
NODES = pl.DataFrame({"id": GENES + DRUGS, "node_type": ["GENE"] * 30 + ["DRUG"] * 20})


def edges(rows, value="1", source="S"):
    return pl.DataFrame([(a, r, b, "", value, source) for a, r, b in rows], schema={c: pl.String for c in COLUMNS},
                        orient="row")


def test_true_negatives_first_then_generated():
    positives = edges([(DRUGS[0], "DRUG_BINDING_GENE", GENES[i]) for i in range(5)])
    tn = edges([(DRUGS[1], "DRUG_BINDING_GENE", GENES[1])], value="0", source="TN")
    negatives = sample_negatives(positives, tn, NODES, seed=1)
    assert negatives.height == 5
    assert negatives.row(0) == (DRUGS[1], "DRUG_BINDING_GENE", GENES[1], "", "0", "TN")
    assert set(negatives["source"][1:]) == {"GENERATED"}


def test_seeded_and_siblings_independent():
    positives = edges([(DRUGS[i % 20], rel, GENES[i % 30]) for i in range(40)
                       for rel in ("DRUG_BINDING_GENE", "DRUG_INHIBITION_GENE")])
    empty = edges([], value="0")
    first = sample_negatives(positives, empty, NODES, seed=3)
    assert first.equals(sample_negatives(positives, empty, NODES, seed=3))
    assert not first.equals(sample_negatives(positives, empty, NODES, seed=4))
    pairs = {rel: set(first.filter(pl.col("relation") == rel).select("id1", "id2").rows())
             for rel in ("DRUG_BINDING_GENE", "DRUG_INHIBITION_GENE")}
    assert len(pairs["DRUG_BINDING_GENE"] & pairs["DRUG_INHIBITION_GENE"]) < 10  # OpenBioLink: all 40 shared


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 19), st.sampled_from(["GENE_DRUG", "DRUG_BINDING_GENE"]),
                          st.integers(0, 29)), min_size=1, max_size=40), st.integers(0, 5))
def test_negatives_never_hit_a_positive_pair_of_the_family(rows, seed):
    positives = edges([(GENES[g], r, DRUGS[d]) if r == "GENE_DRUG" else (DRUGS[d], r, GENES[g]) for d, r, g in rows])
    negatives = sample_negatives(positives, edges([], value="0"), NODES, ratio=1.0, seed=seed)
    known = {frozenset((a, b)) for a, _, b in positives.select("id1", "relation", "id2").rows()}
    drawn = negatives.select("id1", "relation", "id2").rows()
    assert not any(frozenset((a, b)) in known for a, _, b in drawn)
    assert len(set(drawn)) == len(drawn)
    for relation in ("GENE_DRUG", "DRUG_BINDING_GENE"):
        expected = positives.filter(pl.col("relation") == relation).height
        assert negatives.filter(pl.col("relation") == relation).height == expected
    assert set(negatives["value"]) <= {"0"}


def test_gene_drug_negative_avoids_a_child_relation_positive_on_a_saturated_pool():
    """3 genes x 3 drugs: 7 pairs are DRUG_BINDING_GENE positives (a child of GENE_DRUG), one is a
    GENE_DRUG positive; the only pair free for a GENE_DRUG negative is the ninth."""
    genes, drugs = GENES[:3], DRUGS[:3]
    nodes = pl.DataFrame({"id": genes + drugs, "node_type": ["GENE"] * 3 + ["DRUG"] * 3})
    pairs = [(g, d) for g in genes for d in drugs]
    free, gene_drug, binding = pairs[4], pairs[0], [p for i, p in enumerate(pairs) if i not in (0, 4)]
    positives = edges([(gene_drug[0], "GENE_DRUG", gene_drug[1])] + [(d, "DRUG_BINDING_GENE", g) for g, d in binding])
    for seed in range(8):
        negatives = sample_negatives(positives, edges([], value="0"), nodes, seed=seed)
        drawn = negatives.filter(pl.col("relation") == "GENE_DRUG").select("id1", "id2").cast(pl.String).rows()
        assert drawn == [free], (seed, drawn)


def test_missing_node_types_are_reported(caplog):
    positives = edges([("HP:1", "DIS_PHENOTYPE", "HP:2")])
    nodes = pl.DataFrame({"id": ["HP:1", "HP:2"], "node_type": ["PHENOTYPE", "PHENOTYPE"]})
    with caplog.at_level("WARNING"):
        negatives = sample_negatives(positives, edges([], value="0"), nodes)
    assert negatives.height == 0
    assert "only 0 of 1 random negatives could be drawn" in caplog.text
    positives = edges([(GENES[0], "GENE_DRUG", DRUGS[0])])
    genes_only = NODES.filter(pl.col("node_type") == "GENE")
    with caplog.at_level("WARNING"):
        assert sample_negatives(positives, edges([], value="0"), genes_only).height == 0
    assert "GENE_GENE_DRUG_None: 1 positive(s) with nodes missing from the node table" in caplog.text
