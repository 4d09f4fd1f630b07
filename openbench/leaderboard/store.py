"""A local leaderboard of validated result records, in SQLite.

Rows come only from openbench's result JSON. :func:`validate` refuses what cannot be trusted
(missing keys, non-finite or out-of-range metrics, ``null`` where a metric is defined, hits@k
falling as k grows, no protocol, no dataset fingerprint). A run is identified by the dataset
fingerprint, the protocol, the model (``model.name``, ``model.params``, ``model.source_sha256``)
and the seed; a second submission of the same run is refused, and runs differing only in seed
form one group, shown as mean ± std over its runs.

The database carries an application id and a schema version (``PRAGMA user_version``), migrated
forward on open; a file that is not an SQLite database, or another program's database, is
reported and left untouched, and so is a store holding a table, view, index or trigger that the
migrations did not create (or one of theirs changed): a planted trigger would run on the next
write. A served board keeps its teams' tokens (salted digests), its hosted benchmarks' secrets,
their uploads per day and the test-challenge rows hidden until :meth:`Leaderboard.reveal`. Every submit is one ``BEGIN IMMEDIATE`` transaction, so concurrent
submitters queue instead of losing rows. The published OpenBioLink2020 HQ_DIR leaderboard is a
separate, read-only table, shown beside the submitted rows and marked as not reproduced here.
"""
from __future__ import annotations

import datetime
import functools
import hashlib
import hmac
import json
import re
import secrets
import sqlite3
import statistics
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

from openbench.errors import OpenbenchError
from openbench.record import CLASSIFICATION_METRICS, RecordError, validate_record
from openbench.vocabulary import RANK_TYPES, SIDES, TASKS

__all__ = ["DuplicateRun", "APPLICATION_ID", "SIDES", "RANK_TYPES", "MODEL_TYPES", "PUBLISHED_PROTOCOL", "SQLITE_HEADER",
           "PUBLISHED_HQ_DIR", "MIGRATIONS", "LeaderboardError", "default_path", "validate", "Leaderboard",
           "submit_file", "read_rows", "read_page_rows", "page_rows", "open_leaderboard", "connect", "scope_of", "dataset_label",
           "TOKEN_PREFIX", "TOKEN_PATTERN", "VERIFIED", "LimitReached", "expected_schema", "URL_SCHEMES"]

APPLICATION_ID = 0x4F424C42  # "OBLB"
MODEL_TYPES = ("latent", "interpretable", "other")
PUBLISHED_PROTOCOL = "unknown: LibKGE, LinkExplorer 2022"
SQLITE_HEADER = b"SQLite format 3\x00"

# OpenBioLink README (HQ_DIR; LinkExplorer, Ott et al. 2022; embeddings trained with LibKGE); no hits@3 published
PUBLISHED_HQ_DIR = [
    ("latent", "RESCAL", 0.320, 0.212, 0.544), ("latent", "TransE", 0.280, 0.175, 0.500),
    ("latent", "DistMult", 0.300, 0.193, 0.521), ("latent", "ComplEx", 0.319, 0.211, 0.547),
    ("latent", "ConvE", 0.288, 0.186, 0.510), ("latent", "RotatE", 0.286, 0.180, 0.511),
    ("interpretable", "AnyBURL (Maximum)", 0.277, 0.192, 0.457),
    ("interpretable", "AnyBURL (Noisy-OR)", 0.159, 0.098, 0.295), ("interpretable", "SAFRAN*", 0.306, 0.214, 0.501),
]

