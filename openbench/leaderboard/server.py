"""`openbench leaderboard serve`: one shared board over HTTP, on Starlette and uvicorn.

Starlette (the ASGI toolkit FastAPI is built on) and uvicorn are small, well kept and typed; the
record schema is openbench's own (:mod:`openbench.record`), so FastAPI's pydantic layer would add
a second schema without adding a check. Routes:

* ``GET /``: the page (one sortable table and plot per dataset and task), rendered per request;
* ``GET /api/leaderboard?dataset=&task=&sort=&scoped=``: the rows, as ``leaderboard show --format json``;
* ``POST /api/submissions?name=&model_type=&paper=&code=&notes=`` with ``Authorization: Bearer
  TOKEN`` and a result record (``application/json``) → 201 ``{"id": …}``; 400 with the reason,
  401 (no or a bad token), 409 (already on the board), 413 (too large), 415, 429 (rate limit);
* ``GET /api/benchmarks``; ``GET /api/benchmarks/NAME/queries``: a hosted benchmark's entity and
  relation labels and its test queries, tail queries ``(h, r, ?)`` and head queries ``(?, r, t)``,
  each list in its own seeded order, so that no query pairs up with another into a test triple;
* ``POST /api/benchmarks/NAME/predictions?name=…`` (token): an OBL2021 submission (``.npz`` whose
  one array is ``(n_tail + n_head, k)`` entity ids, rows in the served query order) scored against
  the hidden answers with openbench's OBL2021 evaluator; stored as ``verified: server``.

No route returns a test answer: the answers stay in the server's loaded dataset. Writes are one
SQLite transaction each (``BEGIN IMMEDIATE``), acknowledged after COMMIT. Each token may make
``rate`` requests per second on average, in bursts of ``burst`` (a token bucket in memory).
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import numpy as np

from openbench.errors import OpenbenchError
from openbench.leaderboard.render import render
from openbench.leaderboard.store import DuplicateRun, Leaderboard, LeaderboardError, connect, open_leaderboard

__all__ = ["Benchmark", "RateLimiter", "create_app", "load_benchmark", "serve", "MAX_BODY_BYTES"]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024
LIST_LENGTH_LIMIT = 100


@dataclass
class Benchmark:
    """A hosted benchmark: the loaded dataset (answers stay here) and the served query orders
    (``tail_order[j]``: the test triple of served tail query j; ``head_order`` likewise)."""

    name: str
    dataset: object
    tail_order: np.ndarray
    head_order: np.ndarray

    def queries(self) -> dict:
        test = self.dataset.triples["test"].numpy()
        entities, relations = self.dataset.entity_labels, self.dataset.relation_labels
        return {"benchmark": self.name, "entities": list(entities), "relations": list(relations),
                "tail_queries": [[entities[h], relations[r]] for h, r in test[self.tail_order, :2].tolist()],
                "head_queries": [[relations[r], entities[t]] for r, t in test[self.head_order, 1:].tolist()],
                "format": "an .npz with one array of shape (len(tail_queries) + len(head_queries), k), k <= "
                          f"{LIST_LENGTH_LIMIT}: row j < len(tail_queries) ranks tail query j, the rest the head "
                          "queries in order; entries are indices into entities, best first"}

    def in_test_order(self, predictions: np.ndarray) -> np.ndarray:
        """The served-order rows put back into OBL2021's order (tail rows of test triples 0..T-1,
        then head rows)."""
        tasks = len(self.tail_order)
        ordered = np.empty_like(predictions)
        ordered[self.tail_order] = predictions[:tasks]
        ordered[tasks + self.head_order] = predictions[tasks:]
        return ordered


def load_benchmark(name: str, folder) -> Benchmark:
    from openbench.evaluation.dataset import load_dataset

    dataset = load_dataset(folder)
    tasks = dataset.triples["test"].shape[0]
    seed = int.from_bytes(hashlib.sha256(f"{name}\n{dataset.fingerprint}".encode()).digest()[:8], "big")
    rng = np.random.default_rng(seed)
    return Benchmark(name, dataset, rng.permutation(tasks), rng.permutation(tasks))


class RateLimiter:
    """A token bucket per key: ``rate`` requests per second on average, ``burst`` at once."""

    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = rate, burst
        self.buckets: Dict[str, tuple] = {}
        self.lock = threading.Lock()

    def allow(self, key: str) -> bool:
        now = time.monotonic()
        with self.lock:
            level, stamp = self.buckets.get(key, (float(self.burst), now))
            level = min(float(self.burst), level + (now - stamp) * self.rate)
            if level < 1.0:
                self.buckets[key] = (level, now)
                return False
            self.buckets[key] = (level - 1.0, now)
            return True


def create_app(db, benchmarks: Optional[Dict[str, Benchmark]] = None, max_body: int = MAX_BODY_BYTES,
               rate: float = 20.0, burst: int = 60):
    """The ASGI application over the store at ``db`` (checked and migrated once, here)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    path = Path(db)
    open_leaderboard(path).close()  # checks, creates or migrates the store before the first request
    benchmarks = dict(benchmarks or {})
    limiter = RateLimiter(rate, burst)
    local = threading.local()

    def board() -> Leaderboard:
        """One connection per worker thread (sqlite3 connections stay in their thread)."""
        if getattr(local, "board", None) is None:
            local.board = connect(path)
        return local.board

    write_lock = threading.Lock()

    async def on_board(method: str, *args, **kwargs):
        """``board().<method>(...)`` in a worker thread, on that thread's own connection. Writes
        queue on one lock in this process: SQLite's own busy handler backs off by sleeping (up to
        100 ms a try), which turns contention into long tails."""
        def call():
            if method == "submit":
                with write_lock:
                    return board().submit(*args, **kwargs)
            return getattr(board(), method)(*args, **kwargs)
        return await run_in_threadpool(call)

    def error(status: int, message: str, headers: Optional[dict] = None) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    async def body_of(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > max_body):
            raise _Refused(413, f"the body is larger than {max_body} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body:
                raise _Refused(413, f"the body is larger than {max_body} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def team_of(request: Request) -> str:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        team = await on_board("team_of", token) if token else None
        if team is None:
            raise _Refused(401, "a valid token is needed: Authorization: Bearer <token>",
                           {"WWW-Authenticate": "Bearer"})
        if not limiter.allow(token):
            raise _Refused(429, f"too many requests: at most {rate:g} per second per token (bursts of {burst})",
                           {"Retry-After": "1"})
        return team

    def fields_of(request: Request) -> dict:
        query = request.query_params
        name = query.get("name", "")
        if not name.strip():
            raise _Refused(400, "the submission needs a name: ?name=...")
        return {"name": name, "model_type": query.get("model_type", "other"), "paper": query.get("paper"),
                "code": query.get("code"), "notes": query.get("notes")}

    async def home(request: Request):
        def page():
            current = board()
            rows = current.rows() + current.rows(task="classification") + current.rows(scoped=True)
            return render(rows, "html")
        return HTMLResponse(await run_in_threadpool(page))

    async def leaderboard(request: Request):
        query = request.query_params
        try:
            rows = await on_board("rows", dataset=query.get("dataset"), sort=query.get("sort"),
                                           task=query.get("task", "ranking"),
                                           scoped=query.get("scoped", "") in ("1", "true"))
        except LeaderboardError as problem:
            return error(400, str(problem))
        return JSONResponse(rows)

    async def receive(request: Request, content_types: tuple, what: str):
        """(team, the submission's fields, the body) of an authorised POST, or _Refused."""
        team = await team_of(request)
        if request.headers.get("content-type", "").split(";")[0].strip() not in content_types:
            raise _Refused(415, f"{what} is sent as {' or '.join(content_types)}")
        return team, fields_of(request), await body_of(request)

    def refusal(problem: Exception) -> JSONResponse:
        if isinstance(problem, _Refused):
            return error(problem.status, problem.message, problem.headers)
        return error(409 if isinstance(problem, DuplicateRun) else 400, str(problem))

    async def submit(request: Request):
        try:
            team, fields, raw = await receive(request, ("application/json",), "a result record")
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as problem:
                raise _Refused(400, f"the body is not JSON ({problem})") from None
            row_id = await on_board("submit", record, team=team, verified="self", **fields)
        except (_Refused, OpenbenchError) as problem:
            return refusal(problem)
        return JSONResponse({"id": row_id, "team": team, "verified": "self"}, status_code=201)

    async def benchmark_list(request: Request):
        return JSONResponse(sorted(benchmarks))

    async def queries(request: Request):
        hosted = benchmarks.get(request.path_params["name"])
        if hosted is None:
            return error(404, f"no benchmark {request.path_params['name']!r}; hosted: {', '.join(sorted(benchmarks))}")
        return JSONResponse(hosted.queries())

    async def predictions(request: Request):
        hosted = benchmarks.get(request.path_params["name"])
        if hosted is None:
            return error(404, f"no benchmark {request.path_params['name']!r}; hosted: {', '.join(sorted(benchmarks))}")
        try:
            team, fields, raw = await receive(request, ("application/octet-stream", "application/x-npz"),
                                              "predictions (an .npz file)")
            record = await run_in_threadpool(_score, hosted, raw)
            row_id = await on_board("submit", record, team=team, verified="server", **fields)
        except (_Refused, OpenbenchError) as problem:
            return refusal(problem)
        return JSONResponse({"id": row_id, "team": team, "verified": "server",
                             "metrics": record["metrics"]["both"]["realistic"]}, status_code=201)

    return Starlette(routes=[
        Route("/", home), Route("/api/leaderboard", leaderboard), Route("/api/submissions", submit, methods=["POST"]),
        Route("/api/benchmarks", benchmark_list), Route("/api/benchmarks/{name}/queries", queries),
        Route("/api/benchmarks/{name}/predictions", predictions, methods=["POST"])])


class _Refused(Exception):
    def __init__(self, status: int, message: str, headers: Optional[dict] = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def _score(hosted: Benchmark, raw: bytes) -> dict:
    """The OBL2021 evaluation of submitted rows (served order) against the hidden answers."""
    from openbench.evaluation.topk import OBL2021Evaluator

    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as archive:
            arrays = [archive[key] for key in archive.files]
    except Exception as problem:  # numpy raises many kinds for a bad archive
        raise _Refused(400, f"not a readable .npz without pickles ({type(problem).__name__}: {problem})") from None
    if len(arrays) != 1:
        raise _Refused(400, f"the .npz must hold exactly one array, found {len(arrays)}")
    predictions = arrays[0]
    tasks = len(hosted.tail_order)
    if predictions.ndim != 2 or predictions.shape[0] != 2 * tasks or not 1 <= predictions.shape[1] <= LIST_LENGTH_LIMIT:
        raise _Refused(400, f"expected an array of shape ({2 * tasks}, k) with 1 <= k <= {LIST_LENGTH_LIMIT}, found "
                            f"{predictions.shape}")
    if not np.issubdtype(predictions.dtype, np.integer):
        raise _Refused(400, f"entity indices must be integers, found {predictions.dtype}")
    evaluator = OBL2021Evaluator(hosted.dataset, hosted.in_test_order(predictions.astype(np.int64)), progress=False)
    record = evaluator.evaluate()
    record["model"]["source_sha256"] = hashlib.sha256(raw).hexdigest()
    record["protocol"]["benchmark"] = hosted.name
    record["dataset"]["path"] = hosted.name  # the server's folder is none of the submitter's business
    return record


def serve(db, host: str = "127.0.0.1", port: int = 8000, benchmarks: Optional[Dict[str, str]] = None,
          max_body: int = MAX_BODY_BYTES, rate: float = 20.0, burst: int = 60) -> None:
    """Run the server until interrupted."""
    import uvicorn

    hosted = {name: load_benchmark(name, folder) for name, folder in (benchmarks or {}).items()}
    app = create_app(db, hosted, max_body=max_body, rate=rate, burst=burst)
    logger.info("serving %s on http://%s:%d (%d benchmark(s))", db, host, port, len(hosted))
    uvicorn.run(app, host=host, port=port, log_level="warning")
