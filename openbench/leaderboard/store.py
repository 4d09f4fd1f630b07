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

import sqlite3
from pathlib import Path
from typing import List, Optional

from openbench.leaderboard.hosted import HostedMixin
from openbench.leaderboard.published import PUBLISHED_HQ_DIR, PUBLISHED_PROTOCOL, seed_published
from openbench.task_registry import task_names, task_of
from openbench.leaderboard.runs import MODEL_TYPES, URL_SCHEMES, VERIFIED, dataset_label, scope_of, validate
from openbench.leaderboard.schema import (APPLICATION_ID, MIGRATIONS, SQLITE_HEADER, DuplicateRun, LeaderboardError,
                                          LimitReached, check_foreign, check_schema, default_path, expected_schema, loads,
                                          statements)
from openbench.leaderboard.teams import TOKEN_PATTERN, TOKEN_PREFIX, TeamsMixin
from openbench.record import RecordError
from openbench.vocabulary import RANK_TYPES, SIDES

__all__ = ["DuplicateRun", "APPLICATION_ID", "SIDES", "RANK_TYPES", "MODEL_TYPES", "PUBLISHED_PROTOCOL", "SQLITE_HEADER",
           "PUBLISHED_HQ_DIR", "MIGRATIONS", "LeaderboardError", "default_path", "validate", "Leaderboard",
           "submit_file", "read_rows", "read_page_rows", "page_rows", "open_leaderboard", "connect", "scope_of", "dataset_label",
           "TOKEN_PREFIX", "TOKEN_PATTERN", "VERIFIED", "LimitReached", "expected_schema", "URL_SCHEMES"]


class Leaderboard(HostedMixin, TeamsMixin):
    """An open leaderboard database, one idea per module: runs (:mod:`.runs`), teams and tokens
    (:mod:`.teams`), hosted benchmarks (:mod:`.hosted`), the published table (:mod:`.published`),
    the schema, its checks and the shared transaction (:mod:`.schema`). Use :func:`open_leaderboard`."""


def submit_file(result_path, db=None, ranks_path=None, model=None, dataset=None, **fields) -> tuple:
    """Validate the result JSON at ``result_path`` (and the ranks file at ``ranks_path``, its
    per-query ranks) and add it; returns (database path, row id).

    With ``model`` (a :class:`~openbench.models.sources.ModelSpec`) and ``dataset`` (the board's
    copy of the record's dataset), the board re-evaluates the model itself and stores its own record
    and ranks, ``verified: reproduced``, with the re-evaluation certificate
    (:mod:`openbench.leaderboard.reproduce`); the submitted record must be what the model gives."""
    from openbench._io import read_json

    record = read_json(result_path, "result record")
    ranks, provenance, certificate = None, None, None
    try:
        validate(record)  # before the store is opened: a refused record creates nothing
        if model is not None:
            if ranks_path is not None:
                raise LeaderboardError("--ranks goes with a self-reported record: with the model the board computes "
                                       "the ranks itself")
            if dataset is None:
                raise LeaderboardError("the board re-evaluates the model on its own copy of the dataset: give --dataset")
            from openbench.leaderboard.reproduce import reproduce

            reproduced, certificate = reproduce(record, model, dataset)
            record, ranks = reproduced.to_dict(), reproduced.ranks
            fields["verified"] = "reproduced"
        elif ranks_path is not None:
            from openbench.evaluation.statistics.evidence import MAX_ROWS, EvidenceError, read_ranks
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
        row_id = board.submit(record, ranks=ranks, ranks_provenance=provenance, certificate=certificate, **fields)
    except LeaderboardError as error:
        raise LeaderboardError(f"{result_path}: refused: {error}") from None
    finally:
        board.close()
    return board.path, row_id


def read_rows(db=None, **query) -> List[dict]:
    """The grouped rows of :meth:`Leaderboard.rows` from the existing database at ``db``."""
    board = open_leaderboard(db, create=False)
    try:
        return board.rows(**query)
    finally:
        board.close()


def page_rows(board: Leaderboard, dataset: Optional[str] = None, published: Optional[bool] = None) -> List[dict]:
    """Every table a page shows: each task's in the registry's order (ranking's with the published
    rows when asked, as :meth:`Leaderboard.rows` says), then the scoped ones."""
    # an empty table is an empty list (rows() refuses only a --sort it cannot judge); a damaged row
    # or a --dataset that names nothing is an error, never a table silently left out
    rows: List[dict] = []
    for name in task_names():
        rows += board.rows(dataset=dataset, task=name, include_published=published)
    return rows + board.rows(dataset=dataset, scoped=True)


def read_page_rows(db=None, dataset: Optional[str] = None, published: Optional[bool] = None) -> List[dict]:
    """:func:`page_rows` of the existing database at ``db``."""
    board = open_leaderboard(db, create=False)
    try:
        return page_rows(board, dataset, published)
    finally:
        board.close()


def open_leaderboard(path=None, create: bool = True) -> Leaderboard:
    """Open (creating, where ``create``, or migrating) the leaderboard at ``path``; foreign or
    damaged files are refused untouched. Without ``create`` a missing board is an error (reading
    commands never make an empty board out of a mistyped --db)."""
    path = Path(path) if path else default_path()
    if path.is_dir():
        raise LeaderboardError(f"{path}: a folder, not a leaderboard file; give --db a file name")
    if not create and not path.exists():
        raise LeaderboardError(f"{path}: no leaderboard there (leaderboard submit or leaderboard token create makes "
                               "one); check --db")
    if path.exists():
        check_foreign(path)
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
        check_schema(connection, path)
        _migrate(connection, path)
    except sqlite3.DatabaseError as error:
        connection.close()
        raise LeaderboardError(f"{path}: a damaged or unusable SQLite database ({error}); it was left untouched "
                               "(restore it from a copy, or give another --db)") from None
    except LeaderboardError:
        connection.close()
        raise
    return board


def connect(path: Path) -> Leaderboard:
    """A connection to a store :func:`open_leaderboard` has already checked and migrated (one per
    thread: sqlite3 connections stay in theirs); writers wait for each other up to a minute."""
    connection = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
    connection.row_factory = sqlite3.Row
    return Leaderboard(Path(path), connection)


def _migrate(connection: sqlite3.Connection, path: Path) -> None:
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise LeaderboardError(f"{path}: schema version {version} is newer than this openbench knows "
                                   f"({len(MIGRATIONS)}); upgrade openbench")
        for number in range(version, len(MIGRATIONS)):
            for statement in statements(MIGRATIONS[number]):
                connection.execute(statement)
            if number == 0:
                seed_published(connection)
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
        record = loads(row[1], path, row[0], "result_json")
        dataset, task = record.get("dataset", {}), task_of(record)
        registry = dataset.get("registry") or {}
        connection.execute("UPDATE submissions SET task = ?, scope = ?, dataset_label = ? WHERE id = ?",
                           (task.name, task.scope(record.get("protocol", {})),
                            dataset_label(registry.get("name"), dataset.get("fingerprint"), dataset.get("path"),
                                          dataset.get("made_by")),
                            row[0]))
