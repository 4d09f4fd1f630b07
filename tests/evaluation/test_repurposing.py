"""Issue 64: the drug-repurposing task, every number against an independent reference.

A planted graph (drugs, diseases, genes; an ``indication`` relation stored in both orientations,
``contraindication`` the known negatives) and models whose scores tie often (integer embeddings:
exact arithmetic) or never; the references below are written from the definitions, with plain
loops over every pair of the matrix in exact rational arithmetic, and cross-checked against
scikit-learn (AUROC, AUPRC), scipy (Spearman, the hypergeometric test) and ranx (Hit@k, MRR on
tie-free scores)."""
import json
import math
import os
from fractions import Fraction

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import InputError, ScoreError, UsageError
from openbench.evaluation.counting.matrix import MatrixSpec, count_matrix, count_rows
from openbench.models.scorers import build_scorer
from tests.bases import (assert_matrix_counts_are_the_definition, counted_in_parts, exact_embedding_key,
                         fused_matrix_pass_available, near_tie_matrix, planted_graph)
from tests.helpers import write_samples

RANK_TYPES = ("optimistic", "realistic", "pessimistic", "expected")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    folder = write_samples(tmp_path_factory.mktemp("repurposing") / "split", planted_graph(3), negatives=False)
    return load_dataset(folder)


def _model(dataset, name, integer, seed=0, dim=4):
    rng = np.random.default_rng(seed)
    if integer:
        entities = rng.integers(-1, 2, (dataset.num_entities, dim)).astype(np.float32)
        relations = rng.integers(-1, 2, (dataset.num_relations, dim)).astype(np.float32)
    else:
        entities = rng.normal(size=(dataset.num_entities, dim)).astype(np.float32)
        relations = rng.normal(size=(dataset.num_relations, dim)).astype(np.float32)
    return build_scorer(name, entities, relations, dataset.num_entities, dataset.num_relations), entities, relations


# -- the reference, from the definitions ----------------------------------------------------------

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


def _close(a, b):
    return a == pytest.approx(b, abs=1e-12)


CASES = [("DistMult", True), ("DistMult", False), ("TransE-L1", True), ("TransE-L2", True), ("TransE-L2", False)]


@pytest.mark.parametrize("name, integer", CASES)
def test_every_full_matrix_and_disease_number_equals_its_definition(planted, name, integer):
    from sklearn.metrics import average_precision_score, roc_auc_score

    scorer, entities, relations = _model(planted, name, integer, seed=5)
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                                negative_relations=["contraindication"], recall_at=[1, 5, 20, 60], hits_at=[1, 3],
                                keep_top=40).to_dict()
    reference = Reference(planted, name, entities, relations)
    result = record["repurposing"]
    view = result["views"]["test"]
    excluded = reference.known | set(reference.test)
    counts = reference.counts(reference.test, excluded)
    expected = reference.metrics(counts, [1, 5, 20, 60])
    assert result["matrix"]["drugs"] == len(reference.drugs) and result["matrix"]["diseases"] == len(reference.diseases)
    assert result["matrix"]["candidates"] == reference.size - len(excluded)
    assert result["matrix"]["scored_as"] == ("(drug, relation, disease)" if reference.drug_first else
                                             "(disease, relation, drug)")
    for rank_type in RANK_TYPES:
        block = view["full_matrix"]["ranks"][rank_type]
        assert _close(block["mrr"], expected[rank_type]["mrr"]), rank_type
        for n in (1, 5, 20, 60):
            assert _close(block[f"recall@{n}"], expected[rank_type][n]), (rank_type, n)
    assert _close(view["full_matrix"]["auroc"], reference.auroc(counts))
    # scikit-learn's Mann-Whitney AUROC: the test positives against every non-positive pair
    scores = [float(reference.key[p]) for p in reference.test] + [
        float(k) for p, k in reference.key.items() if p not in excluded]
    labels = [1] * len(reference.test) + [0] * (len(scores) - len(reference.test))
    assert _close(view["full_matrix"]["auroc"], roc_auc_score(labels, scores))
    # the known negatives, each among the non-positives (itself aside)
    negative_counts = reference.counts(reference.negatives, excluded)
    negative_expected = reference.metrics(negative_counts, [1, 5, 20, 60])
    for rank_type in RANK_TYPES:
        for n in (1, 5, 20, 60):
            assert _close(view["known_negatives"]["ranks"][rank_type][f"recall@{n}"], negative_expected[rank_type][n])
    # disease-specific: micro, macro, per-disease AUROC and AUPRC against scikit-learn
    per = reference.per_disease(reference.test, excluded)
    micro = reference.metrics([c for _, c in per], [1, 3])
    by_disease = {}
    for s, c in per:
        by_disease.setdefault(s, []).append(c)
    macro_values = {rank_type: {"mrr": [], 1: [], 3: []} for rank_type in RANK_TYPES}
    for s, cs in by_disease.items():
        metrics = reference.metrics(cs, [1, 3])
        for rank_type in RANK_TYPES:
            for key in ("mrr", 1, 3):
                macro_values[rank_type][key].append(metrics[rank_type][key])
    disease = view["disease_specific"]
    for rank_type in RANK_TYPES:
        assert _close(disease["micro"][rank_type]["mrr"], micro[rank_type]["mrr"])
        assert _close(disease["macro"][rank_type]["mrr"], float(np.mean(macro_values[rank_type]["mrr"])))
        for k in (1, 3):
            assert _close(disease["micro"][rank_type][f"hits@{k}"], micro[rank_type][k])
            assert _close(disease["macro"][rank_type][f"hits@{k}"], float(np.mean(macro_values[rank_type][k])))
    aurocs, auprcs = [], []
    for s in sorted(by_disease):
        positives = [d for d, t in reference.test if t == s]
        negatives = [d for d in reference.drugs if (d, s) not in excluded]
        disease_scores = [float(reference.key[(d, s)]) for d in positives + negatives]
        disease_labels = [1] * len(positives) + [0] * len(negatives)
        aurocs.append(roc_auc_score(disease_labels, disease_scores))
        auprcs.append(average_precision_score(disease_labels, disease_scores))
    assert _close(disease["auroc"], float(np.mean(aurocs))) and _close(disease["auprc"], float(np.mean(auprcs)))
    labels = planted.entity_labels
    for s, auroc_s, auprc_s in zip(sorted(by_disease), aurocs, auprcs):
        per = disease["per_disease"][labels[s]]
        assert _close(per["auroc"], auroc_s) and _close(per["auprc"], auprc_s)
        assert _close(per["mrr"], reference.metrics(by_disease[s], [1])["realistic"]["mrr"])
    assert disease["diseases"] == len(by_disease)
    # positives against known negatives (the test split's), scikit-learn on the exact keys
    classification = view["classification"]
    scores = [float(reference.key[p]) for p in reference.test + reference.test_negatives]
    labels = [1] * len(reference.test) + [0] * len(reference.test_negatives)
    assert _close(classification["auroc"], roc_auc_score(labels, scores))
    assert _close(classification["auprc"], average_precision_score(labels, scores))
    # frequent flyers: Entropy@n, tied pairs across the n-th place sharing the places left
    for n in (1, 5, 20):
        found = result["frequent_flyers"]["entropy"][str(n)]
        want = reference.entropy(n)
        assert _close(found["drug_entropy"], want["drug_entropy"]) and \
            _close(found["disease_entropy"], want["disease_entropy"]), n
    from openbench.record import validate_record

    validate_record(record)


