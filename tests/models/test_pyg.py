"""Issue 65: PyTorch Geometric's KGE models in openbench. Each of PyG's TransE (L1, L2), DistMult,
ComplEx and RotatE scores exactly as a float64 reference of its own ``forward`` under the filtered
protocol, both sides, ties planted; ``compat`` gives PyG's own ``KGEModel.test()`` numbers; a custom
subclass is scored through its ``forward``; a saved folder evaluates from the command line without
a pickle; mismatched counts and hostile folders are refused."""
import json
import math

import pytest
import torch
from click.testing import CliRunner

import openbench
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import InputError
from tests.helpers import needs_module, random_labelled_graph, write_samples

kge = needs_module("torch_geometric.nn.kge")

CLASSES = [("TransE", {"p_norm": 1.0}), ("TransE", {"p_norm": 2.0}), ("DistMult", {}), ("ComplEx", {}),
           ("RotatE", {})]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    splits = random_labelled_graph(4, 30, 3, {"train": 180, "valid": 10, "test": 24})
    return load_dataset(write_samples(tmp_path_factory.mktemp("pyg") / "data", splits, negatives=False))


def _planted(name, options, dataset, seed=0, dim=6):
    """A PyG model whose entity rows 1 and 2 (and 5 and 6) are equal: every query ranks them tied.
    Continuous weights otherwise: the float64 reference rounds, and only candidates whose scores
    differ by less than its rounding (about 1e-16; integer weights make such near-ties common,
    random normal ones leave only the planted, exact ties) could be ordered differently by it."""
    model = getattr(kge, name)(dataset.num_entities, dataset.num_relations, dim, **options)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for key, parameter in model.named_parameters():
            values = torch.randn(parameter.shape, generator=generator)
            if key == "rel_emb.weight" and name == "RotatE":
                values = values * math.pi  # phases
            if key.startswith("node_emb"):
                values[2], values[6] = values[1], values[5]
            parameter.copy_(values)
    return model


def _exact_key(model, h: int, r: int, t: int):
    """The model's score of (h, r, t) in exact arithmetic over the float64 values its forward reads
    (entity rows normalised as TransE's forward normalises them, RotatE's cos and sin of its
    phases), as a key that orders as the score does: for a norm, minus the sum of powers."""
    from fractions import Fraction

    state = {key: value.double() for key, value in model.state_dict().items()}
    name = type(model).__name__
    node = state["node_emb.weight"]
    if name == "TransE":
        node = torch.nn.functional.normalize(node, p=model.p_norm, dim=-1)
    exact = [[Fraction(float(x)) for x in row] for row in node.tolist()]
    rel = [[Fraction(float(x)) for x in row] for row in state["rel_emb.weight"].tolist()]
    if name == "DistMult":
        return sum(a * b * c for a, b, c in zip(exact[h], rel[r], exact[t]))
    if name == "TransE":
        return -sum(abs(a + b - c) ** int(model.p_norm) for a, b, c in zip(exact[h], rel[r], exact[t]))
    image = [[Fraction(float(x)) for x in row] for row in state["node_emb_im.weight"].tolist()]
    if name == "ComplEx":
        rel_im = [[Fraction(float(x)) for x in row] for row in state["rel_emb_im.weight"].tolist()]
        return sum(hr * rr * tr + hi * rr * ti + hr * ri * ti - hi * ri * tr for hr, hi, rr, ri, tr, ti in
                   zip(exact[h], image[h], rel[r], rel_im[r], exact[t], image[t]))
    theta = state["rel_emb.weight"][r]
    cos = [Fraction(float(x)) for x in torch.cos(theta).tolist()]
    sin = [Fraction(float(x)) for x in torch.sin(theta).tolist()]
    return -sum((c * hr - s * hi - tr) ** 2 + (c * hi + s * hr - ti) ** 2 for c, s, hr, hi, tr, ti in
                zip(cos, sin, exact[h], image[h], exact[t], image[t]))


