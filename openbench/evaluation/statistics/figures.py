"""``openbench report``: a self-contained HTML page of figures and readings for result records.

For each record ``NAME.json`` its ranks file ``NAME.ranks.parquet`` (``evaluate --ranks-output``),
when it lies beside it, is read and checked against the record; then:

* **per relation**: the realistic MRR of each relation per model, with a 95 % percentile
  bootstrap interval (``resamples`` draws of the relation's test triples with replacement, a
  triple with all its queries; seeded);
* **rank distribution**: the empirical CDF of the realistic ranks per model (the fraction of
  queries whose answer ranks at or above k);
* **degree strata**: the MRR per training-degree bucket of the answer (the record's ``by_degree``);
* **two models** (the first two records with ranks files): their paired comparison (``openbench compare``: difference, interval, p-values,
  verdict) and the per-relation differences of the reciprocal rank with bootstrap intervals.

Every figure's plotted numbers are written to ``figures.json`` beside the PNGs; the PNGs carry no
date or version, so the same records and seed give the same bytes (matplotlib's Agg backend).
Shapes: a ranks table has one row per query; the bootstrap draws an (resamples, T) index matrix
per relation of T triples.
"""
from __future__ import annotations

import html
import io
import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import polars as pl

from openbench.errors import InputError, UsageError
from openbench.task_registry import get_task, task_names, task_of
from openbench.evaluation.statistics.describe import (AMRI_READING, ranking_readings, record_protocol_line)
from openbench.evaluation.statistics.pages import figure_html, report_html, write_report

__all__ = ["FIGURES", "build_report", "relation_intervals", "paired_relation_intervals", "rank_ecdf"]

logger = logging.getLogger(__name__)

FIGURES = ("per_relation", "rank_ecdf", "degree_strata", "paired_relations", "over_time")
_TRIPLE = ["relation", "head", "tail"]


def _triples(ranks: pl.DataFrame, value: pl.Expr) -> pl.DataFrame:
    """(relation, head, tail, total of ``value`` over the triple's queries, its query count)."""
    return (ranks.with_columns(value.alias("value"))
            .group_by(_TRIPLE, maintain_order=True).agg(pl.col("value").sum().alias("total"),
                                                        pl.len().alias("queries"))
            .sort(_TRIPLE))


def _bootstrap(totals: np.ndarray, counts: np.ndarray, rng: np.random.Generator,
               resamples: int) -> Tuple[float, float]:
    """95 % percentile interval of sum(totals[i]) / sum(counts[i]) over ``resamples`` draws of the
    T triples with replacement ((resamples, T) indices)."""
    draws = rng.integers(0, totals.shape[0], size=(resamples, totals.shape[0]))
    values = totals[draws].sum(axis=1) / counts[draws].sum(axis=1)
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _per_relation(grouped: pl.DataFrame, seed: int, resamples: int, name: str,
                  bounds: Tuple[float, float] = (0.0, 1.0)) -> Dict[str, Dict[str, Any]]:
    """{relation: {name: mean over its queries, "low", "high", "queries", "triples"}} of
    :func:`_triples`'s table, relations in sorted order, one generator seeded by ``seed`` drawing
    for each in turn. A relation of one test triple has no interval to speak of (every resample is
    that triple: width 0, which would read as certainty): its interval is the whole range
    ``bounds``, flagged ``"unknown"``."""
    rng = np.random.default_rng(seed)
    out: Dict[str, Dict[str, Any]] = {}
    parts = grouped.partition_by("relation", as_dict=True, include_key=False)
    for (relation,), part in sorted(parts.items()):
        totals, counts = part["total"].to_numpy().astype(np.float64), part["queries"].to_numpy().astype(np.float64)
        low, high = _bootstrap(totals, counts, rng, resamples)
        out[relation] = {name: float(totals.sum() / counts.sum()), "low": low, "high": high,
                         "queries": int(counts.sum()), "triples": int(part.height)}
        if part.height == 1:
            out[relation].update(low=bounds[0], high=bounds[1], unknown=True)
    return out


