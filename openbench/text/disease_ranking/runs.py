"""Run disease-ranking methods over a test set into the per-case cache, and evaluate a cache.

:func:`run_methods` scores each case with every method still missing from its cache file (all of
them with ``resume=False``), stores the top-N diseases plus the ground-truth ones wherever they rank
(:func:`openbench.text.disease_ranking.ranked_entries`) through :func:`save_cache`, and on failure
writes ``case_NNNN.error`` and goes on. :func:`evaluate_cache` turns the cached entries back into
:class:`CaseRank` tie blocks per method and computes the metrics of
:mod:`openbench.text.disease_ranking.metrics`.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from openbench._io.outputs import strict_json
from openbench.progress import progress as progress_bar

from openbench.errors import InputError, UsageError
from openbench.text.disease_ranking.cache import (DEFAULT_ROOT, cache_dir_for, cache_path_for, cached_cases,
                                                  disease_id, load_cache, read_case, record_error, save_cache)
from openbench.text.disease_ranking.knowledge_base import METHODS, KnowledgeBase, ranked_entries
from openbench.text.disease_ranking.case_sets import TestSet, load_test_set
from openbench.text.disease_ranking.metrics import DEFAULT_KS, CaseRank, rank_metrics

__all__ = ["PNG_SOFTWARE", "parse_methods", "run_methods", "case_rank_from_entries", "evaluate_cache",
           "format_report", "plot_topk", "default_dataset_name", "check_dataset_name", "resolve_cache_dir",
           "rank_test_set"]

logger = logging.getLogger(__name__)
PNG_SOFTWARE = "openbench"  # the PNG text chunk that marks a plot as openbench's (it may be replaced)


def parse_methods(text: str) -> List[str]:
    methods = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise InputError(f"unknown method(s) {', '.join(unknown) or '(none given)'}; expected a comma-separated "
                         f"subset of {', '.join(METHODS)}")
    return list(dict.fromkeys(methods))


def run_methods(test_set: TestSet, kb: KnowledgeBase, methods: Sequence[str], cache_dir, top_n: int = 100,
                resume: bool = True, progress: bool = True) -> Dict[str, int]:
    """Score every case; returns counts: ``scored``, ``skipped`` (already cached), ``failed``, ``dropped_terms``."""
    if top_n < 1:
        raise InputError(f"--top-n must be positive, got {top_n}")
    cache_dir = Path(cache_dir)
    counts = {"scored": 0, "skipped": 0, "failed": 0, "dropped_terms": 0}
    for index, case in enumerate(progress_bar(test_set.cases, desc="ranking", unit="case", enabled=progress)):
        cache_file = cache_path_for(cache_dir, index)
        cached = (load_cache(cache_file) or {}) if resume and cache_file.exists() else {}
        todo = [m for m in methods if m not in cached.get("methods_run", [])]  # one read of the case file
        if not todo:
            counts["skipped"] += 1
            continue
        try:
            query, dropped = kb.query_indices(case.hpo_terms)
            counts["dropped_terms"] += len(dropped)
            results, seconds = {}, {}
            for method in todo:
                started = time.perf_counter()
                scores = kb.scores(method, query)
                results[method] = ranked_entries(kb, scores, case.ground_truth, top_n)
                seconds[method] = time.perf_counter() - started
            save_cache(cache_file, index, case.hpo_terms, case.ground_truth, results, seconds)
            counts["scored"] += 1
        except Exception as error:  # a failing case is recorded and the batch goes on
            record_error(cache_file, error)
            logger.warning("case %d failed: %s: %s", index, type(error).__name__, error)
            counts["failed"] += 1
    if counts["dropped_terms"]:
        logger.warning("%d query term(s) were not in the ontology and were dropped", counts["dropped_terms"])
    return counts


def case_rank_from_entries(entries: Sequence[dict], truth: Sequence[str]) -> CaseRank:
    """The best ground-truth tie block among cached entries (``rank``/``rank_last``; from scores if absent)."""
    truth_key = tuple(sorted(set(truth)))
    candidates = max((int(e.get("candidates", 0)) for e in entries), default=0) or len(entries)
    hits = [e for e in entries if disease_id(e) in truth_key]
    if not hits:
        return CaseRank(None, None, candidates, truth_key)
    best = min(hits, key=lambda e: (int(e["rank"]), int(e.get("rank_last", e["rank"]))))
    if "rank_last" in best:
        return CaseRank(int(best["rank"]), int(best["rank_last"]), candidates, truth_key)
    same = [e for e in entries if e.get("score") == best.get("score")]
    return CaseRank(int(best["rank"]), max(int(e["rank"]) for e in same), candidates, truth_key)


def evaluate_cache(cache_dir, ties: str = "mean", ks: Sequence[int] = DEFAULT_KS
                   ) -> Tuple[Dict[str, dict], List[Tuple[Path, str]]]:
    """Per method: the metrics of :func:`rank_metrics` plus ``skipped`` (cases without that method)
    and ``corrupt`` (unreadable case files, left out). Reads only: nothing in the cache is moved,
    renamed or written. Returns (report, [(unreadable file, reason)])."""
    files = cached_cases(cache_dir)
    if not files:
        raise InputError("no case_NNNN.json files", cache_dir)
    per_method: Dict[str, List[CaseRank]] = {}
    cases, corrupt = [], []
    for path in files:
        try:
            data = read_case(path)
            ranks = {method: case_rank_from_entries(entries, data.get("ground_truth", []))
                     for method, entries in data.get("results", {}).items()}
        except (InputError, KeyError, TypeError, ValueError) as error:
            corrupt.append((path, error.reason if isinstance(error, InputError) else f"{type(error).__name__}: "
                                                                                        f"{error}"))
            continue
        cases.append(data)
        for method, rank in ranks.items():
            per_method.setdefault(method, []).append(rank)
    report = {}
    for method in sorted(per_method):
        metrics = rank_metrics(per_method[method], ks, ties)
        metrics["skipped"] = len(cases) - len(per_method[method])
        metrics["corrupt"] = len(corrupt)
        report[method] = metrics
    return report, corrupt


def format_report(report: Dict[str, dict], fmt: str, ks: Sequence[int] = DEFAULT_KS) -> str:
    columns = [f"top{k}" for k in ks] + [f"macro_top{k}" for k in ks] + ["median_rank", "mrr", "cases", "missing",
                                                                          "skipped", "corrupt"]
    if fmt == "json":
        return strict_json(report, indent=2) + "\n"
    rows = [[method] + [_cell(report[method].get(c)) for c in columns] for method in report]
    header = ["method"] + columns
    if fmt == "csv":
        return "\n".join(",".join(line) for line in [header, *rows]) + "\n"
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [header, *rows]) + "\n"


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "" if value is None else str(value)


def plot_topk(report: Dict[str, dict], path, ks: Sequence[int] = DEFAULT_KS, ties: str = "mean",
              inputs: Sequence = ()) -> Path:
    """A PNG of the top-k accuracy curves per method, micro over cases (needs matplotlib: pip
    install 'openbench[plot]'); its title names the averaging and the tie policy."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("plotting needs matplotlib: pip install 'openbench[plot]'") from None
    from openbench._io import atomic_path, is_openbench_png

    figure, axes = plt.subplots(figsize=(6, 4))
    for method, metrics in report.items():
        axes.plot(list(ks), [metrics.get(f"top{k}", 0.0) for k in ks], marker="o", label=method)
    axes.set_xscale("log")
    axes.set_xticks(list(ks), [str(k) for k in ks])
    axes.set_xlabel("k")
    axes.set_ylabel("top-k accuracy")
    axes.set_ylim(0, 1)
    axes.legend()
    axes.grid(alpha=0.3)
    cases = max((int(metrics.get("cases", 0)) for metrics in report.values()), default=0)
    axes.set_title(f"top-k accuracy, micro over {cases} cases; ties: {ties}")
    path = Path(path)
    with atomic_path(path, inputs, recognise=is_openbench_png) as temporary:
        figure.savefig(temporary, format="png", dpi=120, bbox_inches="tight", metadata={"Software": PNG_SOFTWARE})
    plt.close(figure)
    return path


