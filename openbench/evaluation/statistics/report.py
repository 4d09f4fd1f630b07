"""Readable tables of result records."""
from __future__ import annotations

from typing import List, Optional

from openbench._io.outputs import visible
from openbench.evaluation.statistics.describe import AMRI_READING, ranking_readings, record_protocol_line

__all__ = ["format_table"]


def _cell(value: Optional[float], width: int = 8) -> str:
    if value is None:
        return "-".rjust(width)
    if abs(value) >= 1000:
        return f"{value:.1f}".rjust(width)
    return f"{value:.4f}".rjust(width)


def format_table(result: dict) -> str:
    """A fixed-width table of the headline metrics per side and rank type."""
    hits = [f"hits@{k}" for k in result["protocol"]["hits_at"]]
    columns = ["mrr", "mr", *hits, "amri"]
    lines: List[str] = []
    model = result.get("model", {})
    counts = result["dataset"]["counts"]
    split = result["protocol"].get("evaluation_split", "test")
    queries = (result.get("diagnostics") or {}).get("queries")
    evaluated = f"; {queries} queries evaluated" if queries is not None else ""
    lines.append(f"model {visible(model.get('name'))} ({model.get('kind')}) on {visible(result['dataset']['path'])}: "
                 f"{counts['entities']} entities, {counts['relations']} relations, {counts[split]} {split} "
                 f"triples{evaluated}")
    lines.append(f"this table: {record_protocol_line(result)}")
    lines.append(f"{result['timing']['seconds']:.2f} s on {result['device']}")
    protocol = result["protocol"]
    scope = []
    if protocol.get("entities"):
        scope.append(f"{protocol['entities']['count']} candidate entities "
                     f"({protocol['entities']['dropped_triples']} triple(s) with an answer outside dropped)")
    if protocol.get("sides", ["head", "tail"]) != ["head", "tail"]:
        scope.append(f"{'/'.join(protocol['sides'])} queries only")
    if scope:
        lines.append("scope: " + "; ".join(scope))
    header = f"{'side':<6}{'rank':<13}" + "".join(name.rjust(10) for name in columns)
    lines.append(header)
    lines.append("-" * len(header))
    for side in ("both", "head", "tail"):
        if result["metrics"].get(side) is None:
            lines.append(f"{side:<6}(not evaluated)")
            continue
        for rank_type in ("realistic", "optimistic", "pessimistic", "expected"):
            block = result["metrics"][side][rank_type]
            cells = "".join(_cell(block.get(name), 10) if name in block else " " * 10 for name in columns)
            lines.append(f"{side:<6}{rank_type:<13}{cells}")
    lines.append(AMRI_READING)
    headline = (result["metrics"].get("both") or {}).get(protocol.get("headline_rank_type", "realistic")) or {}
    lines += [f"reading: {line}" for line in ranking_readings(visible(model.get("name")), headline)]
    lines += _pyg_compat_lines(result)
    lines += period_lines(result)
    for warning in result.get("warnings", []):
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def period_lines(result: dict) -> List[str]:
    """The headline metrics per period of a dated split's test edges (the record's ``by_period``),
    each with its interval, and what a split by dates is read against."""
    block = result.get("by_period")
    if not block:
        return []
    names = ["mrr"] + [f"hits@{k}" for k in result["protocol"]["hits_at"]]
    level = int(round(100 * float(block.get("level", 0.95))))
    lines = [f"by {block['period']} of the test edges' dates (cut-off {block['cutoff']}; realistic ranks, both sides; "
             f"[{level} % bootstrap interval over the period's triples, {block['resamples']} resamples]):"]
    header = f"{block['period']:<9}{'triples':>9}{'days':>7}" + "".join(f"{name:>24}" for name in names)
    lines += [header, "-" * len(header)]
    for label, entry in block["periods"].items():
        cells = "".join(f"{_cell(entry['metrics'][name], 0).strip():>8} [{entry['intervals'][name][0]:.3f}, "
                        f"{entry['intervals'][name][1]:.3f}]".rjust(24) for name in names)
        lines.append(f"{label:<9}{entry['triples']:>9}{entry['days_after_cutoff']:>7.0f}{cells}")
    if block.get("undated_triples"):
        lines.append(f"{block['undated_triples']} test triple(s) have no date in {block['dates_file']['name']}: "
                     "in no period")
    time_cut = (result.get("dataset") or {}).get("time_cut") or {}
    if time_cut.get("baseline"):
        lines.append(f"read against: {time_cut['baseline']}")
    return lines


def _pyg_compat_lines(result: dict) -> List[str]:
    """PyG's own test() numbers beside openbench's tail-side ones, where the record has them."""
    pyg = (result.get("compat") or {}).get("pyg")
    if not pyg:
        return []
    hits = [key for key in pyg if key.startswith("hits@")]
    theirs = ", ".join([f"MR (0-based) {_cell(pyg.get('mean_rank'), 0).strip()}", f"MRR {_cell(pyg.get('mrr'), 0).strip()}",
                        *(f"{key} {_cell(pyg[key], 0).strip()}" for key in hits)])
    tail = ((result.get("metrics") or {}).get("tail") or {}).get("realistic") or {}
    ours = ", ".join(f"{key} {_cell(tail.get(key), 0).strip()}" for key in ("mr", "mrr", *hits) if key in tail)
    return [f"PyG's own test() ({pyg['protocol']}): {theirs}",
            f"openbench's tail side, filtered, realistic ranks (1-based): {ours}"]
