"""Paired comparisons (issue 39, 4): the sign-flip p-value against an exact enumeration, the
paired bootstrap against a plain loop, Wilcoxon against scipy, and the refusals of ranks that do
not hold the same queries."""
import itertools
import json

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from scipy.stats import wilcoxon

import openbench
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import InputError, UsageError
from openbench.evaluation.statistics.compare import EXACT_SIGN_FLIPS, compare_ranks, sign_flip_p_value
from openbench.evaluation.statistics.ranks_table import RANKS_SCHEMA
from tests.helpers import integer_embeddings, random_labelled_graph, write_samples

KEYS = ["metric", "side", "queries", "a", "b", "difference", "ci", "p_value", "wilcoxon_p", "seed"]


def _table(rows):
    """A ranks table of (side, relation, head, tail, n_greater, n_equal) rows, 50 candidates each."""
    return pl.DataFrame([{"split": "test", "side": s, "relation": r, "head": h, "tail": t, "n_greater": g,
                          "n_equal": k, "n_candidates": 50, "rank": None if g is None else g + (k + 1) / 2}
                         for s, r, h, t, g, k in rows], schema=RANKS_SCHEMA)


def _pair(seed, triples=30):
    rng = np.random.default_rng(seed)
    rows_a, rows_b = [], []
    for i in range(triples):
        for side in ("head", "tail"):
            key = (side, f"R{i % 3}", f"E{i}", f"E{i + 100}")
            rows_a.append(key + (int(rng.integers(0, 12)), int(rng.integers(1, 3))))
            rows_b.append(key + (int(rng.integers(0, 12)), int(rng.integers(1, 3))))
    return _table(rows_a), _table(rows_b)


def _reciprocal(frame):
    return np.array([0.0 if rank is None else 1 / rank for rank in frame["rank"].to_list()])


def test_the_sign_flip_p_value_is_the_exact_enumeration_for_small_cases():
    rng = np.random.default_rng(0)
    for n in (1, 3, 7, EXACT_SIGN_FLIPS):
        differences = np.round(rng.normal(size=n), 2)
        differences[::3] = 0.0  # zero differences count in the reference's enumeration, not in the statistic
        observed = abs(differences.sum())
        sums = [abs(sum(s * d for s, d in zip(signs, differences))) for signs in itertools.product((1, -1), repeat=n)]
        reference = sum(value >= observed - 1e-9 for value in sums) / len(sums)
        assert sign_flip_p_value(differences, 100, np.random.default_rng(1)) == pytest.approx(reference, abs=1e-12)


def test_the_monte_carlo_p_value_approaches_the_exact_one():
    differences = np.random.default_rng(2).normal(0.05, 1.0, size=EXACT_SIGN_FLIPS + 2)
    observed = abs(differences.sum())
    signs = 1 - 2 * (np.arange(1 << differences.size)[:, None] >> np.arange(differences.size) & 1)
    exact = float((np.abs(signs @ differences) >= observed - 1e-9).mean())
    estimate = sign_flip_p_value(differences, 40000, np.random.default_rng(3))
    assert estimate == pytest.approx(exact, abs=0.01) and estimate > 0


@pytest.mark.parametrize("side", ["both", "head", "tail"])
@pytest.mark.parametrize("metric", ["mrr", "hits@3"])
def test_the_comparison_equals_plain_loops_and_scipy(side, metric):
    a, b = _pair(4)
    result = compare_ranks(a, b, metric=metric, side=side, seed=9, resamples=300, permutations=2000)
    assert list(result) == KEYS
    rows = list(zip(a.to_dicts(), b.to_dicts()))  # the same queries in the same order here
    if side != "both":
        rows = [(x, y) for x, y in rows if x["side"] == side]

    def value(row):
        return 1 / row["rank"] if metric == "mrr" else float(row["rank"] <= 3)

    # sorted as compare sorts them (by query), so that the per-query differences line up
    rows.sort(key=lambda pair: tuple(pair[0][key] for key in ("split", "side", "relation", "head", "tail")))
    differences = np.array([value(x) - value(y) for x, y in rows])
    assert result["queries"] == len(rows)
    assert result["a"] == pytest.approx(np.mean([value(x) for x, _ in rows]), abs=1e-12)
    assert result["difference"] == pytest.approx(differences.mean(), abs=1e-12)
    assert result["wilcoxon_p"] == pytest.approx(wilcoxon(differences, zero_method="wilcox").pvalue, abs=1e-12)
    # the paired bootstrap, by a loop: units are triples (both) or queries, drawn in sorted order
    unit_of = [(x["split"], x["relation"], x["head"], x["tail"]) if side == "both" else
               (x["split"], x["side"], x["relation"], x["head"], x["tail"]) for x, _ in rows]
    units = sorted(set(unit_of))
    members = {unit: [i for i, u in enumerate(unit_of) if u == unit] for unit in units}
    rng = np.random.default_rng(9)
    means = []
    for _ in range(300):
        drawn = [units[i] for i in rng.integers(0, len(units), size=len(units), dtype=np.int32)]
        picked = [i for unit in drawn for i in members[unit]]
        means.append(differences[picked].mean())
    assert result["ci"] == pytest.approx(list(np.quantile(means, [0.025, 0.975])), abs=1e-12)
    # and the permutation test continues with the same generator
    assert result["p_value"] == pytest.approx(sign_flip_p_value(differences, 2000, rng), abs=1e-12)


