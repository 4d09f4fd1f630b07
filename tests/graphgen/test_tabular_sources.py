"""Parsers of the tabular sources on the real excerpts, and on documented layouts without one."""
import pytest

from graphgen.sources import ctd, disgenet, go, sider, string, uniprot
from openbench.errors import InputError
from tests.helpers import fixture


def test_gaf_rows_and_negation(tmp_path):
    path = fixture("sources", "go", "goa_human.gaf")
    frame = go.read_annotations(path)
    assert frame.height == sum(1 for line in path.read_text().splitlines() if line and not line.startswith("!"))
    assert frame.row(0) == ("UniProtKB", "A0A024R161", "GO:0003924", "IEA", False)
    not_rows = tmp_path / "not.gaf"
    not_rows.write_text("!gaf-version: 2.2\nUniProtKB\tP1\tX\tNOT|enables\tGO:1\tPMID:1\tIDA\t\tF\tn\t\tprotein\t"
                        "taxon:9606\t20200101\tUniProt\t\t\nUniProtKB\tP2\tY\tenables\tGO:2\tPMID:1\tIEA\t\tF\tn\t\t"
                        "protein\ttaxon:9606\t20200101\tUniProt\t\t\n")
    assert go.read_annotations(not_rows)["negated"].to_list() == [True, False]


@pytest.mark.parametrize("name,rows", [("9606.protein.links.full.v11.5.txt", 9),
                                       ("10090.protein.links.detailed.tsv", 18)])
def test_string_link_layouts(name, rows):
    path = fixture("sources", "string", name)
    frame = string.read_links(path)
    assert frame.height == rows and frame.columns == ["protein1", "protein2", "score"]
    last_line = path.read_text().splitlines()[1].split(" ")
    assert frame.row(0) == (last_line[0], last_line[1], last_line[-1])


def test_string_entrez_mapping_splits_multiple_genes(tmp_path):
    path = fixture("sources", "string", "entrez_2_string.tsv")
    frame = string.read_entrez_mapping(path)
    pairs = {(f[2], f[1]) for f in (line.split("\t") for line in path.read_text().splitlines()[1:] if line)}
    assert frame.row(0) == ("10090.ENSMUSP00000026270", "83493") and set(frame.rows()) == pairs
    assert frame.height == len(pairs)
    multi = tmp_path / "map.tsv"
    multi.write_text("# NCBI taxid / entrez / STRING\n9606\t1|2\t9606.ENSP1\n")
    assert string.read_entrez_mapping(multi).rows() == [("9606.ENSP1", "1"), ("9606.ENSP1", "2")]


def test_string_actions_typed_as_the_spec_says(tmp_path):
    # no real excerpt: STRING's documented protein.actions layout (v11)
    path = tmp_path / "actions.txt"
    rows = [("A", "B", "inhibition", "inhibition", "t", "t", "800"), ("A", "B", "inhibition", "", "t", "f", "800"),
            ("A", "C", "binding", "activation", "t", "t", "900"), ("A", "D", "binding", "", "f", "f", "750"),
            ("A", "E", "ptmod", "", "f", "f", "720"), ("A", "F", "expression", "", "f", "f", "710")]
    header = "item_id_a\titem_id_b\tmode\taction\tis_directional\ta_is_acting\tscore"
    path.write_text(header + "\n" + "\n".join("\t".join(r) for r in rows) + "\n")
    edges = string.action_edges(string.read_actions(path))
    assert edges.rows() == [("A", "B", "800", "GENE_INHIBITION_GENE"), ("A", "C", "900", "GENE_BINDACT_GENE"),
                            ("A", "D", "750", "GENE_BINDING_GENE"), ("A", "E", "720", "GENE_PTMOD_GENE")]


