"""``openbench report`` of repurposing records: the figures a reader of Every Cure's and TxGNN's
evaluations looks for, one page (:func:`repurposing_page`; :mod:`.figures` builds the folder).

* Recall@n against n (the full matrix, realistic ranks), one line per model: how fast each model's
  global list collects the test pairs;
* Hit@k against k (each disease's drugs, macro over diseases);
* the per-disease distribution of AUPRC (TxGNN's per-disease metric): a mean hides whether a
  model is good on a few diseases or fair on all;
* the frequent flyers: how often the drugs and diseases most frequent among the matrix's best pairs
  appear there (a few drugs topping every disease is a hub model's sign).
"""
from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__all__ = ["repurposing_figures", "repurposing_page", "render_figures", "plotters", "CAPTIONS", "repurposing_report"]

logger = logging.getLogger(__name__)

CAPTIONS = {
    "recall_curve": "Recall@n over the whole drug × disease matrix (realistic ranks): the share of the test pairs "
                    "within the matrix's top n pairs, the training and validation pairs filtered.",
    "hits_curve": "Hit@k for each disease's test pairs among all its drugs (macro over diseases, realistic ranks).",
    "per_disease": "Distribution of the per-disease AUPRC (each test disease's positives among all its drugs): a "
                   "mean over diseases hides whether a model is good on a few or fair on all.",
    "frequent_flyers": "The drugs and diseases most frequent among the matrix's best 100 pairs: a few drugs topping "
                       "every disease are frequent flyers.",
}


def repurposing_figures(models: Dict[str, dict]) -> Dict[str, Any]:
    """{figure: the plotted numbers} of {model name: repurposing record}."""
    data: Dict[str, Any] = {"recall_curve": {}, "hits_curve": {}, "per_disease": {}, "frequent_flyers": {}}
    for name, record in models.items():
        view = record["repurposing"]["views"].get("test") or {}
        protocol = record["protocol"]
        realistic = ((view.get("full_matrix") or {}).get("ranks") or {}).get("realistic") or {}
        data["recall_curve"][name] = [[n, realistic.get(f"recall@{n}")] for n in protocol["recall_at"]
                                      if realistic.get(f"recall@{n}") is not None]
        disease = view.get("disease_specific") or {}
        macro = ((disease.get("macro") or {}).get("realistic") or {})
        data["hits_curve"][name] = [[k, macro.get(f"hits@{k}")] for k in protocol["hits_at"]
                                    if macro.get(f"hits@{k}") is not None]
        data["per_disease"][name] = sorted(value["auprc"] for value in (disease.get("per_disease") or {}).values()
                                           if value.get("auprc") is not None)
        flyers = record["repurposing"].get("frequent_flyers") or {}
        data["frequent_flyers"][name] = {"drugs": flyers.get("top_drugs", []), "diseases": flyers.get("top_diseases", [])}
    return {key: value for key, value in data.items() if any(value.values())}


def _plot_curve(series: Dict[str, List[list]], xlabel: str, ylabel: str, log: bool):
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    for name, points in series.items():
        if points:
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    if log:
        axes.set_xscale("log")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(0, 1.02)
    axes.legend(fontsize=11)
    axes.grid(alpha=0.3)
    return figure


def _plot_per_disease(series: Dict[str, List[float]]):
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    shown = {name: values for name, values in series.items() if values}
    axes.hist(list(shown.values()), bins=20, range=(0, 1), label=list(shown), alpha=0.8)
    axes.set_xlabel("AUPRC of a disease (its test drugs among all drugs)")
    axes.set_ylabel("diseases")
    axes.legend(fontsize=11)
    return figure


def _plot_flyers(series: Dict[str, Dict[str, List[list]]]):
    import matplotlib.pyplot as plt

    names = list(series)
    figure, grid = plt.subplots(len(names), 2, figsize=(10, 3.2 * len(names)), squeeze=False)
    for row, name in enumerate(names):
        for column, kind in enumerate(("drugs", "diseases")):
            axes = grid[row][column]
            items = series[name][kind]
            axes.barh([str(label)[-28:] for label, _ in items], [count for _, count in items])
            axes.invert_yaxis()
            axes.set_title(f"{name}: {kind} among the best pairs", fontsize=11)
            axes.tick_params(labelsize=9)
    figure.tight_layout()
    return figure


def plotters() -> Dict[str, Callable[[Any], Any]]:
    return {"recall_curve": lambda d: _plot_curve(d, "n (pairs of the matrix)", "Recall@n", True),
            "hits_curve": lambda d: _plot_curve(d, "k (drugs of a disease)", "Hit@k (macro)", False),
            "per_disease": _plot_per_disease, "frequent_flyers": _plot_flyers}


def repurposing_page(models: Dict[str, dict], pngs: Dict[str, bytes]) -> str:
    """The report's HTML for repurposing records: the protocol, a summary table, the figures."""
    from openbench.evaluation.statistics.pages import figure_html, report_html
    from openbench.evaluation.tasks.repurposing.summary import summary_lines
    from openbench.record import REPURPOSING_HEADLINE, repurposing_headline

    escape = html.escape

    def cell(value) -> str:
        return "-" if value is None else f"{value:.4f}"

    rows = []
    for name, record in models.items():
        headline = repurposing_headline(record)  # the board's row: the test view, realistic ranks
        rows.append(f"<tr><td>{escape(name)}</td>" + "".join(f"<td>{cell(headline.get(key))}</td>"
                                                              for key in REPURPOSING_HEADLINE) + "</tr>")
    first = next(iter(models.values()))
    parts = [f"<p class=\"protocol\">What these numbers are: {escape(summary_lines(first)[0])}.</p>",
             "<table><thead><tr><th>model</th><th>matrix AUROC</th><th>per-disease MRR (macro)</th>"
             "<th>per-disease AUROC</th><th>per-disease AUPRC</th></tr></thead><tbody>" + "".join(rows)
             + "</tbody></table>"]
    parts += figure_html(pngs, list(CAPTIONS), CAPTIONS)
    return report_html(f"openbench report (drug repurposing): {', '.join(models)}", parts)


def render_figures(data: Dict[str, Any]) -> Dict[str, bytes]:
    """PNG bytes of each figure with data."""
    import io

    import matplotlib.pyplot as plt

    out: Dict[str, bytes] = {}
    for key, plot in plotters().items():
        if data.get(key):
            figure = plot(data[key])
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None}, bbox_inches="tight")
            out[key] = buffer.getvalue()
            plt.close(figure)
    return out


def repurposing_report(models: Dict[str, Tuple[dict, Optional[Any]]], output: Path, seed: int,
                        resamples: int, inputs: Sequence) -> Path:
    """The report folder of repurposing records (:mod:`.repurposing_figures`)."""
    import matplotlib

    from openbench.evaluation.statistics.pages import write_report

    records = {name: record for name, (record, _) in models.items()}
    data = repurposing_figures(records)
    with matplotlib.rc_context({"font.size": 12}):
        pngs = render_figures(data)
    page = repurposing_page(records, pngs)
    summary = {"seed": seed, "resamples": resamples, "figures": data, "comparison": {}}

    written = write_report(output, page, summary, pngs, inputs)
    logger.info("wrote the repurposing report of %d record(s) to %s", len(models), output)
    return written
