"""The HTML around a report (``openbench report``): one page skeleton and one figure block for the
ranking report (:mod:`.figures`) and the repurposing report (:mod:`.repurposing_figures`)."""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Dict, List, Sequence

__all__ = ["figure_html", "report_html", "write_report"]


def figure_html(pngs: Dict[str, bytes], order: Sequence[str], captions: Dict[str, str]) -> List[str]:
    """A ``<figure>`` per drawn figure of ``order``, its PNG inline, its caption below."""
    escape = html.escape
    out = []
    for key in order:
        if key in pngs:
            encoded = base64.b64encode(pngs[key]).decode("ascii")
            out.append(f"<figure><img src=\"data:image/png;base64,{encoded}\" alt=\"{escape(captions[key])}\">"
                       f"<figcaption>{escape(captions[key])}</figcaption></figure>")
    return out


def report_html(title: str, parts: Sequence[str]) -> str:
    """The report page around its ``parts`` (HTML already escaped): one style for every report."""
    from openbench import __version__

    escape = html.escape
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>openbench report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; font-size: 16px; max-width: 70em; }}
table {{ border-collapse: collapse; }} th, td {{ padding: 0.25em 0.8em; border-bottom: 1px solid #ddd; text-align: left; }}
td {{ font-variant-numeric: tabular-nums; }} figure {{ margin: 2em 0; }} img {{ max-width: 100%; }}
figcaption, p.note {{ color: #333; }}
</style></head>
<body>
<h1>{escape(title)}</h1>
{chr(10).join(parts)}
<p class="generated">openbench {escape(__version__)}</p>
</body></html>
"""


def write_report(output, page: str, summary: Dict[str, Any], pngs: Dict[str, bytes], inputs: Sequence) -> Path:
    """The report folder ``output``: ``index.html``, ``figures.json`` (``summary``) and one PNG per
    figure, replaced atomically, only over a folder openbench wrote; returns the page."""
    from openbench._io import replace_folder

    def fill(staging: Path) -> None:
        (staging / "index.html").write_text(page, encoding="utf-8")
        (staging / "figures.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        for key, png in pngs.items():
            (staging / f"{key}.png").write_bytes(png)

    replace_folder(Path(output), fill, inputs=list(inputs), kind="report")
    return Path(output) / "index.html"
