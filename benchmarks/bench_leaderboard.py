"""The served leaderboard under load: submissions per second and latency with 16 concurrent
clients on loopback, and the page's render time with 10,000 rows.

Starts `openbench leaderboard serve` on a free port with a fresh store, gives each of 16 clients its
own team token, and has each send ``--per-client`` self-reported result records (distinct runs of
one real record) as fast as the server answers; prints acknowledged submissions per second and
p50/p99 latency. Then fills a store with 10,000 rows and times `GET /` (the page rendered from the
store) and `render(rows, "html")` alone. The peer is the local `Leaderboard.submit` in one process
(no HTTP), measured in the same run.

    python benchmarks/bench_leaderboard.py [--clients 16] [--per-client 50] [--rows 10000]
"""
from __future__ import annotations

import argparse
import copy
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _record(work: Path) -> dict:
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.scorers import build_scorer
    from tests.helpers import integer_embeddings, random_labelled_graph, write_samples

    splits = random_labelled_graph(1, 60, 4, {"train": 400, "valid": 20, "test": 40})
    dataset = load_dataset(write_samples(work / "split", splits, negatives=False))
    scorer = build_scorer("DistMult", integer_embeddings(0, dataset.num_entities, 4),
                          integer_embeddings(1, dataset.num_relations, 4), dataset.num_entities, dataset.num_relations)
    return evaluate(dataset, scorer, device="cpu").to_dict()


def _variant(record: dict, model: str, seed: int) -> dict:
    changed = copy.deepcopy(record)
    changed["model"]["source_sha256"], changed["seed"] = model, seed
    return changed


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(db: Path, port: int) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "openbench", "leaderboard", "serve", "--db", str(db), "--port",
                                str(port), "--rate", "100000", "--burst", "100000"], stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/benchmarks", timeout=2).read()
            return process
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--per-client", type=int, default=50)
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    from openbench.leaderboard.render import render
    from openbench.leaderboard.store import open_leaderboard

    work = Path(tempfile.mkdtemp(prefix="openbench-bench-leaderboard-"))
    record = _record(work)
    db = work / "served.sqlite"
    board = open_leaderboard(db)
    tokens = [board.create_token(f"team{i}") for i in range(args.clients)]
    board.close()
    port = _port()
    server = _start(db, port)
    latencies, failures = [], []

    def client(i: int) -> None:
        for seed in range(args.per_client):
            body = json.dumps(_variant(record, f"model{i}", seed)).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{port}/api/submissions?name=team{i}", data=body,
                                             headers={"Content-Type": "application/json",
                                                      "Authorization": f"Bearer {tokens[i]}"})
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    response.read()
                latencies.append(time.perf_counter() - started)
            except OSError as error:
                failures.append(str(error))

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    server.terminate()
    server.wait()
    ordered = sorted(latencies)
    p50, p99 = statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    served = len(latencies) / seconds
    local_db = work / "local.sqlite"
    board = open_leaderboard(local_db)
    started = time.perf_counter()
    for seed in range(200):
        board.submit(_variant(record, "local", seed), name="local")
    local = 200 / (time.perf_counter() - started)
    print(f"{args.clients} clients x {args.per_client} submissions over HTTP: {served:.0f} submissions/s, "
          f"p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, {len(failures)} failed; local submit in one process "
          f"{local:.0f}/s (ratio {served / local:.2f})")
    # 10,000 rows: distinct models, so 10,000 groups
    connection = board.connection
    connection.execute("BEGIN IMMEDIATE")
    template = connection.execute("SELECT * FROM submissions LIMIT 1").fetchone()
    columns = [key for key in template.keys() if key != "id"]
    for i in range(args.rows):
        values = dict(template)
        values.update(name=f"model {i}", model_key=json.dumps([f"m{i}"]), seed_key="0")
        connection.execute(f"INSERT INTO submissions ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                           [values[key] for key in columns])
    connection.execute("COMMIT")
    started = time.perf_counter()
    rows = board.rows()
    query = time.perf_counter() - started
    started = time.perf_counter()
    page = render(rows, "html")
    rendering = time.perf_counter() - started
    board.close()
    port = _port()
    server = _start(local_db, port)
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=300) as response:
        size = len(response.read())
    served_page = time.perf_counter() - started
    server.terminate()
    server.wait()
    print(f"page with {len(rows):,} rows: store query {query:.2f} s + render {rendering:.2f} s "
          f"({len(page) / 1e6:.1f} MB); GET / on the server {served_page:.2f} s ({size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
