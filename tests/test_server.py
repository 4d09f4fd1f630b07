"""The served leaderboard, tested against the real server on 127.0.0.1 (started per test module,
bounded in time): tokens, refusals that write nothing, server-side scoring against hidden answers,
no route returning an answer, concurrent clients, kill -9 mid-load, rate limits, the live page."""
import copy
import io
import json
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from click.testing import CliRunner

from openbench.cli import main
from openbench.evaluation.dataset import load_dataset
from openbench.evaluation.evaluator import EmbeddingEvaluator
from openbench.evaluation.scorers import build_scorer
from openbench.evaluation.topk import OBL2021Evaluator
from openbench.leaderboard.server import load_benchmark
from tests.bases import TableReader, chromium
from tests.helpers import integer_embeddings, random_labelled_graph, write_samples

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``openbench leaderboard serve`` in a child process."""

    def __init__(self, db, benchmark_dir, *extra):
        self.db, self.benchmark_dir, self.extra = db, benchmark_dir, extra
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None

    def start(self):
        command = [sys.executable, "-m", "openbench", "leaderboard", "serve", "--db", str(self.db), "--port",
                   str(self.port), "--benchmark", f"bench={self.benchmark_dir}", *self.extra]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/api/benchmarks", timeout=2).read()
                return self
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(self.process.stderr.read().decode()) from None
                time.sleep(0.2)
        raise RuntimeError("the server did not start within 60 s")

    def stop(self, sig=signal.SIGTERM):
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)


def request(url, body=None, token=None, content_type="application/json", method=None):
    """(status, parsed JSON or text) of one request."""
    headers = {"Content-Type": content_type} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, headers=headers, method=method or ("POST" if body is not None else "GET"))
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A dataset, a record of it, a board with two teams, and the running server."""
    folder = tmp_path_factory.mktemp("bench")
    splits = random_labelled_graph(11, 40, 3, {"train": 200, "valid": 10, "test": 30})
    dataset = load_dataset(write_samples(folder / "split", splits, negatives=False))
    scorer = build_scorer("DistMult", integer_embeddings(0, dataset.num_entities, 3),
                          integer_embeddings(1, dataset.num_relations, 3), dataset.num_entities, dataset.num_relations)
    record = EmbeddingEvaluator(dataset, scorer, device="cpu", progress=False).evaluate()
    db = folder / "board.sqlite"
    tokens = {}
    for team in ("red", "blue"):
        result = CliRunner().invoke(main, ["leaderboard", "token", "create", "--db", str(db), "--name", team])
        assert result.exit_code == 0, result.output
        tokens[team] = result.output.strip()
    server = Server(db, folder / "split").start()
    yield {"dataset": dataset, "record": record, "db": db, "tokens": tokens, "server": server, "folder": folder}
    server.stop()


def _rows(db):
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT id, name, team, verified FROM submissions ORDER BY id").fetchall()


def _variant(record, team, seed):
    changed = copy.deepcopy(record)
    changed["model"]["source_sha256"] = f"model of {team}"
    changed["seed"] = seed
    return json.dumps(changed).encode()


def test_tokens_refusals_and_a_self_reported_submission(world):
    url, tokens, db = world["server"].url, world["tokens"], world["db"]
    before = _rows(db)
    body = _variant(world["record"], "red", 0)
    cases = [
        (dict(token=None), 401), (dict(token="obt_1_wrong"), 401), (dict(token="garbage"), 401),
        (dict(token=tokens["red"], content_type="text/plain"), 415),
    ]
    for options, status in cases:
        assert request(url + "/api/submissions?name=red%20model", body, **options)[0] == status, options
    assert request(url + "/api/submissions?name=x", b"{not json", tokens["red"])[0] == 400
    impossible = json.loads(body)
    impossible["metrics"]["both"]["realistic"]["mrr"] = 0.99
    status, answer = request(url + "/api/submissions?name=x", json.dumps(impossible).encode(), tokens["red"])
    assert status == 400 and "MRR" in answer["error"]
    assert request(url + "/api/submissions", body, tokens["red"])[0] == 400  # no name
    assert _rows(db) == before  # nothing written by any refusal
    status, answer = request(url + "/api/submissions?name=red%20model&model_type=latent", body, tokens["red"])
    assert status == 201 and answer["team"] == "red" and answer["verified"] == "self"
    assert request(url + "/api/submissions?name=red%20model", body, tokens["red"])[0] == 409  # the same run again
    # another team can neither join red's group nor take its name
    status, answer = request(url + "/api/submissions?name=red%20model", _variant(world["record"], "red", 1),
                             tokens["blue"])
    assert status == 400 and "belongs to another team" in answer["error"]
    rows = [row for row in request(url + "/api/leaderboard")[1] if not row["published"]]
    assert [(row["name"], row["team"], row["verified"]) for row in rows] == [("red model", "red", "self")]