def test_the_matrix_counts_equal_plain_loops_on_planted_ties():
    """count_matrix and count_rows alone: greater and equal counts of random special pairs over a
    random matrix, every tie decided exactly, against Fraction keys (dot, L2 and L1)."""
    for name in ("DistMult", "TransE-L1", "TransE-L2"):
        for integer in (True, False):
            rng = np.random.default_rng(7)
            n, dim = 50, 5
            entities = (rng.integers(-2, 3, (n, dim)) if integer else rng.normal(size=(n, dim))).astype(np.float32)
            relations = (rng.integers(-2, 3, (2, dim)) if integer else rng.normal(size=(2, dim))).astype(np.float32)
            scorer = build_scorer(name, entities, relations, n, 2)
            spec = MatrixSpec(torch.arange(0, 17), torch.arange(20, 43), 1, integer)
            keys = {(i, j): exact_embedding_key(name, *(
                (entities[i], relations[1], entities[20 + j]) if integer else (entities[20 + j], relations[1],
                                                                               entities[i]))) for i in range(17)
                    for j in range(23)}
            rows, cols = rng.integers(0, 17, 40), rng.integers(0, 23, 40)
            thresholds = rng.random(40) < 0.7
            counted = count_matrix(scorer, spec, rows, cols, thresholds)
            for p in np.flatnonzero(thresholds):
                k = keys[(rows[p], cols[p])]
                assert counted.greater[p] == sum(1 for v in keys.values() if v > k)
                assert counted.equal[p] == sum(1 for v in keys.values() if v == k)
            for a in range(40):
                for b in range(40):
                    ka, kb = keys[(rows[a], cols[a])], keys[(rows[b], cols[b])]
                    assert (counted.groups[a] < counted.groups[b]) == (ka < kb)
            greater, equal, _ = count_rows(scorer, spec, rows, cols)
            for p in range(40):
                k = keys[(rows[p], cols[p])]
                row = [keys[(rows[p], j)] for j in range(23)]
                assert greater[p] == sum(1 for v in row if v > k) and equal[p] == sum(1 for v in row if v == k)


@pytest.mark.parametrize("name", ["DistMult", "TransE-L1", "TransE-L2"])
def test_a_matrix_wider_than_a_span_counted_in_parts_equals_the_definition(name, monkeypatch):
    """The plain C pass (after a GEMM) visits the keys a span of columns at a time, every row within
    it, and counts at most COUNTER_LIMIT keys per call (int32 counters): on a matrix wider than a
    span, with exact ties (repeated columns) and near-ties one float32 step apart (the float64 step
    decides them), split into passes of three rows, every count equals the definition and no pass
    counts more keys than its counters hold. (The fused pass: test_fused_matrix.py.)"""
    from openbench.evaluation.counting import matrix

    monkeypatch.setenv(matrix.PASS_VARIABLE, "plain")
    scorer, spec, keys, rows, cols = _wide_matrix(name)
    diseases, drugs = spec.shape[1], spec.shape[0]
    if matrix.passes._library() is None:
        pytest.skip("no compiled helper here")
    counted, sizes = counted_in_parts(monkeypatch, "openbench_matrix_count_f32", lambda a: a[2] * a[3], 3 * diseases,
                                      scorer, spec, rows, cols, np.ones(rows.size, bool), top_k=5)
    assert counted.stats["pass"] == "C on cpu"
    assert sizes and max(sizes) <= 3 * diseases and sum(sizes) >= drugs * diseases  # rows * width a pass
    assert_matrix_counts_are_the_definition(counted, keys, rows, cols)