MIGRATIONS = [
    # version 1
    """
    CREATE TABLE submissions (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL, model_type TEXT NOT NULL, paper TEXT, code TEXT, notes TEXT,
        dataset_name TEXT, dataset_version TEXT, dataset_fingerprint TEXT NOT NULL,
        protocol_key TEXT NOT NULL, model_key TEXT NOT NULL, seed_key TEXT NOT NULL,
        metrics_json TEXT NOT NULL, result_json TEXT NOT NULL, submitted_at TEXT NOT NULL,
        UNIQUE (dataset_fingerprint, protocol_key, model_key, seed_key)
    );
    CREATE TABLE published (
        id INTEGER PRIMARY KEY, dataset_name TEXT NOT NULL, model_type TEXT NOT NULL, name TEXT NOT NULL,
        mrr REAL, hits_at_1 REAL, hits_at_3 REAL, hits_at_10 REAL, protocol TEXT NOT NULL, source TEXT NOT NULL
    );
    CREATE TRIGGER published_read_only_update BEFORE UPDATE ON published
        BEGIN SELECT RAISE(ABORT, 'published results are read-only'); END;
    CREATE TRIGGER published_read_only_delete BEFORE DELETE ON published
        BEGIN SELECT RAISE(ABORT, 'published results are read-only'); END;
    """,
    # version 2: a served board: teams and their tokens (salted hashes only), and how a row was scored
    """
    ALTER TABLE submissions ADD COLUMN team TEXT;
    ALTER TABLE submissions ADD COLUMN verified TEXT NOT NULL DEFAULT 'self';
    ALTER TABLE submissions ADD COLUMN task TEXT NOT NULL DEFAULT 'ranking';
    ALTER TABLE submissions ADD COLUMN scope TEXT;
    ALTER TABLE submissions ADD COLUMN dataset_label TEXT;
    CREATE INDEX submissions_by_dataset ON submissions (dataset_fingerprint, task);
    CREATE TABLE tokens (
        id INTEGER PRIMARY KEY, team TEXT NOT NULL, salt TEXT NOT NULL, digest TEXT NOT NULL,
        created_at TEXT NOT NULL, revoked_at TEXT
    );
    """,
    # version 3: hosted benchmarks keep their secret here (never served); rows of the hidden
    # test-challenge part stay hidden until the organiser reveals them; scored uploads are counted
    """
    ALTER TABLE submissions ADD COLUMN benchmark TEXT;
    ALTER TABLE submissions ADD COLUMN part TEXT;
    ALTER TABLE submissions ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE benchmarks (
        name TEXT PRIMARY KEY, secret TEXT NOT NULL, fingerprint TEXT NOT NULL, created_at TEXT NOT NULL,
        revealed_at TEXT
    );
    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY, team TEXT NOT NULL, benchmark TEXT NOT NULL, day TEXT NOT NULL, at TEXT NOT NULL
    );
    CREATE INDEX attempts_by_team ON attempts (team, benchmark, day);
    """,
    # version 4: a row's per-query ranks (Parquet bytes) and the intervals they give (uncertainty.py)
    """
    CREATE TABLE ranks (
        submission_id INTEGER PRIMARY KEY REFERENCES submissions (id), parquet BLOB NOT NULL,
        confidence_json TEXT NOT NULL
    );
    """,
]
TOKEN_PREFIX = "obt"
# the one token syntax: obt_<id>_<secret>, the id a canonical decimal (no sign, no leading zero,
# at most 18 digits: always an SQLite integer), the secret as secrets.token_urlsafe(32) makes it
TOKEN_PATTERN = re.compile(r"obt_([1-9][0-9]{0,17})_([A-Za-z0-9_-]{43})")
VERIFIED = ("self", "server")
URL_SCHEMES = ("http://", "https://")
# what SQLite itself may add to a store (ANALYZE's statistics): data, never code
SQLITE_OWN_TABLES = ("sqlite_stat1", "sqlite_stat2", "sqlite_stat3", "sqlite_stat4")


class LeaderboardError(OpenbenchError):
    """A refused submission, or a database that is not an openbench leaderboard."""


class DuplicateRun(LeaderboardError):
    """The same dataset, protocol, model and seed is already on the board."""


class LimitReached(LeaderboardError):
    """A team's scored uploads of the UTC day are used up; ``reset`` is when the next one is allowed."""

    def __init__(self, message: str, reset: datetime.datetime):
        super().__init__(message)
        self.reset = reset


def default_path() -> Path:
    import platformdirs

    return platformdirs.user_data_path("openbench") / "leaderboard.sqlite"


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# ------------------------------------------------------------------------------------------
# validation


def validate(record) -> None:
    """Raise LeaderboardError with the reason when ``record`` is not a trustworthy result: the
    evaluators' own schema and consistency rules (:func:`openbench.record.validate_record`)."""
    try:
        validate_record(record)
    except RecordError as error:
        raise LeaderboardError(str(error)) from None


# ------------------------------------------------------------------------------------------
# the store


