"""Answers on the edges of entity chunks (issue 56): a true answer in a chunk's first or last
column, under fast and exact ranks, gives the ranks a plain computation gives. Integer embeddings
make every score exact in float32, so fast ranks must equal the reference too, and no warning
about differing true scores may appear."""
import numpy as np
import pytest

import openbench
from openbench.datasets.loader import load_dataset
from tests.helpers import integer_embeddings, write_samples

ENTITIES = 23
CHUNKS = (1, 5, 7)
MODELS = ("DistMult", "TransE-L1", "RotatE", "RESCAL")


def _label(i: int) -> str:
    return f"E{i:02d}"  # sorted labels: label order is id order


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Test answers at the first and last column of every chunk of 5 and 7 (ids 0, 4, 5, 6, 7, 9,
    10, 13, 14, 15, 19, 20, 21, 22)."""
    edges = [0, 4, 5, 6, 7, 9, 10, 13, 14, 15, 19, 20, 21, 22]
    relations = ["R0", "R1", "R2"]
    train = [(_label(i), relations[i % 3], _label((i * 5 + 3) % ENTITIES)) for i in range(ENTITIES)]
    train += [(_label((i * 3) % ENTITIES), relations[(i + 1) % 3], _label((i * 11 + 2) % ENTITIES)) for i in range(40)]
    test = [(_label(edges[(i + 3) % len(edges)]), relations[i % 3], _label(edge)) for i, edge in enumerate(edges)]
    known = set(train)
    test = [triple for triple in dict.fromkeys(test) if triple not in known]
    folder = write_samples(tmp_path_factory.mktemp("chunks"), {"train": train, "valid": [], "test": test},
                           negatives=False)
    return load_dataset(folder)


def _scores(model: str, entities: np.ndarray, relations: np.ndarray, h: int, r: int, side: str) -> np.ndarray:
    """(E,) float64 scores of every candidate for one query, from each model's definition."""
    anchor, rel = entities[h].astype(np.float64), relations[r].astype(np.float64)
    table = entities.astype(np.float64)
    if model == "DistMult":
        return table @ (anchor * rel)
    if model == "TransE-L1":
        return -np.abs((anchor + rel)[None, :] - table).sum(1) if side == "tail" \
            else -np.abs(table + rel[None, :] - anchor[None, :]).sum(1)
    if model == "RESCAL":
        matrix = rel.reshape(int(np.sqrt(rel.size)), -1)
        return table @ (matrix.T @ anchor) if side == "tail" else table @ (matrix @ anchor)
    raise ValueError(model)


def _reference_ranks(dataset, model, entities, relations):
    """{side: [realistic rank]} by plain loops, filtered by every known triple."""
    known = {tuple(t) for split in dataset.triples.values() for t in split.tolist()}
    out = {}
    for side in ("head", "tail"):
        ranks = []
        for h, r, t in dataset.triples["test"].tolist():
            scores = _scores(model, entities, relations, t if side == "head" else h, r, side)
            answer = h if side == "head" else t
            others = [e for e in range(dataset.num_entities) if e != answer
                      and ((e, r, t) if side == "head" else (h, r, e)) not in known]
            greater = sum(scores[e] > scores[answer] for e in others)
            equal = sum(scores[e] == scores[answer] for e in others)
            ranks.append(greater + (equal + 2) / 2)
        out[side] = ranks
    return out


def _tables(model, dataset):
    rows = dataset.num_entities
    if model == "RotatE":  # complex, unit-modulus relations: phases of multiples of 90 degrees stay exact
        entities = integer_embeddings(3, rows, 4).astype(np.float32)
        phases = np.random.default_rng(1).integers(0, 4, size=(dataset.num_relations, 2))
        relations = np.concatenate([np.cos(phases * np.pi / 2), np.sin(phases * np.pi / 2)], axis=1).round()
        return entities, relations.astype(np.float32)
    width = 3
    relation_width = width * width if model == "RESCAL" else width
    return (integer_embeddings(3, rows, width).astype(np.float32),
            integer_embeddings(4, dataset.num_relations, relation_width).astype(np.float32))


@pytest.mark.parametrize("model", MODELS)
def test_answers_on_chunk_edges_rank_as_in_one_block(dataset, model):
    entities, relations = _tables(model, dataset)
    scorer = openbench.embedding_model(model, entities, relations)
    whole = openbench.evaluate(dataset, scorer, device="cpu")
    expected = whole.ranks.sort("side", "relation", "head", "tail")
    for ranks in ("fast", "exact"):
        for chunk in CHUNKS:
            record = openbench.evaluate(dataset, scorer, device="cpu", ranks=ranks, entity_chunk=chunk)
            found = record.ranks.sort("side", "relation", "head", "tail")
            assert found["rank"].to_list() == expected["rank"].to_list(), (model, ranks, chunk)
            assert not [w for w in record.to_dict().get("warnings", []) if "differed" in w], (model, ranks, chunk)
    if model != "RotatE":  # the other three against their definitions, by loops
        reference = _reference_ranks(dataset, model, entities, relations)
        labels = dataset.entity_labels
        for side in ("head", "tail"):
            expected_by_query = {(labels[h], dataset.relation_labels[r], labels[t]): rank for (h, r, t), rank
                                 in zip(dataset.triples["test"].tolist(), reference[side])}
            ours = {(row["head"], row["relation"], row["tail"]): row["rank"]
                    for row in whole.ranks.filter(whole.ranks["side"] == side).iter_rows(named=True)}
            assert ours == expected_by_query, (model, side)