@pytest.mark.parametrize("name", ["DistMult", "TransE-L1", "TransE-L2"])
def test_the_device_pass_counts_what_the_definition_counts(name, monkeypatch):
    """The pass a GPU runs (torch's searches, the float64 step on the device, bincount), here
    forced on the CPU: the same matrix, ties and near-ties, every count the definition's; a NaN
    score is one error naming its row and column."""
    from openbench.evaluation.counting import matrix

    monkeypatch.setenv(matrix.PASS_VARIABLE, "torch")
    monkeypatch.setenv(matrix.BLOCK_VARIABLE, "1000")  # several blocks
    scorer, spec, keys, rows, cols = _wide_matrix(name)
    calls = []
    real = matrix.passes._TorchPass.__call__
    monkeypatch.setattr(matrix.passes._TorchPass, "__call__", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    counted = count_matrix(scorer, spec, rows, cols, np.ones(rows.size, bool), top_k=5)
    assert len(calls) >= 3 and counted.stats["pass"] == "torch on cpu"  # the blocks went through the device pass
    assert_matrix_counts_are_the_definition(counted, keys, rows, cols)
    scorer.entities[spec.shape[0] + 130, 0] = float("nan")  # a stored NaN is named before any bound reads it
    with pytest.raises(InputError, match=rf"entity embeddings, row {spec.shape[0] + 130}, column 0, holds NaN"):
        count_matrix(scorer, spec, rows, cols, np.ones(rows.size, bool))


def test_the_device_pass_names_a_nan_key_it_meets():
    """The device pass checks the keys it is given (a model's scores as computed): a NaN is one
    error naming its pair's row in the block and its column, nothing counted."""
    from openbench.evaluation.counting import matrix

    thresholds = torch.tensor([0.5, 1.5], dtype=torch.float64)
    device_pass = matrix.passes._TorchPass(matrix.windows._Windows(thresholds, thresholds, True), False, torch.device("cpu"))
    keys = torch.zeros((3, 40), dtype=torch.float64)
    keys[2, 17] = float("nan")
    with pytest.raises(ScoreError, match=r"NaN score to pair \(row 2 of a block, column 17\)"):
        device_pass(keys, None)


def test_the_device_pass_gives_the_c_pass_s_record(planted, monkeypatch):
    """A whole repurposing record (full matrix, per disease, known negatives, the best pairs) is
    the same from the device pass as from the plain C pass and the fused one, timing aside; the
    fused pass's windows are narrower (its own order of sums)."""
    from openbench.evaluation.counting import matrix

    monkeypatch.setenv(matrix.BLOCK_VARIABLE, "64")
    rng = np.random.default_rng(4)
    entities = rng.normal(size=(planted.num_entities, 6)).astype(np.float32)
    relations = rng.normal(size=(planted.num_relations, 6)).astype(np.float32)
    records, bounds = [], {}
    monkeypatch.setattr(matrix.decisions, "CROWDED", 1.1)  # a float32 pass on this small, crowded matrix: most keys decided exactly
    passes = {"plain": "C on cpu", "torch": "torch on cpu"}
    if fused_matrix_pass_available():
        passes["fused"] = "fused C on cpu"  # the default where the CPU runs it
    for chosen, name in passes.items():
        monkeypatch.setenv(matrix.PASS_VARIABLE, chosen)
        scorer = build_scorer("TransE-L2", entities, relations, planted.num_entities, planted.num_relations)
        record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                                    negative_relations=["contraindication"], recall_at=[1, 10, 50],
                                    keep_top=30).to_dict()
        counting = record.pop("timing")["matrix_counting"]
        assert counting["pass"] == name
        bounds[chosen] = counting["fast_bound"]
        records.append(json.dumps(record, sort_keys=True))
    assert all(record == records[0] for record in records[1:])
    if "fused" in bounds:
        assert bounds["fused"] < bounds["plain"]  # d = 6: 4 roundings a term against 6


def _wide_matrix(name):
    """(scorer, spec, exact keys {(row, col): Fraction}, special rows, cols) of a 9 × 300 matrix
    wider than the C pass's span (128 columns), with a column repeated across spans (ties) and one
    a float32 step away (a near-tie the float64 step decides)."""
    scorer, spec, keys = near_tie_matrix(name, 9)
    return scorer, spec, keys, np.array([0, 4, 8, 2, 2, 5, 1]), np.array([3, 200, 150, 299, 128, 127, 3])