class Leaderboard:
    """An open leaderboard database. Use :func:`open_leaderboard`."""

    def __init__(self, path: Path, connection: sqlite3.Connection):
        # (difference, p-value) of row pairs already compared (uncertainty.annotate)
        self._compared: Dict[tuple, Optional[tuple]] = {}
        self.path, self.connection = path, connection

    def close(self) -> None:
        self.connection.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield self.connection
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    def submit(self, record: dict, name: str, model_type: str = "other", paper: Optional[str] = None,
               code: Optional[str] = None, notes: Optional[str] = None, team: Optional[str] = None,
               verified: str = "self", ranks=None, ranks_provenance: Optional[dict] = None) -> int:
        """Validate and store ``record``; returns the new row id. Refuses duplicates and bad records.

        :param team: the submitting team (a served board's token); its rows' names and groups are
            its own: another team's cannot be joined or reused.
        :param verified: ``"self"`` (a result JSON the submitter computed) or ``"server"`` (scored
            by the server against hidden test answers).
        :param ranks: the record's per-query ranks (a polars DataFrame), checked against it
            (:mod:`openbench.evaluation.evidence`); the row then shows its interval and is compared
            with the best of its ranking. ``ranks_provenance``: the ranks file's metadata, checked too.
        """
        fields = self._fields(name, model_type, paper, code, notes, team, verified)
        keys, row = self._row(record, fields)
        if "hosted_protocol" in record["protocol"] or "benchmark_part" in record["protocol"]:
            raise LeaderboardError("a hosted benchmark's rows are scored by its server only (submit-predictions); "
                                   "a record claiming its protocol is refused")
        stored = self._ranks_row(record, ranks, ranks_provenance)
        with self._transaction() as connection:
            row_id = self._insert(connection, keys, row, fields, record.get("task", "ranking"))
            self._insert_ranks(connection, row_id, stored)
            return row_id

    @staticmethod
    def _ranks_row(record: dict, ranks, provenance: Optional[dict] = None) -> Optional[tuple]:
        """(Parquet bytes, confidence JSON) of checked ranks, before any transaction; None without."""
        if ranks is None:
            return None
        from openbench.leaderboard.uncertainty import check_ranks, confidence_json, ranks_blob

        if record.get("task", "ranking") != "ranking":
            raise LeaderboardError("ranks belong to ranking records, not to a classification record")
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

    def submit_parts(self, records: Dict[str, dict], benchmark: str, name: str, model_type: str = "other",
                     paper: Optional[str] = None, code: Optional[str] = None, notes: Optional[str] = None,
                     team: Optional[str] = None, ranks: Optional[Dict[str, object]] = None) -> Dict[str, int]:
        """Store the server-scored records of a hosted benchmark's parts ({part: record}) in one
        transaction, with their ranks ({part: DataFrame}); the test-challenge row stays hidden
        until :meth:`reveal`. Returns {part: id}."""
        fields = self._fields(name, model_type, paper, code, notes, team, "server")
        prepared = {part: self._row(record, fields) for part, record in records.items()}
        stored = {part: self._ranks_row(record, (ranks or {}).get(part)) for part, record in records.items()}
        with self._transaction() as connection:
            state = connection.execute("SELECT revealed_at FROM benchmarks WHERE name = ?", (benchmark,)).fetchone()
            if state is None:
                raise LeaderboardError(f"no hosted benchmark {benchmark!r} in this store")
            ids = {}
            for part, (keys, row) in prepared.items():
                hidden = part == "test-challenge" and state["revealed_at"] is None
                ids[part] = self._insert(connection, keys, row, fields, "ranking",
                                         {"benchmark": benchmark, "part": part, "hidden": int(hidden)})
                self._insert_ranks(connection, ids[part], stored[part])
            return ids

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
        task = record.get("task", "ranking")
        row = {"name": fields["name"], "model_type": fields["model_type"], "paper": fields["paper"],
               "code": fields["code"], "notes": fields["notes"], "dataset_name": registry.get("name"),
               "dataset_version": registry.get("version"), "dataset_fingerprint": keys[0], "protocol_key": keys[1],
               "model_key": keys[2], "seed_key": keys[3], "metrics_json": _canonical(_headline_metrics(record)),
               "result_json": json.dumps(record), "submitted_at": _now(), "team": fields["team"],
               "verified": fields["verified"], "task": task,
               "scope": scope_of(record["protocol"]) if task == "ranking" else None,
               "dataset_label": dataset_label(registry.get("name"), dataset["fingerprint"], dataset.get("path"))}
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
             sort: Optional[str] = None, include_published: bool = True, task: str = "ranking",
             scoped: bool = False) -> List[dict]:
        """One row per group of runs (same dataset, protocol and model) of one ``task``, best first
        by ``sort`` (default: mrr for ranking, auroc for classification). Classification rows carry
        the test split's overall metrics; tasks are never ranked together. Records of a scoped
        protocol (chosen relations, one side, an entity subset) are shown only with ``scoped``,
        ranked within their scope (``row["scope"]``), never with full-protocol rows."""
        if task not in TASKS:
            raise LeaderboardError(f"task {task!r}: expected one of {', '.join(TASKS)}")
        sort = sort or ("mrr" if task == "ranking" else "auroc")
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
        if include_published and side == "both" and task == "ranking" and not scoped:
            out += [row for row in self.published() if not dataset or _dataset_matches(dataset, row["dataset"]["name"],
                                                                                         None)]
        known = sorted({key for row in out for key in row["metrics"]} | {"mrr" if task == "ranking" else "auroc"})
        if sort not in known:
            raise LeaderboardError(f"--sort {sort!r}: expected one of {', '.join(known)}")
        from openbench.leaderboard.uncertainty import annotate

        ranked = _sorted(out, sort)
        annotate(ranked, self.stored_ranks, sort, side, rank_type, self._compared)
        return ranked

    def create_token(self, team: str) -> str:
        """A new token for ``team``, returned once: the store keeps a salted SHA-256 of its secret."""
        if not team.strip():
            raise LeaderboardError("a token needs a team name")
        salt, secret = secrets.token_hex(16), secrets.token_urlsafe(32)
        with self._transaction() as connection:
            cursor = connection.execute("INSERT INTO tokens (team, salt, digest, created_at) VALUES (?, ?, ?, ?)",
                                        (team.strip(), salt, _digest(salt, secret), _now()))
            return f"{TOKEN_PREFIX}_{cursor.lastrowid}_{secret}"

    def revoke_tokens(self, team: str) -> int:
        """Revoke every live token of ``team``; returns how many."""
        with self._transaction() as connection:
            return connection.execute("UPDATE tokens SET revoked_at = ? WHERE team = ? AND revoked_at IS NULL",
                                      (_now(), team)).rowcount

    def authenticate(self, token: str) -> Optional[tuple]:
        """(token id, team) of a live token in the one canonical syntax, else None. The digests are
        compared in constant time, and a token that is unknown, revoked or malformed costs the same
        digest work as a live one."""
        match = TOKEN_PATTERN.fullmatch(token) if isinstance(token, str) else None
        row = None
        if match is not None:
            row = self.connection.execute("SELECT id, team, salt, digest, revoked_at FROM tokens WHERE id = ?",
                                          (int(match.group(1)),)).fetchone()
        if row is None or row["revoked_at"] is not None:
            hmac.compare_digest("0" * 64, _digest("", match.group(2) if match else ""))  # the same work
            return None
        same = hmac.compare_digest(row["digest"], _digest(row["salt"], match.group(2) if match else ""))
        return (int(row["id"]), row["team"]) if same else None

    def team_of(self, token: str) -> Optional[str]:
        """The team of a live token, else None (see :meth:`authenticate`)."""
        found = self.authenticate(token)
        return found[1] if found else None

    # -- hosted benchmarks ------------------------------------------------------------------
    def benchmark_secret(self, name: str, fingerprint: str) -> bytes:
        """The secret of hosted benchmark ``name``, made (32 random bytes) at its first serve. A
        name first served on another split is refused: its queries would change under the teams."""
        with self._transaction() as connection:
            row = connection.execute("SELECT secret, fingerprint FROM benchmarks WHERE name = ?", (name,)).fetchone()
            if row is None:
                secret = secrets.token_bytes(32)
                connection.execute("INSERT INTO benchmarks (name, secret, fingerprint, created_at) VALUES (?, ?, ?, ?)",
                                   (name, secret.hex(), fingerprint, _now()))
                return secret
        if row["fingerprint"] != fingerprint:
            raise LeaderboardError(f"benchmark {name!r} was first served on another split (fingerprint "
                                   f"{row['fingerprint'][:12]}…, this one {fingerprint[:12]}…); serve this split "
                                   "under another name")
        try:
            secret = bytes.fromhex(row["secret"])
        except (TypeError, ValueError):
            secret = b""
        if len(secret) != 32:
            raise LeaderboardError(f"{self.path}: the secret of benchmark {name!r} is not 32 hex-encoded bytes; the "
                                   "store was edited outside openbench")
        return secret

    def count_attempt(self, team: str, benchmark: str, daily_limit: Optional[int]) -> None:
        """Count one scored upload of ``team`` to ``benchmark`` (every upload, refused or not, costs
        the same); raises :class:`LimitReached` once ``daily_limit`` uploads of the UTC day are used."""
        now = datetime.datetime.now(datetime.timezone.utc)
        day = now.date().isoformat()
        with self._transaction() as connection:
            if daily_limit is not None:
                used = connection.execute("SELECT count(*) FROM attempts WHERE team = ? AND benchmark = ? AND day = ?",
                                          (team, benchmark, day)).fetchone()[0]
                if used >= daily_limit:
                    reset = datetime.datetime.combine(now.date() + datetime.timedelta(days=1), datetime.time(),
                                                      tzinfo=datetime.timezone.utc)
                    raise LimitReached(f"{team!r} used its {daily_limit} scored upload(s) to {benchmark!r} of "
                                       f"{day} (UTC); the next is allowed from {reset.isoformat()}", reset)
            connection.execute("INSERT INTO attempts (team, benchmark, day, at) VALUES (?, ?, ?, ?)",
                               (team, benchmark, day, now.isoformat(timespec="seconds")))

    def reveal(self, benchmark: str) -> int:
        """Show the test-challenge rows of ``benchmark`` (and those submitted later); returns how
        many rows became visible."""
        with self._transaction() as connection:
            if connection.execute("SELECT 1 FROM benchmarks WHERE name = ?", (benchmark,)).fetchone() is None:
                known = [row[0] for row in connection.execute("SELECT name FROM benchmarks ORDER BY name")]
                raise LeaderboardError(f"no hosted benchmark {benchmark!r} in {self.path}; it holds "
                                       f"{', '.join(known) or 'none'}")
            connection.execute("UPDATE benchmarks SET revealed_at = coalesce(revealed_at, ?) WHERE name = ?",
                               (_now(), benchmark))
            return connection.execute("UPDATE submissions SET hidden = 0 WHERE benchmark = ? AND hidden = 1",
                                      (benchmark,)).rowcount

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
        """The datasets on the board, as :func:`dataset_label` shows them."""
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

    def published(self) -> List[dict]:
        rows = []
        for row in self.connection.execute("SELECT * FROM published ORDER BY id"):
            metrics = {"mrr": row["mrr"], "hits@1": row["hits_at_1"], "hits@3": row["hits_at_3"],
                       "hits@10": row["hits_at_10"]}
            rows.append({"name": row["name"], "model_type": row["model_type"],
                         "dataset": {"name": row["dataset_name"], "version": None, "fingerprint": None},
                         "group": f"{row['dataset_name']} (ranking)", "family": "ranking (published)",
                         "side": "both", "rank_type": "unknown",
                         "metrics": {key: {"mean": value, "std": None} for key, value in metrics.items()},
                         "runs": None, "protocol": row["protocol"], "published": True,
                         "nonstandard_protocol": None, "source": row["source"]})
        return rows


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256((salt + secret).encode("utf-8")).hexdigest()


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _dataset_matches(query: str, name: Optional[str], fingerprint: Optional[str]) -> bool:
    query = query.strip().lower()
    return (name is not None and name.lower() == query) or (
        fingerprint is not None and len(query) >= 6 and fingerprint.lower().startswith(query))


