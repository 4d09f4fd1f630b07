"""OpenBioLink's evaluation API, working, for users porting code (``openbiolink.evaluation``).

``DataLoader(root, name, entity_to_id_path, relation_to_id_path)`` fetches a registry dataset
(verified, see :mod:`openbench.registry`) and exposes OpenBioLink's attributes; its
``filter_scores`` takes the arguments in the declared order and removes the true answer from the
filter (OpenBioLink 0.1.4 calls it with the arguments swapped and cannot run); ``save_as_kgid``
writes the integer-id layout (0.1.4 raises a TypeError). :class:`Evaluator` is subclassed exactly as
OpenBioLink's README shows (``score_batch(batch) -> (head_scores, tail_scores)``) and evaluates
with openbench's protocol: realistic ranks (OpenBioLink 0.1.4 counts every tie against the model).
"""
from __future__ import annotations

import math
from typing import Iterator, Optional, Tuple

import torch

from openbench.registry import get
from openbench.errors import InputError
from openbench.datasets.loader import SPLITS, load_dataset, write_id_layout
from openbench.evaluation.evaluator import Evaluator as _Evaluator
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


class Evaluator(_Evaluator):
    """``Evaluator(dl, higher_is_better=True)``: subclass it and implement ``score_batch``.

    ``evaluate(batch_size=100)`` returns openbench's full result, plus OpenBioLink's top-level
    keys ``hits@1``, ``hits@3``, ``hits@10`` and ``mrr`` (realistic, head and tail together).
    """

    def __init__(self, dl: DataLoader, higher_is_better: bool = True, **options):
        options.setdefault("progress", False)
        super().__init__(dl.dataset, lower_is_better=not higher_is_better, **options)
        self.dl = dl

    def evaluate(self, batch_size: Optional[int] = 100) -> dict:
        """openbench's record, plus OpenBioLink's flat ``hits@1/3/10`` and ``mrr`` keys (realistic,
        both sides) at its top level, as OpenBioLink's evaluator returned them."""
        result = super().evaluate(batch_size=batch_size)
        headline = result["metrics"]["both"]["realistic"]
        result.update({key: headline[key] for key in ("hits@1", "hits@3", "hits@10", "mrr") if key in headline})
        return result
