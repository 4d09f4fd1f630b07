"""The views beside the full matrix: curated lists, the per-disease intervals, TxGNN's protocol
on the same scores, and stability against scipy."""
import json
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import openbench
from openbench.cli import main
from tests.evaluation.repurposing.reference import close, planted_model


def test_curated_lists_restrict_the_matrix_and_count_what_falls_outside(planted):
    scorer, entities, relations = planted_model(planted, "DistMult", True)
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
    scorer, _, _ = planted_model(planted, "DistMult", False, seed=3)
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

    scorer, entities, relations = planted_model(planted, "TransE-L2", False, seed=3)
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
        assert close(block["fine_tuning_test"]["per_edge_type"][name]["auroc"], per_type[-1][0])
    micro_scores = np.r_[positive, positive, sigmoid(*drawn["drug -> disease"]), sigmoid(*drawn["disease -> drug"])]
    micro_labels = [1] * (2 * positive.size) + [0] * (2 * positive.size)
    fine = block["fine_tuning_test"]
    assert close(fine["micro_auroc"], roc_auc_score(micro_labels, micro_scores))
    assert close(fine["micro_auprc"], average_precision_score(micro_labels, micro_scores))
    assert close(fine["macro_auroc"], float(np.mean([a for a, _ in per_type])))
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
    assert close(block["disease_centric"]["auroc"], float(np.mean(aurocs)))
    assert close(block["disease_centric"]["auprc"], float(np.mean(auprcs)))


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
        scorer, _, _ = planted_model(planted, "DistMult", False, seed=seed)
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
