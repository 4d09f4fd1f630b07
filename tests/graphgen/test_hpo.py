"""HPO parsers on the real excerpts and on both older layouts."""
import pytest

from graphgen.sources.hpo import read_disease_phenotype, read_gene_phenotype
from openbench.errors import InputError
from tests.helpers import fixture


def _slow_hpoa(path):
    rows, header = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        fields = line.split("\t")
        if header is None:
            header = fields
            continue
        record = dict(zip(header, fields))
        rows.append((record["database_id"], record["disease_name"], record["hpo_id"], record["evidence"],
                     record["aspect"], "NOT" in record["qualifier"]))
    return rows


def test_current_hpoa_layout_matches_a_line_loop():
    path = fixture("sources", "hpo", "phenotype.hpoa")
    frame = read_disease_phenotype(path)
    assert frame.rows() == _slow_hpoa(path)
    assert frame.height == 245 and frame["disease"][0].startswith(("OMIM:", "ORPHA:", "DECIPHER:"))


def test_older_layouts(tmp_path):
    old = tmp_path / "phenotype_annotation_negated.tab"
    old.write_text("OMIM\t100050\tAARSKOG SYNDROME\tNOT\tHP:0000175\tOMIM:100050\tIEA\t\t\t\t\tO\t2013-04-10\tHPO:iea\n")
    assert read_disease_phenotype(old).rows() == [("OMIM:100050", "AARSKOG SYNDROME", "HP:0000175", "IEA", "O", True)]
    mid = tmp_path / "phenotype.hpoa"
    mid.write_text("#description: HPO annotations\n#date: 2019-11-08\n#DatabaseID\tDiseaseName\tQualifier\tHPO_ID\t"
                   "Reference\tEvidence\tOnset\tFrequency\tSex\tModifier\tAspect\tBiocuration\n"
                   "OMIM:619340\tDevelopmental\t\tHP:0011097\tPMID:31675180\tPCS\t\t1/2\t\t\tP\tHPO:probinson\n")
    assert read_disease_phenotype(mid).rows() == [("OMIM:619340", "Developmental", "HP:0011097", "PCS", "P", False)]
    spaced = tmp_path / "spaced.hpoa"  # some copies (phenol's test excerpt) separate the header by spaces
    spaced.write_text("#version: 2021-08-02\ndatabase_id disease_name qualifier hpo_id reference evidence onset "
                      "frequency sex modifier aspect biocuration\n"
                      "OMIM:608328\tWeill-Marchesani\t\tHP:0001083\tOMIM:608328\tIEA\t\t\t\t\tP\tHPO:iea\n")
    assert read_disease_phenotype(spaced).rows() == [("OMIM:608328", "Weill-Marchesani", "HP:0001083", "IEA", "P",
                                                      False)]


def test_gene_phenotype_both_layouts(tmp_path):
    frame = read_gene_phenotype(fixture("sources", "hpo", "genes_to_phenotype.txt"))
    assert frame.row(0) == ("10", "HP:0000007", "OMIM:243400") and frame.height == 249
    old = tmp_path / "genes_to_phenotype.txt"
    old.write_text("#Format: entrez-gene-id<tab>entrez-gene-symbol<tab>HPO-Term-ID<tab>HPO-Term-Name<tab>...\n"
                   "8192\tCLPP\tHP:0000013\tHypoplasia of the uterus\t\t\t-\tmim2gene\tOMIM:614129\n")
    assert read_gene_phenotype(old).rows() == [("8192", "HP:0000013", None)]


def test_errors(tmp_path):
    bad = tmp_path / "genes_to_phenotype.txt"
    bad.write_text("ncbi_gene_id\tgene_symbol\thpo_id\thpo_name\tfrequency\tdisease_id\n10\tNAT2\n")
    with pytest.raises(InputError, match=r"genes_to_phenotype\.txt, line 2: expected 6 tab-separated columns, "
                                         r"found 2"):
        read_gene_phenotype(bad)
    bad.write_text("ncbi_gene_id\tsymbol\n10\tNAT2\n")
    with pytest.raises(InputError, match=r"line 1: header has no column 'hpo_id'"):
        read_gene_phenotype(bad)
    empty = tmp_path / "empty.hpoa"
    empty.write_text("#only comments\n")
    with pytest.raises(InputError, match="empty"):
        read_disease_phenotype(empty)
