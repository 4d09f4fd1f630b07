"""``openbench report`` (issue 54): the plotted numbers equal a plain computation, the same records
and seed give the same bytes, the page says what its numbers are and renders without a console
error, and bad input is refused without writing anything."""
import json

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import InputError
from openbench.evaluation.evaluate import evaluate
from openbench.evaluation.statistics.figures import paired_relation_intervals, rank_ecdf, relation_intervals
from openbench.evaluation.statistics.ranks_table import write_ranks
from openbench.models.scorers import build_scorer
from tests.bases import chromium, render_in_chromium
from tests.helpers import integer_embeddings, needs_chromium, random_labelled_graph, write_samples


@pytest.fixture(scope="module")
def evaluated_pair(tmp_path_factory):
    """Two embedding models' records and ranks files (NAME.json beside NAME.ranks.parquet)."""
    folder = tmp_path_factory.mktemp("report")
    splits = random_labelled_graph(3, 40, 4, {"train": 300, "valid": 20, "test": 60})
    dataset = load_dataset(write_samples(folder / "data", splits, negatives=False))
    paths = []
    for seed, model in ((0, "DistMult"), (5, "TransE-L2")):
        scorer = build_scorer(model, integer_embeddings(seed, dataset.num_entities, 4),
                              integer_embeddings(seed + 1, dataset.num_relations, 4), dataset.num_entities,
                              dataset.num_relations)
        record = evaluate(dataset, scorer, device="cpu")
        path = folder / f"{model}.json"
        values = record.to_dict()
        path.write_text(json.dumps(values))
        write_ranks(folder / f"{model}.ranks.parquet", record.ranks, values)
        paths.append(path)
    return folder, paths


def _triple_totals(ranks, value):
    """{relation: [(sum of value over the triple's queries, query count)] in sorted triple order}."""
    per = {}
    for row in sorted(ranks.iter_rows(named=True), key=lambda r: (r["relation"], r["head"], r["tail"])):
        per.setdefault(row["relation"], {}).setdefault((row["head"], row["tail"]), []).append(value(row))
    return {relation: [(sum(v), len(v)) for _, v in sorted(triples.items())] for relation, triples in per.items()}


def test_relation_intervals_equal_a_plain_resampling_loop(evaluated_pair):
    folder, _ = evaluated_pair
    ranks = pl.read_parquet(folder / "DistMult.ranks.parquet")
    found = relation_intervals(ranks, seed=3, resamples=200)
    rng = np.random.default_rng(3)
    for relation, triples in sorted(_triple_totals(ranks, lambda r: 1.0 / r["rank"]).items()):
        values = []
        draws = rng.integers(0, len(triples), size=(200, len(triples)))
        for draw in draws:  # one resample at a time, a triple with all its queries
            values.append(sum(triples[i][0] for i in draw) / sum(triples[i][1] for i in draw))
        low, high = np.percentile(values, [2.5, 97.5])
        queries = [1.0 / r["rank"] for r in ranks.iter_rows(named=True) if r["relation"] == relation]
        assert found[relation]["mrr"] == pytest.approx(sum(queries) / len(queries), abs=1e-12)
        assert (found[relation]["low"], found[relation]["high"]) == pytest.approx((low, high), abs=1e-12)
        assert found[relation]["low"] <= found[relation]["mrr"] <= found[relation]["high"]


def test_paired_intervals_and_the_ecdf_equal_their_definitions(evaluated_pair):
    folder, _ = evaluated_pair
    a, b = (pl.read_parquet(folder / f"{m}.ranks.parquet") for m in ("DistMult", "TransE-L2"))
    paired = paired_relation_intervals(a, b, seed=1, resamples=200)
    by_key = {(r["side"], r["relation"], r["head"], r["tail"]): 1.0 / r["rank"] for r in b.iter_rows(named=True)}
    for relation, block in paired.items():
        differences = [1.0 / r["rank"] - by_key[(r["side"], r["relation"], r["head"], r["tail"])]
                       for r in a.iter_rows(named=True) if r["relation"] == relation]
        assert block["difference"] == pytest.approx(np.mean(differences), abs=1e-12)
        assert block["queries"] == len(differences) and block["low"] <= block["high"]
    curve = rank_ecdf(a)
    ranks = a["rank"].to_list()
    for k, share in zip(curve["rank"], curve["fraction"]):
        assert share == pytest.approx(sum(r <= k for r in ranks) / len(ranks))
    with pytest.raises(InputError, match="different queries"):
        paired_relation_intervals(a, b.head(b.height - 1))