def _reference_counts(model, dataset, side, exact=True):
    """{(h, r, t): (greater, equal)} of each test query on ``side``, from the model's own forward
    in float64, the other known answers removed (filtered). Candidates within 1e-9 of the answer
    (ties, and scores float64 rounding could misorder) are decided in exact arithmetic over the
    same float64 values (:func:`_exact_key`); ``exact=False``: float64 alone (a custom forward)."""
    wide = type(model)(model.num_nodes, model.num_relations, model.hidden_channels,
                       **({"p_norm": model.p_norm} if hasattr(model, "p_norm") else {}))
    wide.load_state_dict(model.state_dict())
    wide = wide.double().eval()
    known = {tuple(row) for split in ("train", "valid", "test") for row in dataset.triples[split].tolist()}
    entities = torch.arange(dataset.num_entities)
    counts = {}
    with torch.no_grad():
        for h, r, t in dataset.triples["test"].tolist():
            if side == "tail":
                scores = wide(torch.full_like(entities, h), torch.full_like(entities, r), entities)
                answer, others = t, {e for e in range(dataset.num_entities) if (h, r, e) in known and e != t}

                def triple(e):
                    return (h, r, e)
            else:
                scores = wide(entities, torch.full_like(entities, r), torch.full_like(entities, t))
                answer, others = h, {e for e in range(dataset.num_entities) if (e, r, t) in known and e != h}

                def triple(e):
                    return (e, r, t)
            true = float(scores[answer])
            greater = equal = 0
            for e in range(dataset.num_entities):
                if e == answer or e in others:
                    continue
                value = float(scores[e])
                if exact and abs(value - true) < 1e-9:
                    mine, theirs = _exact_key(model, *triple(e)), _exact_key(model, *triple(answer))
                    greater, equal = greater + (mine > theirs), equal + (mine == theirs)
                else:
                    greater, equal = greater + (value > true), equal + (value == true)
            counts[(h, r, t)] = (greater, equal)
    return counts


@pytest.mark.parametrize("name, options", CLASSES, ids=lambda value: str(value))
def test_each_class_ranks_as_a_float64_reference_of_its_own_forward(dataset, name, options):
    model = _planted(name, options, dataset)
    scorer = openbench.from_pyg(model, dataset)
    record = openbench.evaluate(dataset, scorer)
    ranks = record.ranks
    labels = dataset.entity_labels
    relation_labels = dataset.relation_labels
    tied = 0
    for side in ("head", "tail"):
        reference = _reference_counts(model, dataset, side)
        part = ranks.filter(ranks["side"] == side)
        assert part.height == len(reference)
        for row in part.iter_rows(named=True):
            key = (labels.index(row["head"]), relation_labels.index(row["relation"]), labels.index(row["tail"]))
            greater, equal = reference[key]
            assert (row["n_greater"], row["n_equal"] - 1) == (greater, equal), (side, key)
            tied += equal > 0
    assert tied > 0  # the planted rows tie in some queries
    description = record.model
    assert description["params"]["pyg_class"] == name and description["params"]["pyg_hidden_channels"] == 6
    assert description["params"]["pyg_version"] == __import__("torch_geometric").__version__
    assert record.protocol.to_dict()["ranks"] == "exact"


@pytest.mark.parametrize("name, options", CLASSES, ids=lambda value: str(value))
def test_compat_mode_is_pygs_own_test(dataset, name, options):
    """PyG's test(): tail side, unfiltered, argsort's tie order, 0-based mean rank, to 1e-6."""
    model = _planted(name, options, dataset, seed=3)
    record = openbench.evaluate(dataset, openbench.from_pyg(model, dataset, compat=True), hits_at=[1, 10])
    test = dataset.triples["test"]
    mean_rank, mrr, hits = model.test(test[:, 0], test[:, 1], test[:, 2], batch_size=20000, k=10, log=False)
    pyg = record.to_dict()["compat"]["pyg"]
    assert pyg["mean_rank"] == pytest.approx(mean_rank, abs=1e-6)
    assert pyg["mrr"] == pytest.approx(mrr, abs=1e-6) and pyg["hits@10"] == pytest.approx(hits, abs=1e-6)
    assert pyg["queries"] == test.shape[0] and "unfiltered" in pyg["protocol"]
    openbench.record.validate_record(record.to_dict())


