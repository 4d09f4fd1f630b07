"""Runs in the store: a record validated by the evaluators' own schema, its identity (dataset
fingerprint, protocol, model, seed: the same run twice is refused), its name owned by one group,
its per-query ranks checked as evidence, and the grouped rows a listing shows (mean ± std over
seeds, the standard-protocol mark, scopes, uncertainty)."""
from __future__ import annotations

import json
import sqlite3
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from openbench.leaderboard.published import PublishedMixin
from openbench.leaderboard.schema import DuplicateRun, LeaderboardError, canonical as _canonical, loads as _loads, now as _now
from openbench.errors import UsageError
from openbench.evaluation.tasks.ranking import scope_of
from openbench.record import RecordError, validate_record
from openbench.task_registry import get_task, task_of
from openbench.vocabulary import RANK_TYPES, SIDES

__all__ = ["MODEL_TYPES", "VERIFIED", "URL_SCHEMES", "validate", "RunsMixin", "scope_of", "dataset_label"]

MODEL_TYPES = ("latent", "interpretable", "other")


# self: the submitter computed the record (and its ranks); server: scored by the board's server
# against hidden answers; reproduced: the board re-evaluated the submitted model itself (reproduce.py)
VERIFIED = ("self", "server", "reproduced")


URL_SCHEMES = ("http://", "https://")


def validate(record) -> None:
    """Raise LeaderboardError with the reason when ``record`` is not a trustworthy result: the
    evaluators' own schema and consistency rules (:func:`openbench.record.validate_record`)."""
    try:
        validate_record(record)
    except RecordError as error:
        raise LeaderboardError(str(error)) from None


