"""The published OpenBioLink2020 HQ_DIR leaderboard: a separate, read-only table (triggers refuse
updates and deletes), seeded once, shown beside the submitted rows and marked as not reproduced
here (the protocol it used is unknown)."""
from __future__ import annotations

import sqlite3
from typing import List

from openbench.leaderboard.schema import StoreBase

__all__ = ["PUBLISHED_PROTOCOL", "PUBLISHED_HQ_DIR", "PublishedMixin", "seed_published"]

PUBLISHED_PROTOCOL = "unknown: LibKGE, LinkExplorer 2022"


# OpenBioLink README (HQ_DIR; LinkExplorer, Ott et al. 2022; embeddings trained with LibKGE); no hits@3 published
PUBLISHED_HQ_DIR = [
    ("latent", "RESCAL", 0.320, 0.212, 0.544), ("latent", "TransE", 0.280, 0.175, 0.500),
    ("latent", "DistMult", 0.300, 0.193, 0.521), ("latent", "ComplEx", 0.319, 0.211, 0.547),
    ("latent", "ConvE", 0.288, 0.186, 0.510), ("latent", "RotatE", 0.286, 0.180, 0.511),
    ("interpretable", "AnyBURL (Maximum)", 0.277, 0.192, 0.457),
    ("interpretable", "AnyBURL (Noisy-OR)", 0.159, 0.098, 0.295), ("interpretable", "SAFRAN*", 0.306, 0.214, 0.501),
]


def seed_published(connection: sqlite3.Connection) -> None:
    for model_type, name, mrr, hits1, hits10 in PUBLISHED_HQ_DIR:
        connection.execute(
            "INSERT INTO published (dataset_name, model_type, name, mrr, hits_at_1, hits_at_3, hits_at_10, protocol, "
            "source) VALUES ('HQ_DIR', ?, ?, ?, ?, NULL, ?, ?, ?)",
            (model_type, name, mrr, hits1, hits10, PUBLISHED_PROTOCOL,
             "OpenBioLink README leaderboard (LinkExplorer, Ott et al. 2022); not reproduced here"))


class PublishedMixin(StoreBase):
    """The :class:`~openbench.leaderboard.store.Leaderboard` method reading the published table."""

    def published(self) -> List[dict]:
        rows = []
        for row in self.connection.execute("SELECT * FROM published ORDER BY id"):
            metrics = {"mrr": row["mrr"], "hits@1": row["hits_at_1"], "hits@3": row["hits_at_3"],
                       "hits@10": row["hits_at_10"]}
            rows.append({"name": row["name"], "model_type": row["model_type"],
                         "dataset": {"name": row["dataset_name"], "version": None, "fingerprint": None},
                         "task": "ranking", "group": f"{row['dataset_name']} (ranking)",
                         "family": "ranking (published)",
                         "side": "both", "rank_type": "unknown",
                         "metrics": {key: {"mean": value, "std": None} for key, value in metrics.items()},
                         "runs": None, "protocol": row["protocol"], "published": True,
                         "nonstandard_protocol": None, "source": row["source"]})
        return rows
