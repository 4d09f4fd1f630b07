"""Ranked lists by name (an LLM's or a literature pipeline's top 20 drugs per disease), mapped to a
dataset's ids through a synonym table, never guessed.

A ranked list (:func:`read_ranked_list`) is a CSV/TSV with a header: a query column (``disease``
or ``query``), a name column (``drug``, ``name``, ``candidate`` or ``id``) and optionally a
``rank`` column (else the file's order within each query, best first). A synonym table
(:func:`read_synonyms`) is a CSV/TSV of ``id`` and ``name`` (one row per synonym; PrimeKG's node
table ``node_id, node_name`` and its ``kg.csv`` ``x_id, x_name`` read too) or Babel-style JSONL
(``{"curie": ..., "names": [...]}``). An id is a dataset label, or the id part of one (PrimeKG's
``type::source::id`` labels end with it).

Names match after Unicode NFKC normalisation, case folding, and punctuation and whitespace folded
to single spaces (:func:`normal_name`). A name two ids carry is **ambiguous**, a name none carries
is **unknown**: both are counted and listed with their file's line, and neither is scored. The list
becomes a table of pairs (query, candidate, score = -rank) that the unlisted rule of
:mod:`openbench.models.tables` ranks: a list of 20 of 7,957 drugs cannot pass for a full ranking.
"""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

from openbench.errors import InputError
from openbench.models.tables import NAMED, ScoreTable, table_sha256

__all__ = ["normal_name", "read_synonyms", "read_ranked_list", "ranked_list_table"]

QUERY_COLUMNS = ("disease", "query")
NAME_COLUMNS = ("drug", "name", "candidate", "id")
_PUNCTUATION = re.compile(r"[\W_]+", re.UNICODE)


def normal_name(text: str) -> str:
    """``text`` as names are matched: NFKC, case-folded, punctuation and whitespace one space."""
    return _PUNCTUATION.sub(" ", unicodedata.normalize("NFKC", str(text)).casefold()).strip()


def _label_index(dataset) -> Dict[str, Set[int]]:
    """{a label, or its last ``::`` part: the entity ids it names}."""
    index: Dict[str, Set[int]] = {}
    for position, label in enumerate(dataset.entity_labels):
        index.setdefault(label, set()).add(position)
        if "::" in label:
            index.setdefault(label.rsplit("::", 1)[1], set()).add(position)
    return index


def read_synonyms(path, dataset) -> Dict[str, Set[int]]:
    """{normal name: the entity ids of the dataset it names} from a synonym table (see the module
    docstring); rows whose id the dataset lacks are left out."""
    from openbench._io.inputs import iter_lines, read_text

    path = Path(path)
    labels = _label_index(dataset)
    pairs: List[Tuple[str, str]] = []
    if path.suffix in (".jsonl", ".ndjson") or path.name.endswith((".jsonl.gz", ".ndjson.gz")):
        for number, line in iter_lines(path):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as error:
                raise InputError(f"not a JSON object ({error.args[0]})", path, number) from None
            if not isinstance(row, dict) or not isinstance(row.get("curie"), str) or not isinstance(
                    row.get("names", []), list):
                raise InputError('expected {"curie": "...", "names": ["...", ...]}', path, number)
            pairs += [(row["curie"], str(name)) for name in row.get("names", [])]
            if isinstance(row.get("preferred_name"), str):
                pairs.append((row["curie"], row["preferred_name"]))
    else:
        text = read_text(path)
        separator = "\t" if "\t" in text.split("\n", 1)[0] else ","
        frame = _table(path, separator)
        lowered = {name.lower(): name for name in frame.columns}
        for id_column, name_column in (("id", "name"), ("node_id", "node_name"), ("x_id", "x_name"),
                                       ("y_id", "y_name"), ("curie", "name")):
            if id_column in lowered and name_column in lowered:
                pairs += list(zip(frame[lowered[id_column]].to_list(), frame[lowered[name_column]].to_list()))
        if not pairs:
            raise InputError(f"a synonym table names an id and a name column (id, name; node_id, node_name; x_id, "
                             f"x_name); found {', '.join(frame.columns)}", path)
    synonyms: Dict[str, Set[int]] = {}
    for identifier, name in pairs:
        ids = labels.get(str(identifier))
        if ids and name:
            synonyms.setdefault(normal_name(name), set()).update(ids)
    return synonyms