def test_a_custom_subclass_is_scored_through_its_forward(dataset):
    class BiasedDistMult(kge.DistMult):
        """DistMult plus a per-entity bias on the tail: a formula the engine does not have."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.bias = torch.nn.Parameter(torch.zeros(self.num_nodes))

        def forward(self, head_index, rel_type, tail_index):
            return super().forward(head_index, rel_type, tail_index) + self.bias[tail_index]

    model = BiasedDistMult(dataset.num_entities, dataset.num_relations, 5)
    with torch.no_grad():
        model.bias.copy_(torch.arange(dataset.num_entities, dtype=torch.float) % 3)
    record = openbench.evaluate(dataset, openbench.from_pyg(model, dataset), ranks="fast")
    assert record.model["kind"] == "pyg-forward" and "forward" in record.model["params"]["scored"]
    reference = _reference_counts(model, dataset, "tail", exact=False)
    part = record.ranks.filter(record.ranks["side"] == "tail")
    labels, relations = dataset.entity_labels, dataset.relation_labels
    for row in part.iter_rows(named=True):
        key = (labels.index(row["head"]), relations.index(row["relation"]), labels.index(row["tail"]))
        assert (row["n_greater"], row["n_equal"] - 1) == reference[key]


def test_a_saved_model_evaluates_from_the_command_line_without_a_pickle(dataset, tmp_path):
    model = _planted("TransE", {"p_norm": 2.0}, dataset, seed=5)
    openbench.save_pyg(model, tmp_path / "model")
    description = json.loads((tmp_path / "model" / "openbench-pyg.json").read_text())
    assert description["class"] == "TransE" and description["p_norm"] == 2.0
    done = CliRunner().invoke(main, ["evaluate", "--dataset", dataset.path, "--model-dir", str(tmp_path / "model"),
                                     "--pyg-compat", "--format", "json", "--no-progress"])
    assert done.exit_code == 0, done.output
    from_folder = json.loads(done.stdout)
    in_memory = openbench.evaluate(dataset, openbench.from_pyg(model, dataset, compat=True)).to_dict()
    assert from_folder["metrics"] == in_memory["metrics"]
    assert from_folder["model"]["source_sha256"] == in_memory["model"]["source_sha256"]
    assert from_folder["compat"] == in_memory["compat"]
    assert "PyG's own test()" in done.stderr or "PyG's own test()" in done.output


def test_a_folder_written_without_openbench_reads_the_same(dataset, tmp_path):
    model = _planted("ComplEx", {}, dataset, seed=7)
    folder = tmp_path / "mine"
    folder.mkdir()
    torch.save(model.state_dict(), folder / "model.pt")
    (folder / "openbench-pyg.json").write_text(json.dumps({"class": "ComplEx", "num_nodes": dataset.num_entities,
                                                          "num_relations": dataset.num_relations,
                                                          "hidden_channels": 6}))
    record = openbench.evaluate(dataset, openbench.load_model(dataset, str(folder)))
    assert record.metrics == openbench.evaluate(dataset, openbench.from_pyg(model, dataset)).metrics


def test_mismatched_counts_are_one_error_naming_both(dataset, tmp_path):
    model = kge.DistMult(dataset.num_entities + 1, dataset.num_relations, 4)
    with pytest.raises(InputError, match=rf"num_nodes {dataset.num_entities + 1} and num_relations "
                                         rf"{dataset.num_relations}; the dataset {dataset.num_entities} entities"):
        openbench.from_pyg(model, dataset)
    openbench.save_pyg(model, tmp_path / "wrong")
    done = CliRunner().invoke(main, ["evaluate", "--dataset", dataset.path, "--model-dir", str(tmp_path / "wrong")])
    assert done.exit_code == 1 and f"num_nodes {dataset.num_entities + 1}" in done.output
    assert len(done.output.strip().splitlines()) == 1


class _Payload:
    def __reduce__(self):
        return (print, ("pickle code ran",))


@pytest.mark.parametrize("content, message", [
    ("pickle", "weights-only loader"),
    ("shape", "expected a float table of shape"),
    ("nan", "NaN or infinite"),
    ("class", "expected an object whose class"),
])
def test_a_hostile_or_broken_folder_is_refused(dataset, tmp_path, content, message, capfd):
    model = kge.DistMult(dataset.num_entities, dataset.num_relations, 4)
    openbench.save_pyg(model, tmp_path / "m")
    state = model.state_dict()
    if content == "pickle":
        torch.save({"node_emb.weight": _Payload()}, tmp_path / "m" / "model.pt")
    elif content == "shape":
        torch.save({**state, "rel_emb.weight": torch.zeros(2, 4)}, tmp_path / "m" / "model.pt")
    elif content == "nan":
        torch.save({**state, "rel_emb.weight": torch.full_like(state["rel_emb.weight"], float("nan"))},
                   tmp_path / "m" / "model.pt")
    else:
        description = json.loads((tmp_path / "m" / "openbench-pyg.json").read_text())
        (tmp_path / "m" / "openbench-pyg.json").write_text(json.dumps({**description, "class": "os.system"}))
    done = CliRunner().invoke(main, ["evaluate", "--dataset", dataset.path, "--model-dir", str(tmp_path / "m")])
    assert done.exit_code == 1 and message in done.output, done.output
    assert "pickle code ran" not in capfd.readouterr().out


def test_pyg_compat_is_refused_where_it_means_nothing(dataset):
    done = CliRunner().invoke(main, ["evaluate", "--dataset", dataset.path, "--model", "popularity", "--pyg-compat"])
    assert done.exit_code == 2 and "--pyg-compat" in done.output
