"""The served leaderboard, tested against the real server on 127.0.0.1 (started per test module,
bounded in time): tokens, refusals that write nothing, server-side scoring against hidden answers,
no route returning an answer, concurrent clients, kill -9 mid-load, rate limits, the live page."""
import copy
import http.client
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
from openbench.errors import INTERRUPTED
from openbench.datasets.loader import load_dataset
from openbench.models.scorers import build_scorer
from openbench.leaderboard import open_leaderboard
from openbench.leaderboard.hosting import PARTS
from openbench.leaderboard.server import load_benchmark, score_predictions
from tests.bases import TableReader, chromium
from tests.helpers import integer_embeddings, needs_chromium, needs_module, random_labelled_graph, write_samples
from tests.bases import evaluated

needs_module("starlette")
needs_module("uvicorn")


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

    def _stderr(self):
        """Where the server's stderr goes."""
        return subprocess.PIPE

    def _startup_failure(self) -> str:
        """What the server said before it died at start-up."""
        return self.process.stderr.read().decode()

    def start(self):
        command = [sys.executable, "-m", "openbench", "leaderboard", "serve", "--db", str(self.db), "--port",
                   str(self.port), "--benchmark", f"bench={self.benchmark_dir}", *self.extra]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self._stderr())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/api/benchmarks", timeout=2).read()
                return self
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(self._startup_failure()) from None
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
    record = evaluated(dataset, scorer)
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
    """An upload is scored on both parts; test-dev is shown at once, test-challenge only after
    `leaderboard reveal`; the scores equal the same scoring done locally with the store's secret."""
    url, token, dataset = world["server"].url, world["tokens"]["red"], world["dataset"]
    status, queries = request(url + "/api/benchmarks/bench/queries")
    assert status == 200 and queries["protocol"] == "served-v2"
    served = queries["queries"]
    assert 0 < len(served) <= dataset.triples["test"].shape[0]  # each test triple at most once
    rng = np.random.default_rng(3)
    predictions = np.stack([rng.choice(dataset.num_entities, 10, replace=False) for _ in range(len(served))])
    status, answer = request(url + "/api/benchmarks/bench/predictions?name=red%20top10", _npz(predictions), token,
                             "application/octet-stream")
    assert status == 201 and answer["verified"] == "server" and answer["part"] == "test-dev", answer
    local = score_predictions(load_benchmark("bench", world["folder"] / "split", world["db"]), _npz(predictions))
    assert answer["metrics"] == local["test-dev"]["metrics"]["both"]["realistic"]
    for bad, message in ((b"not an npz", "not a readable .npz"), (_npz(predictions[:5]), "expected an array of shape")):
        status, refused = request(url + "/api/benchmarks/bench/predictions?name=x", bad, token,
                                  "application/octet-stream")
        assert status == 400 and message in refused["error"]
    status, refused = request(url + "/api/benchmarks/nope/queries")
    assert status == 404 and "hosted: bench" in refused["error"]
    assert request(url + "/api/benchmarks/bench/predictions?name=x", _npz(predictions), token, "text/csv")[0] == 415
    status, refused = request(url + "/api/benchmarks/bench/predictions?name=red%20top10", _npz(predictions), token,
                              "application/octet-stream")
    assert status == 409 and "already on the leaderboard" in refused["error"]

    def shown():
        return [row for row in request(url + "/api/leaderboard")[1] if row["name"] == "red top10"]

    assert [row["protocol"]["benchmark_part"] for row in shown()] == ["test-dev"]
    # server-scored rows keep their ranks in the store (never served) and show their interval
    with sqlite3.connect(world["db"]) as connection:
        kept = connection.execute("SELECT count(*) FROM ranks JOIN submissions ON submissions.id = "
                                  "ranks.submission_id WHERE submissions.name = 'red top10'").fetchone()[0]
    assert kept == 2  # both parts
    interval = shown()[0]["interval"]
    mrr = local["test-dev"]["metrics"]["both"]["realistic"]["mrr"]
    assert interval["metric"] == "mrr" and interval["low"] <= mrr <= interval["high"]
    assert "n_greater" not in json.dumps(request(url + "/api/leaderboard")[1])  # no per-query rank leaves the store
    assert "test-challenge" not in request(url + "/")[1]
    assert all(row["verified"] == "server" and row["team"] == "red" for row in shown())
    done = CliRunner().invoke(main, ["leaderboard", "reveal", "--benchmark", "bench", "--db", str(world["db"])])
    assert done.exit_code == 0 and "revealed 1 test-challenge row" in done.output, done.output
    rows = {row["protocol"]["benchmark_part"]: row for row in shown()}  # the running server sees it at once
    assert set(rows) == set(PARTS)
    assert rows["test-challenge"]["metrics"]["mrr"]["mean"] == local["test-challenge"]["metrics"]["both"]["realistic"]["mrr"]
    refused = CliRunner().invoke(main, ["leaderboard", "reveal", "--benchmark", "nope", "--db", str(world["db"])])
    assert refused.exit_code == 1 and "no hosted benchmark 'nope'" in refused.output and "bench" in refused.output


