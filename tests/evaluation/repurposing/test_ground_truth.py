"""A ground-truth file scores as a test set and names its unknown rows; a bad one, or a mistaken
option, is one clear error naming file, line or option."""

import pytest

import openbench
from openbench.errors import InputError, UsageError
from tests.evaluation.repurposing.reference import RANK_TYPES, Reference, close, planted_model


def test_a_ground_truth_file_scores_as_a_test_set_and_names_its_unknown_rows(planted, tmp_path):
    scorer, entities, relations = planted_model(planted, "DistMult", True, seed=4)
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
            assert close(view["full_matrix"]["ranks"][rank_type][f"recall@{n}"], expected[rank_type][n])
    assert close(view["full_matrix"]["auroc"], reference.auroc(counts))
    assert view["positives"] == 6 and view["negatives"] == 4


@pytest.mark.parametrize("content, message", [
    ("drug,disease,label\ndrug::D00,disease::S00,maybe\n", "line 2: label 'maybe'; expected treat or not-treat"),
    ("drug,disease\ndrug::D00,disease::S00\n", "line 1: the header names drug, disease; expected the columns"),
    ("drug,disease,label\n", "no rows below the header"),
])
def test_a_bad_ground_truth_file_is_one_line_naming_file_and_line(planted, tmp_path, content, message):
    scorer, _, _ = planted_model(planted, "DistMult", True)
    path = tmp_path / "truth.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        openbench.evaluate(planted, scorer, task="repurposing", relations=["indication"], ground_truth=path)


# -- mistakes --------------------------------------------------------------------------------------

def test_mistakes_are_one_clear_error(planted, tmp_path):
    scorer, _, _ = planted_model(planted, "DistMult", True)
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