def _table(path: Path, separator: str):
    from openbench._io.inputs import iter_lines, read_table

    header = next((line for _, line in iter_lines(path) if line.strip()), None)
    if header is None:
        raise InputError("an empty file; expected a header line", path)
    names = [name.strip().strip('"') for name in header.split(separator)]
    return read_table(path, {name: name for name in names}, separator=separator, quote_char='"', comment_prefixes=())


def read_ranked_list(path) -> List[Tuple[int, str, str, Optional[float]]]:
    """(line, query, name, rank or None) of a ranked list's rows (see the module docstring)."""
    path = Path(path)
    from openbench._io.inputs import read_text

    separator = "\t" if "\t" in read_text(path).split("\n", 1)[0] else ","
    frame = _table(path, separator)
    lowered = {name.lower(): name for name in frame.columns}
    query = next((lowered[name] for name in QUERY_COLUMNS if name in lowered), None)
    name = next((lowered[column] for column in NAME_COLUMNS if column in lowered), None)
    if query is None or name is None:
        raise InputError(f"a ranked list names its query ({' or '.join(QUERY_COLUMNS)}) and its candidates "
                         f"({', '.join(NAME_COLUMNS)}) in a header; found {', '.join(frame.columns)}", path)
    ranks: List[Optional[float]] = [None] * frame.height
    if "rank" in lowered:
        raw = frame[lowered["rank"]].to_list()
        for row, value in enumerate(raw):
            try:
                ranks[row] = float(value)
            except (TypeError, ValueError):
                raise InputError(f"rank {value!r}; expected a number", path, row + 2) from None
    return [(row + 2, str(q), str(n), ranks[row]) for row, (q, n) in
            enumerate(zip(frame[query].to_list(), frame[name].to_list()))]


def ranked_list_table(path, dataset, names_path=None) -> ScoreTable:
    """The ranked list at ``path`` as a table of (query, candidate, -rank) pairs over ``dataset``'s
    ids, names mapped through the synonym table ``names_path`` (and the dataset's labels)."""
    path = Path(path)
    synonyms = read_synonyms(names_path, dataset) if names_path else {}
    labels = _label_index(dataset)
    rows = read_ranked_list(path)
    ambiguous: List[Dict[str, Any]] = []
    unknown: List[Dict[str, Any]] = []
    mapped = {"queries": 0, "names": 0}
    pairs: Dict[Tuple[int, int], float] = {}
    positions: Dict[int, int] = {}
    for line, query, name, rank in rows:
        query_ids = _resolve(query, labels, synonyms)
        name_ids = _resolve(name, labels, synonyms)
        problem = None
        for text, ids, what in ((query, query_ids, "query"), (name, name_ids, "name")):
            if len(ids) != 1 and problem is None:
                problem = {"line": line, what: text, "ids": len(ids)}
                (ambiguous if ids else unknown).append(problem)
        if problem is not None:
            continue
        q, n = next(iter(query_ids)), next(iter(name_ids))
        positions[q] = positions.get(q, 0) + 1
        place = rank if rank is not None else float(positions[q])
        if (q, n) not in pairs or -place > pairs[(q, n)]:
            pairs[(q, n)] = -place
        mapped["names"] += 1
    pair_ids = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
    scores = np.array(list(pairs.values()), dtype=np.float64)
    facts = {"format": "ranked list by name", "layout": "pairs", "rows": len(rows), "names_mapped": mapped["names"],
             "names_ambiguous": len(ambiguous), "ambiguous": ambiguous[:NAMED], "names_unknown": len(unknown),
             "unknown": unknown[:NAMED], "queries": len({q for q, _ in pairs}), "path": str(path),
             "synonyms": str(names_path) if names_path else None,
             "match": "NFKC, case folded, punctuation and whitespace folded; ambiguous and unknown names left out"}
    if not pairs:
        raise InputError(f"no row of the ranked list maps to the dataset ({len(unknown)} unknown, {len(ambiguous)} "
                         f"ambiguous name(s); first: line {(unknown + ambiguous)[0]['line'] if rows else '-'})", path)
    table = ScoreTable("pairs", pair_ids, scores, facts)
    table.source_sha256 = table_sha256(path)
    return table


def _resolve(text: str, labels: Dict[str, Set[int]], synonyms: Dict[str, Set[int]]) -> Set[int]:
    """The ids a query or a name stands for: a label (or a label's id part) as written, else its
    normal name in the synonym table."""
    found = labels.get(text.strip())
    if found:
        return set(found)
    return set(synonyms.get(normal_name(text), set()))
