"""The reference every repurposing number is checked against, written from the definitions: plain
loops over every pair of the matrix in exact rational arithmetic (:class:`Reference`), and the
models whose scores tie often (integer embeddings: exact arithmetic) or never (:func:`planted_model`)."""
import math
from fractions import Fraction

import numpy as np
import pytest

from openbench.models.scorers import build_scorer
from tests.bases import exact_embedding_key

RANK_TYPES = ("optimistic", "realistic", "pessimistic", "expected")
CASES = [("DistMult", True), ("DistMult", False), ("TransE-L1", True), ("TransE-L2", True), ("TransE-L2", False)]


def planted_model(dataset, name, integer, seed=0, dim=4):
    rng = np.random.default_rng(seed)
    if integer:
        entities = rng.integers(-1, 2, (dataset.num_entities, dim)).astype(np.float32)
        relations = rng.integers(-1, 2, (dataset.num_relations, dim)).astype(np.float32)
    else:
        entities = rng.normal(size=(dataset.num_entities, dim)).astype(np.float32)
        relations = rng.normal(size=(dataset.num_relations, dim)).astype(np.float32)
    return build_scorer(name, entities, relations, dataset.num_entities, dataset.num_relations), entities, relations


class Reference:
    """Every repurposing number by plain loops over the matrix, in exact arithmetic."""

    def __init__(self, dataset, name, entities, relations, negative=True):
        labels = dataset.entity_labels
        self.drugs = [i for i, label in enumerate(labels) if label.startswith("drug::")]
        self.diseases = [i for i, label in enumerate(labels) if label.startswith("disease::")]
        indication = dataset.relation_labels.index("indication")
        contra = dataset.relation_labels.index("contraindication")
        drug_set = set(self.drugs)

        def pair(h, t):
            return (h, t) if h in drug_set else (t, h)

        splits = {split: dataset.triples[split].tolist() for split in ("train", "valid", "test")}
        forward = sum(1 for s in splits.values() for h, r, t in s if r == indication and h in drug_set)
        backward = sum(1 for s in splits.values() for h, r, t in s if r == indication and h not in drug_set)
        self.drug_first = forward >= backward
        known = {pair(h, t) for split in ("train", "valid") for h, r, t in splits[split] if r == indication}
        self.known = known
        self.test = sorted({pair(h, t) for h, r, t in splits["test"] if r == indication} - known)
        self.negatives = sorted({pair(h, t) for s in splits.values() for h, r, t in s if r == contra}
                                - known - set(self.test)) if negative else []
        self.test_negatives = sorted({pair(h, t) for h, r, t in splits["test"] if r == contra}
                                     - known - set(self.test)) if negative else []
        self.key = {}
        for d in self.drugs:
            for s in self.diseases:
                h, t = (d, s) if self.drug_first else (s, d)
                self.key[(d, s)] = exact_embedding_key(name, entities[h], relations[indication], entities[t])
        self.size = len(self.drugs) * len(self.diseases)

    def counts(self, ranked, excluded):
        """(g, e, n) of each ranked pair against the matrix less ``excluded`` (itself aside)."""
        out = []
        for p in ranked:
            others = [x for x in self.key if x not in excluded and x != p]
            g = sum(1 for x in others if self.key[x] > self.key[p])
            e = sum(1 for x in others if self.key[x] == self.key[p])
            out.append((g, e, len(others) + 1))
        return out

    @staticmethod
    def metrics(counts, ns):
        """{rank type: {"mrr", "recall@n"/"hits@n"}} of (g, e, n) counts."""
        out = {}
        for rank_type in RANK_TYPES:
            block = {}
            values = []
            for g, e, _ in counts:
                if rank_type == "expected":
                    values.append(sum(Fraction(1, g + i) for i in range(1, e + 2)) / (e + 1))
                else:
                    rank = {"optimistic": g + 1, "pessimistic": g + e + 1,
                            "realistic": Fraction(2 * g + e + 2, 2)}[rank_type]
                    values.append(Fraction(1) / rank)
            block["mrr"] = float(sum(values) / len(values))
            for n in ns:
                hits = []
                for g, e, _ in counts:
                    if rank_type == "expected":
                        hits.append(Fraction(min(max(n - g, 0), e + 1), e + 1))
                    else:
                        rank = {"optimistic": g + 1, "pessimistic": g + e + 1,
                                "realistic": Fraction(2 * g + e + 2, 2)}[rank_type]
                        hits.append(Fraction(int(rank <= n)))
                block[n] = float(sum(hits) / len(hits))
            out[rank_type] = block
        return out

    def auroc(self, counts):
        values = [Fraction(2 * (n - 1 - g - e) + e, 2 * (n - 1)) for g, e, n in counts]  # n - 1 non-positives
        return float(sum(values) / len(values))

    def per_disease(self, positives, excluded):
        """(disease of each pair, (g, e, n) among the disease's drugs less ``excluded``)."""
        out = []
        for d, s in positives:
            others = [(x, s) for x in self.drugs if (x, s) not in excluded and x != d]
            g = sum(1 for o in others if self.key[o] > self.key[(d, s)])
            e = sum(1 for o in others if self.key[o] == self.key[(d, s)])
            out.append((s, (g, e, len(others) + 1)))
        return out

    def entropy(self, n):
        ranked = sorted(((k, p) for p, k in self.key.items() if p not in self.known), key=lambda x: -x[0])
        cut = ranked[n - 1][0]
        above = [p for k, p in ranked if k > cut]
        tied = [p for k, p in ranked if k == cut]
        share = Fraction(n - len(above), len(tied))
        result = {}
        for name, position, base in (("drug_entropy", 0, len(self.drugs)), ("disease_entropy", 1, len(self.diseases))):
            totals = {}
            for p in above:
                totals[p[position]] = totals.get(p[position], 0) + 1
            for p in tied:
                totals[p[position]] = totals.get(p[position], 0) + share
            probabilities = [float(v) / n for v in totals.values() if v]
            result[name] = -sum(q * math.log(q) for q in probabilities) / math.log(base)
        return result


def close(a, b):
    return a == pytest.approx(b, abs=1e-12)
