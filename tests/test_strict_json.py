"""Nothing non-finite leaves openbench (issue 49): every JSON text it prints, writes or serves is
strict, parsed here by a parser that refuses NaN and Infinity; a stored row holding non-finite
values (a store written before the checks, or edited by hand) cannot make a route answer 500."""
import asyncio
import json
import sqlite3

import pytest
from click.testing import CliRunner

import openbench
from openbench._io.outputs import finite, strict_json
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.evaluation.statistics.ranks_table import write_ranks
from tests.bases import lifted_scorer
from tests.helpers import random_labelled_graph, write_samples


def strict_loads(text):
    """json.loads that refuses NaN, Infinity and -Infinity (RFC 8259 has none of them)."""
    def refuse(name):
        raise ValueError(f"non-finite JSON number {name}")

    return json.loads(text, parse_constant=refuse)


def test_strict_json_turns_undefined_numbers_into_null():
    value = {"a": float("nan"), "b": [1.0, float("inf"), {"c": -float("inf")}], "d": 0.5, "e": "NaN", "f": (2,)}
    assert strict_loads(strict_json(value)) == {"a": None, "b": [1.0, None, {"c": None}], "d": 0.5, "e": "NaN",
                                                "f": [2]}
    assert finite(float("nan")) is None and finite(3) == 3
    with pytest.raises(ValueError):
        strict_loads(json.dumps(float("nan")))


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory):
    """A board holding one honest row with ranks, then edited in SQLite as an old store might be:
    a metric and an interval bound of 1e308 * 10 (Infinity) and NaN."""
    root = tmp_path_factory.mktemp("strict")
    dataset = load_dataset(write_samples(root / "split", random_labelled_graph(4, 40, 2, {"train": 200, "valid": 8,
                                                                                         "test": 30})))
    record = openbench.evaluate(dataset, lifted_scorer(dataset, 0.5, 1))
    (root / "r.json").write_text(json.dumps(record.to_dict()))
    write_ranks(root / "r.parquet", record.ranks, record.to_dict())
    db = root / "board.sqlite"
    done = CliRunner().invoke(main, ["leaderboard", "submit", str(root / "r.json"), "--name", "m", "--ranks",
                                     str(root / "r.parquet"), "--db", str(db)])
    assert done.exit_code == 0, done.output
    with sqlite3.connect(db) as connection:
        metrics = json.loads(connection.execute("SELECT metrics_json FROM submissions").fetchone()[0])
        metrics["both"]["realistic"]["mrr"] = float("nan")
        metrics["both"]["realistic"]["hits@10"] = float("inf")
        connection.execute("UPDATE submissions SET metrics_json = ?", (json.dumps(metrics),))
        confidence = json.loads(connection.execute("SELECT confidence_json FROM ranks").fetchone()[0])
        confidence["both"] = {"mrr": [float("-inf"), float("nan")]}
        connection.execute("UPDATE ranks SET confidence_json = ?", (json.dumps(confidence),))
    return {"db": db, "root": root}


@pytest.mark.parametrize("arguments", [["--format", "json"], ["--format", "json", "--sort", "hits@10"],
                                       ["--format", "html"], ["--format", "csv"], []])
def test_every_listing_of_a_poisoned_row_is_strict(poisoned, arguments):
    done = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(poisoned["db"]), *arguments])
    assert done.exit_code == 0, done.output
    assert "NaN" not in done.output and "Infinity" not in done.output
    if arguments[:2] == ["--format", "json"]:
        assert strict_loads(done.output)


def _get(app, path, query=b""):
    """(status, body) of a GET through the ASGI app, without a server."""
    messages = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        messages.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query,
             "headers": [], "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
             "asgi": {"version": "3.0"}, "http_version": "1.1", "root_path": ""}
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return status, body.decode("utf-8")


@pytest.mark.parametrize("path, query", [("/api/leaderboard", b""), ("/api/leaderboard", b"sort=hits@10"), ("/", b"")])
def test_no_route_answers_500_for_a_poisoned_row(poisoned, path, query):
    from openbench.leaderboard.server import create_app

    status, body = _get(create_app(poisoned["db"]), path, query)
    assert status == 200, body
    assert "NaN" not in body and "Infinity" not in body
    if path.startswith("/api"):
        rows = strict_loads(body)
        assert any(row["name"] == "m" and row["metrics"]["mrr"]["mean"] is None for row in rows)


def test_the_record_and_the_cli_outputs_parse_strictly(poisoned, tmp_path):
    record = (poisoned["root"] / "r.json").read_text()
    strict_loads(record)
    compared = CliRunner().invoke(main, ["compare", str(poisoned["root"] / "r.parquet"),
                                         str(poisoned["root"] / "r.parquet"), "--format", "json"])
    assert compared.exit_code == 0, compared.output
    assert strict_loads(compared.output)["wilcoxon_p"] is None
    listed = CliRunner().invoke(main, ["datasets", "list", "--format", "json"])
    assert listed.exit_code == 0 and strict_loads(listed.output)
