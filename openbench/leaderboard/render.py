"""Leaderboard rows as a text table, Markdown, CSV, JSON or a static HTML page.

The HTML page is self-contained: the rows travel as JSON inside it, a few lines of script build
the table and sort it when a column header is clicked, and an inline SVG plots MRR and hits@10 per
row (drawn here, so the page needs no plotting library and no network).
"""
from __future__ import annotations

import csv
import html
import io
import time
from pathlib import Path
from typing import Dict, List, Optional

from openbench._io.outputs import strict_json, visible
from openbench.evaluation.statistics.describe import protocol_line
from openbench.task_registry import DEFAULT_TASK, get_task

__all__ = ["METRICS", "FLAGS", "LEGEND", "LEGEND_PARTS", "UNCERTAINTY_NOTE", "TABLE_FORMATS", "export_page", "render", "plot_svg", "page",
           "legend", "safe_link"]

METRICS = ("mrr", "hits@1", "hits@3", "hits@10")  # the ranking task's columns (its table_columns)
FLAGS = {"published": "†", "nonstandard": "*"}
LEGEND_PARTS = {"published": "† published result, not reproduced here (protocol unknown: LibKGE, LinkExplorer 2022)",
                "nonstandard": "* protocol differs from the dataset's standard one"}
LEGEND = "; ".join(LEGEND_PARTS.values())


def _value(row: dict, metric: str, plain: bool = False) -> str:
    cell = row["metrics"].get(metric) or {}
    mean, std = cell.get("mean"), cell.get("std")
    if mean is None:
        return "" if plain else "-"
    if plain:
        return f"{mean:.6f}"
    return f"{mean:.3f} ± {std:.3f}" if std is not None else f"{mean:.3f}"


def _uncertain(rows: List[dict]) -> bool:
    """Whether any row knows its interval or its test against the best (uncertainty.py)."""
    return any(row.get("interval") or row.get("not_worse_than_best") is not None for row in rows)


def _interval(row: dict) -> str:
    interval = row.get("interval")
    return "-" if not interval else f"[{interval['low']:.3f}, {interval['high']:.3f}]"


def _versus_best(row: dict) -> str:
    """``yes`` not significantly worse than the best row of its ranking, ``no`` significantly worse,
    ``self`` a self-reported row (no paired verdict), ``-`` not compared."""
    mark = row.get("not_worse_than_best")
    if mark is None:
        return "self" if row.get("paired") else "-"
    return "yes" if mark else "no"


UNCERTAINTY_NOTE = ("95 % CI: bootstrap interval of the ranked metric; ≈best: not significantly worse than the "
                    "ranking's best row whose ranks the board computed (scored by its server or reproduced from the "
                    "model; paired sign-flip test, Holm-corrected, α = 0.05); self: a self-reported row gets no "
                    "paired verdict, since a paired test trusts each rank to belong to its query, which only ranks "
                    "the board computed can show")


def _flags(row: dict) -> str:
    return (FLAGS["published"] if row["published"] else "") + (FLAGS["nonstandard"] if row.get("nonstandard_protocol")
                                                               else "")


def _name(row: dict) -> str:
    scope = f" [{row['scope']}]" if row.get("scope") else ""
    return row["name"] + _flags(row) + scope


def legend(rows: List[dict]) -> str:
    """The footnotes of the flags that ``rows`` use ("" when none)."""
    used = [text for flag, text in ((FLAGS["published"], LEGEND_PARTS["published"]),
                                    (FLAGS["nonstandard"], LEGEND_PARTS["nonstandard"]))
            if any(flag in _flags(row) for row in rows)]
    return "; ".join(used)


def _served(rows: List[dict]) -> bool:
    """Whether the rows come from a served board (teams, server-scored rows) or hold rows the board
    reproduced: then they show the team and how each row was verified."""
    return any(row.get("team") or row.get("verified") in ("server", "reproduced") for row in rows)


def _dataset(row: dict) -> str:
    dataset = row["dataset"]
    return dataset.get("name") or (dataset.get("fingerprint") or "")[:12]


def _task(rows: List[dict]):
    """The task of a table's rows (the registry's; every row of a table has the same)."""
    return get_task(rows[0].get("task", DEFAULT_TASK)) if rows else get_task(DEFAULT_TASK)