def relation_intervals(ranks: pl.DataFrame, seed: int = 0, resamples: int = 1000) -> Dict[str, Dict[str, float]]:
    """{relation: {"mrr", "low", "high", "queries"}}: each relation's realistic MRR and its 95 %
    bootstrap interval over its triples."""
    return _per_relation(_triples(ranks, 1.0 / pl.col("rank")), seed, resamples, "mrr")


def paired_relation_intervals(a: pl.DataFrame, b: pl.DataFrame, seed: int = 0,
                              resamples: int = 1000) -> Dict[str, Dict[str, float]]:
    """{relation: {"difference", "low", "high", "queries"}}: the mean of 1/rank_a - 1/rank_b over
    each relation's queries (the same queries in both tables) and its 95 % bootstrap interval."""
    key = ["split", "side", *_TRIPLE]
    joined = a.select(*key, pl.col("rank").alias("rank_a")).join(
        b.select(*key, pl.col("rank").alias("rank_b")), on=key, how="inner")
    if joined.height != a.height or joined.height != b.height:
        raise InputError(f"the two ranks files hold different queries ({a.height} and {b.height}, {joined.height} "
                         "shared): a paired comparison needs the same queries")
    return _per_relation(_triples(joined, 1.0 / pl.col("rank_a") - 1.0 / pl.col("rank_b")), seed, resamples,
                         "difference", (-1.0, 1.0))


def rank_ecdf(ranks: pl.DataFrame) -> Dict[str, List[float]]:
    """{"rank": sorted distinct realistic ranks, "fraction": share of queries ranked at or above each}."""
    values = np.sort(ranks["rank"].to_numpy().astype(np.float64))
    distinct, counts = np.unique(values, return_counts=True)
    return {"rank": distinct.tolist(), "fraction": (np.cumsum(counts) / values.shape[0]).tolist()}


def _degree_strata(record: dict) -> Dict[str, float]:
    """{degree bucket: realistic MRR over both sides} of the record's ``by_degree`` block."""
    strata = record.get("by_degree") or {}
    return {bucket: block["both"]["realistic"]["mrr"] for bucket, block in strata.items()
            if (block.get("both") or {}).get("realistic", {}).get("mrr") is not None}


def _over_time(record: dict) -> Dict[str, Dict[str, float]]:
    """{period: {"years": after the cut-off, "mrr", "low", "high"}} of the record's ``by_period``
    block (a split by dates, ``evaluate --by-period``); {} without one."""
    block = record.get("by_period") or {}
    return {label: {"years": entry["days_after_cutoff"] / 365.25, "mrr": entry["metrics"]["mrr"],
                    "low": entry["intervals"]["mrr"][0], "high": entry["intervals"]["mrr"][1]}
            for label, entry in (block.get("periods") or {}).items()}


def _read_record(path: Path) -> Tuple[str, dict]:
    """(model name, record) of a result record file; a file of another kind is named as that kind."""
    from openbench._io.inputs import read_json
    from openbench.evaluation.statistics.ranks_table import is_openbench_ranks

    if is_openbench_ranks(path):
        raise InputError("a ranks file (evaluate --ranks-output); expected a result record (evaluate --output): give "
                         "the record, and the ranks file with --ranks", path)
    record = read_json(path, "result record")
    try:
        task = task_of(record) if isinstance(record, dict) else None
    except UsageError:
        task = None
    if task is None or record.get("written_by") != "openbench":
        raise InputError("not an openbench result record (evaluate --output writes one)", path)
    if not task.draws_report:
        drawn = [name for name in task_names() if get_task(name).draws_report]
        raise InputError(f"a {task.name} record: the report draws {' and '.join(drawn)} results", path)
    if (task.block_key or "metrics") not in record:
        raise InputError("not an openbench result record (evaluate --output writes one)", path)
    return str((record.get("model") or {}).get("name") or path.stem), record


def _checked_ranks(record: dict, ranks_path: Path) -> Optional[pl.DataFrame]:
    """The ranks of ``ranks_path`` when they are ``record``'s, else None; a damaged file is an error."""
    from openbench.evaluation.statistics.evidence import EvidenceError, check_against_record, read_ranks

    try:
        ranks, provenance = read_ranks(ranks_path)
    except EvidenceError as problem:
        raise InputError(str(problem), ranks_path) from None
    try:
        check_against_record(record, ranks, provenance, ranks_path)
    except EvidenceError:
        return None
    return ranks


