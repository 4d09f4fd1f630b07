"""Hosted benchmarks in the store: each benchmark's secret (made once, bound to its split's
fingerprint, never served), the scored uploads a team made per benchmark and UTC day (the daily
limit), both parts of an upload stored in one transaction (test-challenge hidden), and the
organiser's reveal."""
from __future__ import annotations

import datetime
import secrets
from typing import Dict, Optional

from openbench.leaderboard.runs import RunsMixin
from openbench.leaderboard.schema import LeaderboardError, LimitReached, now as _now

__all__ = ["HostedMixin"]


class HostedMixin(RunsMixin):
    """The :class:`~openbench.leaderboard.store.Leaderboard` methods of hosted benchmarks."""

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