def _npz(array):
    buffer = io.BytesIO()
    np.savez(buffer, array)
    return buffer.getvalue()


def test_no_route_returns_a_hidden_answer_or_the_secret(world):
    """Every GET route, walked: no test triple appears whole, the benchmark's secret nowhere, and
    no served query names an entity that answers another served query of its relation."""
    from openbench.leaderboard.server import create_app

    hosted = load_benchmark("bench", world["folder"] / "split", world["db"])
    app = create_app(world["db"], {"bench": hosted})
    routes = [route.path.replace("{name}", "bench") for route in app.routes if "GET" in (route.methods or ())]
    assert {"/", "/api/leaderboard", "/api/benchmarks", "/api/benchmarks/bench/queries"} <= set(routes)
    dataset = world["dataset"]
    test = dataset.triples["test"].tolist()
    labels = [(dataset.entity_labels[h], dataset.relation_labels[r], dataset.entity_labels[t]) for h, r, t in test]
    with sqlite3.connect(world["db"]) as connection:
        secret = connection.execute("SELECT secret FROM benchmarks WHERE name = 'bench'").fetchone()[0]
    for route in routes:
        status, body = request(world["server"].url + route)
        assert status == 200, route
        text = json.dumps(body) if not isinstance(body, str) else body
        assert secret not in text, route
        for h, r, t in labels:
            assert json.dumps([h, r, t]) not in text and f"{h}\t{r}\t{t}" not in text, route
    queries = request(world["server"].url + "/api/benchmarks/bench/queries")[1]["queries"]
    query, triple = hosted.served.answers_of(np.arange(len(queries)))
    answered = {(queries[q][1], labels[t][2] if queries[q][2] is None else labels[t][0])
                for q, t in zip(query.tolist(), triple.tolist())}
    named = {(relation, head or tail) for head, relation, tail in queries}
    assert answered and not named & answered


@pytest.mark.slow  # a served board under 16 concurrent clients: ~6 s
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


@pytest.mark.slow  # waits out a rate-limit window on a running server: ~9 s
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
        time.sleep(2)  # a body without Content-Length (chunked) is bounded as it streams in
        host, port = server.url.split("//")[1].split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            connection.request("POST", "/api/submissions?name=n", body=iter([b"x" * 1000] * 50),
                               headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                               encode_chunked=True)
            answer = connection.getresponse()
            assert answer.status == 413 and "larger than" in json.loads(answer.read())["error"]
        finally:
            connection.close()
    finally:
        server.stop()


@pytest.mark.slow  # starts, loads and kill -9s a server process: ~7 s
def test_a_killed_server_keeps_every_acknowledged_row(world, tmp_path):
    db = tmp_path / "board.sqlite"
    token = CliRunner().invoke(main, ["leaderboard", "token", "create", "--db", str(db), "--name", "k"]).output.strip()
    server = Server(db, world["folder"] / "split", "--rate", "10000", "--burst", "10000").start()
    acknowledged, stop = [], threading.Event()

    def client(offset):
        seed = offset
        while not stop.is_set():
            try:
                status, answer = request(server.url + "/api/submissions?name=k", _variant(world["record"], "k", seed),
                                         token)
            except (OSError, http.client.HTTPException):  # the server was killed mid-answer
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
def test_the_live_page_shows_the_store(world):
    needs_chromium()
    dom = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          world["server"].url + "/"], capture_output=True, text=True, timeout=120, check=True).stdout
    reader = TableReader()
    reader.feed(dom)
    shown = [row["name"] for row in reader.rows if row]
    stored = request(world["server"].url + "/api/leaderboard")[1]
    displayed = [row["name"] + ("†" if row["published"] else "") + ("*" if row["nonstandard_protocol"] else "")
                 for row in stored]
    assert sorted(displayed) == sorted(shown)  # the page's rows are the store's rows