def test_hostile_names_never_break_the_page_or_the_server(world):
    url, token = world["server"].url, world["tokens"]["blue"]
    for seed, name in enumerate(["<!--<script>", "</script><b>x</b>", "'; DROP TABLE submissions; --",
                                 "=HYPERLINK(\"http://evil\")"]):
        quoted = urllib.request.quote(name)
        status, _ = request(url + f"/api/submissions?name={quoted}", _variant(world["record"], f"blue{seed}", seed),
                            token)
        assert status == 201
    status, page = request(url + "/")
    assert status == 200 and page.count('<script id="rows"') == 1
    data = page.split('<script id="rows" type="application/json">')[1].split("</script>")[0]
    names = {row["name"] for row in json.loads(data)}
    assert "'; DROP TABLE submissions; --" in names and "<!--<script>" in names
    assert request(url + "/api/benchmarks")[0] == 200  # still serving


def test_predictions_are_scored_against_the_hidden_answers(world):
    url, token, dataset = world["server"].url, world["tokens"]["red"], world["dataset"]
    status, queries = request(url + "/api/benchmarks/bench/queries")
    assert status == 200 and len(queries["tail_queries"]) == len(queries["head_queries"]) == 30
    rng = np.random.default_rng(3)
    predictions = np.stack([rng.choice(dataset.num_entities, 10, replace=False) for _ in range(60)])
    buffer = io.BytesIO()
    np.savez(buffer, predictions=predictions)
    status, answer = request(url + "/api/benchmarks/bench/predictions?name=red%20top10", buffer.getvalue(), token,
                             "application/octet-stream")
    assert status == 201 and answer["verified"] == "server", answer
    hosted = load_benchmark("bench", world["folder"] / "split")
    local = OBL2021Evaluator(dataset, hosted.in_test_order(predictions), progress=False).evaluate()
    assert answer["metrics"] == local["metrics"]["both"]["realistic"]
    for bad, message in ((b"not an npz", "not a readable .npz"), (_npz(predictions[:5]), "expected an array of shape")):
        status, refused = request(url + "/api/benchmarks/bench/predictions?name=x", bad, token,
                                  "application/octet-stream")
        assert status == 400 and message in refused["error"]
    status, refused = request(url + "/api/benchmarks/nope/queries")
    assert status == 404 and "hosted: bench" in refused["error"]
    assert request(url + "/api/benchmarks/bench/predictions?name=x", buffer.getvalue(), token, "text/csv")[0] == 415
    status, refused = request(url + "/api/benchmarks/bench/predictions?name=red%20top10", buffer.getvalue(), token,
                              "application/octet-stream")
    assert status == 409 and "already on the leaderboard" in refused["error"]
    rows = request(url + "/api/leaderboard")[1]
    served = [row for row in rows if row["name"] == "red top10"]
    assert served[0]["verified"] == "server" and "listed (OBL2021" in served[0]["group"]


def _npz(array):
    buffer = io.BytesIO()
    np.savez(buffer, array)
    return buffer.getvalue()