def _load(path: Path) -> Tuple[str, dict, Optional[pl.DataFrame]]:
    """(model name, record, checked ranks or None) of a record file and the ranks file beside it
    (``NAME.json`` → ``NAME.ranks.parquet``, as evaluate names them)."""
    from openbench.evaluation.statistics.evidence import EvidenceError, check_against_record, read_ranks

    name, record = _read_record(path)
    if not task_of(record).keeps_ranks:
        return name, record, None
    ranks_path = path.with_suffix(".ranks.parquet")
    ranks = None
    if path.suffix == ".json" and ranks_path.is_file():
        try:
            ranks, provenance = read_ranks(ranks_path)
            check_against_record(record, ranks, provenance, ranks_path)
        except EvidenceError as problem:
            raise InputError(str(problem), ranks_path) from None
    return name, record, ranks


def _attach_ranks(models: Dict[str, Tuple[dict, Optional[pl.DataFrame]]], ranks_paths: Sequence[Path]) -> None:
    """Give each ``--ranks`` file to the record it belongs to (the one whose numbers it reproduces,
    in any order); a file that is no record's, or two files for one record, is an error."""
    from openbench.evaluation.statistics.ranks_table import is_openbench_ranks

    given: Dict[str, Path] = {}
    for path in ranks_paths:
        if not is_openbench_ranks(path):
            raise InputError("not a ranks file (evaluate --ranks-output writes one); --ranks takes ranks files",
                             path)
        owner = next((name for name, (record, _) in models.items() if name not in given
                      and task_of(record).keeps_ranks and _checked_ranks(record, path) is not None),
                     None)
        if owner is None:
            raise InputError("these ranks belong to none of the records given (the record and its ranks come from "
                             "the same evaluate run)", path)
        record, _ = models[owner]
        models[owner] = (record, _checked_ranks(record, path))
        given[owner] = path


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None}, bbox_inches="tight")
    return buffer.getvalue()


def _plot_per_relation(data: Dict[str, Dict[str, Dict[str, float]]]):
    import matplotlib.pyplot as plt

    relations = sorted({relation for model in data.values() for relation in model})
    figure, axes = plt.subplots(figsize=(9, 0.3 * len(relations) * max(1, len(data)) + 1.5))
    step = 0.8 / max(1, len(data))
    for index, (model, per) in enumerate(data.items()):
        ys = [position + index * step for position, relation in enumerate(relations) if relation in per]
        xs = [per[relation]["mrr"] for relation in relations if relation in per]
        errors = [[per[r]["mrr"] - per[r]["low"] for r in relations if r in per],
                  [per[r]["high"] - per[r]["mrr"] for r in relations if r in per]] \
            if all("low" in per[r] for r in per) else None
        line = axes.errorbar(xs, ys, xerr=errors, fmt="o", capsize=3, label=model)
        unknown = [(x, y) for x, y, r in zip(xs, ys, [r for r in relations if r in per]) if per[r].get("unknown")]
        if unknown:  # one test triple: the interval spans the axis, the point drawn hollow
            axes.plot(*zip(*unknown), "o", markerfacecolor="white", color=line[0].get_color())
    axes.set_yticks([position + 0.4 - step / 2 for position in range(len(relations))], relations, fontsize=12)
    axes.set_xlabel("realistic MRR (95 % bootstrap interval)", fontsize=12)
    axes.set_xlim(0, 1)
    axes.legend(fontsize=12)
    axes.invert_yaxis()
    return figure


def _plot_ecdf(data: Dict[str, Dict[str, List[float]]]):
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 5))
    for model, curve in data.items():
        axes.step(curve["rank"], curve["fraction"], where="post", label=model)
    axes.set_xscale("log")
    axes.set_xlabel("realistic rank k (log scale)", fontsize=12)
    axes.set_ylabel("share of queries ranked ≤ k", fontsize=12)
    axes.set_ylim(0, 1)
    axes.legend(fontsize=12)
    return figure