def _columns(rows: List[dict], sort: Optional[str] = None) -> List[str]:
    """The metric columns shown: the task's columns present (all of them where none is), plus the
    sort key when it is another."""
    present = {key for row in rows for key in row["metrics"]}
    columns = _task(rows).table_columns
    shown = [m for m in columns if m in present] or list(columns)
    if sort and sort in present and sort not in shown:
        shown.append(sort)
    return shown


TABLE_FORMATS = ("table", "md", "csv", "json", "html")


def export_page(db, output_dir, dataset=None, published: Optional[bool] = None) -> Path:
    """Write the leaderboard's HTML page as ``output_dir/index.html`` (the folder replaced as a whole,
    only over one openbench wrote); returns the page."""
    from openbench._io import check_output_folder, replace_folder
    from openbench.leaderboard.store import default_path, read_page_rows

    database = Path(db) if db else default_path()
    check_output_folder(output_dir, [database])
    text = render(read_page_rows(db, dataset=dataset, published=published), "html")
    def fill(staging: Path) -> None:
        (staging / "index.html").write_text(text, encoding="utf-8")

    replace_folder(Path(output_dir), fill, inputs=[database], kind="leaderboard page")
    return Path(output_dir) / "index.html"


def _groups(rows: List[dict]) -> List[tuple]:
    """(group label, its rows) in the order the rows come (the store sorts by group first)."""
    groups: dict = {}
    for row in rows:
        groups.setdefault(row.get("group") or _dataset(row), []).append(row)
    return list(groups.items())


def _markdown_cell(text: str) -> str:
    """A Markdown table cell that shows the text: control and format characters made visible
    (:func:`~openbench._io.outputs.visible`), HTML escaped (no raw markup passes), pipes escaped."""
    return html.escape(visible(text), quote=False).replace("|", "\\|")


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_text(text: str) -> str:
    """A text cell a spreadsheet will not run as a formula (OWASP's CSV-injection rule: a leading '),
    its control and format characters made visible."""
    text = visible(text)
    return "'" + text if text.startswith(_FORMULA_START) else text


def render(rows: List[dict], fmt: str, sort: Optional[str] = None) -> str:
    """The rows in ``fmt``: a table (one per dataset and task, ranked within it), Markdown, CSV,
    JSON or the HTML page; ``sort`` adds its column where the standard ones lack it. Every text
    cell is escaped for its target."""
    if fmt == "json":
        return strict_json(rows, indent=2) + "\n"
    if fmt == "csv":
        return _csv(rows)
    if fmt == "html":
        return page(rows)
    if not rows:
        return "(no rows)\n"
    served = _served(rows)
    parts = []
    for group, members in _groups(rows):
        columns = _columns(members, sort)
        uncertain = _uncertain(members)
        header = ["#", "model", *(["team", "verified"] if served else []), "type", *columns,
                  *(["95% CI", "≈best"] if uncertain else []), "runs"]
        body = [[str(i), _name(row), *([row.get("team") or "", row.get("verified") or ""] if served else []),
                 row.get("model_type") or "", *(_value(row, m) for m in columns),
                 *([_interval(row), _versus_best(row)] if uncertain else []),
                 str(row["runs"]) if row["runs"] is not None else "-"] for i, row in enumerate(members, start=1)]
        if fmt == "md":
            lines = [f"### {_markdown_cell(group)}", "", _markdown_cell(_protocol_text(members)), "",
                     "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            lines += ["| " + " | ".join(_markdown_cell(cell) for cell in line) + " |" for line in body]
        else:
            body = [[_plain_cell(cell) for cell in line] for line in body]
            widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
            lines = [f"dataset {_plain_cell(group)}", _plain_cell(_protocol_text(members))]
            lines += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
                      for line in [header, *body]]
        parts.append("\n".join(lines))
    footnotes = "; ".join(part for part in (legend(rows), UNCERTAINTY_NOTE if _uncertain(rows) else "") if part)
    return "\n\n".join(parts) + (f"\n\n{_markdown_cell(footnotes) if fmt == 'md' else footnotes}\n" if footnotes
                                  else "\n")


def _plain_cell(text: str) -> str:
    """A text-table cell on one line: control and format characters (newlines, escapes,
    bidirectional overrides) made visible as escapes."""
    return visible(text)