class RunsMixin(PublishedMixin):
    """The :class:`~openbench.leaderboard.store.Leaderboard` methods of runs: submitting, naming,
    listing."""

    def submit(self, record: dict, name: str, model_type: str = "other", paper: Optional[str] = None,
               code: Optional[str] = None, notes: Optional[str] = None, team: Optional[str] = None,
               verified: str = "self", ranks=None, ranks_provenance: Optional[dict] = None,
               certificate: Optional[dict] = None) -> int:
        """Validate and store ``record``; returns the new row id. Refuses duplicates and bad records.

        :param team: the submitting team (a served board's token); its rows' names and groups are
            its own: another team's cannot be joined or reused.
        :param verified: ``"self"`` (a result JSON the submitter computed) or ``"server"`` (scored
            by the server against hidden test answers).
        :param ranks: the record's per-query ranks (a polars DataFrame), checked against it
            (:mod:`openbench.evaluation.statistics.evidence`); the row then shows its interval, and where
            the board computed them (``verified`` server or reproduced) it is compared with the best
            such row of its ranking. ``ranks_provenance``: the ranks file's metadata, checked too.
        :param certificate: a reproduced row's re-evaluation certificate
            (:func:`openbench.leaderboard.reproduce.certificate`); required with ``verified="reproduced"``.
        """
        fields = self._fields(name, model_type, paper, code, notes, team, verified)
        keys, row = self._row(record, fields)  # validates the record first
        keeps_ranks = task_of(record).keeps_ranks
        if (verified == "reproduced") != (certificate is not None) or (verified == "reproduced" and keeps_ranks
                                                                          and ranks is None):
            raise LeaderboardError("a reproduced row carries its re-evaluation certificate (and, ranking, the board's "
                                   "ranks), and only it does")
        if "hosted_protocol" in record["protocol"] or "benchmark_part" in record["protocol"]:
            raise LeaderboardError("a hosted benchmark's rows are scored by its server only (submit-predictions); "
                                   "a record claiming its protocol is refused")
        stored = self._ranks_row(record, ranks, ranks_provenance)
        extra = {"certificate_json": _canonical(certificate)} if certificate is not None else None
        with self._transaction() as connection:
            row_id = self._insert(connection, keys, row, fields, task_of(record).name, extra)
            self._insert_ranks(connection, row_id, stored)
            return row_id

    @staticmethod
    def _ranks_row(record: dict, ranks, provenance: Optional[dict] = None) -> Optional[tuple]:
        """(Parquet bytes, confidence JSON) of checked ranks, before any transaction; None without."""
        if ranks is None:
            return None
        from openbench.leaderboard.uncertainty import check_ranks, confidence_json, ranks_blob

        if not task_of(record).keeps_ranks:
            raise LeaderboardError(f"ranks belong to ranking records, not to a {task_of(record).name} record")
        try:
            check_ranks(record, ranks, provenance)
        except RecordError as error:
            raise LeaderboardError(str(error)) from None
        return ranks_blob(ranks), confidence_json(record, ranks)

    @staticmethod
    def _insert_ranks(connection: sqlite3.Connection, row_id: int, stored: Optional[tuple]) -> None:
        if stored is not None:
            connection.execute("INSERT INTO ranks (submission_id, parquet, confidence_json) VALUES (?, ?, ?)",
                               (row_id, *stored))

    def stored_ranks(self, row_id: int) -> Optional[tuple]:
        """(ranks DataFrame, confidence block) of a stored row, or None where it has no ranks."""
        from openbench.leaderboard.uncertainty import ranks_of_blob

        found = self.connection.execute("SELECT parquet, confidence_json FROM ranks WHERE submission_id = ?",
                                        (row_id,)).fetchone()
        if found is None:
            return None
        return ranks_of_blob(found["parquet"]), _loads(found["confidence_json"], self.path, row_id, "confidence_json")

    def certificate(self, row_id: int) -> Optional[dict]:
        """The re-evaluation certificate of a reproduced row (None for the others)."""
        found = self.connection.execute("SELECT certificate_json FROM submissions WHERE id = ?", (row_id,)).fetchone()
        return _loads(found[0], self.path, row_id, "certificate_json") if found and found[0] else None

    @staticmethod
    def _fields(name: str, model_type: str, paper: Optional[str], code: Optional[str], notes: Optional[str],
                team: Optional[str], verified: str) -> dict:
        """The submitter's fields, checked: a name, a known model type and verification, links that
        are http(s) URLs (a page shows them as links: no javascript: or data: URL gets that far)."""
        if verified not in VERIFIED:
            raise LeaderboardError(f"verified {verified!r}: expected one of {', '.join(VERIFIED)}")
        if model_type not in MODEL_TYPES:
            raise LeaderboardError(f"model type {model_type!r}: expected one of {', '.join(MODEL_TYPES)}")
        if not isinstance(name, str) or not name.strip():
            raise LeaderboardError("a submission needs a name")
        for label, link in (("paper", paper), ("code", code)):
            if link is not None and (not isinstance(link, str) or not link.lower().startswith(URL_SCHEMES)
                                     or any(c.isspace() or ord(c) < 32 for c in link)):
                raise LeaderboardError(f"--{label} {link!r}: expected an http:// or https:// URL")
        return {"name": name.strip(), "model_type": model_type, "paper": paper, "code": code, "notes": notes,
                "team": team, "verified": verified}

    @staticmethod
    def _row(record: dict, fields: dict) -> tuple:
        """(run keys, the submissions row) of a validated record."""
        validate(record)
        dataset, model = record["dataset"], record["model"]
        registry = dataset.get("registry") or {}
        keys = (dataset["fingerprint"], _canonical(record["protocol"]),
                _canonical([model["name"], model.get("params", {}), model.get("source_sha256")]),
                _canonical(record.get("seed")))
        task = task_of(record)
        row = {"name": fields["name"], "model_type": fields["model_type"], "paper": fields["paper"],
               "code": fields["code"], "notes": fields["notes"], "dataset_name": registry.get("name"),
               "dataset_version": registry.get("version"), "dataset_fingerprint": keys[0], "protocol_key": keys[1],
               "model_key": keys[2], "seed_key": keys[3], "metrics_json": _canonical(task.board_metrics(record)),
               "result_json": json.dumps(record), "submitted_at": _now(), "team": fields["team"],
               "verified": fields["verified"], "task": task.name, "scope": task.scope(record["protocol"]),
               "dataset_label": dataset_label(registry.get("name"), dataset["fingerprint"], dataset.get("path"),
                                              dataset.get("made_by"))}
        return keys, row

    def _insert(self, connection: sqlite3.Connection, keys: tuple, row: dict, fields: dict, task: str,
                extra: Optional[dict] = None) -> int:
        duplicate = connection.execute(
            "SELECT id, name FROM submissions WHERE dataset_fingerprint = ? AND protocol_key = ? AND "
            "model_key = ? AND seed_key = ?", keys).fetchone()
        if duplicate:
            raise DuplicateRun(f"a run with the same dataset, protocol, model and seed is already on the "
                               f"leaderboard (#{duplicate[0]}, {duplicate[1]!r}); submit another seed")
        self._check_name(connection, fields["name"], keys, task, fields["team"])
        values = dict(row, **(extra or {}))
        columns = ", ".join(values)
        cursor = connection.execute(f"INSERT INTO submissions ({columns}) VALUES ({', '.join('?' * len(values))})",
                                    tuple(values.values()))
        return int(cursor.lastrowid or 0)

    def _check_name(self, connection: sqlite3.Connection, name: str, keys: tuple, task: str,
                    team: Optional[str] = None) -> None:
        """A name identifies one row: a run joining a group keeps the group's name, and a name is
        not given to a second model on the same dataset and task; on a served board a team joins
        and names only its own rows."""
        fingerprint, protocol_key, model_key, _ = keys
        for row in connection.execute(
                "SELECT id, name, protocol_key, model_key, task, team FROM submissions WHERE dataset_fingerprint = ? "
                "AND (name = ? OR (protocol_key = ? AND model_key = ?)) ORDER BY id",
                (fingerprint, name, protocol_key, model_key)):
            same_group = row["protocol_key"] == protocol_key and row["model_key"] == model_key
            if (same_group or row["name"] == name) and row["team"] != team and (team or row["team"]):
                raise LeaderboardError(f"#{row['id']} {row['name']!r} belongs to another team; a team adds rows "
                                       "only under its own names")
            if same_group and row["name"] != name:
                raise LeaderboardError(f"this run joins the group of #{row['id']} {row['name']!r} (same dataset, "
                                       f"protocol and model: another seed); submit it under that name")
            if not same_group and row["name"] == name and row["model_key"] != model_key and row["task"] == task:
                raise LeaderboardError(f"the name {name!r} already names another model on this dataset (#{row['id']}); "
                                       "choose a name that tells them apart")

    def rows(self, dataset: Optional[str] = None, side: str = "both", rank_type: str = "realistic",
             sort: Optional[str] = None, include_published: Optional[bool] = None, task: str = "ranking",
             scoped: bool = False) -> List[dict]:
        """One row per group of runs (same dataset, protocol and model) of one ``task``, best first
        by ``sort`` (default: mrr for ranking, auroc for classification). Classification rows carry
        the test split's overall metrics; tasks are never ranked together. Records of a scoped
        protocol (chosen relations, one side, an entity subset) are shown only with ``scoped``,
        ranked within their scope (``row["scope"]``), never with full-protocol rows.

        The published reference rows (OpenBioLink's HQ_DIR results) appear only when asked:
        ``include_published`` True, or ``dataset`` naming their dataset (None: that rule alone)."""
        try:
            headline = get_task(task).headline
        except UsageError as error:
            raise LeaderboardError(str(error)) from None
        sort = sort or headline
        if side not in SIDES:
            raise LeaderboardError(f"side {side!r}: expected one of {', '.join(SIDES)}")
        if rank_type not in RANK_TYPES:
            raise LeaderboardError(f"rank type {rank_type!r}: expected one of {', '.join(RANK_TYPES)}")
        if dataset is not None:
            self._check_dataset_query(dataset)
        groups: Dict[tuple, List[sqlite3.Row]] = {}
        columns = ("id, name, model_type, paper, code, notes, dataset_name, dataset_version, dataset_fingerprint, "
                   "protocol_key, model_key, seed_key, metrics_json, team, verified, task, scope, dataset_label")
        for row in self.connection.execute(f"SELECT {columns} FROM submissions WHERE task = ? AND "
                                           f"(scope IS NOT NULL) = ? AND hidden = 0 ORDER BY id", (task, scoped)):
            if dataset and not _dataset_matches(dataset, row["dataset_name"], row["dataset_fingerprint"]):
                continue
            groups.setdefault((row["dataset_fingerprint"], row["protocol_key"], row["model_key"]), []).append(row)
        labels = self._dataset_labels()
        out = [_group_row(runs, side, rank_type, task, self.path, labels) for runs in groups.values()]
        if include_published is None:
            asked = (dataset or "").strip().lower()
            include_published = bool(asked) and any(
                asked == row[0].lower()
                for row in self.connection.execute("SELECT DISTINCT dataset_name FROM published"))
        if include_published and side == "both" and get_task(task).shows_published and not scoped:
            out += [row for row in self.published() if not dataset or _dataset_matches(dataset, row["dataset"]["name"],
                                                                                         None)]
        known = sorted({key for row in out for key in row["metrics"]} | {headline})
        if sort not in known and not out:
            # say why the table is empty rather than judge --sort against no rows at all
            published = " (OpenBioLink's published results report both sides together)" if side != "both" else ""
            raise LeaderboardError(f"no {task} rows to show{' for ' + dataset if dataset else ''} on the {side} "
                                   f"side{' in scoped protocols' if scoped else ''}: no record on this board "
                                   f"matches{published}")
        if sort not in known:
            raise LeaderboardError(f"--sort {sort!r}: expected one of {', '.join(known)}")
        from openbench.leaderboard.uncertainty import annotate

        ranked = _sorted(out, sort)
        self._record_intervals(ranked, get_task(task), sort)
        annotate(ranked, self.stored_ranks, sort, side, rank_type, self._compared)
        return ranked

    def _record_intervals(self, rows: List[dict], task, sort: str) -> None:
        """A task whose records carry their own bootstrap intervals (no per-query ranks the board
        keeps): a one-run row shows its record's interval of ``sort`` (never a paired verdict)."""
        if task.keeps_ranks:
            return
        for row in rows:
            ids = row.get("_ids") or []
            if len(ids) != 1:
                continue
            found = self.connection.execute("SELECT result_json FROM submissions WHERE id = ?", (ids[0],)).fetchone()
            interval = task.interval(_loads(found[0], self.path, ids[0], "result_json"), sort) if found else None
            if interval is not None:
                row["record_interval"] = interval

    def _dataset_labels(self) -> Dict[str, str]:
        """One label per dataset fingerprint, whatever folder or benchmark name its rows came with:
        the registry name where a row has one, else the label of its first row."""
        labels: Dict[str, str] = {}
        for fingerprint, label in self.connection.execute(
                "SELECT dataset_fingerprint, dataset_label FROM submissions WHERE hidden = 0 "
                "ORDER BY dataset_name IS NULL, id"):
            labels.setdefault(fingerprint, label or dataset_label(None, fingerprint))
        return labels

    def datasets(self) -> List[str]:
        """The datasets on the board, as :func:`dataset_label` shows them (the published rows' too:
        --dataset may name them)."""
        labels = set(self._dataset_labels().values())
        labels |= {row["dataset_name"] for row in self.connection.execute("SELECT DISTINCT dataset_name FROM published")}
        return sorted(labels)

    def _check_dataset_query(self, query: str) -> None:
        """A --dataset value must name a dataset on the board: a registry name or a fingerprint
        prefix of 6+ characters."""
        names = {row[0].lower() for row in self.connection.execute(
            "SELECT dataset_name FROM submissions WHERE dataset_name IS NOT NULL UNION "
            "SELECT dataset_name FROM published")}
        if query.strip().lower() in names:
            return
        if len(query.strip()) < 6:
            raise LeaderboardError(f"--dataset {query!r}: not a dataset name on this board, and a fingerprint prefix "
                                   f"needs 6 or more characters; the board holds {', '.join(self.datasets()) or 'none'}")
        if not self.connection.execute("SELECT 1 FROM submissions WHERE lower(dataset_fingerprint) LIKE ? LIMIT 1",
                                        (query.strip().lower() + "%",)).fetchone():
            raise LeaderboardError(f"--dataset {query!r}: no dataset of that name or fingerprint on this board; it "
                                   f"holds {', '.join(self.datasets()) or 'none'}")


