"""The rules baseline (what leakage alone scores) on a graph with a planted inverse relation."""
import random

import pytest
from click.testing import CliRunner

import openbench
from openbench.cli import main
from tests.helpers import write_samples


def _planted_inverse_split(seed: int = 0):
    """"has" and "of" are each other's inverse (every pair stored both ways); "noise" is random.
    The test triples are drawn from all three with no leakage removal (as a naive split would)."""
    rng = random.Random(seed)
    entities = [f"E:{i}" for i in range(60)]
    pairs = {(rng.choice(entities), rng.choice(entities)) for _ in range(300)}
    triples = [(a, "has", b) for a, b in pairs if a != b] + [(b, "of", a) for a, b in pairs if a != b]
    triples += [(rng.choice(entities), "noise", rng.choice(entities)) for _ in range(300)]
    triples = sorted(set(triples))
    rng.shuffle(triples)
    test, train = triples[:80], triples[80:]
    seen = {e for h, _, t in train for e in (h, t)}
    test = [row for row in test if row[0] in seen and row[2] in seen]
    return {"train": train, "valid": [], "test": test}


def test_the_rules_baseline_finds_the_planted_inverse_and_beats_popularity_and_chance(tmp_path):
    folder = write_samples(tmp_path / "split", _planted_inverse_split())
    dataset = openbench.load_dataset(str(folder))
    rules = openbench.evaluate(dataset, openbench.rules_model(dataset))
    popularity = openbench.evaluate(dataset, openbench.popularity_model(dataset))
    assert rules.model["kind"] == "rules" and rules.model["params"]["implied_triples"] > 0
    inverse = {relation: rules.per_relation[relation]["both"]["realistic"]["mrr"] for relation in ("has", "of")}
    assert min(inverse.values()) > 0.8  # first wherever the inverse is in training (not where both are in test)
    assert rules.metrics["both"]["realistic"]["amrr"] > 0.5  # far above chance (0)
    assert rules.metrics["both"]["realistic"]["mrr"] > popularity.metrics["both"]["realistic"]["mrr"] + 0.3
    noise = rules.per_relation["noise"]["both"]["realistic"]["mrr"]
    assert noise == pytest.approx(popularity.per_relation["noise"]["both"]["realistic"]["mrr"])  # nothing implied


def test_evaluate_model_rules_on_the_command_line(tmp_path):
    folder = write_samples(tmp_path / "split", _planted_inverse_split())
    output = tmp_path / "rules.json"
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--model", "rules", "--no-progress",
                                     "--output", str(output)])
    assert done.exit_code == 0, done.output
    import json

    record = json.loads(output.read_text())
    assert record["model"]["kind"] == "rules" and record["model"]["params"]["threshold"] == 0.8