def _headline_metrics(record: dict) -> dict:
    """What a row shows: a ranking record's metrics; a classification record's test overall block."""
    if record.get("task", "ranking") == "classification":
        return dict(record["classification"]["test"]["overall"])
    return record["metrics"]


def _loads(text, path, row_id, column: str):
    """A JSON cell of the store; a hand-edited, broken cell is reported by row, never a traceback."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as error:
        raise LeaderboardError(f"{path}: row #{row_id}: the {column} cell is not valid JSON ({error}); the store "
                               "was edited outside openbench") from None
    if not isinstance(value, dict):
        raise LeaderboardError(f"{path}: row #{row_id}: the {column} cell is not a JSON object; the store was "
                               "edited outside openbench")
    return value


def dataset_label(name: Optional[str], fingerprint: Optional[str], path: Optional[str] = None) -> str:
    """How a dataset is shown: its registry name, else the folder name recorded at evaluation, with
    the fingerprint's first 8 characters."""
    shown = name or (Path(path).name if path else None) or "dataset"
    return f"{shown} ({fingerprint[:8]})" if fingerprint else shown


def _candidates_note(protocol: dict) -> str:
    """Ranks against listed candidates (top-k files, OBL2021) are not comparable with full
    rankings: such rows get a table of their own."""
    candidates = protocol.get("candidates", "all") if isinstance(protocol, dict) else "all"
    part = protocol.get("benchmark_part") if isinstance(protocol, dict) else None
    note = "" if candidates in ("all", "typed") else f"; {candidates}"
    return note + (f"; {part}" if part else "")