def test_identical_ranks_differ_by_nothing():
    a, _ = _pair(5)
    result = compare_ranks(a, a.clone())
    assert result["difference"] == 0.0 and result["ci"] == [0.0, 0.0] and result["p_value"] == 1.0
    assert result["wilcoxon_p"] is None


def test_unlisted_answers_count_zero():
    a = _table([("tail", "R", "A", "B", None, None), ("tail", "R", "C", "D", 0, 1)])
    b = _table([("tail", "R", "A", "B", 0, 1), ("tail", "R", "C", "D", 1, 1)])
    result = compare_ranks(a, b, metric="hits@1")
    assert result["a"] == 0.5 and result["b"] == 0.5 and result["difference"] == 0.0


def test_ranks_of_other_queries_are_refused_naming_the_query():
    a, b = _pair(6)
    with pytest.raises(InputError, match=r"B has a tail query of \(E0, R0, E100\) in test that A does not"):
        compare_ranks(a.filter(~((pl.col("head") == "E0") & (pl.col("side") == "tail"))), b)
    with pytest.raises(InputError, match="A ranks the valid split, B the test split"):
        compare_ranks(a.with_columns(pl.lit("valid").alias("split")), b)
    with pytest.raises(InputError, match="A holds tail queries, B head/tail: give --side"):
        compare_ranks(a.filter(pl.col("side") == "tail"), b)
    assert compare_ranks(a.filter(pl.col("side") == "tail"), b, side="tail")["queries"] == 30
    with pytest.raises(UsageError, match="--metric 'precision'|metric='precision'"):
        compare_ranks(a, b, metric="precision")
    with pytest.raises(UsageError, match="a record read back from JSON has no ranks"):
        compare_ranks(openbench.ResultRecord.from_dict(_record_of_nothing()), b)


def _record_of_nothing():
    return {"written_by": "openbench", "schema_version": 1, "task": "ranking", "metrics": {}, "per_relation": {},
            "macro_relation": {}, "protocol": {"filter_sets": [], "hits_at": [1]}, "dataset": {}, "model": {"name": "x"},
            "diagnostics": {}, "seed": 0, "device": "cpu", "version": "0", "timing": {"seconds": 0}, "warnings": []}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    splits = random_labelled_graph(41, 60, 3, {"train": 300, "valid": 12, "test": 40})
    other = random_labelled_graph(42, 60, 3, {"train": 300, "valid": 12, "test": 40})
    return write_samples(root / "one", splits), write_samples(root / "two", other)


def _ranks_file(folder, tmp_path, name, seed, *extra):
    dataset = load_dataset(folder)
    np.save(tmp_path / f"{name}_e.npy", integer_embeddings(seed, dataset.num_entities, 4, -2, 3))
    np.save(tmp_path / f"{name}_r.npy", integer_embeddings(seed + 1, dataset.num_relations, 4, -2, 3))
    path = tmp_path / f"{name}.parquet"
    done = CliRunner().invoke(main, ["evaluate", "--dataset", str(folder), "--entity-embeddings",
                                     str(tmp_path / f"{name}_e.npy"), "--relation-embeddings",
                                     str(tmp_path / f"{name}_r.npy"), "--model", "DistMult", "--ranks-output",
                                     str(path), "--output", str(tmp_path / f"{name}.json"), "--no-progress", *extra])
    assert done.exit_code == 0, done.output
    return path