def test_uniprot_dat_and_selected(tmp_path):
    genes, ensembl = uniprot.read_dat(fixture("sources", "id_mapping", "HUMAN_9606_idmapping.dat"))
    assert genes.columns == ["uniprot", "gene"] and ensembl.columns == ["ensembl", "gene"]
    dat = tmp_path / "x.dat"
    dat.write_text("P1\tGeneID\t7157\nP1\tEnsembl\tENSG00000141510.17\nP2\tGeneID\t1\nP2\tGeneID\t2\n")
    genes, ensembl = uniprot.read_dat(dat)
    assert genes.rows() == [("P1", "7157"), ("P2", "1"), ("P2", "2")]
    assert ensembl.rows() == [("ENSG00000141510", "7157")]
    selected = tmp_path / "selected.tab"
    columns = [""] * 22
    columns[0], columns[2], columns[18] = "P04637", "7157", "ENSG00000141510; ENSG00000999999"
    selected.write_text("\t".join(columns) + "\n")
    genes, ensembl = uniprot.read_selected(selected)
    assert genes.rows() == [("P04637", "7157")]
    assert ensembl.rows() == [("ENSG00000141510", "7157"), ("ENSG00000999999", "7157")]


def test_disgenet_mappings_and_associations(tmp_path):
    frame = disgenet.read_do_mappings(fixture("sources", "disgenet", "disease_mappings.tsv"))
    assert frame.height > 0 and all(doid.startswith("DOID:") and doid.count(":") == 1 for doid in frame["doid"])
    assert all(umls.startswith("C") for umls in frame["umls"])
    gda = tmp_path / "curated.tsv"
    gda.write_text("geneId\tgeneSymbol\tDSI\tDPI\tdiseaseId\tdiseaseName\tdiseaseType\tdiseaseClass\t"
                   "diseaseSemanticType\tscore\tEI\tYearInitial\tYearFinal\tNofPmids\tNofSnps\tsource\n"
                   "1\tA1BG\t0.7\t0.5\tC0019209\tHepatomegaly\tphenotype\tC23\tFinding\t0.31\t1\t2017\t2017\t1\t0\tCTD\n")
    assert disgenet.read_associations(gda).rows() == [("1", "C0019209", "0.31")]


def test_sider_pubchem_ids():
    se = sider.read_side_effects(fixture("sources", "sider", "meddra_all_se.tsv"))
    assert se.row(0) == ("10917", "C0000729")
    indications = sider.read_indications(fixture("sources", "sider", "meddra_all_indications.tsv"))
    assert indications.row(0) == ("85", "C0015544", "text_mention")


def test_ctd_pathway_prefixes(tmp_path):
    path = tmp_path / "CTD_genes_pathways.tsv"
    path.write_text("# Comparative Toxicogenomics Database\n#\n# Fields:\n# GeneSymbol\tGeneID\tPathwayName\t"
                    "PathwayID\n#\nA1BG\t1\tImmune System\tREACT:R-HSA-168256\nA2M\t2\tComplement\tKEGG:hsa04610\n"
                    "X\t3\tModule\tKEGG:hsa_M00001\n")
    assert ctd.read_gene_pathways(path).rows() == [("1", "REACTOME:R-HSA-168256"), ("2", "KEGG:hsa04610"),
                                                   ("3", "KEGG:M00001")]


def test_missing_required_value_names_the_line(tmp_path):
    path = tmp_path / "meddra_all_se.tsv"
    path.write_text("CID1\tCID0\tC1\tPT\tC1\tx\nCID1\t\tC2\tPT\tC2\ty\n")
    with pytest.raises(InputError, match=r"meddra_all_se\.tsv, line 2: column\(s\) stitch_stereo empty"):
        sider.read_side_effects(path)
    with pytest.raises(InputError, match="file does not exist"):
        sider.read_side_effects(tmp_path / "absent.tsv")


def test_header_errors(tmp_path):
    from openbench._io.inputs import read_table

    path = tmp_path / "only_comments.tsv"
    path.write_text("# nothing but comments\n")
    with pytest.raises(InputError, match="no header line found"):
        read_table(path, {"a": "a"})
    with pytest.raises(InputError, match="no header line found starting with '#DatabaseID'"):
        read_table(path, {"a": "a"}, header_prefix="#DatabaseID")
