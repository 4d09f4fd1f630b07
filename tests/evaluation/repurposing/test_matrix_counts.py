"""The repurposing matrix's counts against their definition: every full-matrix and per-disease
number, planted ties, matrices wider than a span, the device pass, the best pairs, ranx on
tie-free scores, and a model that scores each disease's drugs its own way."""
import json

import numpy as np
import pytest
import torch

import openbench
from openbench.errors import InputError, ScoreError
from openbench.evaluation.counting.matrix import MatrixSpec, count_matrix, count_rows
from openbench.models.scorers import build_scorer
from tests.bases import assert_matrix_counts_are_the_definition, counted_in_parts, exact_embedding_key, fused_matrix_pass_available, near_tie_matrix
from tests.evaluation.repurposing.reference import CASES, RANK_TYPES, Reference, close, planted_model


@pytest.mark.parametrize("name, integer", CASES)
def test_every_full_matrix_and_disease_number_equals_its_definition(planted, name, integer):
    from sklearn.metrics import average_precision_score, roc_auc_score

    scorer, entities, relations = planted_model(planted, name, integer, seed=5)
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
        assert close(block["mrr"], expected[rank_type]["mrr"]), rank_type
        for n in (1, 5, 20, 60):
            assert close(block[f"recall@{n}"], expected[rank_type][n]), (rank_type, n)
    assert close(view["full_matrix"]["auroc"], reference.auroc(counts))
    # scikit-learn's Mann-Whitney AUROC: the test positives against every non-positive pair
    scores = [float(reference.key[p]) for p in reference.test] + [
        float(k) for p, k in reference.key.items() if p not in excluded]
    labels = [1] * len(reference.test) + [0] * (len(scores) - len(reference.test))
    assert close(view["full_matrix"]["auroc"], roc_auc_score(labels, scores))
    # the known negatives, each among the non-positives (itself aside)
    negative_counts = reference.counts(reference.negatives, excluded)
    negative_expected = reference.metrics(negative_counts, [1, 5, 20, 60])
    for rank_type in RANK_TYPES:
        for n in (1, 5, 20, 60):
            assert close(view["known_negatives"]["ranks"][rank_type][f"recall@{n}"], negative_expected[rank_type][n])
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
        assert close(disease["micro"][rank_type]["mrr"], micro[rank_type]["mrr"])
        assert close(disease["macro"][rank_type]["mrr"], float(np.mean(macro_values[rank_type]["mrr"])))
        for k in (1, 3):
            assert close(disease["micro"][rank_type][f"hits@{k}"], micro[rank_type][k])
            assert close(disease["macro"][rank_type][f"hits@{k}"], float(np.mean(macro_values[rank_type][k])))
    aurocs, auprcs = [], []
    for s in sorted(by_disease):
        positives = [d for d, t in reference.test if t == s]
        negatives = [d for d in reference.drugs if (d, s) not in excluded]
        disease_scores = [float(reference.key[(d, s)]) for d in positives + negatives]
        disease_labels = [1] * len(positives) + [0] * len(negatives)
        aurocs.append(roc_auc_score(disease_labels, disease_scores))
        auprcs.append(average_precision_score(disease_labels, disease_scores))
    assert close(disease["auroc"], float(np.mean(aurocs))) and close(disease["auprc"], float(np.mean(auprcs)))
    labels = planted.entity_labels
    for s, auroc_s, auprc_s in zip(sorted(by_disease), aurocs, auprcs):
        per = disease["per_disease"][labels[s]]
        assert close(per["auroc"], auroc_s) and close(per["auprc"], auprc_s)
        assert close(per["mrr"], reference.metrics(by_disease[s], [1])["realistic"]["mrr"])
    assert disease["diseases"] == len(by_disease)
    # positives against known negatives (the test split's), scikit-learn on the exact keys
    classification = view["classification"]
    scores = [float(reference.key[p]) for p in reference.test + reference.test_negatives]
    labels = [1] * len(reference.test) + [0] * len(reference.test_negatives)
    assert close(classification["auroc"], roc_auc_score(labels, scores))
    assert close(classification["auprc"], average_precision_score(labels, scores))
    # frequent flyers: Entropy@n, tied pairs across the n-th place sharing the places left
    for n in (1, 5, 20):
        found = result["frequent_flyers"]["entropy"][str(n)]
        want = reference.entropy(n)
        assert close(found["drug_entropy"], want["drug_entropy"]) and \
            close(found["disease_entropy"], want["disease_entropy"]), n
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
    counted, sizes = counted_in_parts(monkeypatch, "openbench_matrix_count_f32", lambda a: a.rows * a.width, 3 * diseases,
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
    scorer, entities, relations = planted_model(planted, "DistMult", True, seed=2)
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

    scorer, entities, relations = planted_model(planted, "DistMult", False, seed=9, dim=6)
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
    assert close(micro["mrr"], found["mrr"])
    for k in (1, 3, 5):
        assert close(micro[f"hits@{k}"], found[f"hit_rate@{k}"])


# -- a ground-truth file ----------------------------------------------------------------------------


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
        assert close(found["mrr"], float(np.mean([1 / rank for rank in ranks])))
        if negatives:
            assert close(found["auroc"], roc_auc_score(truth, scores))
            assert close(found["auprc"], average_precision_score(truth, scores))
            checked += 1
    assert checked >= 3