def _csv(rows: List[dict]) -> str:
    columns = _columns(rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["group", "name", "team", "verified", "model_type", "dataset", "fingerprint", "scope", "side",
                     "rank_type", *(f"{m}_{part}" for m in columns for part in ("mean", "std")), "runs", "published",
                     "nonstandard_protocol", "paper", "code", "interval_metric", "interval_low", "interval_high",
                     "not_worse_than_best"])
    for row in rows:
        cells = []
        for metric in columns:
            cell = row["metrics"].get(metric) or {}
            cells += ["" if cell.get("mean") is None else repr(cell["mean"]),
                      "" if cell.get("std") is None else repr(cell["std"])]
        texts = [row.get("group"), row["name"], row.get("team"), row.get("verified"), row.get("model_type"),
                 row["dataset"].get("name"), row["dataset"].get("fingerprint"), row.get("scope"), row["side"],
                 row["rank_type"]]
        writer.writerow([_csv_text(str(text or "")) for text in texts] + cells
                        + ["" if row["runs"] is None else row["runs"], row["published"],
                           "" if row.get("nonstandard_protocol") is None else row["nonstandard_protocol"],
                           _csv_text(row.get("paper") or ""), _csv_text(row.get("code") or "")]
                        + _interval_cells(row))
    return buffer.getvalue()


def _interval_cells(row: dict) -> list:
    interval, mark = row.get("interval"), row.get("not_worse_than_best")
    return ([interval["metric"], repr(interval["low"]), repr(interval["high"])] if interval else ["", "", ""]) \
        + [("self" if row.get("paired") else "") if mark is None else mark]


def safe_link(url: Optional[str]) -> Optional[str]:
    """``url`` where it is an http(s) URL a page may link to, else None (javascript:, data:, ...)."""
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        return None
    return None if any(c.isspace() or ord(c) < 32 for c in url) else url


# the plot's text sizes in px: a label as large as the table's text, a value no smaller than 12 px
PLOT_LABEL_PX, PLOT_VALUE_PX = 14, 12


PLOT_COLOURS = ("#3366aa", "#dd8844", "#55aa55", "#aa5588")


def plot_svg(rows: List[dict], width: int = 860, bar_height: int = 15) -> str:
    """Horizontal bars of the rows' task's page metrics (ranking: MRR and hits@10; classification:
    AUROC and AUPRC; repurposing: AUROC and the disease-specific MRR) per row, as an SVG element."""
    metrics = [(metric, PLOT_COLOURS[i % len(PLOT_COLOURS)]) for i, metric in enumerate(_task(rows).page_metrics)]
    names = [metric.upper() if metric in ("mrr", "auroc", "auprc") else metric for metric, _ in metrics]
    label_width, gap, count = 300, 10, max(1, len(metrics))
    height = gap + len(rows) * (count * bar_height + gap) + 34
    scale = width - label_width - 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="plot" width="{width}" height="{height}" '
             f'role="img" aria-label="{html.escape(" and ".join(names))} per model">']
    y = gap
    for row in rows:
        parts.append(f'<text x="{label_width - 6}" y="{y + bar_height + 3}" text-anchor="end" '
                     f'font-size="{PLOT_LABEL_PX}">{html.escape(_name(row))}</text>')
        for offset, (metric, colour) in enumerate(metrics):
            mean = (row["metrics"].get(metric) or {}).get("mean")
            length = 0 if mean is None else max(0.0, min(1.0, mean)) * scale
            top = y + offset * bar_height
            parts.append(f'<rect class="bar-{metric.replace("@", "")}" x="{label_width}" y="{top}" '
                         f'width="{length:.1f}" height="{bar_height - 1}" fill="{colour}"/>')
            if mean is not None:
                parts.append(f'<text x="{label_width + length + 4:.1f}" y="{top + bar_height - 2}" '
                             f'font-size="{PLOT_VALUE_PX}">{mean:.3f}</text>')
        y += count * bar_height + gap
    legend_text = " ".join(f'<tspan fill="{colour}">■ {html.escape(name)}</tspan>'
                           for (_, colour), name in zip(metrics, names))
    parts.append(f'<text x="{label_width}" y="{height - 8}" font-size="{PLOT_LABEL_PX}">{legend_text} (0 to 1)</text>')
    parts.append("</svg>")
    return "".join(parts)