def _plot_strata(data: Dict[str, Dict[str, float]]):
    import matplotlib.pyplot as plt

    buckets = sorted({bucket for model in data.values() for bucket in model},
                     key=lambda label: int(label.split("-")[0]))
    figure, axes = plt.subplots(figsize=(9, 5))
    width = 0.8 / max(1, len(data))
    for index, (model, strata) in enumerate(data.items()):
        axes.bar([position + index * width for position, bucket in enumerate(buckets) if bucket in strata],
                 [strata[bucket] for bucket in buckets if bucket in strata], width=width, label=model)
    axes.set_xticks([position + 0.4 - width / 2 for position in range(len(buckets))], buckets, fontsize=12)
    axes.set_xlabel("training degree of the answer", fontsize=12)
    axes.set_ylabel("realistic MRR", fontsize=12)
    axes.legend(fontsize=12)
    return figure


def _plot_over_time(data: Dict[str, Dict[str, Dict[str, float]]]):
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 5))
    for model, periods in data.items():
        points = sorted(periods.items(), key=lambda item: item[1]["years"])
        xs, ys = [p["years"] for _, p in points], [p["mrr"] for _, p in points]
        errors = [[p["mrr"] - p["low"] for _, p in points], [p["high"] - p["mrr"] for _, p in points]]
        line = axes.errorbar(xs, ys, yerr=errors, fmt="o-", capsize=3, label=model)
        for (label, _), x, y in zip(points, xs, ys):
            axes.annotate(label, (x, y), textcoords="offset points", xytext=(4, 6), fontsize=10,
                          color=line[0].get_color())
    axes.axvline(0, color="#888888", linewidth=1)
    axes.set_xlim(left=0)
    axes.set_ylim(bottom=0)
    axes.set_xlabel("years after the cut-off (median date of the period's test edges)", fontsize=12)
    axes.set_ylabel("realistic MRR (95 % bootstrap interval)", fontsize=12)
    axes.legend(fontsize=12)
    return figure


def _plot_paired(data: Dict[str, Dict[str, float]], names: Sequence[str]):
    import matplotlib.pyplot as plt

    relations = list(data)
    figure, axes = plt.subplots(figsize=(9, 0.45 * len(relations) + 1.5))
    xs = [data[r]["difference"] for r in relations]
    errors = [[data[r]["difference"] - data[r]["low"] for r in relations],
              [data[r]["high"] - data[r]["difference"] for r in relations]]
    axes.errorbar(xs, range(len(relations)), xerr=errors, fmt="o", capsize=3, color="#3366aa")
    axes.axvline(0, color="#888888", linewidth=1)
    axes.set_yticks(range(len(relations)), relations, fontsize=12)
    axes.set_xlabel(f"reciprocal rank: {names[0]} − {names[1]} (95 % bootstrap interval)", fontsize=12)
    axes.invert_yaxis()
    return figure


