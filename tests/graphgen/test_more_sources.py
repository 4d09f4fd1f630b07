"""Bgee, STITCH and DrugCentral parsers: documented layouts, and the DrugCentral TSV excerpt."""
import gzip

import pytest

from graphgen.sources import bgee, drugcentral, stitch
from openbench.errors import InputError
from tests.helpers import fixture


def test_bgee_layouts(tmp_path):
    # no real excerpt: Bgee's documented "simple" call files, with and without FDR columns
    path = tmp_path / "expr.tsv"
    path.write_text("Gene ID\tGene name\tAnatomical entity ID\tAnatomical entity name\tExpression\tCall quality\t"
                    "FDR\tExpression score\tExpression rank\nENSG00000000003\tTSPAN6\tUBERON:0000178\tblood\tpresent\t"
                    "gold quality\t0.0001\t80.5\t3.2e4\nENSG00000000005\tTNMD\tCL:0000015\tcell\tabsent\tsilver quality"
                    "\t0.2\t10\t4e4\n")
    assert bgee.read_expression(path).rows() == [("ENSG00000000003", "UBERON:0000178", "present", "gold quality"),
                                                 ("ENSG00000000005", "CL:0000015", "absent", "silver quality")]
    diff = tmp_path / "diff.tsv"
    diff.write_text("Gene ID\tGene name\tAnatomical entity ID\tAnatomical entity name\tDevelopmental stage ID\t"
                    "Developmental stage name\tDifferential expression\tCall quality\nENSG1\tA\tUBERON:1\tx\tHsapDv:1"
                    "\ty\tunder-expression\thigh quality\n")
    assert bgee.read_differential(diff).rows() == [("ENSG1", "UBERON:1", "under-expression", "high quality")]


def test_stitch_links_and_actions(tmp_path):
    # no real excerpt: STITCH 5's documented layouts
    links = tmp_path / "links.tsv.gz"
    with gzip.open(links, "wt") as handle:
        handle.write("chemical\tprotein\tcombined_score\nCIDs00010917\t9606.ENSP1\t800\nCIDm00010917\t9606.ENSP1\t800\n")
    assert stitch.read_links(links).rows() == [("9606.ENSP1", "10917", "800")]
    actions = tmp_path / "actions.tsv"
    actions.write_text("item_id_a\titem_id_b\tmode\taction\ta_is_acting\tscore\n"
                       "CIDs00000001\t9606.ENSP1\tbinding\tinhibition\tt\t900\n"
                       "CIDs00000002\t9606.ENSP2\tpred_bind\t\tf\t300\n"
                       "9606.ENSP3\tCIDs00000003\tactivation\tactivation\tt\t700\n")
    assert sorted(stitch.read_action_edges(actions).rows()) == [
        ("1", "9606.ENSP1", "900", "DRUG_BINDING_GENE"), ("1", "9606.ENSP1", "900", "DRUG_BINDINH_GENE"),
        ("2", "9606.ENSP2", "300", "DRUG_PREDBIND_GENE")]


DUMP = """--
-- PostgreSQL database dump
--
COPY public.identifier (id, identifier, id_type, struct_id, parent_match) FROM stdin;
1\t2244\tPUBCHEM_CID\t25\t\\N
2\tC0004057\tUMLSCUI\t25\t\\N
\\.
COPY public.omop_relationship (id, struct_id, concept_id, relationship_name, concept_name, umls_cui, snomed_full_name, cui_semantic_type, snomed_conceptid) FROM stdin;
7\t25\t1\tindication\tPain\tC0030193\tPain (finding)\tT184\t22253000
8\t25\t2\tcontraindication\tAsthma\tC0004096\tAsthma (disorder)\tT047\t195967001
9\t25\t3\tindication\tFever\t\\N\t\\N\t\\N\t\\N
\\.
"""


def test_drugcentral_dump(tmp_path):
    path = tmp_path / "dump.sql.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(DUMP)
    tables = drugcentral.read_indications(path)
    assert tables["indications"].rows() == [("25", "C0030193")]
    assert tables["contraindications"].rows() == [("25", "C0004096")]
    assert tables["pubchem"].rows() == [("25", "2244")]
    broken = tmp_path / "broken.sql"
    broken.write_text(DUMP.split("COPY public.omop")[0])
    with pytest.raises(InputError, match="no COPY block for table public.omop_relationship"):
        drugcentral.read_indications(broken)


def test_drugcentral_target_export():
    frame = drugcentral.read_target_interactions(fixture("sources", "drugcentral",
                                                         "drug.target.interaction_SNIPPET.tsv"))
    assert frame.row(0) == ("4", "levobupivacaine", "P35499", "SCN4A", "BLOCKER")
    assert all("|" not in accession for accession in frame["uniprot"])