def _dataset_matches(query: str, name: Optional[str], fingerprint: Optional[str]) -> bool:
    query = query.strip().lower()
    return (name is not None and name.lower() == query) or (
        fingerprint is not None and len(query) >= 6 and fingerprint.lower().startswith(query))


def dataset_label(name: Optional[str], fingerprint: Optional[str], path: Optional[str] = None,
                  made_by: Optional[str] = None) -> str:
    """How a dataset is shown: its registry name, else the folder name recorded at evaluation and
    what wrote the split ("openbench split rand, seed 0"), with the fingerprint's first 8 characters."""
    shown = name or (Path(path).name if path else None) or "dataset"
    if made_by and not name:
        shown = f"{shown}: {made_by}"
    return f"{shown} ({fingerprint[:8]})" if fingerprint else shown


def _candidates_note(protocol: dict) -> str:
    """Ranks against listed candidates (top-k files, OBL2021) are not comparable with full
    rankings, nor a split's question with another's (an entity-held-out split): such rows get a
    table of their own, its title saying why."""
    candidates = protocol.get("candidates", "all") if isinstance(protocol, dict) else "all"
    part = protocol.get("benchmark_part") if isinstance(protocol, dict) else None
    split = protocol.get("split") if isinstance(protocol, dict) else None
    note = "" if candidates in ("all", "typed") else f"; {candidates}"
    if isinstance(split, dict):  # what the split asks: its rows are ranked apart from every other kind
        held = (split.get("heldout_entities") or {}).get("test")
        inferred = (split.get("inference_graph") or {}).get("entities")
        note += f"; {split.get('kind')} split" + (f", {held} entities held out" if held is not None else "") \
            + (f", {inferred} inference-graph entities ranked" if inferred is not None else "")
    return note + (f"; {part}" if part else "")


