"""The registry against the spec's tables (openbiolink.md §2.4–§2.6)."""
import pytest

from graphgen.edge_types import (EDGE_TYPES, NODE_TYPES, ExcludedScores, MinScore, RegistryError, edge_type,
                                 node_type_of, normalise_quality, parent_of)


def test_thirty_two_edge_types_with_openbiolink_codes():
    assert len(EDGE_TYPES) == 32
    codes = {edge.code for edge in EDGE_TYPES.values()}
    assert len(codes) == 32 and {0, 1, 10, 19, 20, 201, 21, 29, 31, 39} <= codes
    assert set(NODE_TYPES) == {"GENE", "GO", "DIS", "DRUG", "PHENOTYPE", "PATHWAY", "ANATOMY"}


def test_parents_directedness_and_signatures():
    assert parent_of("GENE_BINDING_GENE") == "GENE_GENE" and parent_of("DRUG_BINDINH_GENE") == "GENE_DRUG"
    assert parent_of("GENE_UNDEREXPRESSED_ANATOMY") == "GENE_EXPRESSED_ANATOMY" and parent_of("IS_A") == "IS_A"
    undirected = {name for name, edge in EDGE_TYPES.items() if not edge.directed}
    assert undirected == {"GENE_GENE", "GENE_BINDING_GENE", "GENE_PTMOD_GENE"}
    for edge in EDGE_TYPES.values():
        assert edge.parent in EDGE_TYPES and EDGE_TYPES[edge.parent].parent == edge.parent
        assert all(head in NODE_TYPES and tail in NODE_TYPES for head, tail in edge.signatures)
    assert len(edge_type("IS_A").signatures) == 4
    assert {name for name, edge in EDGE_TYPES.items() if edge.true_negatives} == {
        "DIS_DRUG", "DIS_PHENOTYPE", "GENE_GO", "GENE_EXPRESSED_ANATOMY", "GENE_OVEREXPRESSED_ANATOMY",
        "GENE_UNDEREXPRESSED_ANATOMY"}


@pytest.mark.parametrize("name,level,kept,dropped", [
    ("GENE_GENE", "hq", ["701", "999"], ["700", "12", "", None]),
    ("GENE_DRUG", "mq", ["401"], ["400"]),
    ("DRUG_BINDING_GENE", "lq", ["1"], ["0"]),
    ("GENE_DIS", "hq", ["0.71"], ["0.7", "0.3"]),
    ("GENE_GO", "hq", ["EXP", "TAS"], ["IEA"]),
    ("GENE_GO", "mq", ["IEA"], []),
    ("DIS_PHENOTYPE", "high", ["PCS"], ["IEA"]),
    ("GENE_EXPRESSED_ANATOMY", "hq", ["gold quality"], ["silver quality"]),
    ("GENE_OVEREXPRESSED_ANATOMY", "h", ["high quality"], ["low quality"]),
])
def test_cutoffs(name, level, kept, dropped):
    cutoff = edge_type(name).cutoff(level)
    assert isinstance(cutoff, (MinScore, ExcludedScores))
    assert all(cutoff.keeps(score) for score in kept)
    assert not any(cutoff.keeps(score) for score in dropped)


def test_no_cutoff_at_nq_or_for_unscored_types():
    assert all(edge.cutoff("nq") is None for edge in EDGE_TYPES.values())
    assert edge_type("GENE_PATHWAY").cutoff("hq") is None and edge_type("GENE_EXPRESSED_ANATOMY").cutoff("mq") is None


def test_node_types_by_prefix_and_errors():
    assert node_type_of("NCBIGENE:7157") == "GENE" and node_type_of("CL:0000001") == "ANATOMY"
    assert node_type_of("PUBCHEM.COMPOUND:2244") == "DRUG" and node_type_of("REACTOME:R-HSA-1") == "PATHWAY"
    with pytest.raises(RegistryError, match="cannot type 'UMLS:C0001'"):
        node_type_of("UMLS:C0001")
    with pytest.raises(RegistryError, match="unknown edge type 'GENE_FOO'; valid: IS_A, PART_OF"):
        edge_type("GENE_FOO")
    with pytest.raises(RegistryError, match="unknown quality level 'best'"):
        normalise_quality("best")
