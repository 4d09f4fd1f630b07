"""What a table of results holds, in words: the same sentences on the command line, in the demo,
on the leaderboard page and in the report, so a number is never shown without its protocol.

:func:`protocol_line` names the split (and its kind), the queries and sides, the rank type and the
protocol (full filtered ranking against how many entities, or sampled negatives with the warning
that such numbers are not comparable with full ranking). :func:`ranking_readings` and
:func:`classification_readings` give the one-line readings of the adjusted metrics and of
anything near or below chance.
"""
from __future__ import annotations

from typing import List, Mapping, Optional

__all__ = ["AMRI_READING", "CHANCE_AMRI", "classification_readings", "protocol_line", "ranking_readings",
           "record_protocol_line", "SAMPLED_WARNING"]

AMRI_READING = ("AMRI (adjusted mean rank index): 1 = every answer ranked first, 0 = what a random order of the "
                "candidates scores, below 0 = worse than random")
SAMPLED_WARNING = "not comparable with full ranking"
# an AMRI at or below this is reported as near chance: the answers sit about where a random order puts them
CHANCE_AMRI = 0.05
# an AUROC within this of 0.5 is near chance
CHANCE_AUROC = 0.05


def _sides(protocol: Mapping) -> str:
    sides = list(protocol.get("sides") or ["head", "tail"])
    return "head and tail" if sides == ["head", "tail"] else f"{' and '.join(sides)} only"


def _split_kind(protocol: Mapping) -> str:
    split = protocol.get("split")
    if not isinstance(split, Mapping):
        return ""
    kind = split.get("kind")
    if kind == "entity":
        held = (split.get("heldout_entities") or {}).get("test")
        relations = split.get("relations")
        under = f"under {', '.join(relations)}" if relations else "under every relation (fully cold)"
        # "held out", not "unseen": under chosen relations an entity may still occur in other training
        # triples, and "unseen in training" is the audit's word for an entity in none
        return f"entity-held-out split ({held} test entities held out of training {under})" if held is not None \
            else "entity-held-out split"
    if kind == "inductive":
        return "inductive split (entities new to training, ranked in the inference graph)"
    return f"{kind} split" if kind else ""


def _mapping(value: object) -> Mapping:
    """``value`` when it is a mapping, else an empty one (a record's optional protocol parts)."""
    return value if isinstance(value, Mapping) else {}


def _candidates(protocol: Mapping, entities: Optional[int]) -> str:
    """How each query was ranked: full filtered ranking, typed, listed, or sampled negatives."""
    candidates = protocol.get("candidates", "all")
    negatives = protocol.get("negatives_per_query")
    if candidates == "sampled" or isinstance(negatives, Mapping):
        per = negatives or {}
        counts = " / ".join(f"{per[side]} {side}" for side in ("head", "tail") if side in per)
        return (f"sampled protocol: each query against its own {counts} negatives, unfiltered "
                f"({SAMPLED_WARNING})")
    scope = _mapping(protocol.get("entities"))
    inference = _mapping(_mapping(protocol.get("split")).get("inference_graph"))
    if scope.get("of") == "the inference graph" or inference.get("entities") is not None:
        # an inductive split's candidates: its inference graph (the door states them as an entity scope)
        against = f"against the {scope.get('count', inference.get('entities'))} inference-graph entities"
    elif scope.get("count") is not None:
        against = f"against {scope['count']} chosen entities"
    elif candidates == "typed":
        against = "against the entities of a type each relation admits"
    elif candidates == "all":
        against = f"against all {entities} entities" if entities is not None else "against every entity"
    else:
        against = f"against {candidates} ({SAMPLED_WARNING} unless every model lists the same candidates)"
    filters = list(protocol.get("filter_sets") or [])
    filtered = (f"filtered (the other known answers in {', '.join(filters)} removed)" if filters
                else "unfiltered (raw: other known answers count against the model)")
    return f"full ranking {against}, {filtered}"


