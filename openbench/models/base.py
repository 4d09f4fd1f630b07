"""The Scorer protocol: what every model source is to the evaluation.

A scorer answers three questions about triples of entity and relation ids (the dataset's), each
score higher for a more plausible triple (a distance is negated, or the evaluation is told
``lower_is_better``):

* ``score_rows(batch (B, 3), side) -> (B, E)``: every candidate entity of each query; for
  ``side="tail"`` row i scores (h_i, r_i, e) for every entity e, for ``"head"`` (e, r_i, t_i);
* ``score_candidates(batch (B, 3), side, candidates (B, W)) -> (B, W)``: each query against its
  own candidates only (the sampled protocol);
* ``score_triples(triples (T, 3)) -> (T,)``: the triples themselves (triple classification).

plus ``num_entities`` and ``description()`` (the record's ``model`` block).

A scorer that reads a graph reads the one a model may use when it answers the evaluation queries:
:meth:`Dataset.test_graph() <openbench.datasets.loader.Dataset.test_graph>`, the training triples,
or an inductive split's inference graph (the baselines are built from it; an inductive PyKEEN
model brings its own and is checked against it: :mod:`openbench.models.pykeen_inductive`). A
scorer with one learnt row per training entity sets ``transductive = True``: the door refuses it
where evaluation entities have no training triple. Embedding scorers
(:mod:`openbench.models.scorers`) also stream candidates in chunks and support exact ranks;
everything else is a :class:`RowScorer`, whose candidates and triples come from its rows.
"""
from __future__ import annotations

from typing import Callable, Optional, Protocol, runtime_checkable

import torch

from openbench.errors import ScoreError

__all__ = ["Scorer", "RowScorer", "FunctionScorer", "score_function", "TRIPLE_BATCH"]

TRIPLE_BATCH = 65536  # triples scored per call by score_triples


@runtime_checkable
class Scorer(Protocol):
    """Anything openbench can rank and classify with (see the module docstring)."""

    @property
    def num_entities(self) -> int:
        ...

    def description(self) -> dict:
        """``{"name", "kind", "params", "source_sha256"}``: the record's model block."""
        ...

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) scores of every candidate of the ``side`` queries of ``batch`` (B, 3)."""
        ...

    def score_candidates(self, batch: torch.Tensor, side: str, candidates: torch.Tensor) -> torch.Tensor:
        """(B, W) scores of each ``side`` query of ``batch`` (B, 3) against its ``candidates`` (B, W)."""
        ...

    def score_triples(self, triples: torch.Tensor) -> torch.Tensor:
        """(T,) scores of the ``triples`` (T, 3) themselves."""
        ...


class RowScorer:
    """A scorer that computes full score rows; candidates and triples are read from them.

    Subclasses implement :meth:`score_rows` and set ``name`` (and ``kind``: what the record calls
    the source). :meth:`order` may reorder the evaluation triples for speed (the metrics do not
    depend on the order).
    """

    name = "custom"
    kind = "score_rows"

    def __init__(self, num_entities: int):
        self._num_entities = int(num_entities)
        self.device = torch.device("cpu")

    @property
    def num_entities(self) -> int:
        return self._num_entities

    def to(self, device: torch.device) -> "RowScorer":
        """This scorer, asked to compute on ``device`` (a subclass moves what it holds)."""
        self.device = device
        return self

    def description(self) -> dict:
        """The name and kind, no parameters, no source files."""
        return {"name": self.name, "kind": self.kind, "params": {}, "source_sha256": None}

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) scores of every candidate of the ``side`` queries of ``batch`` (B, 3)."""
        raise NotImplementedError("a RowScorer implements score_rows(batch, side)")

    def score_candidates(self, batch: torch.Tensor, side: str, candidates: torch.Tensor) -> torch.Tensor:
        """(B, W) float64: each query's row, gathered at its ``candidates`` (B, W)."""
        rows = self.score_rows(batch.to(self.device), side)
        return rows.gather(1, candidates.to(rows.device)).double().cpu()

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor) -> torch.Tensor:
        """(T,) float64: each triple's score read from its tail row."""
        out = []
        for start in range(0, triples.shape[0], self.row_batch()):
            batch = triples[start:start + self.row_batch()].to(self.device)
            rows = self.score_rows(batch, "tail")
            out.append(rows[torch.arange(batch.shape[0], device=rows.device), batch[:, 2]].double().cpu())
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)

    def row_batch(self) -> int:
        """Queries per score_rows call when scoring triples: rows of at most 2**23 values."""
        return max(1, min((1 << 23) // max(self.num_entities, 1), 1024))

    def order(self, triples: torch.Tensor) -> torch.Tensor:
        """(T, 3) ``triples`` in the order this scorer is fastest on (here: as given)."""
        return triples


class FunctionScorer(RowScorer):
    """A user's scoring function ``fn(batch (B, 3), side) -> (B, E)`` as a scorer."""

    kind = "score_function"

    def __init__(self, function: Callable[[torch.Tensor, str], torch.Tensor], num_entities: int,
                 name: str = "custom function", params: Optional[dict] = None):
        super().__init__(num_entities)
        self.function, self.name, self.params = function, name, dict(params or {})

    def description(self) -> dict:
        """The name the user gave, ``kind: "score_function"`` and the parameters given."""
        return {"name": self.name, "kind": self.kind, "params": dict(self.params), "source_sha256": None}

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E): the function's rows, checked for their shape."""
        rows = torch.as_tensor(self.function(batch, side))
        expected = (batch.shape[0], self.num_entities)
        if tuple(rows.shape) != expected:
            raise ScoreError(f"the scoring function returned {side} scores of shape {tuple(rows.shape)}; expected "
                             f"{expected} (one row per query, one column per entity)")
        return rows


def score_function(function: Callable[[torch.Tensor, str], torch.Tensor], num_entities: int,
                   name: str = "custom function", params: Optional[dict] = None) -> FunctionScorer:
    """A scorer from ``function(batch, side)``: ``batch`` (B, 3) holds (head, relation, tail) ids
    on the evaluation device, ``side`` is ``"head"`` or ``"tail"``; it returns (B, E) scores of
    every entity as the missing one (higher is more plausible). ``num_entities``: the dataset's."""
    return FunctionScorer(function, num_entities, name, params)
