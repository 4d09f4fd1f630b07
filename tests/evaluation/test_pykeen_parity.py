"""openbench against PyKEEN's RankBasedEvaluator on the same embeddings (skipped without pykeen).

Integer-valued embeddings make every float32 score exact, so ties are genuine and both tools
must agree to rounding of the final means, for every side and rank type (RotatE: see _models).
"""
import numpy as np
import pytest
import torch

from tests.helpers import needs_module, random_labelled_graph, write_samples  # noqa: E402

pykeen = needs_module("pykeen")
from pykeen.evaluation import RankBasedEvaluator  # noqa: E402
from pykeen.models import RESCAL, ComplEx, DistMult, RotatE, TransE  # noqa: E402
from pykeen.triples import TriplesFactory  # noqa: E402

from openbench.datasets.loader import load_dataset  # noqa: E402
from openbench.models.scorers import build_scorer  # noqa: E402
from tests.bases import evaluated

DIM = 4
METRICS = {"mrr": "inverse_harmonic_mean_rank", "mr": "arithmetic_mean_rank", "hits@1": "hits_at_1",
           "hits@3": "hits_at_3", "hits@10": "hits_at_10"}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    splits = random_labelled_graph(11, 40, 5, {"train": 300, "valid": 30, "test": 40})
    return load_dataset(write_samples(tmp_path_factory.mktemp("parity"), splits))


def _models(dataset, rng):
    """(openbench name, pykeen model, entity array, relation array, layout) with integer values."""
    tf = TriplesFactory(mapped_triples=dataset.triples["train"],
                        entity_to_id={label: i for i, label in enumerate(dataset.entity_labels)},
                        relation_to_id={label: i for i, label in enumerate(dataset.relation_labels)})
    n_e, n_r = dataset.num_entities, dataset.num_relations
    ints = lambda *shape: rng.integers(-2, 3, size=shape).astype(np.float32)  # noqa: E731
    # torch's complex vector_norm takes |z| per coordinate (hypot) before squaring, so PyKEEN's
    # RotatE scores carry rounding noise even for integer inputs and break exact ties at random;
    # RotatE is therefore compared on continuous values, where ties do not occur.
    rotations = np.exp(1j * rng.uniform(-np.pi, np.pi, size=(n_r, DIM)))
    normal = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    interleave = lambda z: np.stack([z.real, z.imag], -1).reshape(z.shape[0], -1).astype(np.float32)  # noqa: E731
    yield "TransE-L1", TransE(triples_factory=tf, embedding_dim=DIM, scoring_fct_norm=1), ints(n_e, DIM), ints(n_r, DIM)
    yield "TransE-L2", TransE(triples_factory=tf, embedding_dim=DIM, scoring_fct_norm=2), ints(n_e, DIM), ints(n_r, DIM)
    yield "DistMult", DistMult(triples_factory=tf, embedding_dim=DIM), ints(n_e, DIM), ints(n_r, DIM)
    yield "ComplEx", ComplEx(triples_factory=tf, embedding_dim=DIM), ints(n_e, 2 * DIM), ints(n_r, 2 * DIM)
    yield "RotatE", RotatE(triples_factory=tf, embedding_dim=DIM), normal(n_e, 2 * DIM), interleave(rotations)
    yield "RESCAL", RESCAL(triples_factory=tf, embedding_dim=DIM), ints(n_e, DIM), ints(n_r, DIM * DIM)


def _pykeen_results(model, dataset, entities, relations):
    with torch.no_grad():
        model.entity_representations[0]._embeddings.weight.copy_(torch.from_numpy(entities))
        model.relation_representations[0]._embeddings.weight.copy_(torch.from_numpy(relations))
    evaluator = RankBasedEvaluator(filtered=True)
    results = evaluator.evaluate(model, dataset.triples["test"], batch_size=16, use_tqdm=False,
                                 additional_filter_triples=[dataset.triples["train"], dataset.triples["valid"]])
    return results.to_flat_dict()


def test_all_models_match_pykeen(dataset):
    rng = np.random.default_rng(0)
    compared = 0
    for name, model, entities, relations in _models(dataset, rng):
        theirs = _pykeen_results(model, dataset, entities, relations)
        scorer = build_scorer(name, entities, relations, dataset.num_entities, dataset.num_relations,
                              complex_layout="interleaved")
        ours = evaluated(dataset, scorer, batch_size=7)
        tied = ours["diagnostics"]["tied_query_fraction"]
        assert tied > 0.2 or name == "RotatE", f"{name}: the test needs ties to mean something ({tied})"
        for side in ("both", "head", "tail"):
            for rank_type in ("optimistic", "pessimistic", "realistic"):
                for key, their_key in METRICS.items():
                    value = theirs[f"{side}.{rank_type}.{their_key}"]
                    assert ours["metrics"][side][rank_type][key] == pytest.approx(value, abs=1e-6), \
                        (name, side, rank_type, key)
                    compared += 1
            amri = theirs[f"{side}.realistic.adjusted_arithmetic_mean_rank_index"]
            assert ours["metrics"][side]["realistic"]["amri"] == pytest.approx(amri, abs=1e-6), (name, side)
    assert compared == 6 * 3 * 3 * len(METRICS)