def _figures(models: Dict[str, Tuple[dict, Optional[pl.DataFrame]]], seed: int, resamples: int
             ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(the plotted numbers per figure, the comparison of two models or {})."""
    from openbench.evaluation.statistics.compare import compare_ranks

    with_ranks = {name: ranks for name, (_, ranks) in models.items() if ranks is not None}
    data: Dict[str, Any] = {
        "per_relation": {name: relation_intervals(ranks, seed, resamples) for name, ranks in with_ranks.items()},
        "rank_ecdf": {name: rank_ecdf(ranks) for name, ranks in with_ranks.items()},
        "degree_strata": {name: strata for name, (record, _) in models.items() if (strata := _degree_strata(record))},
    }
    over_time = {name: points for name, (record, _) in models.items() if (points := _over_time(record))}
    if over_time:
        data["over_time"] = over_time
    for name, (record, ranks) in models.items():  # without ranks: the record's points, no interval
        if ranks is None:
            data["per_relation"][name] = {relation: {"mrr": block["both"]["realistic"]["mrr"]}
                                          for relation, block in sorted((record.get("per_relation") or {}).items())
                                          if (block.get("both") or {}).get("realistic")}
    comparison: Dict[str, Any] = {}
    if len(with_ranks) >= 2:  # the first two records with ranks, in the order given
        (name_a, a), (name_b, b) = list(with_ranks.items())[:2]
        data["paired_relations"] = paired_relation_intervals(a, b, seed, resamples)
        comparison = compare_ranks(a, b, seed=seed, resamples=resamples, names=(name_a, name_b))
        comparison["names"] = [name_a, name_b]
    return data, comparison


def build_report(record_paths: Sequence[Path], output: Path, seed: int = 0, resamples: int = 1000,
                 inputs: Sequence = (), ranks_paths: Sequence[Path] = ()) -> Path:
    """Write the report folder ``output`` (``index.html``, one PNG per figure, ``figures.json``)
    atomically, only over a folder openbench wrote, drawn by the records' task
    (:meth:`~openbench.evaluation.tasks.base.Task.report`); returns the page."""
    from openbench._io import check_output_folder

    if not record_paths:
        raise UsageError("give at least one result record (evaluate --output FILE)")
    ranks_paths = [Path(path) for path in ranks_paths]
    inputs = [*inputs, *ranks_paths]
    check_output_folder(output, [*record_paths, *inputs])
    models: Dict[str, Tuple[dict, Optional[pl.DataFrame]]] = {}
    for path in map(Path, record_paths):
        name, record, ranks = _load(path)
        while name in models:
            name = f"{name} ({path.stem})" if path.stem not in name else f"{name}'"
        models[name] = (record, ranks)
    _attach_ranks(models, ranks_paths)
    fingerprints = {(record.get("dataset") or {}).get("fingerprint") for record, _ in models.values()}
    if len(fingerprints) > 1:
        raise InputError("the records are of different datasets (fingerprints differ): a report compares models on "
                         "one dataset", record_paths[0])
    tasks = sorted({task_of(record).name for record, _ in models.values()})
    if len(tasks) > 1:
        raise InputError(f"the records are of different tasks ({' and '.join(tasks)}): a report draws one task",
                         record_paths[0])
    return get_task(tasks[0]).report(models, Path(output), seed, resamples, [*record_paths, *inputs])


def ranking_report(models: Dict[str, Tuple[dict, Optional[pl.DataFrame]]], output: Path, seed: int,
                   resamples: int, inputs: Sequence) -> Path:
    """The report folder of ranking records (with their ranks where given): per relation, the rank
    distribution, the degree strata and the paired comparison of the first two."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    data, comparison = _figures(models, seed, resamples)
    pngs: Dict[str, bytes] = {}
    plotters: Dict[str, Callable[[Any], Any]] = {"per_relation": _plot_per_relation, "rank_ecdf": _plot_ecdf,
                                                 "degree_strata": _plot_strata, "over_time": _plot_over_time}
    with matplotlib.rc_context({"font.size": 12}):
        for key, plot in plotters.items():
            if data.get(key):
                figure = plot(data[key])
                pngs[key] = _png(figure)
                plt.close(figure)
        if "paired_relations" in data:
            figure = _plot_paired(data["paired_relations"], comparison["names"])
            pngs["paired_relations"] = _png(figure)
            plt.close(figure)
    page = _page(models, comparison, pngs)
    summary = {"seed": seed, "resamples": resamples, "figures": data, "comparison": comparison,
               "not_drawn": not_drawn(models, pngs)}

    written = write_report(output, page, summary, pngs, inputs)
    logger.info("wrote the report of %d record(s) to %s", len(models), output)
    return written


_CAPTIONS = {
    "per_relation": "Realistic MRR per relation, with 95 % bootstrap intervals over the relation's test triples. "
                    "A point without a bar: the record's value, its ranks not given (evaluate --ranks-output, then "
                    "report --ranks FILE). A hollow point with a bar across the axis: a relation of one test "
                    "triple, whose interval is unknown.",
    "rank_ecdf": "Rank distribution: the share of queries whose answer ranks at or above k (higher and further "
                 "left is better).",
    "degree_strata": "MRR by the training degree of the answer: a model that only scores hubs well is strong on "
                     "the right and weak on the left.",
    "over_time": "Realistic MRR per period of the test edges' dates (a split by dates, evaluate --by-period), "
                 "against the years from the cut-off to the period's median date, with 95 % bootstrap intervals "
                 "over the period's test triples: a model that predicts what was found later holds its MRR as the "
                 "periods move away from the cut-off.",
    "paired_relations": "Per-relation difference of the reciprocal rank between the two models on the same queries, "
                        "with 95 % bootstrap intervals; an interval crossing 0 is no clear difference.",
}


def not_drawn(models: Dict[str, Tuple[dict, Optional[pl.DataFrame]]], pngs: Dict[str, bytes]) -> List[str]:
    """Why each figure (or part of one) is missing: a line per missing figure and per record
    without ranks."""
    without = [name for name, (_, ranks) in models.items() if ranks is None]
    with_ranks = len(models) - len(without)
    lines = []
    if without:
        lines.append(f"No ranks for {', '.join(without)} (neither NAME.ranks.parquet beside the record nor report "
                     "--ranks FILE; evaluate --ranks-output writes them): no intervals, rank distribution or paired "
                     "comparison for it.")
    reasons = {
        "per_relation": "no record holds per-relation results",
        "rank_ecdf": "no record has its ranks",
        "degree_strata": "no record holds MRR by training degree (by_degree: the evaluation reads the training "
                         "graph for it)",
        "paired_relations": f"a paired comparison needs two records with ranks; {with_ranks} given",
        "over_time": "no record holds metrics per period (evaluate --by-period on a split by dates)",
    }
    dated = any((record.get("dataset") or {}).get("time_cut") for record, _ in models.values())
    for key in FIGURES:
        if key not in pngs and (key != "over_time" or dated):  # time is asked of a split by dates only
            lines.append(f"Not drawn: {_TITLES[key]}: {reasons[key]}.")
    return lines


_TITLES = {"per_relation": "MRR per relation", "rank_ecdf": "the rank distribution",
           "degree_strata": "MRR by training degree", "paired_relations": "the per-relation paired comparison",
           "over_time": "MRR over the time since the cut-off"}


def _page(models: Dict[str, Tuple[dict, Optional[pl.DataFrame]]], comparison: Dict[str, Any],
          pngs: Dict[str, bytes]) -> str:
    """The report's HTML: protocol lines, a summary table with readings, the comparison, figures."""
    from openbench.evaluation.statistics.compare import comparison_verdict as verdict

    escape = html.escape
    first_record = next(iter(models.values()))[0]
    rows, readings = [], []
    for name, (record, _) in models.items():
        block = record["metrics"]["both"]["realistic"]
        cells = "".join(f"<td>{'-' if block.get(key) is None else f'{block[key]:.4f}'}</td>"
                        for key in ("mrr", "hits@1", "hits@10", "amri"))
        rows.append(f"<tr><td>{escape(name)}</td>{cells}<td>{escape(record_protocol_line(record))}</td></tr>")
        baseline = next((other["metrics"]["both"]["realistic"] for other_name, (other, _) in models.items()
                         if other_name != name and (other.get("model") or {}).get("kind") == "popularity"), None)
        readings += ranking_readings(name, block, baseline)
    parts = [f"<p class=\"protocol\">What these numbers are: {escape(record_protocol_line(first_record))}.</p>",
             "<table><thead><tr><th>model</th><th>MRR</th><th>hits@1</th><th>hits@10</th><th>AMRI</th>"
             "<th>protocol</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>",
             f"<p class=\"reading\">{escape(AMRI_READING)}.</p>"]
    parts += [f"<p class=\"reading\">{escape(line)}.</p>" for line in readings]
    if comparison:
        low, high = comparison["ci"]
        name_a, name_b = comparison["names"]
        parts.append(f"<h2>{escape(name_a)} against {escape(name_b)}, query by query</h2>"
                     f"<p class=\"comparison\">{comparison['metric']} over {comparison['queries']} paired queries: "
                     f"{escape(name_a)} {comparison['a']:.4f}, {escape(name_b)} {comparison['b']:.4f}, difference "
                     f"{comparison['difference']:+.4f}, 95 % interval [{low:+.4f}, {high:+.4f}] (paired bootstrap), "
                     f"p = {comparison['p_value']:.3g} (paired sign-flip permutation test).</p>"
                     f"<p class=\"reading\">{escape(verdict(comparison, name_a, name_b))}.</p>")
    parts += figure_html(pngs, FIGURES, _CAPTIONS)
    parts += [f"<p class=\"note\">{escape(line)}</p>" for line in not_drawn(models, pngs)]
    return report_html(f"openbench report: {', '.join(models)}", parts)


