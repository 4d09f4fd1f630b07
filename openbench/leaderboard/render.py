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
from typing import List

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


def _columns(rows: List[dict]) -> List[str]:
    present = {key for row in rows for key in row["metrics"]}
    for names in (METRICS, CLASSIFICATION_METRICS):
        shown = [m for m in names if m in present]
        if shown:
            return shown
    return list(METRICS)


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


def render(rows: List[dict], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    if fmt == "csv":
        return _csv(rows)
    if fmt == "html":
        return page(rows)
    columns = _columns(rows)
    header = ["#", "model", "type", "dataset", *columns, "runs"]
    body = [[str(i), _name(row), row.get("model_type") or "", _dataset(row), *(_value(row, m) for m in columns),
             str(row["runs"]) if row["runs"] is not None else "-"] for i, row in enumerate(rows, start=1)]
    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |" for line in body]
        return "\n".join(lines) + f"\n\n{LEGEND}\n"
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [header, *body]]
    return "\n".join(lines) + f"\n{LEGEND}\n"


def _csv(rows: List[dict]) -> str:
    columns = _columns(rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["name", "model_type", "dataset", "fingerprint", "side", "rank_type",
                     *(f"{m}_{part}" for m in columns for part in ("mean", "std")), "runs", "published",
                     "nonstandard_protocol"])
    for row in rows:
        cells = []
        for metric in columns:
            cell = row["metrics"].get(metric) or {}
            cells += ["" if cell.get("mean") is None else repr(cell["mean"]),
                      "" if cell.get("std") is None else repr(cell["std"])]
        writer.writerow([row["name"], row.get("model_type") or "", row["dataset"].get("name") or "",
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
const columns = COLUMNS;
const table = document.getElementById("leaderboard");
let order = {key: "mrr", descending: true};
function metric(row, key) { const cell = row.metrics[key]; return cell ? cell.mean : null; }
function text(row, key) {
  if (key === "name") return row.name + (row.published ? "\\u2020" : "") + (row.nonstandard_protocol ? "*" : "");
  if (key === "dataset") return row.dataset.name || (row.dataset.fingerprint || "").slice(0, 12);
  if (key === "runs") return row.runs === null ? "-" : String(row.runs);
  if (key === "model_type") return row.model_type || "";
  const cell = row.metrics[key];
  if (!cell || cell.mean === null) return "-";
  return cell.mean.toFixed(3) + (cell.std === null ? "" : " \\u00b1 " + cell.std.toFixed(3));
}
function value(row, key) {
  if (["name", "dataset", "model_type"].includes(key)) return text(row, key);
  if (key === "runs") return row.runs;
  return metric(row, key);
}
function render() {
  const sorted = rows.slice().sort((a, b) => {
    const x = value(a, order.key), y = value(b, order.key);
    if (x === y) return 0;
    if (x === null) return 1;
    if (y === null) return -1;
    return (x < y ? -1 : 1) * (order.descending ? -1 : 1);
  });
  const head = "<thead><tr>" + columns.map(c => `<th data-key="${c.key}">${c.label}</th>`).join("") + "</tr></thead>";
  const body = sorted.map(r => "<tr>" + columns.map(c => `<td data-key="${c.key}">${text(r, c.key)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;")}</td>`).join("") + "</tr>").join("");
  table.innerHTML = head + "<tbody>" + body + "</tbody>";
  table.querySelectorAll("th").forEach(th => th.addEventListener("click", () => {
    const key = th.dataset.key;
    order = {key: key, descending: order.key === key ? !order.descending : !["name", "dataset"].includes(key)};
    render();
  }));
}
render();
"""


def page(rows: List[dict]) -> str:
    columns = [{"key": "name", "label": "model"}, {"key": "model_type", "label": "type"},
               {"key": "dataset", "label": "dataset"}]
    columns += [{"key": m, "label": m.upper() if m == "mrr" else m} for m in _columns(rows)]
    columns.append({"key": "runs", "label": "runs"})
    data = json.dumps(rows).replace("</", "<\\/")
    script = _SCRIPT.replace("COLUMNS", json.dumps(columns))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>openbench leaderboard</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }} th, td {{ padding: 0.25em 0.8em; border-bottom: 1px solid #ddd; }}
th {{ cursor: pointer; text-align: left; background: #f4f4f4; }} td {{ font-variant-numeric: tabular-nums; }}
</style></head>
<body>
<h1>openbench leaderboard</h1>
<p>One row per model and protocol; mean ± standard deviation over seeds. Click a column to sort.</p>
<table id="leaderboard"></table>
<p class="legend">{html.escape(LEGEND)}</p>
<h2>MRR and hits@10</h2>
{plot_svg(rows)}
<script id="rows" type="application/json">{data}</script>
<script>{script}</script>
</body></html>
"""
