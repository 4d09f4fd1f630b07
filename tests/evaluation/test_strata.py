"""Degree strata (issue 56): each answer's bucket by its training degree, a self-loop counting
twice as the strata's docstring says, checked against a table computed by hand."""
import numpy as np
import pytest
import torch

import openbench
from openbench.datasets.loader import load_dataset
from openbench.evaluation.statistics.strata import degree_bucket_labels, degree_buckets, training_degree
from tests.helpers import integer_embeddings, write_samples


def test_a_self_loop_counts_twice():
    train = torch.tensor([[0, 0, 0], [0, 0, 1], [2, 0, 2], [2, 0, 2], [3, 0, 1]])
    # 0: (0,0,0) twice + (0,0,1) once = 3; 1: two tails; 2: two self-loops = 4; 3: one head; 4: none
    assert training_degree(train, 5).tolist() == [3, 2, 4, 1, 0]


def test_buckets_and_their_labels_by_hand():
    assert degree_buckets(np.array([0, 1, 2, 3, 4, 7, 8, 15, 16])).tolist() == [0, 1, 2, 2, 3, 3, 4, 4, 5]
    assert degree_bucket_labels(5) == ["0", "1", "2-3", "4-7", "8-15"]


def test_a_self_loop_moves_its_entity_a_bucket_in_the_record(tmp_path):
    """E4's only training edge is a self-loop: degree 2, bucket "2-3", beside the other answers
    (E5, E6: degree 2); counted once, E4 would sit alone in bucket "1"."""
    train = [("E0", "R", "E5"), ("E4", "R", "E4"), ("E5", "R", "E0"), ("E6", "R", "E0"), ("E0", "R", "E6")]
    test = [("E5", "R", "E4"), ("E6", "R", "E5")]
    data = load_dataset(write_samples(tmp_path, {"train": train, "valid": [], "test": test}, negatives=False))
    model = openbench.embedding_model("DistMult", integer_embeddings(1, data.num_entities, 3),
                                      integer_embeddings(2, data.num_relations, 3))
    record = openbench.evaluate(data, model, device="cpu").to_dict()
    # tail answers: E4 (degree 2 with its self-loop counted twice: bucket "2-3") and E5 (degree 2: "2-3");
    # head answers: E5 ("2-3") and E6 (degree 2: "2-3"); counted once, E4 would sit in bucket "1"
    strata = record["by_degree"]
    assert set(strata) == {"2-3"}
    assert strata["2-3"]["tail"]["realistic"]["mrr"] == pytest.approx(record["metrics"]["tail"]["realistic"]["mrr"])