def test_the_command_and_the_python_api_agree_on_two_evaluations(folders, tmp_path):
    a, b = _ranks_file(folders[0], tmp_path, "a", 1), _ranks_file(folders[0], tmp_path, "b", 7)
    done = CliRunner().invoke(main, ["compare", str(a), str(b), "--format", "json", "--seed", "3"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    assert list(result) == KEYS and result["queries"] == 80 and result["seed"] == 3
    records = [json.loads((tmp_path / f"{name}.json").read_text()) for name in ("a", "b")]
    assert result["a"] == pytest.approx(records[0]["metrics"]["both"]["realistic"]["mrr"], abs=1e-12)
    assert result["b"] == pytest.approx(records[1]["metrics"]["both"]["realistic"]["mrr"], abs=1e-12)
    dataset = load_dataset(folders[0])
    in_memory = [openbench.evaluate(dataset, openbench.embedding_model(
        "DistMult", np.load(tmp_path / f"{name}_e.npy"), np.load(tmp_path / f"{name}_r.npy"))) for name in ("a", "b")]
    assert openbench.compare(*in_memory, seed=3) == result
    table = CliRunner().invoke(main, ["compare", str(a), str(b)])
    assert table.exit_code == 0 and "95 % CI" in table.output and "Wilcoxon p" in table.output


def test_the_command_refuses_ranks_of_another_dataset_protocol_or_a_broken_file(folders, tmp_path):
    a = _ranks_file(folders[0], tmp_path, "a", 1)
    other = _ranks_file(folders[1], tmp_path, "other", 1)
    done = CliRunner().invoke(main, ["compare", str(a), str(other)])
    assert done.exit_code == 1 and "rank different datasets" in done.output
    unfiltered = _ranks_file(folders[0], tmp_path, "raw", 1, "--no-filter")
    done = CliRunner().invoke(main, ["compare", str(a), str(unfiltered)])
    assert done.exit_code == 1 and "filter_sets" in done.output
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(a.read_bytes()[: len(a.read_bytes()) // 2])
    done = CliRunner().invoke(main, ["compare", str(a), str(broken)])
    assert done.exit_code == 1 and f"{broken}: not a ranks file" in done.output


def test_the_library_refuses_what_the_command_line_cannot_pass():
    """Error paths the command's own option types stop first: a side, resample and permutation
    counts below 1, and a query held a different number of times."""
    from openbench.evaluation.statistics.intervals import confidence_block

    a, b = _pair(7)
    with pytest.raises(UsageError, match="side='left'.*expected both, head or tail"):
        compare_ranks(a, b, side="left")
    with pytest.raises(UsageError, match="resamples=0.*at least 1"):
        compare_ranks(a, b, resamples=0)
    with pytest.raises(UsageError, match="bootstrap=0.*at least 1 resample"):
        confidence_block(a, [1, 3], 0, 0)
    assert sign_flip_p_value(np.zeros(5), 10, np.random.default_rng(0)) == 1.0  # nothing differs
    with pytest.raises(UsageError, match="permutations=0.*at least 1"):
        sign_flip_p_value(np.arange(1.0, EXACT_SIGN_FLIPS + 2), 0, np.random.default_rng(0))
    twice = pl.concat([a, a.head(1)])
    with pytest.raises(InputError, match="the same queries a different number of times"):
        compare_ranks(twice, pl.concat([b, b.head(1), b.head(1)]))


@pytest.mark.parametrize("permutations", [1, 9, 999])
def test_the_monte_carlo_p_value_is_never_below_one_over_permutations_plus_one(permutations):
    """Issue 56: without the +1 correction p = 0 was printed for 40 queries each better by 0.2."""
    differences = np.full(40, 0.2)  # only the all-plus and all-minus sign vectors reach the observed sum
    p = sign_flip_p_value(differences, permutations, np.random.default_rng(0))
    assert p == pytest.approx(1 / (1 + permutations), abs=1e-15)
    rng, hits = np.random.default_rng(5), 0  # and in general (1 + hits) / (1 + permutations), hits by a loop
    mixed = np.random.default_rng(2).normal(0.05, 1, size=EXACT_SIGN_FLIPS + 5)
    p = sign_flip_p_value(mixed, permutations, rng)
    replay = np.random.default_rng(5)
    signs = 1.0 - 2.0 * replay.integers(0, 2, size=(permutations, mixed.size), dtype=np.int8)
    for row in signs:
        hits += abs(float(row @ mixed)) >= abs(float(mixed.sum())) - 1e-9 * float(np.abs(mixed).sum())
    assert p == pytest.approx((1 + hits) / (1 + permutations), abs=1e-15) and p >= 1 / (1 + permutations)