def default_dataset_name(test_set_path) -> str:
    return Path(test_set_path).stem


def check_dataset_name(name: str) -> str:
    """A cache folder name: one path component, so that the cache stays inside its root."""
    if not name or name in (".", "..") or Path(name).name != name or "/" in name or "\\" in name or "\0" in name:
        raise UsageError(f"--dataset {name!r}: expected a plain folder name (no path separators, not '.' or '..'); "
                         "the cache must stay inside --cache-root")
    return name


def resolve_cache_dir(cache_root: Optional[str], dataset: str) -> Path:
    return cache_dir_for(check_dataset_name(dataset), Path(cache_root) if cache_root else DEFAULT_ROOT)


def rank_test_set(test_set, methods_text: str, *, dataset: Optional[str] = None, cache_root=None, top_n: int = 100,
                  annotations=None, ontology=None, resume: bool = True, progress: bool = True) -> str:
    """``openbench text rank-diseases``: rank every case of ``test_set`` into its cache; returns a summary line."""
    methods = parse_methods(methods_text)
    cache_dir = resolve_cache_dir(cache_root, dataset or default_dataset_name(test_set))
    cases = load_test_set(test_set)
    kb = KnowledgeBase.from_files(annotations, ontology)
    counts = run_methods(cases, kb, methods, cache_dir, top_n=top_n, resume=resume, progress=progress)
    return (f"{len(cases.cases)} cases ({', '.join(f'{k} {v}' for k, v in counts.items())}) against "
            f"{len(kb.diseases)} diseases; cache: {cache_dir}")
