"""Benchmark: ``openbench generate --no-download`` on source files of the real sizes.

The inputs are synthetic but in the real formats, written with the same id schemes as the
embedded sample (so id mappings resolve), at the row counts below times ``--fraction``. The row
counts are the providers' published figures, rounded (human, around the releases OpenBioLink
used); where a figure is uncertain the comment says so. Prints wall time of the command, source
rows read per second and peak memory (the child's max RSS); targets on the 2-core machine:
>= 1 million rows/s and < 8 GB.

    python benchmarks/bench_generate.py [--fraction 1] [--workdir DIR] [--seed 0]

The targets hold for the real sizes (``--fraction 1``, the default; about 3 GB of disk and a
minute to write the inputs); smaller fractions are for quick looks, where the mappings and
ontologies (always whole) and start-up weigh more than the rows.
"""
from __future__ import annotations

import argparse
import gzip
import io
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from graphgen.recipes import SOURCES  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peak import run_measured  # noqa: E402

REAL_ROWS = {
    "string_links": 11_759_454,     # 9606.protein.links.v11.0 (STRING download page)
    "string_actions": 3_300_000,    # 9606.protein.actions.v11.0, about
    "string_entrez": 19_000,        # human.entrez_2_string.2018, about
    "stitch_links": 15_473_939,     # 9606.protein_chemical.links.v5.0
    "stitch_actions": 6_000_000,    # 9606.actions.v5.0, uncertain (order of magnitude)
    "gaf": 600_000,                 # goa_human.gaf, about (issue note)
    "go_terms": 44_000,             # go-basic.obo terms
    "disgenet_gda": 84_038,         # curated_gene_disease_associations (v7)
    "disgenet_mappings": 60_000,    # disease_mappings, about
    "hpoa": 270_000,                # phenotype.hpoa, about
    "hpo_terms": 17_000,            # hp.obo terms
    "genes_to_phenotype": 300_000,  # about
    "bgee_expression": 3_100_000,   # Homo_sapiens_expr_simple, about
    "bgee_differential": 500_000,   # Homo_sapiens_diffexpr-anatomy-simple (v13), uncertain
    "ctd": 135_000,                 # CTD_genes_pathways, about
    "sider": 309_849,               # meddra_all_se (SIDER 4.1)
    "drugcentral_omop": 37_000,     # omop_relationship rows, about
    "drugcentral_identifier": 70_000,
    "uniprot_selected": 200_000,    # HUMAN_9606_idmapping_selected (Swiss-Prot + TrEMBL), about
    "do_terms": 11_000,
    "uberon_terms": 15_000,
}
N_GENES, N_DRUGS = 20_000, 100_000
FULL_SIZE = ("string_entrez", "uniprot_selected", "disgenet_mappings", "go_terms", "hpo_terms", "do_terms",
             "uberon_terms", "drugcentral_identifier")


def _columns(frame: pl.DataFrame, *expressions) -> pl.DataFrame:
    """``frame.select`` with positional names, so that repeated literals do not clash."""
    return frame.select([(pl.col(e) if isinstance(e, str) else e).alias(f"c{i}") for i, e in enumerate(expressions)])


def _gz(path: Path, frame: pl.DataFrame, separator: str = "\t", header: str = "") -> int:
    buffer = io.BytesIO()
    frame.write_csv(buffer, include_header=False, separator=separator, quote_style="never")
    data = header.encode() + buffer.getvalue()
    if path.suffix == ".gz":
        with gzip.open(path, "wb", compresslevel=1) as handle:
            handle.write(data)
    elif path.suffix == ".zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            archive.writestr(path.name[:-4], data)
    else:
        path.write_bytes(data)
    return frame.height


def _obo(path: Path, prefix: str, count: int, rng, xrefs=(), part_of: float = 0.0) -> int:
    """A synthetic OBO file: ``count`` terms in an is_a tree, each with one xref per entry of
    ``xrefs`` ((text, offset): ``xref: <text><the term's number + offset>``), and a
    ``relationship: part_of`` to an earlier term for a ``part_of`` share of them. Returns lines written."""
    ids = np.arange(1, count + 1)
    parents = np.maximum(1, (rng.random(count) * ids).astype(np.int64))
    wholes = np.maximum(1, (rng.random(count) * ids).astype(np.int64))
    with_part = rng.random(count) < part_of
    frame = pl.DataFrame({"i": ids, "p": parents, "w": wholes, "has_part": with_part})
    lines = [pl.format("[Term]\nid: " + prefix + ":{}\nname: term {}\nis_a: " + prefix + ":{} ! parent", "i", "i", "p")]
    lines += [pl.format("xref: " + text + "{}", pl.col("i") + offset) for text, offset in xrefs]
    lines.append(pl.when(pl.col("has_part")).then(pl.format("relationship: part_of " + prefix + ":{} ! whole", "w"))
                 .otherwise(pl.lit(None)))
    frame = frame.select(pl.concat_str(lines, separator="\n", ignore_nulls=True).alias("x"))
    path.write_text("format-version: 1.2\n\n" + "\n\n".join(frame["x"].to_list()) + "\n")
    return count * (4 + len(xrefs)) + int(with_part.sum())


