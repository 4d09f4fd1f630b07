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
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from graphgen.recipes import SOURCES

__all__ = ["HERE", "FILES", "World", "STRING_MODES", "STITCH_MODES", "STEPS", "make_sample", "main"]

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


@dataclass
class World:
    """The invented entities every sample file draws from, and the one seeded generator they share
    (the files are written in :data:`STEPS` order, so the same seed gives the same bytes)."""

    rng: np.random.Generator
    scale: int
    genes: List[int]
    drugs: List[int]
    terms: Dict[str, List[dict]] = field(default_factory=dict)  # ontology -> its terms
    umls_do: List[tuple] = field(default_factory=list)

    @classmethod
    def create(cls, seed: int, scale: int) -> "World":
        return cls(np.random.default_rng(seed), scale, [1000 + i for i in range(40 * scale)],
                   [2000 + i for i in range(15 * scale)])

    def string_id(self, gene: int) -> str:
        return f"9606.ENSP{gene:011d}"

    def uniprot_id(self, gene: int) -> str:
        return f"P{gene + 10000}"

    def ensembl_id(self, gene: int) -> str:
        return f"ENSG{gene:011d}"

    def pick(self, items: Sequence, size: int) -> list:
        return [items[int(i)] for i in self.rng.integers(0, len(items), size)]

    @property
    def umls(self) -> List[str]:
        return [row[0] for row in self.umls_do] + ["C0999999"]

    @property
    def diseases(self) -> List[str]:
        return [f"OMIM:{600000 + i}" for i in range(len(self.terms["DO"]))] + ["ORPHA:1", "OMIM:100000"]


Files = Dict[str, str]  # file name -> content


def _ontologies(world: World) -> Files:
    rng, scale = world.rng, world.scale
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
    world.terms.update(GO=go, DO=do, HPO=hp, UBERON=anatomy)
    return {_file(name, "ontology"): _obo(world.terms[name], header) for name, header in
            (("GO", "go/sample"), ("DO", "doid/sample"), ("HPO", "hp/sample"), ("UBERON", "uberon/sample"))}


def _id_mappings(world: World) -> Files:
    genes = world.genes
    string_rows: List[tuple] = [("# NCBI taxid / entrez / STRING",)]
    for g in genes[:-2]:  # the last two genes' proteins have no Entrez mapping
        string_rows.append((9606, g, world.string_id(g)))
    string_rows[3] = (9606, f"{genes[2]}|{genes[-1]}", world.string_id(genes[2]))  # one protein, two genes
    selected = []
    for g in genes[:-1]:
        row = [""] * 22
        row[0], row[1], row[2], row[18] = world.uniprot_id(g), f"X{g}_HUMAN", str(g), f"{world.ensembl_id(g)}.{g % 7}"
        selected.append(row)
    do = world.terms["DO"]
    world.umls_do = [(f"C{1000000 + i:07d}", f"disease {i}", "DO", f"{1 + i:07d}", "name") for i in range(len(do) - 1)]
    world.umls_do.append(("C0999999", "no DO term", "HPO", "HP:0000001", "name"))
    return {_file("STRING", "entrez"): _tsv(string_rows), SOURCES["UniProt"]["selected"].filename: _tsv(selected),
            _file("DisGeNet", "mappings"): _tsv([("diseaseId", "name", "vocabulary", "code", "vocabularyName")]
                                                + world.umls_do)}


STRING_MODES = [("activation", "activation", "t", "t"), ("catalysis", "", "t", "t"), ("expression", "", "t", "t"),
                ("inhibition", "inhibition", "t", "t"), ("reaction", "", "t", "t"),
                ("binding", "activation", "t", "t"), ("binding", "inhibition", "t", "t"), ("binding", "", "f", "f"),
                ("ptmod", "", "f", "f"), ("activation", "activation", "t", "f")]
STITCH_MODES = [("activation", "activation"), ("binding", ""), ("binding", "activation"), ("binding", "inhibition"),
                ("catalysis", ""), ("expression", ""), ("inhibition", "inhibition"), ("pred_bind", ""),
                ("reaction", "")]


def _string(world: World) -> Files:
    rng, scale, genes, sid = world.rng, world.scale, world.genes, world.string_id
    links: List[tuple] = [("protein1", "protein2", "combined_score")]
    for a, b in zip(world.pick(genes, 60 * scale), world.pick(genes, 60 * scale)):
        if a != b:
            score = int(rng.integers(300, 1000))
            links += [(sid(a), sid(b), score), (sid(b), sid(a), score)]
    actions: List[tuple] = [("item_id_a", "item_id_b", "mode", "action", "is_directional", "a_is_acting", "score")]
    for mode, action, directional, acting in STRING_MODES:
        for a, b in zip(world.pick(genes, 6 * scale), world.pick(genes, 6 * scale)):
            if a != b:
                actions.append((sid(a), sid(b), mode, action, directional, acting, int(rng.integers(500, 1000))))
    return {_file("STRING", "links"): _tsv(links, " "), _file("STRING", "actions"): _tsv(actions)}


