"""Benchmark: ``openbench export`` (RDF N-Triples and BEL) on an HQ-scale synthetic TSV graph.

The graph has OpenBioLink HQ's size (about 4.8 million positive edges, 180 thousand nodes; true
negatives a tenth of that), random edges over the real edge types with the real id schemes. Each
export runs as a child process; wall time and peak memory (max RSS) are printed. As a peer, the
same RDF for a slice of the edges is built in an in-memory rdflib Graph and serialised by rdflib;
the ratio is per edge. Targets on the 2-core machine: RDF-NT < 4 minutes and < 3 GB; BEL
reported, target < 10 minutes.

    python benchmarks/bench_export.py [--edges 4800000] [--skip-bel] [--workdir DIR] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from graphgen.edge_types import EDGE_TYPES  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peak import run_measured  # noqa: E402

NODES = {"GENE": ("NCBIGENE:", 19_000, 1), "GO": ("GO:", 30_000, 1), "DIS": ("DOID:", 10_000, 1),
         "PHENOTYPE": ("HP:", 15_000, 1), "DRUG": ("PUBCHEM.COMPOUND:", 100_000, 1),
         "ANATOMY": ("UBERON:", 5_000, 1), "PATHWAY": ("REACTOME:R-HSA-", 2_000, 1)}
SOURCES = {"GENE_GENE": "STRING", "GENE_GO": "GO", "GENE_DIS": "DisGeNet", "GENE_PHENOTYPE": "HPO",
           "GENE_EXPRESSED_ANATOMY": "Bgee", "DRUG_PHENOTYPE": "SIDER", "GENE_DRUG": "STITCH",
           "DIS_DRUG": "DrugCentral", "IS_A": "GO", "GENE_PATHWAY": "CTD"}


def _ids(node_type: str, rng, size: int) -> np.ndarray:
    prefix, count, start = NODES[node_type]
    return np.char.add(prefix, (rng.integers(start, start + count, size)).astype(str))


def _edges(rng, total: int) -> pl.DataFrame:
    types = [t for t in EDGE_TYPES.values() if t.name != "PART_OF"]
    share = rng.dirichlet(np.ones(len(types)))
    frames = []
    for edge, weight in zip(types, share):
        size = max(10, int(total * weight))
        head, tail = edge.signatures[0]
        frames.append(pl.DataFrame({"id1": _ids(head, rng, size), "edge_type": edge.name, "id2": _ids(tail, rng, size),
                                    "qscore": rng.integers(700, 1000, size).astype(str),
                                    "source": SOURCES.get(edge.name, "STITCH" if head == "DRUG" else "STRING")}))
    return pl.concat(frames).unique(["id1", "edge_type", "id2"], keep="first", maintain_order=True)


def _nodes(edges: pl.DataFrame) -> pl.DataFrame:
    ids = pl.concat([edges["id1"], edges["id2"]]).unique()
    kind = {prefix.rstrip(":").split(":")[0]: name for name, (prefix, _, _) in NODES.items()}
    prefix = ids.str.extract(r"^([^:]+):", 1)
    return pl.DataFrame({"id": ids, "node_type": prefix.replace_strict(kind)}).sort(["node_type", "id"])


def make_graph(folder: Path, total: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, size in (("", total), ("TN_", total // 10)):
        edges = _edges(rng, size)
        edges.write_csv(folder / f"{prefix}edges.csv", include_header=False, separator="\t")
        _nodes(edges).write_csv(folder / f"{prefix}nodes.csv", include_header=False, separator="\t")
        if not prefix:
            count = edges.height
    (folder / "graph_props.json").write_text(json.dumps({"DIRECTED": True, "QUALITY": "HQ"}))
    return count


def run_export(graph: Path, fmt: str, out: Path):
    command = [sys.executable, "-m", "openbench", "export", "--graph", str(graph), "--format", fmt,
               "--output", str(out)]
    seconds, peak_gb, _, _, status = run_measured(command, capture=False)
    if status != 0:
        raise SystemExit(f"openbench export --format {fmt} failed")
    return seconds, peak_gb


def rdflib_peer(graph: Path, rows: int) -> float:
    """Seconds per edge for rdflib to build and serialise the same triples in memory."""
    from rdflib import Graph, Literal, URIRef
    from rdflib.namespace import RDF

    from graphgen.writers.rdf import VOCAB, node_iri

    edges = pl.read_csv(graph / "edges.csv", separator="\t", has_header=False, n_rows=rows, infer_schema=False,
                        new_columns=["id1", "edge_type", "id2", "qscore", "source"])
    started = time.perf_counter()
    memory = Graph()
    for n, (id1, edge_type, id2, qscore, source) in enumerate(edges.rows()):
        s, p, o = node_iri(id1), VOCAB[edge_type], node_iri(id2)
        statement = URIRef(f"urn:e{n}")
        memory.add((s, p, o))
        for triple in ((statement, RDF.type, RDF.Statement), (statement, RDF.subject, s),
                       (statement, RDF.predicate, p), (statement, RDF.object, o),
                       (statement, VOCAB.qscore, Literal(qscore)), (statement, VOCAB.source, Literal(source))):
            memory.add(triple)
    memory.serialize(destination=os.devnull, format="nt", encoding="utf-8")
    return (time.perf_counter() - started) / edges.height


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", type=int, default=4_800_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-bel", action="store_true")
    parser.add_argument("--peer-rows", type=int, default=50_000)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="openbench-bench-export-"))
    graph = workdir / f"graph-{args.edges}-{args.seed}"
    if not (graph / "edges.csv").exists():
        count = make_graph(graph, args.edges, args.seed)
    else:
        count = sum(1 for _ in open(graph / "edges.csv", "rb"))
    print(f"graph: {count:,} positive edges under {graph}")
    seconds, peak = run_export(graph, "RDF-NT", workdir / "rdf")
    size = sum(p.stat().st_size for p in (workdir / "rdf").iterdir()) / 1e9
    print(f"RDF-NT: {seconds:.1f} s, peak memory {peak:.2f} GB, {size:.1f} GB written "
          f"(targets < 240 s, < 3 GB): {'met' if seconds < 240 and peak < 3 else 'MISSED'}")
    per_edge = rdflib_peer(graph, args.peer_rows)
    print(f"rdflib in-memory Graph + serialize on {args.peer_rows:,} edges: {per_edge * 1e6:.1f} us/edge; "
          f"openbench {seconds / count * 1e6:.2f} us/edge (both files and nodes included): "
          f"{per_edge / (seconds / count):.1f}x")
    if not args.skip_bel:
        seconds, peak = run_export(graph, "BEL", workdir / "bel")
        print(f"BEL (streamed through PyBEL in chunks of edges): {seconds:.1f} s, peak memory {peak:.2f} GB "
              f"(target < 600 s): {'met' if seconds < 600 else 'MISSED'}")


if __name__ == "__main__":
    main()