def _group_row(runs: Sequence[sqlite3.Row], side: str, rank_type: str, task: str = "ranking",
               path: Optional[Path] = None, labels: Optional[Dict[str, str]] = None) -> dict:
    first = runs[0]
    protocol = _loads(first["protocol_key"], path, first["id"], "protocol_key")
    cells = [_loads(run["metrics_json"], path, run["id"], "metrics_json") for run in runs]
    kind = get_task(task)
    per_run, side, rank_type = kind.board_cells(cells, side, rank_type)
    names = sorted({key for values in per_run for key in values})
    metrics = {}
    for key in names:
        values = [v.get(key) for v in per_run]
        present = [v for v in values if v is not None]
        mean = statistics.fmean(present) if len(present) == len(values) and present else None
        std = statistics.stdev(present) if mean is not None and len(present) > 1 else None
        metrics[key] = {"mean": mean, "std": std}
    fingerprint = first["dataset_fingerprint"]
    label = (labels or {}).get(fingerprint) or first["dataset_label"] or dataset_label(first["dataset_name"],
                                                                                        fingerprint)
    return {"name": first["name"], "model_type": first["model_type"],
            "dataset": {"name": first["dataset_name"], "version": first["dataset_version"], "fingerprint": fingerprint,
                        "label": label},
            "task": task, "group": f"{label} ({task}{_candidates_note(protocol)})",
            "family": f"{task}{_candidates_note(protocol)}",
            "group_key": f"{fingerprint} {task}{_candidates_note(protocol)}",
            "side": side, "rank_type": rank_type, "metrics": metrics, "runs": len(runs),
            "protocol": protocol, "published": False,
            "nonstandard_protocol": kind.nonstandard(first["dataset_name"], protocol),
            "scope": first["scope"],
            "seeds": [json.loads(run["seed_key"]) for run in runs],
            "_ids": [run["id"] for run in runs],  # for the stored ranks; annotate() removes it
            "team": first["team"], "verified": _verified(runs),
            "paper": first["paper"], "code": first["code"], "notes": first["notes"]}


def _verified(runs: Sequence[sqlite3.Row]) -> str:
    """A group's mark: server or reproduced where every run has it, else self."""
    marks = {run["verified"] for run in runs}
    return marks.pop() if len(marks) == 1 else "self"


def _sorted(rows: List[dict], sort: str) -> List[dict]:
    lower_first = sort in ("mr", "amr")  # mean ranks: lower is better

    def key(row):
        group, scope = row.get("group") or "", row.get("scope") or ""  # ranked within one dataset and scope
        value = (row["metrics"].get(sort) or {}).get("mean")
        if value is None:
            return (group, scope, 1, 0.0, row["name"])
        return (group, scope, 0, value if lower_first else -value, row["name"])

    return sorted(rows, key=key)