def _stitch(world: World) -> Files:
    rng, scale, sid = world.rng, world.scale, world.string_id
    links: List[tuple] = [("chemical", "protein", "combined_score")]
    for d, g in zip(world.pick(world.drugs, 40 * scale), world.pick(world.genes, 40 * scale)):
        links.append((f"CIDs{d:08d}", sid(g), int(rng.integers(300, 1000))))
        links.append((f"CIDm{d:08d}", sid(g), int(rng.integers(300, 1000))))
    actions: List[tuple] = [("item_id_a", "item_id_b", "mode", "action", "a_is_acting", "score")]
    for mode, action in STITCH_MODES:
        for d, g in zip(world.pick(world.drugs, 5 * scale), world.pick(world.genes, 5 * scale)):
            actions.append((f"CIDs{d:08d}", sid(g), mode, action, "t", int(rng.integers(500, 1000))))
            actions.append((sid(g), f"CIDs{d:08d}", mode, action, "f", int(rng.integers(500, 1000))))
    return {_file("STITCH", "links"): _tsv(links), _file("STITCH", "actions"): _tsv(actions)}


def _go_annotations(world: World) -> Files:
    rng, go = world.rng, world.terms["GO"]
    gaf = ["!gaf-version: 2.2", "!generated-by: openbench sample"]
    live_go = [t["id"] for t in go if not t.get("obsolete")] + ["GO:0099999"]
    for g, term in zip(world.pick(world.genes, 60 * world.scale), world.pick(live_go, 60 * world.scale)):
        evidence = ["IEA", "EXP", "TAS", "IDA"][int(rng.integers(0, 4))]
        qualifier = "NOT|involved_in" if rng.random() < 0.1 else "involved_in"
        gaf.append("\t".join(["UniProtKB", world.uniprot_id(g), f"G{g}", qualifier, term, "PMID:1", evidence, "", "P",
                              "name", "", "protein", "taxon:9606", "20200101", "UniProt", "", ""]))
    gaf.append("\t".join(["UniProtKB", "Q99999", "NOPE", "involved_in", go[1]["id"], "PMID:1", "EXP", "", "P", "n", "",
                          "protein", "taxon:9606", "20200101", "UniProt", "", ""]))
    return {_file("GO", "annotations"): "\n".join(gaf) + "\n"}


def _disgenet(world: World) -> Files:
    gda: List[tuple] = [("geneId", "geneSymbol", "DSI", "DPI", "diseaseId", "diseaseName", "diseaseType",
                         "diseaseClass", "diseaseSemanticType", "score", "EI", "YearInitial", "YearFinal", "NofPmids",
                         "NofSnps", "source")]
    for g, cui in zip(world.pick(world.genes, 40 * world.scale), world.pick(world.umls, 40 * world.scale)):
        gda.append((g, f"G{g}", 0.5, 0.5, cui, "d", "disease", "C04", "Disease",
                    f"{world.rng.uniform(0.1, 1.0):.2f}", 1, 2000, 2020, 1, 0, "CURATED"))
    return {_file("DisGeNet", "curated"): _tsv(gda)}


def _hpo(world: World) -> Files:
    rng, scale = world.rng, world.scale
    hpoa = ["#description: \"HPO annotations (openbench sample)\"", "#version: sample",
            "database_id\tdisease_name\tqualifier\thpo_id\treference\tevidence\tonset\tfrequency\tsex\tmodifier\t"
            "aspect\tbiocuration"]
    hp_ids = [t["id"] for t in world.terms["HPO"]] + ["HP:9999999"]
    for disease, term in zip(world.pick(world.diseases, 60 * scale), world.pick(hp_ids, 60 * scale)):
        qualifier = "NOT" if rng.random() < 0.15 else ""
        evidence = ["IEA", "PCS", "TAS"][int(rng.integers(0, 3))]
        hpoa.append("\t".join([disease, "name", qualifier, term, "PMID:1", evidence, "", "", "", "", "P",
                               "HPO:sample[2020-01-01]"]))
    g2p: List[tuple] = [("ncbi_gene_id", "gene_symbol", "hpo_id", "hpo_name", "frequency", "disease_id")]
    for g, term in zip(world.pick(world.genes, 40 * scale), world.pick(hp_ids, 40 * scale)):
        g2p.append((g, f"G{g}", term, "name", "-", world.pick(world.diseases, 1)[0]))
    return {_file("HPO", "annotations"): "\n".join(hpoa) + "\n", _file("HPO", "genes"): _tsv(g2p)}


