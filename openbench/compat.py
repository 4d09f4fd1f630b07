"""OpenBioLink's evaluation API, working, for users porting code (``openbiolink.evaluation``).

``DataLoader(root, name, entity_to_id_path, relation_to_id_path)`` fetches a registry dataset
(verified, see :mod:`openbench.datasets.published`) and exposes OpenBioLink's attributes; its
``filter_scores`` takes the arguments in the declared order and removes the true answer from the
filter (OpenBioLink 0.1.4 calls it with the arguments swapped and cannot run); ``save_as_kgid``
writes the integer-id layout (0.1.4 raises a TypeError).

:class:`Evaluator` is openbench's one subclassing contract, OpenBioLink's: subclass it and
implement ``score_batch(batch)``, returning ``(head_scores, tail_scores)``, each (B, E)
(``head_scores[i, j]`` the score of (j, r_i, t_i), ``tail_scores[i, j]`` that of (h_i, r_i, j)), or
the older 4-tensor contract ``(pos_head, neg_head, pos_tail, neg_tail)``, where the true score is
read from the full row and a warning is recorded where it differs from ``pos_*`` by more than
rounding. ``evaluate()`` goes through the one door (:func:`openbench.evaluation.evaluate.evaluate`)
with the subclass as a row scorer, so it gets exactly what every other model gets, with
openbench's protocol: realistic ranks (OpenBioLink 0.1.4 counts every tie against the model). New
code passes a scorer to :func:`openbench.evaluate` instead (:func:`openbench.score_function`
turns a function into one).
"""
from __future__ import annotations

import math
from typing import Any, Iterator, Optional, Tuple, Union

import torch

from openbench.datasets.published.fetch import get
from openbench.errors import InputError
from openbench.datasets.loader import SPLITS, load_dataset, write_id_layout
from openbench.errors import ScoreError
from openbench.evaluation.evaluate import evaluate
from openbench.models.base import RowScorer
from openbench.datasets.filter_index import FilterIndex

__all__ = ["DataLoader", "Evaluator"]

_COLUMNS = {0: "head", 2: "tail", "head": "head", "tail": "tail"}


class DataLoader:
    """``DataLoader(root='dataset', name='HQ_DIR', entity_to_id_path=None, relation_to_id_path=None)``.

    Label maps: both id<TAB>label files or neither (OpenBioLink crashes with one). Triples with
    labels outside the maps are dropped, as in OpenBioLink, but recorded in ``warnings``.
    """

    def __init__(self, root: str = "dataset", name: str = "HQ_DIR", entity_to_id_path: Optional[str] = None,
                 relation_to_id_path: Optional[str] = None, *, mirror: Optional[str] = None, progress: bool = True):
        if (entity_to_id_path is None) != (relation_to_id_path is None):
            raise InputError("give both entity_to_id_path and relation_to_id_path, or neither")
        self.name, self.root = name, root
        folder = get(name, root, mirror=mirror, progress=progress)
        self.dataset = load_dataset(folder, entity_map=entity_to_id_path, relation_map=relation_to_id_path,
                                    drop_unknown=True)
        self.warnings = list(self.dataset.warnings)
        known = torch.cat([self.dataset.triples[split] for split in SPLITS])
        self._filters = {side: FilterIndex.build(known, self.num_relations, side) for side in ("head", "tail")}

    @property
    def training(self) -> torch.Tensor:
        return self.dataset.triples["train"]

    @property
    def validation(self) -> torch.Tensor:
        return self.dataset.triples["valid"]

    @property
    def testing(self) -> torch.Tensor:
        return self.dataset.triples["test"]

    @property
    def num_entities(self) -> int:
        return self.dataset.num_entities

    @property
    def num_relations(self) -> int:
        return self.dataset.num_relations

    @property
    def stats(self) -> str:
        counts = self.dataset.counts()
        return (f"{self.name}: {counts['entities']} entities, {counts['relations']} relations, {counts['train']} "
                f"train, {counts['valid']} valid, {counts['test']} test triples")

    def filter_scores(self, batch: torch.Tensor, scores: torch.Tensor, filter_col, filter_val: float = math.nan
                      ) -> torch.Tensor:
        """Set ``scores[i, e] = filter_val`` for every other known answer e of query i, in place.

        :param batch: (B, 3) id triples; ``scores`` (B, E); ``filter_col`` 0 (head queries (?, r, t))
            or 2 (tail queries (h, r, ?)). The triple's own answer is never filtered.
        """
        side = _COLUMNS.get(filter_col if not torch.is_tensor(filter_col) else None)
        if side is None:
            raise InputError(f"filter_col must be 0 (heads) or 2 (tails), got {filter_col!r}")
        batch = batch.to(torch.long)
        rows, answers = self._filters[side].lookup(batch.cpu())
        true = batch[:, 0 if side == "head" else 2].cpu()
        keep = answers != true[rows]
        scores[rows[keep].to(scores.device), answers[keep].to(scores.device)] = filter_val
        return scores

    def get_test_batches(self, batch_size: int = 100) -> Tuple[int, Iterator[torch.Tensor]]:
        """(number of batches, iterator over (batch_size, 3) slices of the test triples)."""
        if batch_size < 1:
            raise InputError(f"batch_size must be positive, got {batch_size}")
        testing = self.testing
        count = -(-testing.shape[0] // batch_size)
        return count, (testing[i:i + batch_size] for i in range(0, testing.shape[0], batch_size))

    def save_as_kgid(self, path: str = "dataset", sep: str = "\t"):
        """The integer-id layout: entities.tsv, relations.tsv, train.tsv, valid.tsv, test.tsv."""
        return write_id_layout(self.dataset, path, sep)


class _ScoreBatch(RowScorer):
    """An :class:`Evaluator` subclass's ``score_batch`` as a row scorer: called once per batch,
    both sides served from its output; the 4-tensor contract's positives checked against the rows."""

    kind = "score_batch"

    def __init__(self, evaluator: "Evaluator"):
        super().__init__(evaluator.num_entities)
        self.evaluator = evaluator
        self.device = evaluator.device
        self._batch: Optional[torch.Tensor] = None
        self._output: Tuple = ()

    def to(self, device: torch.device) -> "_ScoreBatch":
        """The evaluator computes where it was told to."""
        return self

    def description(self) -> dict:
        """The subclass's model block."""
        return self.evaluator.model_description()

    def _scores_of(self, batch: torch.Tensor) -> Tuple:
        if batch is not self._batch:
            output = self.evaluator.score_batch(batch)
            if not isinstance(output, (tuple, list)) or len(output) not in (2, 4):
                raise ScoreError("score_batch must return (head_scores, tail_scores) or "
                                 "(pos_head, neg_head, pos_tail, neg_tail)")
            self._batch, self._output = batch, tuple(output)
        return self._output

    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) ``score_batch``'s ``side`` rows (``neg_*`` of the 4-tensor contract)."""
        output = self._scores_of(batch)
        if len(output) == 2:
            return output[0] if side == "head" else output[1]
        return output[1] if side == "head" else output[3]

    def check_rows(self, batch: torch.Tensor, side: str, rows: torch.Tensor, true_scores: torch.Tensor) -> None:
        """The 4-tensor contract: ``pos_*`` (B,) against the true answers' entries ``true_scores`` (B,)."""
        output = self._scores_of(batch)
        if len(output) == 4:
            positive = torch.as_tensor(output[0] if side == "head" else output[2], device=rows.device)
            self.evaluator._check_positive_scores(side, positive, true_scores)