_SCRIPT = """
const rows = JSON.parse(document.getElementById("rows").textContent);
const columnsByTable = COLUMNS;
function metric(row, key) { const cell = row.metrics[key]; return cell ? cell.mean : null; }
function text(row, key) {
  if (key === "name") return row.name + (row.published ? "\\u2020" : "") + (row.nonstandard_protocol ? "*" : "")
    + (row.scope ? " [" + row.scope + "]" : "");
  if (key === "runs") return row.runs === null ? "-" : String(row.runs);
  if (key === "model_type") return row.model_type || "";
  if (key === "team") return row.team || "";
  if (key === "verified") return row.published ? "published" : (row.verified || "self");
  if (key === "interval") return row.interval ? "[" + row.interval.low.toFixed(3) + ", " + row.interval.high.toFixed(3) + "]" : "-";
  if (key === "not_worse_than_best") return row.not_worse_than_best === null ? (row.paired ? "self" : "-") : (row.not_worse_than_best ? "yes" : "no");
  const cell = row.metrics[key];
  if (!cell || cell.mean === null) return "-";
  return cell.mean.toFixed(3) + (cell.std === null ? "" : " \\u00b1 " + cell.std.toFixed(3));
}
function escaped(value) {
  return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}
function cell(row, key) {
  if (key !== "links") return escaped(text(row, key));
  return row.links.map(link => `<a href="${escaped(link.url)}" rel="nofollow noopener noreferrer">${escaped(link.label)}</a>`)
    .join(" ");
}
const TEXT_KEYS = ["name", "model_type", "team", "verified", "links", "interval", "not_worse_than_best"];
function value(row, key) {
  if (TEXT_KEYS.includes(key)) return key === "links" ? row.links.length : text(row, key);
  if (key === "runs") return row.runs;
  return metric(row, key);
}
function build(table, order) {
  const id = table.dataset.table, columns = columnsByTable[id];
  const sorted = rows.filter(r => r.page_table === id).sort((a, b) => {
    const x = value(a, order.key), y = value(b, order.key);
    if (x === y) return 0;
    if (x === null) return 1;
    if (y === null) return -1;
    return (x < y ? -1 : 1) * (order.descending ? -1 : 1);
  });
  const head = "<thead><tr>" + columns.map(c => `<th data-key="${escaped(c.key)}">${escaped(c.label)}</th>`).join("")
    + "</tr></thead>";
  const body = sorted.map(r => "<tr>" + columns.map(c => `<td data-key="${escaped(c.key)}">${cell(r, c.key)}</td>`)
    .join("") + "</tr>").join("");
  table.innerHTML = head + "<tbody>" + body + "</tbody>";
  table.querySelectorAll("th").forEach(th => th.addEventListener("click", () => {
    const key = th.dataset.key;
    build(table, {key: key, descending: order.key === key ? !order.descending : !TEXT_KEYS.includes(key)});
  }));
}
document.querySelectorAll("table.leaderboard").forEach(table => {
  const first = columnsByTable[table.dataset.table].find(c => !TEXT_KEYS.includes(c.key));
  build(table, {key: first ? first.key : "name", descending: true});
});
"""


def _json_for_html(value) -> str:
    """JSON safe inside a <script> element: no character that can close it or open a comment."""
    text = strict_json(value)
    for character, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"),
                               ("\u2029", "\\u2029")):
        text = text.replace(character, escaped)
    return text


def _sections(rows: List[dict]) -> List[tuple]:
    """(dataset label, [(table label, its rows)]) in the order the rows come: one section per
    dataset fingerprint (published rows, which have none, per dataset name), one table per task,
    protocol family and scope within it."""
    sections: dict = {}
    for row in rows:
        dataset = row["dataset"]
        if dataset.get("fingerprint"):
            key, label = dataset["fingerprint"], dataset.get("label") or _dataset(row)
        else:
            key, label = f"published {dataset.get('name')}", f"{dataset.get('name')}: published results"
        family = row.get("family") or "ranking"
        table = f"{family}; scope: {row['scope']}" if row.get("scope") else family
        sections.setdefault(key, (label, {}))[1].setdefault(table, []).append(row)
    return [(label, list(tables.items())) for label, tables in sections.values()]