def test_the_best_pairs_are_the_matrix_s_best_with_every_tie_at_the_cut(planted):
    scorer, entities, relations = _model(planted, "DistMult", True, seed=2)
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"], keep_top=25,
                                recall_at=[10]).to_dict()
    reference = Reference(planted, "DistMult", entities, relations, negative=False)
    labels = planted.entity_labels
    top = record["repurposing"]["top_pairs"]
    ranked = sorted(((k, p) for p, k in reference.key.items() if p not in reference.known), key=lambda x: -x[0])
    cut = ranked[24][0]
    want = {(labels[d], labels[s]) for k, (d, s) in ranked if k >= cut}
    assert {(drug, disease) for drug, disease, _ in top} == want
    for drug, disease, place in top:  # a pair's place: 1 + the pairs scoring strictly higher
        d, s = labels.index(drug), labels.index(disease)
        assert place == 1 + sum(1 for k, _ in ranked if k > reference.key[(d, s)])


def test_tie_free_hits_and_mrr_equal_ranx(planted):
    """On scores without ties, the disease-specific micro Hit@k and MRR equal ranx's, each
    positive its own query among its disease's candidate drugs (the other known positives removed)."""
    from ranx import Qrels, Run, evaluate as ranx_evaluate

    scorer, entities, relations = _model(planted, "DistMult", False, seed=9, dim=6)
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                                hits_at=[1, 3, 5]).to_dict()
    reference = Reference(planted, "DistMult", entities, relations, negative=False)
    excluded = reference.known | set(reference.test)
    qrels, run = {}, {}
    for index, (d, s) in enumerate(reference.test):
        query = f"q{index}"
        qrels[query] = {f"d{d}": 1}
        run[query] = {f"d{x}": float(reference.key[(x, s)]) for x in reference.drugs
                      if x == d or (x, s) not in excluded}
        assert len(set(run[query].values())) == len(run[query])  # no ties
    found = ranx_evaluate(Qrels(qrels), Run(run), ["mrr", "hit_rate@1", "hit_rate@3", "hit_rate@5"])
    micro = record["repurposing"]["views"]["test"]["disease_specific"]["micro"]["realistic"]
    assert _close(micro["mrr"], found["mrr"])
    for k in (1, 3, 5):
        assert _close(micro[f"hits@{k}"], found[f"hit_rate@{k}"])


# -- a ground-truth file ----------------------------------------------------------------------------

def test_a_ground_truth_file_scores_as_a_test_set_and_names_its_unknown_rows(planted, tmp_path):
    scorer, entities, relations = _model(planted, "DistMult", True, seed=4)
    reference = Reference(planted, "DistMult", entities, relations, negative=False)
    labels = planted.entity_labels
    free = [p for p in reference.key if p not in reference.known and p not in reference.test]
    positives, negatives = free[:6], free[6:10]
    leaked = sorted(reference.known)[0]
    rows = ["drug\tdisease\tlabel\tdate\tsource"]
    rows += [f"{labels[d]}\t{labels[s]}\ttreat\t2024-01-01\ttrials" for d, s in positives]
    rows += [f"{labels[d]}\t{labels[s]}\tnot-treat\t2024-02-01\ttrials" for d, s in negatives]
    rows += [f"{labels[leaked[0]]}\t{labels[leaked[1]]}\ttreat\t\t", "drug::NOPE\tdisease::S00\ttreat\t\t",
             f"{labels[positives[0][0]]}\tgene::G00\ttreat\t\t"]
    path = tmp_path / "trials.tsv"
    path.write_text("\n".join(rows) + "\n")
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"], ground_truth=path,
                                recall_at=[1, 10, 50]).to_dict()
    view = record["repurposing"]["views"]["ground_truth"]
    file = view["file"]
    assert file["unknown_rows"] == 2 and [row["line"] for row in file["unknown"]] == [len(rows) - 1, len(rows)]
    assert "'drug::NOPE'" in file["unknown"][0]["why"] and "outside the matrix" in file["unknown"][1]["why"]
    assert file["positive_pairs_in_training"] == 1 and file["in_training"][0]["line"] == len(rows) - 2
    excluded = reference.known | set(reference.test) | set(positives)
    counts = reference.counts(positives, excluded)
    expected = reference.metrics(counts, [1, 10, 50])
    for rank_type in RANK_TYPES:
        for n in (1, 10, 50):
            assert _close(view["full_matrix"]["ranks"][rank_type][f"recall@{n}"], expected[rank_type][n])
    assert _close(view["full_matrix"]["auroc"], reference.auroc(counts))
    assert view["positives"] == 6 and view["negatives"] == 4


@pytest.mark.parametrize("content, message", [
    ("drug,disease,label\ndrug::D00,disease::S00,maybe\n", "line 2: label 'maybe'; expected treat or not-treat"),
    ("drug,disease\ndrug::D00,disease::S00\n", "line 1: the header names drug, disease; expected the columns"),
    ("drug,disease,label\n", "no rows below the header"),
])
def test_a_bad_ground_truth_file_is_one_line_naming_file_and_line(planted, tmp_path, content, message):
    scorer, _, _ = _model(planted, "DistMult", True)
    path = tmp_path / "truth.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"], ground_truth=path)


# -- mistakes --------------------------------------------------------------------------------------

def test_mistakes_are_one_clear_error(planted, tmp_path):
    scorer, _, _ = _model(planted, "DistMult", True)
    with pytest.raises(UsageError, match=r"'indications': not a relation of the dataset \(did you mean 'indication'"):
        openbench.evaluate(planted, scorer, task="repurposing", relations=["indications"])
    with pytest.raises(UsageError, match="needs the treats relation"):
        openbench.evaluate(planted, scorer, task="repurposing")
    with pytest.raises(InputError, match=r"2 drugs of the list are not entities of the dataset \(line 2: 'drug::X'"):
        openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                           drugs=["drug::D00", "drug::X", "drug::Y"])
    with pytest.raises(UsageError, match="both a treats and a negative relation"):
        openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                           negative_relations=["indication"])