class LoggedServer(Server):
    """A Server whose stderr goes to a file, read after the test: no traceback may appear there."""

    def _stderr(self):
        self.log = open(self.db.parent / f"server-{self.port}.log", "w+b")
        return self.log

    def _startup_failure(self) -> str:
        self.log.seek(0)
        return self.log.read().decode()

    def peak_memory_mb(self) -> float:
        with open(f"/proc/{self.process.pid}/status") as status:
            line = next(line for line in status if line.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024

    def logged(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")


def _raw(url, request_bytes: bytes) -> int:
    """The status of a hand-written HTTP request (headers urllib would not send)."""
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(request_bytes)
        head = connection.recv(65536).decode(errors="replace")
    return int(head.split(" ", 2)[1])


@pytest.fixture(scope="module")
def hardened(world):
    server = LoggedServer(world["db"], world["folder"] / "split", "--max-body-mb", "1", "--daily-limit", "3",
                          "--rate", "1000", "--burst", "1000").start()
    yield server
    server.stop()


def _team(db, name):
    result = CliRunner().invoke(main, ["leaderboard", "token", "create", "--db", str(db), "--name", name])
    assert result.exit_code == 0, result.output
    return result.output.strip()


def test_a_token_has_one_spelling(world, hardened):
    token = _team(world["db"], "spelling")
    prefix, number, secret = token.split("_", 2)
    variants = [f"obt_0{number}_{secret}", f"obt_00{number}_{secret}", f"obt_+{number}_{secret}",
                f"OBT_{number}_{secret}", f"obt_{number}_{secret}x", f"obt_{number}_{secret[:-1]}",
                "obt_99999999999999999999_a", f"obt_{2 ** 63}_{secret}", f"obt_{number}_{secret} x"]
    url = hardened.url + "/api/submissions?name=spell"
    for variant in variants:
        assert request(url, b"{}", variant)[0] == 401, variant
    host = hardened.url.split("//")[1]
    arabic = f"obt_{'١' * len(number)}_{secret}"  # int() reads these digits too
    assert _raw(hardened.url, f"POST /api/submissions?name=spell HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer "
                              f"{arabic}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
                              .encode()) == 401
    assert request(url, b"{}", token)[0] == 400  # the canonical token is let in (and the record refused)


def test_rate_limits_key_on_the_token_not_its_spelling(world):
    """Issue 36: `obt_01_…`, `obt_001_…` authenticated as one token while the limiter keyed on the
    raw string (40 requests in a burst of 10, none refused)."""
    server = Server(world["db"], world["folder"] / "split", "--rate", "0.01", "--burst", "10").start()
    try:
        token = _team(world["db"], "burst")
        _, number, secret = token.split("_", 2)
        url = server.url + "/api/submissions?name=b"
        spellings = [f"obt_{'0' * i}{number}_{secret}" for i in range(1, 40)]
        assert {request(url, b"{}", spelling)[0] for spelling in spellings} == {401}
        statuses = [request(url, b"{}", token)[0] for _ in range(40)]
        assert statuses.count(400) == 10 and statuses.count(429) == 30  # a burst of ten, then refused
    finally:
        server.stop()


def test_malformed_requests_get_a_4xx_and_leave_no_traceback(world, hardened):
    url, token = hardened.url, _team(world["db"], "fuzz")
    record = json.loads(_variant(world["record"], "fuzz", 0))
    bad_records = [[], 1, "text", None, {"metrics": []},
                   dict(record, dataset=dict(record["dataset"], registry="HQ_DIR")),
                   dict(record, dataset=dict(record["dataset"], registry={"name": 5})),
                   dict(record, dataset=dict(record["dataset"], path=["a"])),
                   dict(record, dataset=dict(record["dataset"], fingerprint="=HYPERLINK(\"x\")")),
                   dict(record, protocol=dict(record["protocol"], relations="REL_A")),
                   dict(record, protocol=dict(record["protocol"], relations=[1, 2])),
                   dict(record, protocol=dict(record["protocol"], entities=[1])),
                   dict(record, protocol=dict(record["protocol"], entities={"count": "x", "sha256": 1})),
                   dict(record, protocol=dict(record["protocol"], hits_at=[10 ** 400])),
                   dict(record, protocol=dict(record["protocol"], benchmark_part="test-dev")),
                   dict(record, per_relation={"REL_A": []}), dict(record, model={"name": "x", "params": []})]
    cases = [(url + "/api/submissions?name=x", json.dumps(body).encode(), "application/json") for body in bad_records]
    cases += [(url + "/api/submissions?name=x", b"[" * 200_000 + b"]" * 200_000, "application/json"),
              (url + "/api/submissions?name=x", b"\xff\xfe{}", "application/json"),
              (url + "/api/submissions?name=x", b'{"a": NaN, "b": 1e999}', "application/json"),
              (url + "/api/submissions?name=x&model_type=neural", json.dumps(record).encode(), "application/json"),
              (url + "/api/submissions?name=x&paper=javascript:alert(1)", json.dumps(record).encode(),
               "application/json"),
              (url + "/api/submissions?name=%ff%fe%00", b"{}", "application/json"),
              (url + "/api/benchmarks/bench/predictions?name=x", b"", "application/octet-stream")]
    for target, body, content_type in cases:
        status, answer = request(target, body, token, content_type)
        assert 400 <= status < 500 and "error" in answer, (target, body[:80], status, answer)
    for target in ("/api/leaderboard?task=x", "/api/leaderboard?sort=%00", "/api/leaderboard?dataset=%25%25",
                   "/api/leaderboard?dataset=" + "x" * 5000, "/api/benchmarks/" + "%ff" * 300 + "/queries",
                   "/api/nowhere"):
        assert request(url + target)[0] < 500, target
    assert request(url + "/api/benchmarks/bench/queries", b"x", token, method="POST")[0] == 405
    host = url.split("//")[1]
    auth = f"Authorization: Bearer {token}\r\n"
    assert _raw(url, f"POST /api/submissions?name=x HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json"
                     f"\r\nContent-Length: 12abc\r\n\r\n{{}}".encode()) in range(400, 500)
    assert _raw(url, f"POST /api/submissions?name=x HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer \xe9\r\n"
                     f"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}".encode("latin-1")) == 401
    log = hardened.logged()
    assert "Traceback" not in log and " 500 " not in log, log[-3000:]


@pytest.mark.slow  # streams a gigabyte-inflating upload to a running server: ~6 s
def test_an_npz_that_inflates_to_a_gigabyte_costs_no_memory(world, hardened):
    """Issue 36: a 1.04 MB .npz whose member expands to 1 GiB raised the server's peak from 271 to
    1,298 MB before the shape check refused it. Headers are read first now."""
    token = _team(world["db"], "bomb")
    queries = len(request(hardened.url + "/api/benchmarks/bench/queries")[1]["queries"])
    buffer = io.BytesIO()
    np.savez_compressed(buffer, predictions=np.zeros((queries, (1 << 30) // (8 * queries)), dtype=np.int64))
    assert len(buffer.getvalue()) < 1 << 20
    before = hardened.peak_memory_mb()
    status, answer = request(hardened.url + "/api/benchmarks/bench/predictions?name=bomb", buffer.getvalue(), token,
                             "application/octet-stream")
    assert status == 400 and "accepted here" in answer["error"], answer
    assert hardened.peak_memory_mb() - before < 64


def test_the_daily_limit_counts_every_upload_refused_or_not(world, hardened):
    token = _team(world["db"], "daily")
    queries = len(request(hardened.url + "/api/benchmarks/bench/queries")[1]["queries"])
    lists = np.tile(np.arange(5), (queries, 1))
    url = hardened.url + "/api/benchmarks/bench/predictions?name=daily"
    statuses = [request(url, body, token, "application/octet-stream")[0]
                for body in (b"broken", _npz(lists), _npz(lists[:1]))]
    assert statuses == [400, 201, 400]
    status, answer = request(url, _npz(lists + 1), token, "application/octet-stream")
    assert status == 429 and "next is allowed from" in answer["error"] and "(UTC)" in answer["error"]
    other = _team(world["db"], "daily-other")  # the limit is the team's, per benchmark and day
    assert request(url.replace("daily", "daily2"), _npz(lists + 1), other, "application/octet-stream")[0] == 201


def test_a_board_served_without_a_limit_given_limits_uploads_by_default(world):
    """Issue 49: with no daily limit, test-dev answered every upload at full precision, a
    scoring oracle. The world's server is started without --daily-limit."""
    from openbench.leaderboard.server import DAILY_LIMIT

    token = _team(world["db"], "oracle")
    queries = len(request(world["server"].url + "/api/benchmarks/bench/queries")[1]["queries"])
    url = world["server"].url + "/api/benchmarks/bench/predictions?name=oracle"
    rng = np.random.default_rng(49)
    statuses = [request(f"{url}{attempt}", _npz(np.stack([rng.permutation(world["dataset"].num_entities)[:7]
                                                          for _ in range(queries)])), token,
                        "application/octet-stream")[0] for attempt in range(DAILY_LIMIT + 1)]
    assert statuses == [201] * DAILY_LIMIT + [429]


def test_a_store_holding_objects_openbench_did_not_create_is_refused_untouched(world, tmp_path):
    """Issue 36: a trigger planted in the store ran on the next submit."""
    db = tmp_path / "planted.sqlite"
    _team(db, "victim")
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TRIGGER wipe AFTER INSERT ON submissions BEGIN DELETE FROM tokens; END")
        connection.execute("CREATE VIEW everything AS SELECT * FROM tokens")
    before = db.read_bytes()
    path = tmp_path / "record.json"
    path.write_text(_variant(world["record"], "victim", 0).decode())
    for command in (["leaderboard", "submit", str(path), "--name", "x", "--db", str(db)],
                    ["leaderboard", "show", "--db", str(db)],
                    ["leaderboard", "token", "create", "--name", "y", "--db", str(db)]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 1 and "not created by openbench: trigger wipe, view everything" in result.output
    served = subprocess.run([sys.executable, "-m", "openbench", "leaderboard", "serve", "--db", str(db), "--port",
                             str(_free_port())], capture_output=True, text=True, timeout=60)
    assert served.returncode == 1 and "trigger wipe" in served.stderr and "Traceback" not in served.stderr
    assert db.read_bytes() == before


# ------------------------------------------------------------------------------------------
# issue 43: a revoked token can do nothing, at once


def _attempts(db, team):
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT COUNT(*) FROM attempts WHERE team = ?", (team,)).fetchone()[0]


def test_a_revoked_token_can_do_nothing_on_any_route_at_once(world, hardened, tmp_path):
    """Property: after `leaderboard token revoke`, every route and command that takes a token
    refuses it (401, as an unknown token) on the server already running, nothing is written or counted for
    it, the team's names stay its own, and only that team's tokens stop (a new one works)."""
    db, url = world["db"], hardened.url
    token, bystander = _team(db, "revoked"), _team(db, "bystander")
    queries = len(request(url + "/api/benchmarks/bench/queries")[1]["queries"])
    lists = np.tile(np.arange(5), (queries, 1))
    record = _variant(world["record"], "revoked", 0)
    assert request(url + "/api/submissions?name=revoked%20model", record, token)[0] == 201  # live: accepted
    done = CliRunner().invoke(main, ["leaderboard", "token", "revoke", "--db", str(db), "--name", "revoked"])
    assert done.exit_code == 0 and "revoked 1 token(s) of 'revoked'" in done.output, done.output
    rows, attempts = _rows(db), _attempts(db, "revoked")
    for path, body, content_type in (
            ("/api/submissions?name=revoked%20model", _variant(world["record"], "revoked", 1), "application/json"),
            ("/api/submissions?name=another%20name", _variant(world["record"], "revoked", 2), "application/json"),
            ("/api/benchmarks/bench/predictions?name=revoked%20lists", _npz(lists), "application/octet-stream"),
            ("/api/benchmarks/bench/predictions?name=revoked%20lists", b"broken", "application/octet-stream")):
        status, answer = request(url + path, body, token, content_type)
        assert status == 401 and "a valid token is needed" in answer["error"], (path, status, answer)
    # listing needs no token, and a revoked one adds nothing to it (the team's earlier row stays listed)
    for path in ("/api/leaderboard", "/api/benchmarks", "/api/benchmarks/bench/queries"):
        assert request(url + path, token=token) == request(url + path), path
    assert any(row.get("team") == "revoked" for row in request(url + "/api/leaderboard")[1])
    # the commands that carry a token say so and write nothing
    record_file, lists_file = tmp_path / "revoked.json", tmp_path / "revoked.npz"
    record_file.write_bytes(_variant(world["record"], "revoked", 6))
    lists_file.write_bytes(_npz(lists))
    for command in (["leaderboard", "submit", str(record_file), "--name", "revoked cli", "--server", url,
                     "--token", token],
                    ["leaderboard", "submit-predictions", str(lists_file), "--server", url, "--benchmark", "bench",
                     "--name", "revoked cli lists", "--token", token]):
        refused = CliRunner().invoke(main, command)
        assert refused.exit_code == 1 and "a valid token is needed" in refused.output, (command, refused.output)
    assert _rows(db) == rows and _attempts(db, "revoked") == attempts  # nothing written, nothing counted
    store = open_leaderboard(db)
    try:
        assert store.authenticate(token) is None and store.team_of(token) is None
        assert store.team_of(bystander) == "bystander"  # another team's token is untouched
    finally:
        store.close()
    # the team's name stays its own: another team cannot take it, a new token of the team can
    taken = request(url + "/api/submissions?name=revoked%20model", _variant(world["record"], "bystander", 3),
                    bystander)
    assert taken[0] == 400 and "belongs to another team" in taken[1]["error"]
    fresh = _team(db, "revoked")
    assert request(url + "/api/submissions?name=revoked%20model", _variant(world["record"], "revoked", 4),
                   fresh)[0] == 201
    again = CliRunner().invoke(main, ["leaderboard", "token", "revoke", "--db", str(db), "--name", "revoked"])
    assert "revoked 1 token(s)" in again.output  # the fresh one only: the old one was revoked already
    assert request(url + "/api/submissions?name=revoked%20model", _variant(world["record"], "revoked", 5),
                   fresh)[0] == 401


# ------------------------------------------------------------------------------------------
# issue 63: Ctrl-C always ends with the one interrupted line; a busy port is one error line


def _serve_command(db, port):
    return [sys.executable, "-m", "openbench", "leaderboard", "serve", "--db", str(db), "--port", str(port)]


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal starts it (a background job ignores SIGINT)


@pytest.mark.parametrize("delay", [0.6, 1.2, "ready", "serving a request"])
def test_ctrl_c_ends_a_served_board_with_the_interrupted_line(tmp_path, delay):
    """At any moment, from start-up to serving: status 130 and the one interrupted line as the
    last line of stderr, no traceback (uvicorn.run swallowed the interrupt and ended 0; a Ctrl-C
    during its start printed a traceback)."""
    port = _free_port()
    process = subprocess.Popen(_serve_command(tmp_path / "board.sqlite", port), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    if isinstance(delay, float):
        time.sleep(delay)
    else:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as answer:
                    answer.read()
                break
            except urllib.error.HTTPError:  # an answer: it serves
                break
            except OSError:
                time.sleep(0.1)
        if delay == "serving a request":
            threading.Thread(target=lambda: request(f"http://127.0.0.1:{port}/"), daemon=True).start()
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == INTERRUPTED and "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 2, err  # at most "serving ..." before it


def test_a_busy_port_is_one_error_line_before_serving_is_announced(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(_serve_command(tmp_path / "board.sqlite", port), capture_output=True, text=True,
                              timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [f"error: cannot serve on 127.0.0.1:{port}: already in use (another "
                                                "server?); choose another --port or --host"]