def _group_row(runs: Sequence[sqlite3.Row], side: str, rank_type: str, task: str = "ranking",
               path: Optional[Path] = None, labels: Optional[Dict[str, str]] = None) -> dict:
    first = runs[0]
    protocol = _loads(first["protocol_key"], path, first["id"], "protocol_key")
    cells = [_loads(run["metrics_json"], path, run["id"], "metrics_json") for run in runs]
    if task == "classification":
        per_run = [{k: v for k, v in cell.items() if k in CLASSIFICATION_METRICS} for cell in cells]
        side, rank_type = "test", "overall"
    else:
        per_run = [(cell.get(side) or {}).get(rank_type, {}) for cell in cells]
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
            "group": f"{label} ({task}{_candidates_note(protocol)})", "family": f"{task}{_candidates_note(protocol)}",
            "group_key": f"{fingerprint} {task}{_candidates_note(protocol)}",
            "side": side, "rank_type": rank_type, "metrics": metrics, "runs": len(runs),
            "protocol": protocol, "published": False,
            "nonstandard_protocol": _nonstandard(first["dataset_name"], protocol),
            "scope": first["scope"],
            "seeds": [json.loads(run["seed_key"]) for run in runs],
            "_ids": [run["id"] for run in runs],  # for the stored ranks; annotate() removes it
            "team": first["team"], "verified": "server" if all(run["verified"] == "server" for run in runs) else "self",
            "paper": first["paper"], "code": first["code"], "notes": first["notes"]}