def test_curated_lists_restrict_the_matrix_and_count_what_falls_outside(planted):
    scorer, entities, relations = _model(planted, "DistMult", True)
    labels = planted.entity_labels
    drugs = [label for label in labels if label.startswith("drug::")][:6]
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"], drugs=drugs).to_dict()
    matrix = record["repurposing"]["matrix"]
    assert matrix["drugs"] == 6 and matrix["drugs_from"] == "a list of 6 labels"
    assert sum(matrix["triples_outside_matrix"].values()) > 0


# -- TxGNN's protocol -------------------------------------------------------------------------------

def test_the_disease_intervals_resample_the_diseases_own_numbers(planted):
    """--bootstrap: the per-disease intervals are percentile intervals of the mean over diseases
    resampled with replacement (seeded), from each disease's own MRR and AUROC in the record."""
    scorer, _, _ = _model(planted, "DistMult", False, seed=3)
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"], bootstrap=50,
                                seed=7).to_dict()
    per_disease = record["repurposing"]["views"]["test"]["disease_specific"]["per_disease"]
    labels = planted.entity_labels
    ordered = sorted(per_disease, key=labels.index)  # the matrix's columns: diseases by entity id
    intervals = record["repurposing"]["confidence"]["test"]
    for name, key in (("disease_mrr_macro", "mrr"), ("disease_auroc", "auroc")):
        values = np.array([np.nan if per_disease[d][key] is None else per_disease[d][key] for d in ordered])
        rng = np.random.default_rng(7)
        means = [np.nanmean(values[rng.integers(0, values.size, values.size)]) for _ in range(50)]
        means = [m for m in means if np.isfinite(m)]
        assert intervals[name] == pytest.approx([np.quantile(means, 0.025), np.quantile(means, 0.975)], abs=1e-12)
    assert intervals["disease_mrr_macro"][0] < intervals["disease_mrr_macro"][1]


