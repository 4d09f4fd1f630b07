"""Leaderboard rows as a text table, Markdown, CSV, JSON or a static HTML page.

The HTML page is self-contained: the rows travel as JSON inside it, a few lines of script build
the table and sort it when a column header is clicked, and an inline SVG plots MRR and hits@10 per
row (drawn here, so the page needs no plotting library and no network).
"""
from __future__ import annotations

import csv
import html
import io
import json
from pathlib import Path
from typing import List, Optional

from openbench.record import CLASSIFICATION_METRICS

__all__ = ["METRICS", "FLAGS", "LEGEND", "TABLE_FORMATS", "export_page", "render", "plot_svg", "page"]

METRICS = ("mrr", "hits@1", "hits@3", "hits@10")
FLAGS = {"published": "†", "nonstandard": "*"}
LEGEND = ("† published result, not reproduced here (protocol unknown: LibKGE, LinkExplorer 2022); "
          "* protocol differs from the dataset's standard one")


def _value(row: dict, metric: str, plain: bool = False) -> str:
    cell = row["metrics"].get(metric) or {}
    mean, std = cell.get("mean"), cell.get("std")
    if mean is None:
        return "" if plain else "-"
    if plain:
        return f"{mean:.6f}"
    return f"{mean:.3f} ± {std:.3f}" if std is not None else f"{mean:.3f}"


def _name(row: dict) -> str:
    flags = FLAGS["published"] if row["published"] else ""
    flags += FLAGS["nonstandard"] if row.get("nonstandard_protocol") else ""
    scope = f" [{row['scope']}]" if row.get("scope") else ""
    return row["name"] + flags + scope


def _dataset(row: dict) -> str:
    dataset = row["dataset"]
    return dataset.get("name") or (dataset.get("fingerprint") or "")[:12]


def _columns(rows: List[dict], sort: Optional[str] = None) -> List[str]:
    """The metric columns shown: the standard ones present, plus the sort key when it is another."""
    present = {key for row in rows for key in row["metrics"]}
    shown = list(METRICS)
    for names in (METRICS, CLASSIFICATION_METRICS):
        chosen = [m for m in names if m in present]
        if chosen:
            shown = chosen
            break
    if sort and sort in present and sort not in shown:
        shown.append(sort)
    return shown


TABLE_FORMATS = ("table", "md", "csv", "json", "html")


def export_page(db, output_dir, dataset=None) -> Path:
    """Write the leaderboard's HTML page as ``output_dir/index.html`` (the folder replaced as a whole,
    only over one openbench wrote); returns the page."""
    from openbench._io import check_output_folder, replace_folder
    from openbench.leaderboard.store import default_path, read_rows

    database = Path(db) if db else default_path()
    check_output_folder(output_dir, [database])
    text = render(read_rows(db, dataset=dataset), "html")
    replace_folder(Path(output_dir), lambda staging: (staging / "index.html").write_text(text, encoding="utf-8"),
                   inputs=[database], kind="leaderboard page")
    return Path(output_dir) / "index.html"


def _groups(rows: List[dict]) -> List[tuple]:
    """(group label, its rows) in the order the rows come (the store sorts by group first)."""
    groups: dict = {}
    for row in rows:
        groups.setdefault(row.get("group") or _dataset(row), []).append(row)
    return list(groups.items())


def _markdown_cell(text: str) -> str:
    """A Markdown table cell that shows the text: HTML escaped (no raw markup passes), pipes escaped."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_text(text: str) -> str:
    """A text cell a spreadsheet will not run as a formula (OWASP's CSV-injection rule: a leading ')."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def render(rows: List[dict], fmt: str, sort: Optional[str] = None) -> str:
    """The rows in ``fmt``: a table (one per dataset and task, ranked within it), Markdown, CSV,
    JSON or the HTML page; ``sort`` adds its column where the standard ones lack it."""
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    if fmt == "csv":
        return _csv(rows)
    if fmt == "html":
        return page(rows)
    if not rows:
        return "(no rows)\n"
    parts = []
    for group, members in _groups(rows):
        columns = _columns(members, sort)
        header = ["#", "model", "type", *columns, "runs"]
        body = [[str(i), _name(row), row.get("model_type") or "", *(_value(row, m) for m in columns),
                 str(row["runs"]) if row["runs"] is not None else "-"] for i, row in enumerate(members, start=1)]
        if fmt == "md":
            lines = [f"### {_markdown_cell(group)}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            lines += ["| " + " | ".join(_markdown_cell(cell) for cell in line) + " |" for line in body]
        else:
            widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
            lines = [f"dataset {group}"]
            lines += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
                      for line in [header, *body]]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + f"\n\n{LEGEND}\n"


def _csv(rows: List[dict]) -> str:
    columns = _columns(rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["group", "name", "model_type", "dataset", "fingerprint", "side", "rank_type",
                     *(f"{m}_{part}" for m in columns for part in ("mean", "std")), "runs", "published",
                     "nonstandard_protocol"])
    for row in rows:
        cells = []
        for metric in columns:
            cell = row["metrics"].get(metric) or {}
            cells += ["" if cell.get("mean") is None else repr(cell["mean"]),
                      "" if cell.get("std") is None else repr(cell["std"])]
        writer.writerow([_csv_text(row.get("group") or ""), _csv_text(row["name"]),
                         _csv_text(row.get("model_type") or ""), _csv_text(row["dataset"].get("name") or ""),
                         row["dataset"].get("fingerprint") or "", row["side"], row["rank_type"], *cells,
                         "" if row["runs"] is None else row["runs"], row["published"],
                         "" if row.get("nonstandard_protocol") is None else row["nonstandard_protocol"]])
    return buffer.getvalue()