def scope_of(protocol: dict) -> Optional[str]:
    """A scoped protocol's description (relations, sides, entity subset); None for the full one.
    A hosted benchmark's sides are the server's choice (a part may happen to serve tail queries
    only), never a scope: its parts rank with each other."""
    parts = []
    if protocol.get("relations"):
        parts.append("relations " + ",".join(protocol["relations"]))
    if list(protocol.get("sides", ["head", "tail"])) != ["head", "tail"] and "hosted_protocol" not in protocol:
        parts.append("/".join(protocol["sides"]) + " only")
    if protocol.get("entities"):
        entities = protocol["entities"]
        parts.append(f"{entities.get('count')} entities ({str(entities.get('sha256', ''))[:8]})")
    return "; ".join(parts) or None


def _nonstandard(dataset_name: Optional[str], protocol: dict) -> Optional[bool]:
    """True where the protocol differs from the registry's standard one (a scoped protocol always
    does); None without a registry entry."""
    if scope_of(protocol) is not None:
        return True
    if not dataset_name:
        return None
    from openbench.registry import REGISTRY

    entry = REGISTRY.get(dataset_name)
    if entry is None:
        return None
    return any(protocol.get(key) != value for key, value in entry.protocol.standard_part().items())


def _sorted(rows: List[dict], sort: str) -> List[dict]:
    lower_first = sort in ("mr", "amr")  # mean ranks: lower is better

    def key(row):
        group, scope = row.get("group") or "", row.get("scope") or ""  # ranked within one dataset and scope
        value = (row["metrics"].get(sort) or {}).get("mean")
        if value is None:
            return (group, scope, 1, 0.0, row["name"])
        return (group, scope, 0, value if lower_first else -value, row["name"])

    return sorted(rows, key=key)