class Evaluator:
    """``Evaluator(dl, higher_is_better=True, **options)``: subclass it and implement ``score_batch``.

    :param dl: a :class:`DataLoader` (or a loaded :class:`~openbench.datasets.loader.Dataset`).
    :param options: keywords of :func:`openbench.evaluation.evaluate.evaluate` (``filter_sets``,
        ``hits_at``, ``device``, ``candidates``, ``sides``, ``relations``, ``entities``, ...).

    ``evaluate(batch_size=100)`` returns openbench's full result, plus OpenBioLink's top-level
    keys ``hits@1``, ``hits@3``, ``hits@10`` and ``mrr`` (realistic, head and tail together).
    """

    model_name = "custom"
    model_kind = "score_batch"

    def __init__(self, dl: Union[DataLoader, Any], higher_is_better: bool = True, **options):
        from openbench.evaluation.counting.device import resolve_device

        self.dl = dl
        self.dataset = dl.dataset if isinstance(dl, DataLoader) else dl
        self.num_entities = self.dataset.num_entities
        self.lower_is_better = not higher_is_better
        options.setdefault("progress", False)
        device = options.pop("device", "auto")
        self.device = device if isinstance(device, torch.device) else resolve_device(device)
        self.options = options
        self.warnings: list = []

    # -- the model contract ---------------------------------------------------------------
    def score_batch(self, batch: torch.Tensor):
        """Scores for ``batch`` (B, 3) of (h, r, t) ids on the evaluation device.

        Return ``(head_scores, tail_scores)``, each (B, E), or the 4-tuple
        ``(pos_head (B,), neg_head (B, E), pos_tail (B,), neg_tail (B, E))``.
        """
        raise NotImplementedError("subclasses implement score_batch(batch)")

    def model_description(self) -> dict:
        return {"name": self.model_name, "kind": self.model_kind, "params": {}, "source_sha256": None}

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def _as_scorer(self) -> "_ScoreBatch":
        """This evaluator's ``score_batch`` as a row scorer (what the door ranks)."""
        return _ScoreBatch(self)

    def evaluate(self, batch_size: Optional[int] = 100) -> dict:
        """openbench's record, plus OpenBioLink's flat ``hits@1/3/10`` and ``mrr`` keys (realistic,
        both sides) at its top level, as OpenBioLink's evaluator returned them."""
        self.warnings = []
        result = evaluate(self.dataset, self._as_scorer(), lower_is_better=self.lower_is_better, device=self.device,
                          batch_size=batch_size, **self.options).to_dict()
        # what the 4-tensor contract's checks found while scoring (after the run's own warnings)
        result["warnings"] += [message for message in self.warnings if message not in result["warnings"]]
        headline = result["metrics"]["both"]["realistic"]
        result.update({key: headline[key] for key in ("hits@1", "hits@3", "hits@10", "mrr") if key in headline})
        return result

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor, batch_size: Optional[int] = None) -> torch.Tensor:
        """(n,) scores of the given (n, 3) triples, for triple classification; higher is more
        plausible (distances are negated when ``lower_is_better``), read from the tail rows."""
        scores = self._as_scorer().score_triples(triples)
        return -scores if self.lower_is_better else scores

    def _check_positive_scores(self, side: str, positive: torch.Tensor, from_rows: torch.Tensor) -> None:
        """Warn where ``pos_*`` (B,) and the true answer's entry of the full row (B,) differ by
        more than rounding: the same score computed two ways may differ in its last bits."""
        positive = positive.reshape(-1).to(from_rows.dtype)
        tolerance = 64 * torch.finfo(from_rows.dtype).eps
        differs = ~torch.isclose(positive, from_rows, rtol=tolerance, atol=tolerance, equal_nan=True)
        if bool(differs.any()):
            largest = float((positive - from_rows)[differs].abs().max())
            self.warn(f"{int(differs.sum())} {side} positive score(s) differ from the true answer's entry of the full "
                      f"score row by more than rounding (up to {largest:.3g}); ranked with the full-row value")
