"""Writes the embedded sample: small source files in the sources' real formats, seeded.

Run ``python -m graphgen.sample.make_sample [--seed 7] [--scale 1] [--output DIR]``; the committed
files in ``graphgen/sample/files/`` come from the defaults. The entities are invented (ids in the
real id spaces but made up), coherent across files so that every one of the 32 edge types, the
true negatives and every id-mapping path yields edges, and a few ids are deliberately unmappable,
alt_ids or below the quality cutoffs. ``--scale`` multiplies the row counts (for benchmarks).
"""
from __future__ import annotations

import argparse
import gzip
import io
import zipfile
from pathlib import Path
from typing import List, Sequence

import numpy as np

from graphgen.recipes import SOURCES

HERE = Path(__file__).resolve().parent
FILES = HERE / "files"


def _file(source: str, key: str) -> str:
    return SOURCES[source][key].filename


def _write(folder: Path, name: str, text: str) -> None:
    """Plain, gzip (mtime 0, so bytes are reproducible) or single-member zip, by the file name."""
    path = folder / name
    data = text.encode("utf-8")
    if name.endswith(".gz"):
        buffer = io.BytesIO()
        with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
            handle.write(data)
        path.write_bytes(buffer.getvalue())
    elif name.endswith(".zip"):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            info = zipfile.ZipInfo(name[:-4], date_time=(1980, 1, 1, 0, 0, 0))
            archive.writestr(info, data)
        path.write_bytes(buffer.getvalue())
    else:
        path.write_bytes(data)


def _tsv(rows: Sequence[Sequence], separator: str = "\t") -> str:
    return "".join(separator.join(str(v) for v in row) + "\n" for row in rows)


def _obo(terms: List[dict], header: str) -> str:
    lines = ["format-version: 1.2", f"data-version: {header}", ""]
    for term in terms:
        lines += ["[Term]", f"id: {term['id']}", f"name: {term['name']}"]
        lines += [f"alt_id: {alt}" for alt in term.get("alt", [])]
        lines += [f"xref: {xref}" for xref in term.get("xref", [])]
        lines += [f"is_a: {parent} ! parent" for parent in term.get("is_a", [])]
        lines += [f"relationship: part_of {target} ! whole" for target in term.get("part_of", [])]
        if term.get("obsolete"):
            lines.append("is_obsolete: true")
        lines.append("")
    lines += ["[Typedef]", "id: part_of", "name: part of", "is_transitive: true", ""]
    return "\n".join(lines)


def _hierarchy(rng, prefix: str, count: int, name: str, digits: int = 7, start: int = 1) -> List[dict]:
    terms = []
    for i in range(count):
        term = {"id": f"{prefix}:{start + i:0{digits}d}", "name": f"{name} {i}"}
        if i:
            term["is_a"] = [terms[int(rng.integers(0, i))]["id"]]
            if i % 4 == 0:
                term["part_of"] = [terms[int(rng.integers(0, i))]["id"]]
        terms.append(term)
    return terms