def _page_row(row: dict, table: str) -> dict:
    links = [{"label": label, "url": url} for label in ("paper", "code") for url in [safe_link(row.get(label))] if url]
    return dict(row, page_table=table, links=links)


def _protocol_text(members: List[dict]) -> str:
    """The table's protocol line: the task's own words (:meth:`~openbench.evaluation.tasks.base.Task.protocol_text`),
    else :func:`~openbench.evaluation.statistics.describe.protocol_line`, or what a published row says of its protocol."""
    first = next((row for row in members if not row.get("published")), members[0])
    protocol = first.get("protocol")
    own = _task(members).protocol_text(protocol) if isinstance(protocol, dict) else None
    if own is not None:
        return own
    if isinstance(protocol, dict):
        return f"what this table holds: {protocol_line(protocol, rank_type=first.get('rank_type') or 'realistic')}"
    return f"what this table holds: published numbers; protocol: {protocol or 'not stated'}"


def page(rows: List[dict], generated: Optional[str] = None) -> str:
    """The self-contained HTML page: per dataset a section, in it per task, protocol family and
    scope a sortable table (model, team, verification, type, metrics, runs, links) under its
    protocol line, and a plot; the footer gives ``generated`` (default: now, UTC) and the
    openbench version (the page's one timing field, ``<p class="generated">``)."""
    from openbench import __version__

    if generated is None:
        generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    sections: List[str] = []
    columns_by_table: Dict[str, List[dict]] = {}
    shown: List[dict] = []
    for label, tables in _sections(rows):
        parts = [f"<section><h2>{html.escape(label)}</h2>"]
        for caption, members in tables:
            number = str(len(columns_by_table))
            columns = [{"key": "name", "label": "model"}, {"key": "team", "label": "team"},
                       {"key": "verified", "label": "verified"}, {"key": "model_type", "label": "type"}]
            columns += [{"key": m, "label": m.upper() if m == "mrr" else m} for m in _columns(members)]
            if _uncertain(members):
                columns += [{"key": "interval", "label": "95% CI"}, {"key": "not_worse_than_best", "label": "≈best"}]
            columns += [{"key": "runs", "label": "runs"}, {"key": "links", "label": "links"}]
            columns_by_table[number] = columns
            parts.append(f'<h3>{html.escape(caption)}</h3>\n<p class="protocol">{html.escape(_protocol_text(members))}'
                         f'</p>\n<table class="leaderboard" id="leaderboard-{number}" '
                         f'data-table="{number}"></table>\n{plot_svg(members)}')
            shown += [_page_row(row, number) for row in members]
        sections.append("\n".join(parts) + "</section>")
    script = _SCRIPT.replace("COLUMNS", _json_for_html(columns_by_table))
    body = "\n".join(sections) or "<p>No results yet.</p>"
    footnotes = "; ".join(part for part in (legend(rows), UNCERTAINTY_NOTE if _uncertain(rows) else "") if part)
    note = f'<p class="legend">{html.escape(footnotes)}</p>\n' if footnotes else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>openbench leaderboard</title>
<style>
body {{ font-family: sans-serif; margin: 2em; font-size: 16px; }}
p.protocol {{ color: #333; max-width: 60em; }} p.generated {{ color: #666; font-size: 14px; }}
table {{ border-collapse: collapse; }} th, td {{ padding: 0.25em 0.8em; border-bottom: 1px solid #ddd; }}
th {{ cursor: pointer; text-align: left; background: #f4f4f4; }} td {{ font-variant-numeric: tabular-nums; }}
</style></head>
<body>
<h1>openbench leaderboard</h1>
<p>One section per dataset, one table per task and protocol (models are comparable only within one); one row per
model and protocol; mean ± standard deviation over seeds; verified: server where the board scored the row against
hidden test answers, reproduced where the board re-evaluated the submitted model on its own copy of the dataset,
self where the submitter computed it. Only rows the board computed are compared with each other. Click a column to
sort.</p>
{body}
{note}<p class="generated">generated {html.escape(generated)} by openbench {html.escape(__version__)}</p>
<script id="rows" type="application/json">{_json_for_html(shown)}</script>
<script>{script}</script>
</body></html>
"""