def make_inputs(folder: Path, fraction: float, seed: int) -> int:
    """Write every source file; returns the number of data rows written (lines for OBO files)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    n = {key: max(10, int(value * fraction)) for key, value in REAL_ROWS.items()}
    n.update({key: REAL_ROWS[key] for key in FULL_SIZE})  # mappings and ontologies stay whole
    name = lambda source, key: folder / SOURCES[source][key].filename  # noqa: E731
    genes = lambda size: rng.integers(1000, 1000 + N_GENES, size)  # noqa: E731
    drugs = lambda size: rng.integers(1, N_DRUGS, size)  # noqa: E731
    scores = lambda size: rng.integers(150, 1000, size)  # noqa: E731
    rows = 0
    ensp = lambda col: pl.format("9606.ENSP{}", pl.col(col).cast(pl.String).str.zfill(11))  # noqa: E731
    frame = pl.DataFrame({"a": genes(n["string_links"]), "b": genes(n["string_links"]), "s": scores(n["string_links"])})
    rows += _gz(name("STRING", "links"), _columns(frame, ensp("a"), ensp("b"), "s"), " ", "protein1 protein2 combined_score\n")
    modes = np.array(["activation", "binding", "catalysis", "expression", "inhibition", "ptmod", "reaction"])
    k = n["string_actions"]
    actions = np.array(["", "activation", "inhibition"])
    frame = pl.DataFrame({"a": genes(k), "b": genes(k), "m": modes[rng.integers(0, 7, k)],
                          "x": actions[rng.integers(0, 3, k)],
                          "d": np.where(rng.random(k) < 0.5, "t", "f"), "s": scores(k)})
    rows += _gz(name("STRING", "actions"), _columns(frame, ensp("a"), ensp("b"), "m", "x", "d", "d", "s"),
                header="item_id_a\titem_id_b\tmode\taction\tis_directional\ta_is_acting\tscore\n")
    frame = pl.DataFrame({"g": np.arange(1000, 1000 + min(N_GENES, n["string_entrez"]))})
    rows += _gz(name("STRING", "entrez"), _columns(frame, pl.lit("9606"), "g", ensp("g")), header="# NCBI taxid\n")
    cid = lambda col: pl.format("CIDs{}", pl.col(col).cast(pl.String).str.zfill(8))  # noqa: E731
    k = n["stitch_links"]
    frame = pl.DataFrame({"d": drugs(k), "g": genes(k), "s": scores(k)})
    rows += _gz(name("STITCH", "links"), _columns(frame, cid("d"), ensp("g"), "s"), header="chemical\tprotein\tcombined_score\n")
    k = n["stitch_actions"]
    stitch_modes = np.append(modes, "pred_bind")
    frame = pl.DataFrame({"d": drugs(k), "g": genes(k), "m": stitch_modes[rng.integers(0, 8, k)],
                          "x": actions[rng.integers(0, 3, k)], "s": scores(k)})
    rows += _gz(name("STITCH", "actions"), _columns(frame, cid("d"), ensp("g"), "m", "x", pl.lit("t"), "s"),
                header="item_id_a\titem_id_b\tmode\taction\ta_is_acting\tscore\n")
    k = n["gaf"]
    evidence = np.array(["IEA", "EXP", "TAS", "IDA"])
    qualifiers = np.where(rng.random(k) < 0.02, "NOT|involved_in", "involved_in")  # GAF NOT: true negatives
    frame = pl.DataFrame({"g": genes(k), "t": rng.integers(1, n["go_terms"], k), "e": evidence[rng.integers(0, 4, k)],
                          "q": qualifiers})
    rows += _gz(name("GO", "annotations"), _columns(frame,
        pl.lit("UniProtKB"), pl.format("P{}", pl.col("g") + 10000), pl.lit("S"), "q",
        pl.format("GO:{}", pl.col("t").cast(pl.String).str.zfill(7)), pl.lit("PMID:1"), "e", pl.lit(""), pl.lit("P"),
        pl.lit("n"), pl.lit(""), pl.lit("protein"), pl.lit("taxon:9606"), pl.lit("20200101"), pl.lit("UniProt"),
        pl.lit(""), pl.lit("")), header="!gaf-version: 2.2\n")
    rows += _obo(name("GO", "ontology"), "GO", n["go_terms"], rng, part_of=0.1)
    # DO names the diseases of HPO's annotations as current releases do: MIM: and ORDO: xrefs
    rows += _obo(name("DO", "ontology"), "DOID", n["do_terms"], rng,
                 (("UMLS_CUI:C", 0), ("MIM:", 600000), ("ORDO:", 0)))
    rows += _obo(name("HPO", "ontology"), "HP", n["hpo_terms"], rng, (("UMLS:C", 0),))
    rows += _obo(name("UBERON", "ontology"), "UBERON", n["uberon_terms"], rng, part_of=0.1)
    k = n["disgenet_gda"]
    frame = pl.DataFrame({"g": genes(k), "c": rng.integers(1, n["do_terms"], k), "s": rng.random(k).round(2)})
    rows += _gz(name("DisGeNet", "curated"), _columns(frame, "g", pl.lit("S"), pl.lit("0.5"), pl.lit("0.5"),
                                                          pl.format("C{}", "c"), *[pl.lit("x")] * 4, "s",
                                                          *[pl.lit("1")] * 5, pl.lit("CURATED")),
                header="geneId\tgeneSymbol\tDSI\tDPI\tdiseaseId\tdiseaseName\tdiseaseType\tdiseaseClass\t"
                       "diseaseSemanticType\tscore\tEI\tYearInitial\tYearFinal\tNofPmids\tNofSnps\tsource\n")
    frame = pl.DataFrame({"c": np.arange(1, n["disgenet_mappings"] + 1)})
    rows += _gz(name("DisGeNet", "mappings"), _columns(frame, pl.format("C{}", "c"), pl.lit("n"), pl.lit("DO"),
                                                           pl.col("c").cast(pl.String).str.zfill(7), pl.lit("n")),
                header="diseaseId\tname\tvocabulary\tcode\tvocabularyName\n")
    k = n["hpoa"]
    # as HPO 2025: OMIM, ORPHA and DECIPHER diseases; NOT (true negative) rows on ORPHA diseases only
    namespace = rng.choice(np.array(["OMIM", "ORPHA", "DECIPHER"]), k, p=[0.58, 0.41, 0.01])
    qualifier = np.where((namespace == "ORPHA") & (rng.random(k) < 0.006), "NOT", "")
    frame = pl.DataFrame({"d": rng.integers(1, 9000, k), "h": rng.integers(1, n["hpo_terms"], k), "ns": namespace,
                          "q": qualifier})
    disease = pl.format("{}:{}", "ns", pl.when(pl.col("ns") == "OMIM").then(pl.col("d") + 600000).otherwise("d"))
    rows += _gz(name("HPO", "annotations"), _columns(frame,
        disease, pl.lit("n"), "q", pl.format("HP:{}", pl.col("h").cast(pl.String)
                                                                                          .str.zfill(7)),
        pl.lit("PMID:1"), pl.lit("PCS"), *[pl.lit("")] * 4, pl.lit("P"), pl.lit("HPO:x")),
        header="#version: bench\ndatabase_id\tdisease_name\tqualifier\thpo_id\treference\tevidence\tonset\tfrequency\t"
               "sex\tmodifier\taspect\tbiocuration\n")
    k = n["genes_to_phenotype"]
    frame = pl.DataFrame({"g": genes(k), "h": rng.integers(1, n["hpo_terms"], k)})
    rows += _gz(name("HPO", "genes"), _columns(frame, "g", pl.lit("S"), pl.format("HP:{}", pl.col("h").cast(pl.String)
                                                                               .str.zfill(7)), pl.lit("n"), pl.lit("-"),
                                                   pl.lit("OMIM:1")),
                header="ncbi_gene_id\tgene_symbol\thpo_id\thpo_name\tfrequency\tdisease_id\n")
    ensg = lambda col: pl.format("ENSG{}", pl.col(col).cast(pl.String).str.zfill(11))  # noqa: E731
    uberon = lambda size: rng.integers(1, n["uberon_terms"], size)  # noqa: E731
    k = n["bgee_expression"]
    frame = pl.DataFrame({"g": genes(k), "a": uberon(k), "x": np.where(rng.random(k) < 0.7, "present", "absent"),
                          "q": np.where(rng.random(k) < 0.6, "gold quality", "silver quality")})
    rows += _gz(name("Bgee", "expression"), _columns(frame, 
        ensg("g"), pl.lit("n"), pl.format("UBERON:{}", pl.col("a").cast(pl.String).str.zfill(7)), pl.lit("n"), "x", "q"),
        header="Gene ID\tGene name\tAnatomical entity ID\tAnatomical entity name\tExpression\tCall quality\n")
    k = n["bgee_differential"]
    directions = np.array(["over-expression", "under-expression", "no diff expression"])
    frame = pl.DataFrame({"g": genes(k), "a": uberon(k), "x": directions[rng.integers(0, 3, k)],
                          "q": np.where(rng.random(k) < 0.6, "high quality", "low quality")})
    rows += _gz(name("Bgee", "differential"), _columns(frame, 
        ensg("g"), pl.lit("n"), pl.format("UBERON:{}", pl.col("a").cast(pl.String).str.zfill(7)), pl.lit("n"),
        pl.lit("HsapDv:1"), pl.lit("adult"), "x", "q"),
        header="Gene ID\tGene name\tAnatomical entity ID\tAnatomical entity name\tDevelopmental stage ID\t"
               "Developmental stage name\tDifferential expression\tCall quality\n")
    k = n["ctd"]
    frame = pl.DataFrame({"g": genes(k), "p": rng.integers(1, 3000, k)})
    rows += _gz(name("CTD", "pathways"), _columns(frame, pl.lit("S"), "g", pl.lit("p"), pl.format("KEGG:hsa{}", "p")),
                header="# GeneSymbol\tGeneID\tPathwayName\tPathwayID\n")
    k = n["sider"]
    frame = pl.DataFrame({"d": drugs(k), "u": rng.integers(1, n["hpo_terms"], k)})
    rows += _gz(name("SIDER", "side_effects"), _columns(frame, 
        pl.format("CID1{}", pl.col("d").cast(pl.String).str.zfill(8)),
        pl.format("CID0{}", pl.col("d").cast(pl.String).str.zfill(8)), pl.format("C{}", "u"), pl.lit("PT"),
        pl.format("C{}", "u"), pl.lit("effect")))
    k = n["uniprot_selected"]
    g = np.arange(1000, 1000 + k) % (1000 + N_GENES) + 1000
    frame = pl.DataFrame({"g": g})
    rows += _gz(name("UniProt", "selected"), _columns(frame, 
        pl.format("P{}", pl.col("g") + 10000), pl.lit("X"), "g", *[pl.lit("")] * 15, ensg("g"), *[pl.lit("")] * 3))
    omop, ident = n["drugcentral_omop"], n["drugcentral_identifier"]
    identifier = _columns(pl.DataFrame({"i": np.arange(ident)}),
                          pl.col("i") + 1, pl.col("i") + 1, pl.lit("PUBCHEM_CID"), pl.col("i") + 1, pl.lit("\\N"))
    relation = pl.DataFrame({"i": np.arange(omop), "s": rng.integers(1, ident, omop),
                             "u": rng.integers(1, n["do_terms"], omop),
                             "k": np.where(rng.random(omop) < 0.7, "indication", "contraindication")})
    relation = _columns(relation, pl.col("i") + 1, "s", "i", "k", pl.lit("n"), pl.format("C{}", "u"), pl.lit("n"),
                        pl.lit("T047"), "i")
    parts = []
    for header, frame in (("COPY public.identifier (id, identifier, id_type, struct_id, parent_match) FROM stdin;\n",
                           identifier),
                          ("COPY public.omop_relationship (id, struct_id, concept_id, relationship_name, concept_name, "
                           "umls_cui, snomed_full_name, cui_semantic_type, snomed_conceptid) FROM stdin;\n", relation)):
        buffer = io.BytesIO()
        frame.write_csv(buffer, include_header=False, separator="\t", quote_style="never")
        parts.append(header.encode() + buffer.getvalue() + b"\\.\n\n")
    with gzip.open(name("DrugCentral", "dump"), "wb", compresslevel=1) as handle:
        handle.write(b"-- bench dump\n" + b"".join(parts))
    return rows + omop + ident


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fraction", type=float, default=1.0, help="share of the real row counts (1 = real size)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="openbench-bench-generate-"))
    sources = workdir / f"sources-{args.fraction}-{args.seed}"
    started = time.perf_counter()
    rows = make_inputs(sources, args.fraction, args.seed)
    print(f"wrote {rows:,} source rows under {sources} in {time.perf_counter() - started:.1f} s")
    command = [sys.executable, "-m", "openbench", "generate", "--sources-dir", str(sources), "--no-download",
               "--output", str(workdir / "out"), "--no-progress", "--qual", "nq"]
    seconds, peak_gb, _, _, status = run_measured(command, capture=False)
    if status != 0:
        raise SystemExit("openbench generate failed")
    rate = rows / seconds
    print(f"openbench generate: {seconds:.1f} s, {rate / 1e6:.2f} million source rows/s (target >= 1.0), "
          f"peak memory {peak_gb:.2f} GB (target < 8)")
    edges = sum(1 for _ in open(workdir / "out" / "graph_files" / "edges.csv", "rb"))
    verdict = "met" if rate >= 1e6 and peak_gb < 8 else "MISSED"
    print(f"{edges:,} edges written; " + (f"targets {verdict}" if args.fraction >= 1 else
                                          "the targets are stated for --fraction 1"))


if __name__ == "__main__":
    main()