def test_no_route_returns_a_hidden_answer(world):
    """Every GET route, walked: no test triple appears whole, and the two query lists are in
    orders that pair no tail query with its own head query."""
    from openbench.leaderboard.server import create_app

    app = create_app(world["db"], {"bench": load_benchmark("bench", world["folder"] / "split")})
    routes = [route.path.replace("{name}", "bench") for route in app.routes if "GET" in (route.methods or ())]
    assert {"/", "/api/leaderboard", "/api/benchmarks", "/api/benchmarks/bench/queries"} <= set(routes)
    dataset = world["dataset"]
    test = dataset.triples["test"].tolist()
    labels = [(dataset.entity_labels[h], dataset.relation_labels[r], dataset.entity_labels[t]) for h, r, t in test]
    for route in routes:
        status, body = request(world["server"].url + route)
        assert status == 200, route
        text = json.dumps(body) if not isinstance(body, str) else body
        for h, r, t in labels:
            assert json.dumps([h, r, t]) not in text and f"{h}\t{r}\t{t}" not in text, route
    queries = request(world["server"].url + "/api/benchmarks/bench/queries")[1]
    paired = sum(1 for (h, r), (r2, t) in zip(queries["tail_queries"], queries["head_queries"])
                 if r == r2 and (h, r, t) in set(labels))
    assert paired <= 3  # the orders are independent permutations: pairing is chance, not the test triples


def test_concurrent_clients_lose_nothing(world, tmp_path):
    """16 clients x 25 submissions, each client its own team: every acknowledged row is stored."""
    db = world["db"]
    tokens = [CliRunner().invoke(main, ["leaderboard", "token", "create", "--db", str(db), "--name",
                                        f"team{i}"]).output.strip() for i in range(16)]
    url = world["server"].url
    acknowledged, failures = [], []

    def client(i):
        for seed in range(25):
            status, answer = request(url + f"/api/submissions?name=team{i}", _variant(world["record"], f"t{i}", seed),
                                     tokens[i])
            (acknowledged if status == 201 else failures).append(answer.get("id") if status == 201 else answer)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not failures and len(acknowledged) == 400
    stored = {row[0] for row in _rows(db)}
    assert set(acknowledged) <= stored


def test_rate_limit_and_size_limit(world, tmp_path):
    server = Server(world["db"], world["folder"] / "split", "--rate", "0.5", "--burst", "2", "--max-body-mb",
                    "0.001").start()
    try:
        token = world["tokens"]["blue"]
        statuses = [request(server.url + "/api/submissions?name=n", b"{}", token)[0] for _ in range(3)]
        assert statuses[:2] == [400, 400] and statuses[2] == 429
        time.sleep(4)
        status, answer = request(server.url + "/api/submissions?name=n", b"x" * 5000, token)
        assert status == 413 and "larger than" in answer["error"]
    finally:
        server.stop()


def test_a_killed_server_keeps_every_acknowledged_row(world, tmp_path):
    db = tmp_path / "board.sqlite"
    token = CliRunner().invoke(main, ["leaderboard", "token", "create", "--db", str(db), "--name", "k"]).output.strip()
    server = Server(db, world["folder"] / "split").start()
    acknowledged, stop = [], threading.Event()

    def client(offset):
        seed = offset
        while not stop.is_set():
            try:
                status, answer = request(server.url + "/api/submissions?name=k", _variant(world["record"], "k", seed),
                                         token)
            except OSError:
                return
            if status == 201:
                acknowledged.append(answer["id"])
            seed += 4

    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    server.stop(signal.SIGKILL)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert acknowledged
    restarted = Server(db, world["folder"] / "split").start()
    try:
        runs = [row["runs"] for row in request(restarted.url + "/api/leaderboard")[1] if row["name"] == "k"]
        assert runs == [len(_rows(db))]  # one group holding every stored row
        assert set(acknowledged) <= {row[0] for row in _rows(db)}
    finally:
        restarted.stop()


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="no headless Chromium here (.ci/run installs Debian's chromium)")
def test_the_live_page_shows_the_store(world):
    dom = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          world["server"].url + "/"], capture_output=True, text=True, timeout=120, check=True).stdout
    reader = TableReader()
    reader.feed(dom)
    shown = [row["name"] for row in reader.rows if row]
    stored = request(world["server"].url + "/api/leaderboard")[1]
    displayed = [row["name"] + ("†" if row["published"] else "") + ("*" if row["nonstandard_protocol"] else "")
                 for row in stored]
    assert sorted(displayed) == sorted(shown)  # the page's rows are the store's rows