def _ctd(world: World) -> Files:
    scale = world.scale
    rows = ["# CTD sample", "# Fields:", "# GeneSymbol\tGeneID\tPathwayName\tPathwayID", "#"]
    pathways = ([f"KEGG:hsa{4000 + i:05d}" for i in range(5 * scale)] + [f"REACT:R-HSA-{100 + i}" for i in range(5 * scale)]
                + ["KEGG:hsa_M00001"])
    for g, p in zip(world.pick(world.genes, 40 * scale), world.pick(pathways, 40 * scale)):
        rows.append(f"G{g}\t{g}\tpathway\t{p}")
    return {_file("CTD", "pathways"): "\n".join(rows) + "\n"}


def _sider(world: World) -> Files:
    scale = world.scale
    side_umls = [f"C{2000000 + i:07d}" for i in range(len(world.terms["HPO"]))] + ["C0888888"]
    effects = [(f"CID1{d:08d}", f"CID0{d:08d}", cui, "PT", cui, "effect")
               for d, cui in zip(world.pick(world.drugs, 40 * scale), world.pick(side_umls, 40 * scale))]
    indications = [(f"CID1{d:08d}", cui, "text_mention", "name", "PT", cui, "name")
                   for d, cui in zip(world.pick(world.drugs, 10 * scale), world.pick(world.umls, 10 * scale))]
    return {_file("SIDER", "side_effects"): _tsv(effects), _file("SIDER", "indications"): _tsv(indications)}


def _bgee(world: World) -> Files:
    rng, scale = world.rng, world.scale
    expr: List[tuple] = [("Gene ID", "Gene name", "Anatomical entity ID", "Anatomical entity name", "Expression",
                          "Call quality", "FDR", "Expression score", "Expression rank")]
    anatomy_ids = [t["id"] for t in world.terms["UBERON"]] + ["UBERON:9999999"]
    ensembl_all = [world.ensembl_id(g) for g in world.genes] + ["ENSG99999999999"]
    for e, a in zip(world.pick(ensembl_all, 60 * scale), world.pick(anatomy_ids, 60 * scale)):
        call = "present" if rng.random() < 0.7 else "absent"
        quality = "gold quality" if rng.random() < 0.6 else "silver quality"
        expr.append((e, "name", a, "organ", call, quality, "0.001", "50.0", "1000"))
    diff: List[tuple] = [("Gene ID", "Gene name", "Anatomical entity ID", "Anatomical entity name",
                          "Developmental stage ID", "Developmental stage name", "Differential expression",
                          "Call quality")]
    for e, a in zip(world.pick(ensembl_all, 50 * scale), world.pick(anatomy_ids, 50 * scale)):
        direction = ["over-expression", "under-expression", "no diff expression"][int(rng.integers(0, 3))]
        quality = "high quality" if rng.random() < 0.6 else "low quality"
        diff.append((e, "name", a, "organ", "HsapDv:0000087", "adult", direction, quality))
    return {_file("Bgee", "expression"): _tsv(expr), _file("Bgee", "differential"): _tsv(diff)}


def _drugcentral(world: World) -> Files:
    structs = list(range(1, 1 + len(world.drugs)))
    dump = ["--", "-- PostgreSQL database dump (openbench sample)", "--", "",
            "COPY public.identifier (id, identifier, id_type, struct_id, parent_match) FROM stdin;"]
    for i, (struct, drug) in enumerate(zip(structs[:-1], world.drugs)):
        dump.append(f"{i + 1}\t{drug}\tPUBCHEM_CID\t{struct}\t\\N")
    dump.append(f"{len(structs) + 1}\tCHEMBL1\tChEMBL_ID\t{structs[0]}\t\\N")
    dump += ["\\.", "",
             "COPY public.omop_relationship (id, struct_id, concept_id, relationship_name, concept_name, umls_cui, "
             "snomed_full_name, cui_semantic_type, snomed_conceptid) FROM stdin;"]
    for i, (struct, cui) in enumerate(zip(world.pick(structs, 40 * world.scale), world.pick(world.umls,
                                                                                            40 * world.scale))):
        kind = "indication" if world.rng.random() < 0.7 else "contraindication"
        dump.append(f"{i + 1}\t{struct}\t{i}\t{kind}\tname\t{cui}\tname\tT047\t{i}")
    dump += ["\\.", ""]
    return {_file("DrugCentral", "dump"): "\n".join(dump) + "\n"}


# the files, source by source, in the order they draw from the generator
STEPS: Tuple[Callable[[World], Files], ...] = (_ontologies, _id_mappings, _string, _stitch, _go_annotations,
                                               _disgenet, _hpo, _ctd, _sider, _bgee, _drugcentral)


def make_sample(folder: Path, seed: int = 7, scale: int = 1) -> None:
    """Write every sample file into ``folder`` (see the module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    world = World.create(seed, scale)
    for step in STEPS:
        for name, text in step(world).items():
            _write(folder, name, text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--output", type=Path, default=FILES)
    args = parser.parse_args()
    make_sample(args.output, args.seed, args.scale)


if __name__ == "__main__":
    main()