def test_the_same_records_and_seed_give_the_same_report(evaluated_pair, tmp_path):
    _, paths = evaluated_pair
    outputs = []
    for name in ("one", "two"):
        done = CliRunner().invoke(main, ["report", *map(str, paths), "--output", str(tmp_path / name),
                                         "--resamples", "200"])
        assert done.exit_code == 0, done.output
        outputs.append(tmp_path / name)
    for file in ("index.html", "figures.json", "per_relation.png", "rank_ecdf.png", "degree_strata.png",
                 "paired_relations.png"):
        assert (outputs[0] / file).read_bytes() == (outputs[1] / file).read_bytes(), file
    other = CliRunner().invoke(main, ["report", *map(str, paths), "--output", str(tmp_path / "three"), "--seed", "9",
                                      "--resamples", "200"])
    assert other.exit_code == 0
    assert (tmp_path / "three" / "figures.json").read_bytes() != (outputs[0] / "figures.json").read_bytes()


def test_the_page_says_what_its_numbers_are(evaluated_pair, tmp_path):
    _, paths = evaluated_pair
    CliRunner().invoke(main, ["report", *map(str, paths), "--output", str(tmp_path / "r"), "--resamples", "200"])
    page = (tmp_path / "r" / "index.html").read_text()
    assert "What these numbers are: test set; 120 queries (head and tail); realistic rank" in page
    assert "full ranking against all 40 entities, filtered" in page
    assert "95 % interval [" in page and "paired sign-flip permutation test" in page
    assert ("is better than" in page) or ("no clear difference" in page)
    assert page.count("<img src=\"data:image/png;base64,") == 4 and "<script" not in page
    figures = json.loads((tmp_path / "r" / "figures.json").read_text())
    assert set(figures["figures"]) == {"per_relation", "rank_ecdf", "degree_strata", "paired_relations"}


@pytest.mark.slow
def test_the_report_renders_in_a_browser_without_console_errors(evaluated_pair, tmp_path):
    needs_chromium()
    _, paths = evaluated_pair
    CliRunner().invoke(main, ["report", *map(str, paths), "--output", str(tmp_path / "r"), "--resamples", "200"])
    dom, console = render_in_chromium(tmp_path / "r" / "index.html")
    assert console == [] and dom.count("<figure>") == 4 and "What these numbers are" in dom


def test_bad_input_is_refused_and_nothing_is_written(evaluated_pair, tmp_path):
    folder, paths = evaluated_pair
    not_a_record = tmp_path / "x.json"
    not_a_record.write_text('{"a": 1}')
    done = CliRunner().invoke(main, ["report", str(not_a_record), "--output", str(tmp_path / "out")])
    assert done.exit_code == 1 and "x.json" in done.output and "not an openbench result record" in done.output
    assert not (tmp_path / "out").exists()
    truncated = tmp_path / "DistMult.json"
    truncated.write_bytes(paths[0].read_bytes()[:100])
    done = CliRunner().invoke(main, ["report", str(truncated), "--output", str(tmp_path / "out")])
    assert done.exit_code == 1 and "DistMult.json" in done.output and not (tmp_path / "out").exists()
    # a ranks file that is not the record's (another model's) is named and refused
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "DistMult.json").write_bytes(paths[0].read_bytes())
    (tmp_path / "m" / "DistMult.ranks.parquet").write_bytes((folder / "TransE-L2.ranks.parquet").read_bytes())
    done = CliRunner().invoke(main, ["report", str(tmp_path / "m" / "DistMult.json"), "--output", str(tmp_path / "out")])
    assert done.exit_code == 1 and "DistMult.ranks.parquet" in done.output and not (tmp_path / "out").exists()
    # records of two datasets, and a classification record: each named and refused
    other = json.loads(paths[1].read_text())
    other["dataset"]["fingerprint"] = "f" * 64
    (tmp_path / "other.json").write_text(json.dumps(other))
    done = CliRunner().invoke(main, ["report", str(paths[0]), str(tmp_path / "other.json"), "--output",
                                     str(tmp_path / "out")])
    assert done.exit_code == 1 and "different datasets" in done.output and not (tmp_path / "out").exists()
    classified = dict(json.loads(paths[0].read_text()), task="classification")
    (tmp_path / "classified.json").write_text(json.dumps(classified))
    done = CliRunner().invoke(main, ["report", str(tmp_path / "classified.json"), "--output", str(tmp_path / "out")])
    assert done.exit_code == 1 and "classified.json" in done.output and "a classification record" in done.output
    assert not (tmp_path / "out").exists()
    # --output pointed at an input
    before = sorted(p.name for p in folder.iterdir())
    done = CliRunner().invoke(main, ["report", str(paths[0]), "--output", str(folder)])
    assert done.exit_code == 2 and "holds an input of this command" in done.output
    assert sorted(p.name for p in folder.iterdir()) == before