def submit_file(result_path, db=None, ranks_path=None, **fields) -> tuple:
    """Validate the result JSON at ``result_path`` (and the ranks file at ``ranks_path``, its
    per-query ranks) and add it; returns (database path, row id)."""
    from openbench._io import read_json

    record = read_json(result_path, "result record")
    ranks, provenance = None, None
    try:
        validate(record)  # before the store is opened: a refused record creates nothing
        if ranks_path is not None:
            from openbench.evaluation.evidence import MAX_ROWS, EvidenceError, read_ranks
            from openbench.leaderboard.uncertainty import check_ranks

            stated = (record.get("diagnostics") or {}).get("queries")
            bound = stated if isinstance(stated, int) and not isinstance(stated, bool) and stated >= 0 else MAX_ROWS
            try:
                ranks, provenance = read_ranks(ranks_path, max_rows=min(bound, MAX_ROWS))  # sizes, rows, provenance
            except EvidenceError as problem:
                raise RecordError(str(problem)) from None
            check_ranks(record, ranks, provenance, ranks_path)  # before the store is opened
    except (LeaderboardError, RecordError) as error:
        raise LeaderboardError(f"{result_path}: refused: {error}") from None
    board = open_leaderboard(db)
    try:
        row_id = board.submit(record, ranks=ranks, ranks_provenance=provenance, **fields)
    except LeaderboardError as error:
        raise LeaderboardError(f"{result_path}: refused: {error}") from None
    finally:
        board.close()
    return board.path, row_id


def read_rows(db=None, **query) -> List[dict]:
    """The grouped rows of :meth:`Leaderboard.rows` from the database at ``db``."""
    board = open_leaderboard(db)
    try:
        return board.rows(**query)
    finally:
        board.close()


def page_rows(board: Leaderboard, dataset: Optional[str] = None) -> List[dict]:
    """Every table a page shows: ranking (with the published rows), classification and scoped."""
    return (board.rows(dataset=dataset) + board.rows(dataset=dataset, task="classification")
            + board.rows(dataset=dataset, scoped=True))


def read_page_rows(db=None, dataset: Optional[str] = None) -> List[dict]:
    """:func:`page_rows` of the database at ``db``."""
    board = open_leaderboard(db)
    try:
        return page_rows(board, dataset)
    finally:
        board.close()


# ------------------------------------------------------------------------------------------
# opening, migrating