def make_sample(folder: Path, seed: int = 7, scale: int = 1) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    n_genes, n_drugs = 40 * scale, 15 * scale
    genes = [1000 + i for i in range(n_genes)]
    string_id = {g: f"9606.ENSP{g:011d}" for g in genes}
    uniprot_id = {g: f"P{g + 10000}" for g in genes}
    ensembl_id = {g: f"ENSG{g:011d}" for g in genes}
    drugs = [2000 + i for i in range(n_drugs)]

    def pick(items, size):
        return [items[int(i)] for i in rng.integers(0, len(items), size)]

    # ontologies ------------------------------------------------------------------------------
    go = _hierarchy(rng, "GO", 20 * scale, "process")
    go[3]["alt"] = ["GO:0099999"]
    go[-1]["obsolete"] = True
    do = _hierarchy(rng, "DOID", 12 * scale, "disease")
    for i, term in enumerate(do):
        term["xref"] = [f"MIM:{600000 + i}", f"UMLS_CUI:C{1000000 + i:07d}"]
    do[2]["alt"] = ["DOID:9999999"]
    hp = _hierarchy(rng, "HP", 20 * scale, "phenotype")
    for i, term in enumerate(hp):
        term["xref"] = [f"UMLS:C{2000000 + i:07d}"]
    hp[5]["alt"] = ["HP:9999999"]
    anatomy = _hierarchy(rng, "UBERON", 10 * scale, "organ") + _hierarchy(rng, "CL", 5 * scale, "cell", start=100)
    anatomy[-1]["is_a"] = ["UBERON:0000001"]
    anatomy[1]["is_a"] = anatomy[1].get("is_a", []) + ["BFO:0000002"]  # outside anatomy: not an edge
    anatomy[4]["alt"] = ["UBERON:9999999"]
    _write(folder, _file("GO", "ontology"), _obo(go, "go/sample"))
    _write(folder, _file("DO", "ontology"), _obo(do, "doid/sample"))
    _write(folder, _file("HPO", "ontology"), _obo(hp, "hp/sample"))
    _write(folder, _file("UBERON", "ontology"), _obo(anatomy, "uberon/sample"))

    # id mappings -----------------------------------------------------------------------------
    string_rows = [("# NCBI taxid / entrez / STRING",)]
    for g in genes[:-2]:  # the last two genes' proteins have no Entrez mapping
        string_rows.append((9606, g, string_id[g]))
    string_rows[3] = (9606, f"{genes[2]}|{genes[-1]}", string_id[genes[2]])  # one protein, two genes
    _write(folder, _file("STRING", "entrez"), _tsv(string_rows))
    selected = []
    for g in genes[:-1]:
        row = [""] * 22
        row[0], row[1], row[2], row[18] = uniprot_id[g], f"X{g}_HUMAN", str(g), f"{ensembl_id[g]}.{g % 7}"
        selected.append(row)
    _write(folder, SOURCES["UniProt"]["selected"].filename, _tsv(selected))
    umls_do = [(f"C{1000000 + i:07d}", f"disease {i}", "DO", f"{1 + i:07d}", "name") for i in range(len(do) - 1)]
    umls_do.append(("C0999999", "no DO term", "HPO", "HP:0000001", "name"))
    _write(folder, _file("DisGeNet", "mappings"),
           _tsv([("diseaseId", "name", "vocabulary", "code", "vocabularyName")] + umls_do))

    # STRING and STITCH -----------------------------------------------------------------------
    links = [("protein1", "protein2", "combined_score")]
    for a, b in zip(pick(genes, 60 * scale), pick(genes, 60 * scale)):
        if a != b:
            score = int(rng.integers(300, 1000))
            links += [(string_id[a], string_id[b], score), (string_id[b], string_id[a], score)]
    _write(folder, _file("STRING", "links"), _tsv(links, " "))
    actions = [("item_id_a", "item_id_b", "mode", "action", "is_directional", "a_is_acting", "score")]
    modes = [("activation", "activation", "t", "t"), ("catalysis", "", "t", "t"), ("expression", "", "t", "t"),
             ("inhibition", "inhibition", "t", "t"), ("reaction", "", "t", "t"), ("binding", "activation", "t", "t"),
             ("binding", "inhibition", "t", "t"), ("binding", "", "f", "f"), ("ptmod", "", "f", "f"),
             ("activation", "activation", "t", "f")]
    for mode, action, directional, acting in modes:
        for a, b in zip(pick(genes, 6 * scale), pick(genes, 6 * scale)):
            if a != b:
                actions.append((string_id[a], string_id[b], mode, action, directional, acting,
                                int(rng.integers(500, 1000))))
    _write(folder, _file("STRING", "actions"), _tsv(actions))
    stitch_links = [("chemical", "protein", "combined_score")]
    for d, g in zip(pick(drugs, 40 * scale), pick(genes, 40 * scale)):
        stitch_links.append((f"CIDs{d:08d}", string_id[g], int(rng.integers(300, 1000))))
        stitch_links.append((f"CIDm{d:08d}", string_id[g], int(rng.integers(300, 1000))))
    _write(folder, _file("STITCH", "links"), _tsv(stitch_links))
    stitch_actions = [("item_id_a", "item_id_b", "mode", "action", "a_is_acting", "score")]
    for mode, action in [("activation", "activation"), ("binding", ""), ("binding", "activation"),
                         ("binding", "inhibition"), ("catalysis", ""), ("expression", ""), ("inhibition", "inhibition"),
                         ("pred_bind", ""), ("reaction", "")]:
        for d, g in zip(pick(drugs, 5 * scale), pick(genes, 5 * scale)):
            stitch_actions.append((f"CIDs{d:08d}", string_id[g], mode, action, "t", int(rng.integers(500, 1000))))
            stitch_actions.append((string_id[g], f"CIDs{d:08d}", mode, action, "f", int(rng.integers(500, 1000))))
    _write(folder, _file("STITCH", "actions"), _tsv(stitch_actions))

    # GO annotations ----------------------------------------------------------------------------
    gaf = ["!gaf-version: 2.2", "!generated-by: openbench sample"]
    live_go = [t["id"] for t in go if not t.get("obsolete")] + ["GO:0099999"]
    for g, term in zip(pick(genes, 60 * scale), pick(live_go, 60 * scale)):
        evidence = ["IEA", "EXP", "TAS", "IDA"][int(rng.integers(0, 4))]
        qualifier = "NOT|involved_in" if rng.random() < 0.1 else "involved_in"
        gaf.append("\t".join(["UniProtKB", uniprot_id[g], f"G{g}", qualifier, term, "PMID:1", evidence, "", "P",
                              "name", "", "protein", "taxon:9606", "20200101", "UniProt", "", ""]))
    gaf.append("\t".join(["UniProtKB", "Q99999", "NOPE", "involved_in", go[1]["id"], "PMID:1", "EXP", "", "P", "n", "",
                          "protein", "taxon:9606", "20200101", "UniProt", "", ""]))
    _write(folder, _file("GO", "annotations"), "\n".join(gaf) + "\n")

    # DisGeNET, HPO, CTD, SIDER, Bgee, DrugCentral ----------------------------------------------
    gda = [("geneId", "geneSymbol", "DSI", "DPI", "diseaseId", "diseaseName", "diseaseType", "diseaseClass",
            "diseaseSemanticType", "score", "EI", "YearInitial", "YearFinal", "NofPmids", "NofSnps", "source")]
    umls = [row[0] for row in umls_do] + ["C0999999"]
    for g, cui in zip(pick(genes, 40 * scale), pick(umls, 40 * scale)):
        gda.append((g, f"G{g}", 0.5, 0.5, cui, "d", "disease", "C04", "Disease", f"{rng.uniform(0.1, 1.0):.2f}", 1,
                    2000, 2020, 1, 0, "CURATED"))
    _write(folder, _file("DisGeNet", "curated"), _tsv(gda))
    hpoa = ["#description: \"HPO annotations (openbench sample)\"", "#version: sample",
            "database_id\tdisease_name\tqualifier\thpo_id\treference\tevidence\tonset\tfrequency\tsex\tmodifier\t"
            "aspect\tbiocuration"]
    diseases = [f"OMIM:{600000 + i}" for i in range(len(do))] + ["ORPHA:1", "OMIM:100000"]
    hp_ids = [t["id"] for t in hp] + ["HP:9999999"]
    for disease, term in zip(pick(diseases, 60 * scale), pick(hp_ids, 60 * scale)):
        qualifier = "NOT" if rng.random() < 0.15 else ""
        evidence = ["IEA", "PCS", "TAS"][int(rng.integers(0, 3))]
        hpoa.append("\t".join([disease, "name", qualifier, term, "PMID:1", evidence, "", "", "", "", "P",
                               "HPO:sample[2020-01-01]"]))
    _write(folder, _file("HPO", "annotations"), "\n".join(hpoa) + "\n")
    g2p = [("ncbi_gene_id", "gene_symbol", "hpo_id", "hpo_name", "frequency", "disease_id")]
    for g, term in zip(pick(genes, 40 * scale), pick(hp_ids, 40 * scale)):
        g2p.append((g, f"G{g}", term, "name", "-", pick(diseases, 1)[0]))
    _write(folder, _file("HPO", "genes"), _tsv(g2p))
    ctd_rows = ["# CTD sample", "# Fields:", "# GeneSymbol\tGeneID\tPathwayName\tPathwayID", "#"]
    pathways = [f"KEGG:hsa{4000 + i:05d}" for i in range(5 * scale)] + [f"REACT:R-HSA-{100 + i}" for i in range(5 * scale)]
    pathways.append("KEGG:hsa_M00001")
    for g, p in zip(pick(genes, 40 * scale), pick(pathways, 40 * scale)):
        ctd_rows.append(f"G{g}\t{g}\tpathway\t{p}")
    _write(folder, _file("CTD", "pathways"), "\n".join(ctd_rows) + "\n")
    side_umls = [f"C{2000000 + i:07d}" for i in range(len(hp))] + ["C0888888"]
    se = [(f"CID1{d:08d}", f"CID0{d:08d}", cui, "PT", cui, "effect")
          for d, cui in zip(pick(drugs, 40 * scale), pick(side_umls, 40 * scale))]
    _write(folder, _file("SIDER", "side_effects"), _tsv(se))
    indications = [(f"CID1{d:08d}", cui, "text_mention", "name", "PT", cui, "name")
                   for d, cui in zip(pick(drugs, 10 * scale), pick(umls, 10 * scale))]
    _write(folder, _file("SIDER", "indications"), _tsv(indications))
    expr = [("Gene ID", "Gene name", "Anatomical entity ID", "Anatomical entity name", "Expression", "Call quality",
             "FDR", "Expression score", "Expression rank")]
    anatomy_ids = [t["id"] for t in anatomy] + ["UBERON:9999999"]
    ensembl_all = [ensembl_id[g] for g in genes] + ["ENSG99999999999"]
    for e, a in zip(pick(ensembl_all, 60 * scale), pick(anatomy_ids, 60 * scale)):
        call = "present" if rng.random() < 0.7 else "absent"
        quality = "gold quality" if rng.random() < 0.6 else "silver quality"
        expr.append((e, "name", a, "organ", call, quality, "0.001", "50.0", "1000"))
    _write(folder, _file("Bgee", "expression"), _tsv(expr))
    diff = [("Gene ID", "Gene name", "Anatomical entity ID", "Anatomical entity name", "Developmental stage ID",
             "Developmental stage name", "Differential expression", "Call quality")]
    for e, a in zip(pick(ensembl_all, 50 * scale), pick(anatomy_ids, 50 * scale)):
        direction = ["over-expression", "under-expression", "no diff expression"][int(rng.integers(0, 3))]
        quality = "high quality" if rng.random() < 0.6 else "low quality"
        diff.append((e, "name", a, "organ", "HsapDv:0000087", "adult", direction, quality))
    _write(folder, _file("Bgee", "differential"), _tsv(diff))
    structs = list(range(1, 1 + n_drugs))
    dump = ["--", "-- PostgreSQL database dump (openbench sample)", "--", "",
            "COPY public.identifier (id, identifier, id_type, struct_id, parent_match) FROM stdin;"]
    for i, (struct, drug) in enumerate(zip(structs[:-1], drugs)):
        dump.append(f"{i + 1}\t{drug}\tPUBCHEM_CID\t{struct}\t\\N")
    dump.append(f"{len(structs) + 1}\tCHEMBL1\tChEMBL_ID\t{structs[0]}\t\\N")
    dump += ["\\.", "",
             "COPY public.omop_relationship (id, struct_id, concept_id, relationship_name, concept_name, umls_cui, "
             "snomed_full_name, cui_semantic_type, snomed_conceptid) FROM stdin;"]
    for i, (struct, cui) in enumerate(zip(pick(structs, 40 * scale), pick(umls, 40 * scale))):
        kind = "indication" if rng.random() < 0.7 else "contraindication"
        dump.append(f"{i + 1}\t{struct}\t{i}\t{kind}\tname\t{cui}\tname\tT047\t{i}")
    dump += ["\\.", ""]
    _write(folder, _file("DrugCentral", "dump"), "\n".join(dump) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--output", type=Path, default=FILES)
    args = parser.parse_args()
    make_sample(args.output, args.seed, args.scale)


if __name__ == "__main__":
    main()
