"""The OBO parser on the real excerpts (HPO, GO slim, DO cancer slim, UBERON EFO slim)."""
import pytest

from graphgen.sources.obo import parse_obo
from openbench.errors import InputError
from tests.helpers import fixture


def _slow_terms(path):
    """Reference: term ids and is_a parents by a plain line loop over [Term] stanzas."""
    terms, parents, kind, current = [], [], None, None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            kind, current = line.strip(), None
        elif kind == "[Term]" and line.startswith("id: "):
            current = line[4:].strip()
            terms.append(current)
        elif kind == "[Term]" and line.startswith("is_a: "):
            parents.append((current, line[6:].split("!")[0].split("{")[0].strip()))
    return terms, parents


@pytest.mark.parametrize("parts", [("hpo", "hp.obo"), ("go", "goslim_generic.obo"),
                                   ("disease_ontology", "DO_cancer_slim.obo"), ("uberon", "efo-slim.obo")])
def test_terms_and_hierarchy_match_a_line_loop(parts):
    path = fixture("sources", *parts)
    ontology = parse_obo(path)
    terms, parents = _slow_terms(path)
    assert ontology.terms["id"].to_list() == terms
    obsolete = set(ontology.terms.filter("obsolete")["id"])
    assert sorted(ontology.is_a.rows()) == sorted(p for p in parents if p[0] not in obsolete)


def test_hpo_values():
    ontology = parse_obo(fixture("sources", "hpo", "hp.obo"))
    assert ontology.terms.row(0) == ("HP:0000001", "All", False)
    assert ("HP:0000002", "HP:0001507") in ontology.is_a.rows()
    assert ("HP:0004715", "HP:0000003") in ontology.alt_ids.rows()
    assert ("HP:0000001", "UMLS", "C0444868") in ontology.xrefs.rows()


def test_go_part_of_and_do_xrefs():
    go = parse_obo(fixture("sources", "go", "goslim_generic.obo"))
    assert set(go.relationships["relation"]) >= {"part_of"}
    assert go.relationships.filter(go.relationships["target"].is_null()).height == 0
    do = parse_obo(fixture("sources", "disease_ontology", "DO_cancer_slim.obo"))
    dbs = set(do.xrefs["db"])
    assert {"UMLS_CUI", "MIM"} <= dbs  # current DO writes MIM:, OpenBioLink looked for OMIM:
    assert all(":" not in accession for accession in do.xrefs.filter(do.xrefs["db"] == "UMLS_CUI")["accession"])


def test_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.obo"
    bad.write_text("format-version: 1.2\n\n[Term]\nid: X:1\nthis line has no tag\n")
    with pytest.raises(InputError, match=r"bad\.obo, line 5: expected a 'tag: value' line"):
        parse_obo(bad)
    bad.write_text("format-version: 1.2\n\n[Term]\nname: nameless\n")
    with pytest.raises(InputError, match=r"bad\.obo, line 4: a \[Term\] stanza has no id line"):
        parse_obo(bad)
    bad.write_text("hello\nworld\n")
    with pytest.raises(InputError, match="not an OBO file"):
        parse_obo(bad)
    with pytest.raises(InputError, match="OBO file does not exist"):
        parse_obo(tmp_path / "missing.obo")


def test_obsolete_terms_give_no_edges_and_typedefs_are_skipped(tmp_path):
    path = tmp_path / "mini.obo"
    path.write_text("format-version: 1.2\n\n[Term]\nid: X:1\nname: root\n\n[Term]\nid: X:2\nis_a: X:1 ! root\n"
                    "is_anonymous: true\n\n[Term]\nid: X:3\nis_a: X:1\nis_obsolete: true\nreplaced_by: X:2\n\n"
                    "[Typedef]\nid: part_of\nis_a: X:9\n")
    ontology = parse_obo(path)
    assert ontology.terms["id"].to_list() == ["X:1", "X:2", "X:3"]
    assert ontology.is_a.rows() == [("X:2", "X:1")]
    assert ontology.replaced_by.rows() == [("X:3", "X:2")]