def open_leaderboard(path=None) -> Leaderboard:
    """Open (creating or migrating) the leaderboard at ``path``; foreign or damaged files are refused untouched."""
    path = Path(path) if path else default_path()
    if path.is_dir():
        raise LeaderboardError(f"{path}: a folder, not a leaderboard file; give --db a file name")
    if path.exists():
        _check_foreign(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        board = connect(path)
    except (OSError, sqlite3.Error) as error:
        raise LeaderboardError(f"{path}: the leaderboard cannot be opened or created there ({error}); give --db "
                               "a writable place") from None
    connection = board.connection
    try:
        # opened read-write: a hot journal left by a killed writer is rolled back here
        problems = [row[0] for row in connection.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            connection.close()
            raise LeaderboardError(f"{path}: a damaged SQLite database ({problems[0]}); it was left untouched "
                                   "(restore it from a copy, or give another --db)")
        _check_schema(connection, path)
        _migrate(connection, path)
    except sqlite3.DatabaseError as error:
        connection.close()
        raise LeaderboardError(f"{path}: a damaged or unusable SQLite database ({error}); it was left untouched "
                               "(restore it from a copy, or give another --db)") from None
    except LeaderboardError:
        connection.close()
        raise
    return board


def _normal_sql(sql: Optional[str]) -> Optional[str]:
    return None if sql is None else " ".join(sql.split())


def _schema_of(connection: sqlite3.Connection) -> Dict[tuple, Optional[str]]:
    """{(type, name): its SQL, whitespace collapsed} of every table, index, view and trigger."""
    return {(kind, name): _normal_sql(sql)
            for kind, name, sql in connection.execute("SELECT type, name, sql FROM sqlite_master")}


@functools.lru_cache(maxsize=None)
def expected_schema(version: int) -> Dict[tuple, Optional[str]]:
    """What :data:`MIGRATIONS` 1..``version`` create, as :func:`_schema_of` reads it back."""
    reference = sqlite3.connect(":memory:")
    try:
        for number in range(version):
            for statement in _statements(MIGRATIONS[number]):
                reference.execute(statement)
        return _schema_of(reference)
    finally:
        reference.close()


def _check_schema(connection: sqlite3.Connection, path: Path) -> None:
    """Refuse a store holding a table, index, view or trigger openbench did not create, or one of
    its own changed (a planted trigger would run on the next submit): nothing is written."""
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        return  # _migrate names the newer version
    expected, found = expected_schema(version), _schema_of(connection)
    foreign = sorted(f"{kind} {name}" for kind, name in found
                     if (kind, name) not in expected and not (kind == "table" and name in SQLITE_OWN_TABLES))
    changed = sorted(f"{kind} {name}" for (kind, name), sql in found.items()
                     if (kind, name) in expected and expected[(kind, name)] != sql)
    missing = sorted(f"{kind} {name}" for kind, name in expected if (kind, name) not in found)
    problems = [f"{label}: {', '.join(names)}" for label, names in
                (("not created by openbench", foreign), ("changed outside openbench", changed),
                 ("missing", missing)) if names]
    if problems:
        raise LeaderboardError(f"{path}: the store's schema is not the one openbench made ({'; '.join(problems)}); "
                               "nothing was written. Remove what was added (or restore a copy) before using it")


def connect(path: Path) -> Leaderboard:
    """A connection to a store :func:`open_leaderboard` has already checked and migrated (one per
    thread: sqlite3 connections stay in theirs); writers wait for each other up to a minute."""
    connection = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
    connection.row_factory = sqlite3.Row
    return Leaderboard(Path(path), connection)


def _check_foreign(path: Path) -> None:
    """Refuse, untouched, a file that is not an SQLite database or is another program's: read from
    the file header itself (application id at offset 68), so that no SQLite connection, and no
    rollback of a foreign hot journal, happens before the file is known to be ours."""
    with open(path, "rb") as handle:
        header = handle.read(100)
    if path.stat().st_size == 0:
        return
    if header[:len(SQLITE_HEADER)] != SQLITE_HEADER:
        raise LeaderboardError(f"{path}: not an SQLite database (the file was left untouched); give another --db")
    if len(header) < 100:
        raise LeaderboardError(f"{path}: a truncated SQLite database (the file was left untouched)")
    application_id = int.from_bytes(header[68:72], "big")
    if application_id == APPLICATION_ID:
        return
    try:  # a fresh openbench store has no application id until its first migration: empty is ours
        probe = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60.0)
        try:
            tables = probe.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        finally:
            probe.close()
    except sqlite3.DatabaseError as error:
        raise LeaderboardError(f"{path}: an SQLite database openbench cannot read ({error}); the file was left "
                               "untouched") from None
    if tables:
        raise LeaderboardError(f"{path}: an SQLite database of another program, not an openbench leaderboard; "
                               "the file was left untouched")


def _migrate(connection: sqlite3.Connection, path: Path) -> None:
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise LeaderboardError(f"{path}: schema version {version} is newer than this openbench knows "
                                   f"({len(MIGRATIONS)}); upgrade openbench")
        for number in range(version, len(MIGRATIONS)):
            for statement in _statements(MIGRATIONS[number]):
                connection.execute(statement)
            if number == 0:
                _seed_published(connection)
            if number == 1:
                _backfill_derived_columns(connection, path)
        connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        connection.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _backfill_derived_columns(connection: sqlite3.Connection, path: Path) -> None:
    """Version 2 keeps task, scope and the dataset's label beside each record (so that listing never
    parses whole records): computed once here for the rows a version-1 store holds."""
    for row in connection.execute("SELECT id, result_json FROM submissions").fetchall():
        record = _loads(row[1], path, row[0], "result_json")
        dataset, task = record.get("dataset", {}), record.get("task", "ranking")
        registry = dataset.get("registry") or {}
        connection.execute("UPDATE submissions SET task = ?, scope = ?, dataset_label = ? WHERE id = ?",
                           (task, scope_of(record.get("protocol", {})) if task == "ranking" else None,
                            dataset_label(registry.get("name"), dataset.get("fingerprint"), dataset.get("path")),
                            row[0]))


def _statements(script: str) -> List[str]:
    """Split a migration script into statements (triggers hold ';' inside BEGIN ... END)."""
    statements, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and (not text.upper().startswith("CREATE TRIGGER") or text.upper().endswith("END;")):
            statements.append(text)
            current = []
    return statements


def _seed_published(connection: sqlite3.Connection) -> None:
    for model_type, name, mrr, hits1, hits10 in PUBLISHED_HQ_DIR:
        connection.execute(
            "INSERT INTO published (dataset_name, model_type, name, mrr, hits_at_1, hits_at_3, hits_at_10, protocol, "
            "source) VALUES ('HQ_DIR', ?, ?, ?, ?, NULL, ?, ?, ?)",
            (model_type, name, mrr, hits1, hits10, PUBLISHED_PROTOCOL,
             "OpenBioLink README leaderboard (LinkExplorer, Ott et al. 2022); not reproduced here"))