def test_txgnn_s_protocol_is_its_formulas_on_the_same_scores(planted):
    """The fine-tuning test: scikit-learn on float32 sigmoids of the positives and of the drawn
    negatives (each a destination with a test edge of its type); the disease-centric evaluation:
    per disease, every drug of the relation less the disease's training and validation drugs,
    AUROC and AUPRC averaged with TxGNN's -1 for an undefined value."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    from openbench.evaluation.tasks.repurposing import RepurposingOptions, define_matrix
    from openbench.evaluation.tasks.repurposing.txgnn import draw_negatives

    scorer, entities, relations = _model(planted, "TransE-L2", False, seed=3)
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"], protocol="txgnn",
                                seed=11).to_dict()
    block = record["repurposing"]["txgnn"]
    matrix = define_matrix(planted, RepurposingOptions(relations=["indication"]))
    known = np.union1d(matrix.pairs["train"], matrix.pairs["valid"])
    test = np.setdiff1d(matrix.pairs["test"], known)
    rows, cols = matrix.rows_cols(test)

    def sigmoid(pair_rows, pair_cols):
        triples = matrix.spec.triples(torch.from_numpy(pair_rows), torch.from_numpy(pair_cols))
        scores = []
        for h, r, t in triples.tolist():
            scores.append(-math.sqrt(float(sum((Fraction(float(a)) + Fraction(float(b)) - Fraction(float(c))) ** 2
                                               for a, b, c in zip(entities[h], relations[r], entities[t])))))
        return torch.sigmoid(torch.tensor(scores, dtype=torch.float32)).numpy()

    drawn = draw_negatives(rows, cols, 11)
    assert set(drawn["drug -> disease"][1]) <= set(cols) and set(drawn["disease -> drug"][0]) <= set(rows)
    positive = sigmoid(rows, cols)
    per_type = []
    for name in ("drug -> disease", "disease -> drug"):
        negative = sigmoid(*drawn[name])
        labels = [1] * positive.size + [0] * negative.size
        scores = np.r_[positive, negative]
        per_type.append((roc_auc_score(labels, scores), average_precision_score(labels, scores)))
        assert _close(block["fine_tuning_test"]["per_edge_type"][name]["auroc"], per_type[-1][0])
    micro_scores = np.r_[positive, positive, sigmoid(*drawn["drug -> disease"]), sigmoid(*drawn["disease -> drug"])]
    micro_labels = [1] * (2 * positive.size) + [0] * (2 * positive.size)
    fine = block["fine_tuning_test"]
    assert _close(fine["micro_auroc"], roc_auc_score(micro_labels, micro_scores))
    assert _close(fine["micro_auprc"], average_precision_score(micro_labels, micro_scores))
    assert _close(fine["macro_auroc"], float(np.mean([a for a, _ in per_type])))
    relation_drugs = np.unique(np.concatenate([matrix.pairs[s] for s in ("train", "valid", "test")]) // matrix.width)
    known_rows, known_cols = matrix.rows_cols(known)
    aurocs, auprcs = [], []
    for disease in np.unique(cols):
        candidates = relation_drugs[~np.isin(relation_drugs, known_rows[known_cols == disease])]
        labels = np.isin(candidates, rows[cols == disease]).astype(int)
        predictions = sigmoid(candidates, np.full(candidates.size, disease))
        if labels.all():
            aurocs.append(-1.0)
            auprcs.append(-1.0)
        else:
            aurocs.append(roc_auc_score(labels, predictions))
            auprcs.append(average_precision_score(labels, predictions))
    assert _close(block["disease_centric"]["auroc"], float(np.mean(aurocs)))
    assert _close(block["disease_centric"]["auprc"], float(np.mean(auprcs)))


# -- stability ----------------------------------------------------------------------------------------

def _average_ranks(values):
    """1-based ranks, tied values sharing the mean of their places: by plain comparison."""
    return [1 + sum(other < value for other in values) + (sum(other == value for other in values) - 1) / 2
            for value in values]


def test_stability_equals_scipy(planted, tmp_path):
    from scipy.stats import hypergeom, spearmanr

    from openbench.evaluation.statistics.stability import stability

    records = []
    for seed in (1, 2):
        scorer, _, _ = _model(planted, "DistMult", False, seed=seed)
        records.append(openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                                          keep_top=60).to_dict())
    found = stability(records[0], records[1], at=[10, 30, 60])
    population = records[0]["repurposing"]["matrix"]["candidates"]
    for k in (10, 30, 60):
        a, b = records[0]["repurposing"]["top_pairs"][:k], records[1]["repurposing"]["top_pairs"][:k]
        place_a = {(x, y): p for x, y, p in a}
        place_b = {(x, y): p for x, y, p in b}
        common = sorted(set(place_a) & set(place_b))
        block = found["at"][str(k)]
        assert block["commonality"] == len(common) / k
        assert block["hypergeometric_p"] == pytest.approx(hypergeom.sf(len(common) - 1, population, k, k), rel=1e-9)
        tail = sum(Fraction(math.comb(k, x) * math.comb(population - k, k - x), math.comb(population, k))
                   for x in range(len(common), k + 1))  # the definition, in exact arithmetic
        assert block["hypergeometric_p"] == pytest.approx(float(tail), rel=1e-9)
        if len(common) >= 3:
            rho, p = spearmanr([place_a[c] for c in common], [place_b[c] for c in common])
            assert block["spearman"] == pytest.approx(rho, abs=1e-12)
            assert block["spearman_p"] == pytest.approx(p, rel=1e-6)
            ranks = [_average_ranks([places[c] for c in common]) for places in (place_a, place_b)]
            assert block["spearman"] == pytest.approx(float(np.corrcoef(*ranks)[0, 1]), abs=1e-12)
    for index, record in enumerate(records):
        (tmp_path / f"r{index}.json").write_text(json.dumps(record))
    done = CliRunner().invoke(main, ["compare", "--stability", str(tmp_path / "r0.json"), str(tmp_path / "r1.json"),
                                     "--at", "10,30"])
    assert done.exit_code == 0, done.output
    assert "Commonality@10" in done.output and "Spearman@30" in done.output


# -- the command line ---------------------------------------------------------------------------------

def test_the_command_line_prints_the_protocol_line_and_writes_a_valid_record(planted, tmp_path):
    from openbench.record import validate_record

    scorer, entities, relations = _model(planted, "DistMult", True)
    np.save(tmp_path / "e.npy", entities)
    np.save(tmp_path / "r.npy", relations)
    done = CliRunner().invoke(main, ["evaluate", "--dataset", planted.path, "--model", "DistMult",
                                     "--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings",
                                     str(tmp_path / "r.npy"), "--task", "repurposing", "--relation", "indication",
                                     "--negative-relation", "contraindication", "--recall-at", "1,10",
                                     "--bootstrap", "20", "--protocol", "txgnn", "--output", str(tmp_path / "r.json")])
    assert done.exit_code == 0, done.output
    assert "matrix 14 drugs × 11 diseases = 154 pairs; filtered" in done.output
    assert "TxGNN's protocol" in done.output and "per disease" in done.output
    record = json.loads((tmp_path / "r.json").read_text())
    validate_record(record)
    assert record["task"] == "repurposing" and record["repurposing"]["confidence"]["resamples"] == 20
    again = CliRunner().invoke(main, ["evaluate", "--dataset", planted.path, "--model", "DistMult",
                                      "--entity-embeddings", str(tmp_path / "e.npy"), "--relation-embeddings",
                                      str(tmp_path / "r.npy"), "--task", "repurposing", "--relation", "indication",
                                      "--negative-relation", "contraindication", "--recall-at", "1,10",
                                      "--bootstrap", "20", "--protocol", "txgnn", "--output",
                                      str(tmp_path / "again.json")])
    assert again.exit_code == 0
    first, second = (json.loads((tmp_path / name).read_text()) for name in ("r.json", "again.json"))
    first.pop("timing"), second.pop("timing")
    assert first == second  # the same seed, the same record (timing aside)


def test_a_forged_repurposing_record_is_refused(planted):
    from openbench.record import RecordError, validate_record

    scorer, _, _ = _model(planted, "DistMult", True)
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                                recall_at=[1, 10, 100]).to_dict()
    validate_record(record)
    broken = json.loads(json.dumps(record))
    broken["repurposing"]["views"]["test"]["full_matrix"]["ranks"]["realistic"]["recall@10"] = 0.0
    broken["repurposing"]["views"]["test"]["full_matrix"]["ranks"]["realistic"]["recall@1"] = 0.5
    with pytest.raises(RecordError, match="recall@10 = 0.0 < recall@1"):
        validate_record(broken)
    broken = json.loads(json.dumps(record))
    broken["repurposing"]["matrix"]["pairs"] += 1
    with pytest.raises(RecordError, match="pairs must be drugs × diseases"):
        validate_record(broken)
    broken = json.loads(json.dumps(record))
    broken["repurposing"]["views"]["test"]["full_matrix"]["auroc"] = 1.5
    with pytest.raises(RecordError, match=r"auroc = 1.5: expected a value in \[0, 1\]"):
        validate_record(broken)
    # the blocks are checked as a ranking record's are: MRR against recall@n, every rank type there
    broken = json.loads(json.dumps(record))
    block = broken["repurposing"]["views"]["test"]["full_matrix"]["ranks"]
    block["realistic"].update({"recall@1": 0.0, "recall@10": 0.0, "mrr": 0.9})
    with pytest.raises(RecordError, match="MRR 0.9 is impossible with recall@"):
        validate_record(broken)
    broken = json.loads(json.dumps(record))
    del broken["repurposing"]["views"]["test"]["disease_specific"]["macro"]["pessimistic"]
    with pytest.raises(RecordError, match=r"disease_specific.macro.pessimistic is missing"):
        validate_record(broken)


# -- the leaderboard ----------------------------------------------------------------------------------

def test_the_board_ranks_repurposing_records_in_a_table_of_their_own_and_reproduces_them(planted, tmp_path):
    """Repurposing rows never mix with ranking rows; a model submitted with its files is
    re-evaluated by the board (the same record, verified: reproduced)."""
    db = tmp_path / "board.sqlite"
    for seed in (1, 2):
        scorer, entities, relations = _model(planted, "DistMult", False, seed=seed)
        np.save(tmp_path / f"e{seed}.npy", entities)
        np.save(tmp_path / f"r{seed}.npy", relations)
        model = ["--model", "DistMult", "--entity-embeddings", str(tmp_path / f"e{seed}.npy"),
                 "--relation-embeddings", str(tmp_path / f"r{seed}.npy")]
        done = CliRunner().invoke(main, ["evaluate", "--dataset", planted.path, *model, "--task", "repurposing",
                                         "--relation", "indication", "--recall-at", "1,10,100",
                                         "--output", str(tmp_path / f"rep{seed}.json")])
        assert done.exit_code == 0, done.output
        extra = ["--dataset", planted.path, *model] if seed == 1 else []
        done = CliRunner().invoke(main, ["leaderboard", "submit", str(tmp_path / f"rep{seed}.json"), "--name",
                                         f"DistMult {seed}", *extra, "--db", str(db)])
        assert done.exit_code == 0, done.output
        assert ("reproduced by the board" in done.output) == (seed == 1)
    shown = CliRunner().invoke(main, ["leaderboard", "show", "--task", "repurposing", "--db", str(db), "--format",
                                      "json"])
    assert shown.exit_code == 0, shown.output
    rows = {row["name"]: row for row in json.loads(shown.output)}
    assert set(rows) == {"DistMult 1", "DistMult 2"}
    assert rows["DistMult 1"]["verified"] == "reproduced" and rows["DistMult 2"]["verified"] == "self"
    record = json.loads((tmp_path / "rep1.json").read_text())
    view = record["repurposing"]["views"]["test"]
    assert rows["DistMult 1"]["metrics"]["auroc"]["mean"] == view["full_matrix"]["auroc"]
    assert rows["DistMult 1"]["metrics"]["disease_mrr"]["mean"] == \
        view["disease_specific"]["macro"]["realistic"]["mrr"]
    table = CliRunner().invoke(main, ["leaderboard", "show", "--task", "repurposing", "--db", str(db)]).output
    assert "drug repurposing, indication" in table and "disease_mrr" in table and "recall@100" in table
    ranking = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db)])
    assert "DistMult 1" not in ranking.output


def test_the_report_draws_the_repurposing_figures(planted, tmp_path):
    paths = []
    for name in ("DistMult", "TransE-L2"):
        scorer, _, _ = _model(planted, name, False, seed=3)
        record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                                    recall_at=[1, 10, 100], hits_at=[1, 3, 10]).to_dict()
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(record))
    done = CliRunner().invoke(main, ["report", *map(str, paths), "--output", str(tmp_path / "report")])
    assert done.exit_code == 0, done.output
    figures = json.loads((tmp_path / "report" / "figures.json").read_text())["figures"]
    assert set(figures) == {"recall_curve", "hits_curve", "per_disease", "frequent_flyers"}
    record = json.loads(paths[0].read_text())
    realistic = record["repurposing"]["views"]["test"]["full_matrix"]["ranks"]["realistic"]
    assert figures["recall_curve"]["DistMult"] == [[n, realistic[f"recall@{n}"]] for n in (1, 10, 100)]
    per_disease = record["repurposing"]["views"]["test"]["disease_specific"]["per_disease"]
    assert sorted(v["auprc"] for v in per_disease.values()) == figures["per_disease"]["DistMult"]
    for key in figures:
        assert (tmp_path / "report" / f"{key}.png").stat().st_size > 1000
    page = (tmp_path / "report" / "index.html").read_text()
    assert "drug repurposing" in page and "Recall@n over the whole drug × disease matrix" in page
    ranking = openbench.evaluate(planted, _model(planted, "DistMult", False)[0]).to_dict()
    (tmp_path / "ranking.json").write_text(json.dumps(ranking))
    done = CliRunner().invoke(main, ["report", str(paths[0]), str(tmp_path / "ranking.json"), "--output",
                                     str(tmp_path / "mixed")])
    assert done.exit_code == 1 and "different tasks" in done.output


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_the_record_is_the_same_on_one_process_and_several(planted, tmp_path, world, monkeypatch):
    """--shard entities over torch.distributed (gloo): the drugs' blocks dealt over the ranks, the
    counts summed; the record equals one process's, byte for byte (timing aside). Small blocks, so
    that every rank holds several."""
    import torch.multiprocessing as mp

    from openbench.evaluation.counting import matrix
    from tests.bases import repurposing_worker

    monkeypatch.setenv(matrix.BLOCK_VARIABLE, "64")  # read by the spawned ranks too
    rng = np.random.default_rng(2)
    entities = rng.normal(size=(planted.num_entities, 6)).astype(np.float32)
    relations = rng.normal(size=(planted.num_relations, 6)).astype(np.float32)
    scorer = build_scorer("DistMult", entities, relations, planted.num_entities, planted.num_relations)
    one = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"],
                             negative_relations=["contraindication"], recall_at=[1, 10, 50], keep_top=30).to_dict()
    one.pop("timing")
    out = tmp_path / "sharded.json"
    mp.spawn(repurposing_worker, args=(world, planted.path, str(tmp_path / "rendezvous"), str(out), 2), nprocs=world,
             join=True)
    assert json.loads(out.read_text()) == json.loads(json.dumps(one, sort_keys=True))


@pytest.mark.slow
def test_torchrun_gives_the_one_process_record(planted, tmp_path):
    """``torchrun … evaluate --task repurposing --distributed``: the drugs dealt over two ranks, rank 0
    writes the record, which equals one process's (timing aside)."""
    import subprocess
    import sys

    scorer, entities, relations = _model(planted, "DistMult", False)
    np.save(tmp_path / "e.npy", entities)
    np.save(tmp_path / "r.npy", relations)
    base = ["-m", "openbench", "evaluate", "--dataset", planted.path, "--model", "DistMult", "--entity-embeddings",
            str(tmp_path / "e.npy"), "--relation-embeddings", str(tmp_path / "r.npy"), "--task", "repurposing",
            "--relation", "indication", "--negative-relation", "contraindication", "--no-progress"]
    env = {**os.environ, "OPENBENCH_MATRIX_BLOCK_KEYS": "64"}
    single = subprocess.run([sys.executable, *base, "--output", str(tmp_path / "one.json")], capture_output=True,
                            text=True, timeout=120, env=env)
    assert single.returncode == 0, single.stderr
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                          "29523", *base, "--distributed", "--output", str(tmp_path / "two.json")],
                         capture_output=True, text=True, timeout=180, env=env)
    assert run.returncode == 0, run.stderr
    one, two = (json.loads((tmp_path / name).read_text()) for name in ("one.json", "two.json"))
    one.pop("timing"), two.pop("timing")
    assert one == two