def plot_svg(rows: List[dict], width: int = 720, bar_height: int = 9) -> str:
    """Horizontal bars of MRR and hits@10 per row, as an SVG element."""
    label_width, gap = 200, 8
    height = gap + len(rows) * (2 * bar_height + gap) + 30
    scale = width - label_width - 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="plot" width="{width}" height="{height}" '
             f'role="img" aria-label="MRR and hits@10 per model">']
    y = gap
    for row in rows:
        parts.append(f'<text x="{label_width - 6}" y="{y + bar_height + 3}" text-anchor="end" font-size="11">'
                     f'{html.escape(_name(row))}</text>')
        for offset, (metric, colour) in enumerate((("mrr", "#3366aa"), ("hits@10", "#dd8844"))):
            mean = (row["metrics"].get(metric) or {}).get("mean")
            length = 0 if mean is None else max(0.0, min(1.0, mean)) * scale
            top = y + offset * bar_height
            parts.append(f'<rect class="bar-{metric.replace("@", "")}" x="{label_width}" y="{top}" '
                         f'width="{length:.1f}" height="{bar_height - 1}" fill="{colour}"/>')
            if mean is not None:
                parts.append(f'<text x="{label_width + length + 4:.1f}" y="{top + bar_height - 1}" '
                             f'font-size="9">{mean:.3f}</text>')
        y += 2 * bar_height + gap
    parts.append(f'<text x="{label_width}" y="{height - 8}" font-size="11">'
                 '<tspan fill="#3366aa">■ MRR</tspan> <tspan fill="#dd8844">■ hits@10</tspan> (0 to 1)</text>')
    parts.append("</svg>")
    return "".join(parts)


_SCRIPT = """
const rows = JSON.parse(document.getElementById("rows").textContent);
const columnsByGroup = COLUMNS;
function metric(row, key) { const cell = row.metrics[key]; return cell ? cell.mean : null; }
function text(row, key) {
  if (key === "name") return row.name + (row.published ? "\\u2020" : "") + (row.nonstandard_protocol ? "*" : "")
    + (row.scope ? " [" + row.scope + "]" : "");
  if (key === "runs") return row.runs === null ? "-" : String(row.runs);
  if (key === "model_type") return row.model_type || "";
  const cell = row.metrics[key];
  if (!cell || cell.mean === null) return "-";
  return cell.mean.toFixed(3) + (cell.std === null ? "" : " \\u00b1 " + cell.std.toFixed(3));
}
function escaped(value) {
  return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
function value(row, key) {
  if (["name", "model_type"].includes(key)) return text(row, key);
  if (key === "runs") return row.runs;
  return metric(row, key);
}
function build(table, order) {
  const group = table.dataset.group, columns = columnsByGroup[group];
  const sorted = rows.filter(r => r.page_group === group).sort((a, b) => {
    const x = value(a, order.key), y = value(b, order.key);
    if (x === y) return 0;
    if (x === null) return 1;
    if (y === null) return -1;
    return (x < y ? -1 : 1) * (order.descending ? -1 : 1);
  });
  const head = "<thead><tr>" + columns.map(c => `<th data-key="${escaped(c.key)}">${escaped(c.label)}</th>`).join("")
    + "</tr></thead>";
  const body = sorted.map(r => "<tr>" + columns.map(c => `<td data-key="${escaped(c.key)}">${escaped(text(r, c.key))}</td>`)
    .join("") + "</tr>").join("");
  table.innerHTML = head + "<tbody>" + body + "</tbody>";
  table.querySelectorAll("th").forEach(th => th.addEventListener("click", () => {
    const key = th.dataset.key;
    build(table, {key: key, descending: order.key === key ? !order.descending : !["name", "model_type"].includes(key)});
  }));
}
document.querySelectorAll("table.leaderboard").forEach(table => {
  const first = columnsByGroup[table.dataset.group][2];
  build(table, {key: first ? first.key : "name", descending: true});
});
"""


def _json_for_html(value) -> str:
    """JSON safe inside a <script> element: no character that can close it or open a comment."""
    text = json.dumps(value)
    for character, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"),
                               ("\u2029", "\\u2029")):
        text = text.replace(character, escaped)
    return text


def page(rows: List[dict]) -> str:
    """The self-contained HTML page: per dataset and task a sortable table and a plot."""
    sections, columns_by_group, groups = [], {}, _groups(rows)
    for number, (group, members) in enumerate(groups):
        columns = [{"key": "name", "label": "model"}, {"key": "model_type", "label": "type"}]
        columns += [{"key": m, "label": m.upper() if m == "mrr" else m} for m in _columns(members)]
        columns.append({"key": "runs", "label": "runs"})
        columns_by_group[str(number)] = columns
        sections.append(f'<section><h2>{html.escape(group)}</h2>\n<table class="leaderboard" id="leaderboard-{number}" '
                        f'data-group="{number}"></table>\n{plot_svg(members)}</section>')
    grouped = [dict(row, page_group=str(number)) for number, (_, members) in enumerate(groups) for row in members]
    script = _SCRIPT.replace("COLUMNS", _json_for_html(columns_by_group))
    body = "\n".join(sections) or "<p>No results yet.</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>openbench leaderboard</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }} th, td {{ padding: 0.25em 0.8em; border-bottom: 1px solid #ddd; }}
th {{ cursor: pointer; text-align: left; background: #f4f4f4; }} td {{ font-variant-numeric: tabular-nums; }}
</style></head>
<body>
<h1>openbench leaderboard</h1>
<p>One table per dataset and task (models are comparable only within one); one row per model and protocol;
mean ± standard deviation over seeds. Click a column to sort.</p>
{body}
<p class="legend">{html.escape(LEGEND)}</p>
<script id="rows" type="application/json">{_json_for_html(grouped)}</script>
<script>{script}</script>
</body></html>
"""
