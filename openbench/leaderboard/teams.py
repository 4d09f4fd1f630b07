"""Teams and their tokens: ``obt_<id>_<secret>`` handed out once, stored as salted SHA-256 digests
only, revoked at once (a running server sees it on the next request)."""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Optional

from openbench.leaderboard.schema import LeaderboardError, StoreBase, now as _now

__all__ = ["TOKEN_PREFIX", "TOKEN_PATTERN", "TeamsMixin"]

TOKEN_PREFIX = "obt"


# the one token syntax: obt_<id>_<secret>, the id a canonical decimal (no sign, no leading zero,
# at most 18 digits: always an SQLite integer), the secret as secrets.token_urlsafe(32) makes it
TOKEN_PATTERN = re.compile(r"obt_([1-9][0-9]{0,17})_([A-Za-z0-9_-]{43})")


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256((salt + secret).encode("utf-8")).hexdigest()


class TeamsMixin(StoreBase):
    """The :class:`~openbench.leaderboard.store.Leaderboard` methods of teams and tokens."""

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