def test_a_model_that_scores_a_disease_s_drugs_its_own_way_is_ranked_in_that_order(planted):
    """The popularity baseline scores a disease's drugs by their degree as heads, a drug's diseases
    by their degree as tails: the per-disease view ranks each disease's row as the model scores
    that row (scikit-learn's AUROC and AUPRC, and the realistic MRR, per disease on those scores)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    from openbench.models.popularity import popularity_model

    scorer = popularity_model(planted)
    record = openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"], hits_at=[1]).to_dict()
    labels = planted.entity_labels
    drugs = [i for i, label in enumerate(labels) if label.startswith("drug::")]
    relation = planted.relation_labels.index("indication")

    def pairs(*splits):
        return {(h, t) if labels[h].startswith("drug::") else (t, h) for split in splits
                for h, r, t in planted.triples[split].tolist() if r == relation}

    known = pairs("train", "valid")
    test = sorted(pairs("test") - known)
    excluded = known | set(test)
    assert record["repurposing"]["matrix"]["scored_as"] == "(drug, relation, disease)"
    disease = record["repurposing"]["views"]["test"]["disease_specific"]
    checked = 0
    for s in sorted({t for _, t in test}):
        row = scorer.score_rows(torch.tensor([[0, relation, s]]), "head")[0].double().numpy()  # (?, r, s)
        positives = [d for d, t in test if t == s]
        negatives = [d for d in drugs if (d, s) not in excluded]
        scores = [row[d] for d in positives + negatives]
        truth = [1] * len(positives) + [0] * len(negatives)
        ranks = [sum(row[n] > row[p] for n in negatives) + (sum(row[n] == row[p] for n in negatives) + 2) / 2
                 for p in positives]
        found = disease["per_disease"][labels[s]]
        assert _close(found["mrr"], float(np.mean([1 / rank for rank in ranks])))
        if negatives:
            assert _close(found["auroc"], roc_auc_score(truth, scores))
            assert _close(found["auprc"], average_precision_score(truth, scores))
            checked += 1
    assert checked >= 3