def test_ranks_given_with_dash_dash_ranks_find_their_records_in_any_order(evaluated_pair, tmp_path):
    """Issue 66: the tutorial's `--ranks-output distmult.parquet` was never found (only
    NAME.ranks.parquet beside NAME.json was) and the report silently lost its intervals."""
    import shutil

    folder, paths = evaluated_pair
    records, ranks = [], []
    for model in ("DistMult", "TransE-L2"):
        shutil.copy(folder / f"{model}.json", tmp_path / f"{model.lower()}.json")
        shutil.copy(folder / f"{model}.ranks.parquet", tmp_path / f"{model.lower()}-ranks.parquet")
        records.append(str(tmp_path / f"{model.lower()}.json"))
        ranks.append(str(tmp_path / f"{model.lower()}-ranks.parquet"))
    alone = CliRunner().invoke(main, ["report", *records, "--output", str(tmp_path / "without")])
    assert alone.exit_code == 0, alone.output
    summary = json.loads((tmp_path / "without" / "figures.json").read_text())
    assert not summary["figures"]["rank_ecdf"] and any("No ranks for" in line for line in summary["not_drawn"])
    assert any(line.startswith("Not drawn: the rank distribution") for line in summary["not_drawn"])
    done = CliRunner().invoke(main, ["report", *records, "--ranks", ranks[1], "--ranks", ranks[0], "--output",
                                     str(tmp_path / "with")])
    assert done.exit_code == 0, done.output
    given = json.loads((tmp_path / "with" / "figures.json").read_text())
    beside = CliRunner().invoke(main, ["report", *map(str, paths), "--output", str(tmp_path / "beside")])
    assert beside.exit_code == 0
    reference = json.loads((tmp_path / "beside" / "figures.json").read_text())
    assert given["figures"]["rank_ecdf"] == reference["figures"]["rank_ecdf"] and given["not_drawn"] == []
    assert given["comparison"]["difference"] == reference["comparison"]["difference"]


def test_a_ranks_file_where_a_record_belongs_is_named_as_a_ranks_file(evaluated_pair, tmp_path):
    folder, paths = evaluated_pair
    done = CliRunner().invoke(main, ["report", str(folder / "DistMult.ranks.parquet"), "--output", str(tmp_path / "r")])
    assert done.exit_code == 1 and "a ranks file (evaluate --ranks-output); expected a result record" in done.output
    stranger = CliRunner().invoke(main, ["report", str(paths[0]), "--ranks", str(folder / "TransE-L2.ranks.parquet"),
                                         "--output", str(tmp_path / "s")])
    assert stranger.exit_code == 1 and "belong to none of the records" in stranger.output
    record = CliRunner().invoke(main, ["report", str(paths[0]), "--ranks", str(paths[1]), "--output",
                                       str(tmp_path / "t")])
    assert record.exit_code == 1 and "not a ranks file" in record.output
    assert not any((tmp_path / name).exists() for name in ("r", "s", "t"))


def test_a_relation_of_one_test_triple_has_an_unknown_interval_not_a_certain_one():
    ranks = pl.DataFrame({"split": ["test"] * 6, "side": ["head", "tail"] * 3,
                          "relation": ["lonely", "lonely", "busy", "busy", "busy", "busy"],
                          "head": ["a", "a", "b", "b", "c", "c"], "tail": ["x", "x", "y", "y", "z", "z"],
                          "rank": [1.0, 1.0, 2.0, 4.0, 1.0, 3.0]})
    found = relation_intervals(ranks, seed=0, resamples=200)
    assert found["lonely"]["mrr"] == 1.0 and found["lonely"]["unknown"] is True
    assert (found["lonely"]["low"], found["lonely"]["high"]) == (0.0, 1.0) and found["lonely"]["triples"] == 1
    assert "unknown" not in found["busy"] and found["busy"]["low"] < found["busy"]["high"]
    paired = paired_relation_intervals(ranks, ranks.with_columns(pl.col("rank") + 1), seed=0, resamples=200)
    assert (paired["lonely"]["low"], paired["lonely"]["high"]) == (-1.0, 1.0)


def test_a_ranks_file_given_to_the_board_is_named_as_one(evaluated_pair, tmp_path):
    folder, _ = evaluated_pair
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(folder / "DistMult.ranks.parquet"), "--name", "x", "--db",
                                     str(tmp_path / "board.sqlite")])
    assert done.exit_code == 1 and "a Parquet file" in done.output and "expected a result record" in done.output
    assert "UTF-8" not in done.output
