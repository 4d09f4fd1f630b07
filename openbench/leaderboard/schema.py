"""The store's schema: the migrations that create it (``PRAGMA user_version`` counts them), the
checks an existing file passes before anything is written (an SQLite database of this
application id, holding exactly the objects the migrations created: a planted trigger would run
on the next write), the migration itself, and the errors every part of the store raises."""
from __future__ import annotations

import datetime
import functools
import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from openbench.errors import OpenbenchError

__all__ = ["StoreBase", "APPLICATION_ID", "SQLITE_HEADER", "MIGRATIONS", "SQLITE_OWN_TABLES", "LeaderboardError", "DuplicateRun",
           "LimitReached", "default_path", "expected_schema", "check_schema", "check_foreign", "statements", "now",
           "canonical", "loads"]

APPLICATION_ID = 0x4F424C42  # "OBLB"


SQLITE_HEADER = b"SQLite format 3\x00"


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
    # version 5: a reproduced row's re-evaluation certificate (reproduce.py): dataset fingerprint,
    # model files' sha256, the command that gives its record again
    """
    ALTER TABLE submissions ADD COLUMN certificate_json TEXT;
    """,
]


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


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def loads(text, path, row_id, column: str):
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
            for statement in statements(MIGRATIONS[number]):
                reference.execute(statement)
        return _schema_of(reference)
    finally:
        reference.close()


def check_schema(connection: sqlite3.Connection, path: Path) -> None:
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


def check_foreign(path: Path) -> None:
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


def statements(script: str) -> List[str]:
    """Split a migration script into statements (triggers hold ';' inside BEGIN ... END)."""
    statements, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and (not text.upper().startswith("CREATE TRIGGER") or text.upper().endswith("END;")):
            statements.append(text)
            current = []
    return statements


class StoreBase:
    """What every part of the store shares: the open database, its path, and one transaction
    (``BEGIN IMMEDIATE``: concurrent writers queue instead of losing rows)."""

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
