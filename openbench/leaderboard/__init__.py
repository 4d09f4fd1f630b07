"""The local leaderboard: a validated SQLite store of result records (:mod:`.store`) and its
table, Markdown, CSV, JSON and HTML renderings (:mod:`.render`)."""
from openbench.leaderboard.store import (APPLICATION_ID, MODEL_TYPES, PUBLISHED_HQ_DIR, Leaderboard, LeaderboardError,
                                         default_path, open_leaderboard, validate)

__all__ = ["APPLICATION_ID", "MODEL_TYPES", "PUBLISHED_HQ_DIR", "Leaderboard", "LeaderboardError", "default_path",
           "open_leaderboard", "validate"]