def protocol_line(protocol: Mapping, entities: Optional[int] = None, queries: Optional[int] = None,
                  rank_type: str = "realistic") -> str:
    """One sentence: split (and kind), queries and sides, rank type, candidates and filtering.

    ``protocol``: a result record's ``protocol`` block; ``entities``: the dataset's entity count;
    ``queries``: the number of queries ranked (the record's ``diagnostics.queries``)."""
    parts = [f"{protocol.get('evaluation_split', 'test')} set"]
    kind = _split_kind(protocol)
    if kind:
        parts.append(kind)
    parts.append(f"{queries} queries ({_sides(protocol)})" if queries is not None else f"{_sides(protocol)} queries")
    if protocol.get("relations"):
        parts.append(f"relations {', '.join(protocol['relations'])} only")
    rank = {"realistic": "realistic rank (ties: the mean of the tied positions)",
            "optimistic": "optimistic rank (ties in the model's favour)",
            "pessimistic": "pessimistic rank (ties against the model)"}.get(rank_type, f"{rank_type} rank")
    parts.append(rank)
    parts.append(_candidates(protocol, entities))
    return "; ".join(parts)


def record_protocol_line(record: Mapping, rank_type: Optional[str] = None) -> str:
    """:func:`protocol_line` of a whole result record (its entity count and query count)."""
    protocol = record.get("protocol") or {}
    counts = (record.get("dataset") or {}).get("counts") or {}
    queries = (record.get("diagnostics") or {}).get("queries")
    return protocol_line(protocol, counts.get("entities"), queries,
                         rank_type or protocol.get("headline_rank_type", "realistic"))


def ranking_readings(name: str, block: Mapping, baseline: Optional[Mapping] = None,
                     baseline_name: str = "popularity") -> List[str]:
    """Readings of one model's headline metrics (``block``: {"mrr", "amri", ...}): near or below
    chance, and below the baseline's MRR (``baseline``: the same block of the baseline)."""
    lines = []
    amri = block.get("amri")
    if amri is not None and amri <= CHANCE_AMRI:
        where = "below" if amri < -CHANCE_AMRI else "near"
        lines.append(f"{name}: AMRI {amri:.3f} is {where} chance: its answers sit about where a random order of "
                     f"the candidates puts them{' or lower' if where == 'below' else ''}")
    if baseline is not None and block.get("mrr") is not None and baseline.get("mrr") is not None \
            and block["mrr"] < baseline["mrr"]:
        lines.append(f"{name}: MRR {block['mrr']:.3f} is below the {baseline_name} baseline's {baseline['mrr']:.3f}: "
                     f"it ranks worse than scoring each candidate by its training degree")
    return lines


FEW_FOR_AUROC = 20  # fewer positives or negatives than this: a reading says how far one pair moves the AUROC


def classification_readings(name: str, auroc: Optional[float], positives: Optional[int] = None,
                            negatives: Optional[int] = None) -> List[str]:
    """Readings of a classifier's AUROC: 0.5 is chance, below it the scores order positives and
    negatives the wrong way round more often than not. With the counts, each reading says what it
    rests on, and warns where the negatives (or positives) are too few to read much into it."""
    if auroc is None:
        return []
    counts = ""
    if positives is not None and negatives is not None:
        counts = f" ({positives} positives against {negatives} negatives"
        fewest = min(positives, negatives)
        counts += (f": with {fewest} on one side, one pair more or less moves the AUROC by up to {1 / fewest:.2f})"
                   if 0 < fewest < FEW_FOR_AUROC else ")")
    if auroc < 0.5 - CHANCE_AUROC:
        return [f"{name}: AUROC {auroc:.3f} is below chance (0.5): it scores these negatives above the positives "
                f"more often than not{counts}"]
    if auroc <= 0.5 + CHANCE_AUROC:
        return [f"{name}: AUROC {auroc:.3f} is near chance (0.5){counts}"]
    return []