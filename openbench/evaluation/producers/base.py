"""The producer contract: a model's complete rank counts for every query of an evaluation.

A producer turns a scorer (or a model's ranked lists) into ``{side: RankCounts}`` over the
evaluation triples, under a :class:`~openbench.evaluation.candidates.RankingSetup`; the one reduction
and record (:func:`openbench.evaluation.tasks.ranking.run`) take it from there. The door calls a
producer twice: :meth:`Producer.options` (the setup's options: what it refuses, its defaults, what
it requires) and :meth:`Producer.run`, which hands back everything the record takes of it in one
:class:`Produced` value (the counts, the triples they rank, the protocol, the model block, the
timings), so nothing calls the producer once its counts are made. The hooks they call:

* ``refuse(given)``: raise for an option the caller gave (not None) that this producer cannot honour;
* ``setup_defaults()``, ``setup_options()``: setup options the producer takes by default, or needs;
* ``bind(setup)``: get ready for this setup (devices, exact ranks, checks against the dataset);
* ``evaluation_triples(setup) -> (T, 3)``: what is ranked, in the order :meth:`produce` walks it;
* ``produce(setup, triples, batch_size) -> {side: RankCounts (T_side,)}``;
* ``side_triples(setup, triples) -> {side: (T_side, 3)}``: the triples of each side's counts;
* ``adjust(protocol)``: what the producer adds to the recorded protocol;
* ``model_description()``, ``timing()``.

:class:`FullRanking` ranks every candidate entity (filtered), :class:`SampledRanking` each query's
own sampled negatives (OGB); the ranked-list producers are in :mod:`openbench.evaluation.producers.topk`,
the distributed wrapper in :mod:`openbench.evaluation.producers.sharded`.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional

import torch

from openbench.evaluation.candidates import RankingSetup
from openbench.evaluation.counting.counts import RankCounts
from openbench.record import Protocol

__all__ = ["Producer", "Produced", "take_warnings", "is_out_of_memory"]


def take_warnings(setup: RankingSetup, scorer) -> None:
    """What the scorer found while matching the dataset (a PyKEEN model knowing other entities)."""
    setup.warnings.extend(message for message in getattr(scorer, "warnings", []) if message not in setup.warnings)


def is_out_of_memory(error: BaseException) -> bool:
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


class Produced(NamedTuple):
    """A producer's whole answer: ``counts`` {side: RankCounts (T_side,)} of the evaluated sides,
    ``triples`` {side: (T_side, 3)} the triples those counts rank, the recorded ``protocol``
    (the setup's, with what the producer adds), the ``model`` block and the ``timing`` counts."""

    counts: Dict[str, RankCounts]
    triples: Dict[str, torch.Tensor]
    protocol: Protocol
    model: dict
    timing: dict


class Producer:
    """The contract (see the module docstring), with the defaults most producers keep."""

    def options(self, given: dict) -> dict:
        """The :class:`~openbench.evaluation.candidates.RankingSetup` options for ``given`` (the
        caller's, None where not given): :meth:`refuse` first, then :meth:`setup_defaults` where an
        option was not given, then :meth:`setup_options` whatever was; None left out."""
        self.refuse(given)
        options = dict(given)
        for key, value in self.setup_defaults().items():
            if options.get(key) is None:
                options[key] = value
        options.update(self.setup_options())
        return {key: value for key, value in options.items() if value is not None}

    def run(self, setup: RankingSetup, batch_size: Optional[int] = None) -> Produced:
        """Every evaluation triple under ``setup``: :meth:`bind`, :meth:`evaluation_triples`,
        :meth:`produce` (``batch_size`` queries per batch, None: the producer's choice), and what
        the record takes of this producer, in one value."""
        self.bind(setup)
        triples = self.evaluation_triples(setup)
        counts = self.produce(setup, triples, batch_size)
        return Produced({side: counts[side] for side in setup.sides}, self.side_triples(setup, triples),
                        self.adjust(setup.protocol()), self.model_description(), self.timing())

    def refuse(self, given: dict) -> None:
        """Raise a :class:`~openbench.errors.UsageError` for an option of ``given`` (the
        :class:`~openbench.evaluation.candidates.RankingSetup` options the caller passed, None
        where not given) this producer cannot honour; every option is fine by default."""

    def setup_defaults(self) -> dict:
        """Setup options this producer takes where the caller gave none (None)."""
        return {}

    def setup_options(self) -> dict:
        """Setup options this producer requires whatever the caller gave."""
        return {}

    def bind(self, setup: RankingSetup) -> None:
        """Get ready for ``setup``; nothing to do by default."""

    def evaluation_triples(self, setup: RankingSetup) -> torch.Tensor:
        """(T, 3) the evaluation split's distinct triples in the scope (a repeat counts once)."""
        return setup.distinct(setup.scoped(setup.evaluation_triples()))

    def produce(self, setup: RankingSetup, triples: torch.Tensor,
                batch_size: Optional[int] = None) -> Dict[str, RankCounts]:
        """{side: RankCounts (T,)} of ``triples`` (T, 3)."""
        raise NotImplementedError

    def side_triples(self, setup: RankingSetup, triples: torch.Tensor) -> Dict[str, torch.Tensor]:
        """{side: (T, 3)}: every side ranks every triple of ``triples`` (T, 3)."""
        return {side: triples for side in setup.sides}

    def adjust(self, protocol: Protocol) -> Protocol:
        """The recorded protocol with what this producer adds (here: nothing)."""
        return protocol

    def model_description(self) -> dict:
        raise NotImplementedError

    def timing(self) -> dict:
        """Machine-dependent counts kept under the record's ``timing`` (none here)."""
        return {}
