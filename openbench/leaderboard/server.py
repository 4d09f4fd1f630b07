"""`openbench leaderboard serve`: one shared board over HTTP, on Starlette and uvicorn.

Starlette (the ASGI toolkit FastAPI is built on) and uvicorn are small, well kept and typed; the
record schema is openbench's own (:mod:`openbench.record`), so FastAPI's pydantic layer would add
a second schema without adding a check. Routes:

* ``GET /``: the page (per dataset: ranking, classification and scoped tables), rendered per request;
* ``GET /api/leaderboard?dataset=&task=&sort=&scoped=``: the rows, as ``leaderboard show --format json``;
* ``POST /api/submissions?name=&model_type=&paper=&code=&notes=`` with ``Authorization: Bearer
  TOKEN`` and a result record (``application/json``) → 201 ``{"id": …}``; 400 with the reason,
  401 (no or a bad token), 409 (already on the board), 413 (too large), 415, 429 (rate limit);
* ``GET /api/benchmarks``; ``GET /api/benchmarks/NAME/queries``: a hosted benchmark's entity and
  relation labels and its served queries (:mod:`openbench.leaderboard.hosting`: each test triple
  at most once, on one side, and no query naming an answer of its relation);
* ``POST /api/benchmarks/NAME/predictions?name=…`` (token): an ``.npz`` whose one integer array
  is ``(queries, k)`` entity indices, row j ranking served query j, scored against the hidden
  answers of both parts; the test-dev score is returned and shown, the test-challenge one is
  stored hidden until ``leaderboard reveal``. Rows are ``verified: server``.

No route returns a test answer, and no refusal says anything derived from one: uploads are
checked in served order and every message names served rows only. Writes are one SQLite
transaction each (``BEGIN IMMEDIATE``), acknowledged after COMMIT. Each token may make ``rate``
requests per second on average, in bursts of ``burst`` (a token bucket per token id, in memory);
``daily_limit`` caps a team's scored uploads per benchmark and UTC day (every upload counts,
refused or not): :data:`DAILY_LIMIT` unless the organiser says otherwise, since a board that
scores test-dev as often as asked is an oracle (a list changed in one query tells, by the score,
where that query's answer lies). ``None`` lifts the cap.
"""
from __future__ import annotations

import datetime
import hashlib
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional

import numpy as np
import torch

from openbench._io.inputs import parse_json, read_npz
from openbench._io.outputs import strict_json
from openbench.errors import InputError, OpenbenchError
from openbench.leaderboard.hosting import HOSTED_PROTOCOL, PARTS, SIDE_NAMES, ServedQueries, serve_queries
from openbench.leaderboard.render import render
from openbench.leaderboard.store import (DuplicateRun, Leaderboard, LeaderboardError, LimitReached, connect,
                                         open_leaderboard, page_rows)

if TYPE_CHECKING:
    from openbench.datasets.loader import Dataset

__all__ = ["bind", "Benchmark", "RateLimiter", "create_app", "load_benchmark", "read_predictions", "score_predictions", "scored_parts",
           "serve", "DAILY_LIMIT", "MAX_BODY_BYTES", "LIST_LENGTH_LIMIT", "INFLATE_FACTOR"]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024
DAILY_LIMIT = 5  # scored uploads per team, benchmark and UTC day, by default
LIST_LENGTH_LIMIT = 100
INFLATE_FACTOR = 4  # an upload's arrays may declare at most this many times the body limit
WRITES = ("submit", "submit_parts", "count_attempt")


@dataclass
class Benchmark:
    """A hosted benchmark: the loaded dataset (the answers stay here) and its served queries."""

    name: str
    dataset: "Dataset"
    served: ServedQueries

    def queries(self) -> dict:
        """What ``GET /api/benchmarks/NAME/queries`` serves: labels and queries, no answer."""
        entities, relations = self.dataset.entity_labels, self.dataset.relation_labels
        rows = []
        for side, relation, anchor in zip(self.served.side.tolist(), self.served.relation.tolist(),
                                          self.served.anchor.tolist()):
            rows.append([entities[anchor], relations[relation], None] if side == 1 else
                        [None, relations[relation], entities[anchor]])
        return {"benchmark": self.name, "protocol": HOSTED_PROTOCOL, "entities": list(entities),
                "relations": list(relations), "queries": rows,
                "format": f"an .npz holding one integer array of shape ({len(rows)}, k), 1 <= k <= "
                          f"{LIST_LENGTH_LIMIT}: row j ranks the missing entity (null) of query j, as indices into "
                          "entities, best first, distinct within a row; known training and validation answers "
                          "may be listed (they are filtered out before scoring)"}

    def relation_summary(self) -> Dict[str, tuple]:
        """{relation label: (test triples served, test triples held)}: the organiser's report."""
        labels = self.dataset.relation_labels
        return {labels[r]: (self.served.kept.get(r, 0), held) for r, held in self.served.test_triples.items()}


def load_benchmark(name: str, folder, db) -> Benchmark:
    """The benchmark ``name`` over the split at ``folder``, its secret read from (or made in) the
    store at ``db``."""
    from openbench.datasets.loader import load_dataset

    dataset = load_dataset(folder)
    board = open_leaderboard(db)
    try:
        secret = board.benchmark_secret(name, dataset.fingerprint)
    finally:
        board.close()
    return Benchmark(name, dataset, serve_queries(dataset.triples["test"].numpy(), secret))


def read_predictions(raw: bytes, queries: int, max_bytes: int) -> np.ndarray:
    """The submitted (queries, k) int64 array, every check in served order (row j is query j)."""
    arrays = read_npz(raw, "the upload", max_bytes)
    if len(arrays) != 1:
        raise InputError(f"the .npz must hold exactly one array, found {len(arrays)}", "the upload")
    predictions = next(iter(arrays.values()))
    if predictions.ndim != 2 or predictions.shape[0] != queries or not 1 <= predictions.shape[1] <= LIST_LENGTH_LIMIT:
        raise InputError(f"expected an array of shape ({queries}, k) with 1 <= k <= {LIST_LENGTH_LIMIT}, found "
                         f"{predictions.shape}", "the upload")
    if not np.issubdtype(predictions.dtype, np.integer):
        raise InputError(f"entity indices must be integers, found {predictions.dtype}", "the upload")
    return predictions.astype(np.int64)


def _check_rows(predictions: np.ndarray, num_entities: int) -> None:
    """Ids in range and distinct within each row; the first bad *served* row is named."""
    outside = np.flatnonzero(((predictions < 0) | (predictions >= num_entities)).any(axis=1))
    if len(outside):
        raise InputError(f"row {int(outside[0])} holds an id outside [0, {num_entities})", "the upload")
    ordered = np.sort(predictions, axis=1)
    repeated = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    if len(repeated):
        raise InputError(f"row {int(repeated[0])} lists an entity twice; each row must hold distinct ids",
                         "the upload")


def score_predictions(hosted: Benchmark, raw: bytes, max_bytes: int = MAX_BODY_BYTES * INFLATE_FACTOR) -> Dict[str, dict]:
    """{part: the record} of an upload, scored against the hidden answers of each part."""
    return {part: record for part, (record, _) in scored_parts(hosted, raw, max_bytes).items()}


def scored_parts(hosted: Benchmark, raw: bytes, max_bytes: int = MAX_BODY_BYTES * INFLATE_FACTOR) -> Dict[str, tuple]:
    """{part: (the record, its per-query ranks)} of an upload, scored against the hidden answers
    of each part; the ranks stay in the store (they name the hidden test triples)."""
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.lists import ServedLists

    served = hosted.served
    predictions = read_predictions(raw, len(served), max_bytes)
    _check_rows(predictions, hosted.dataset.num_entities)
    query, triple = served.answers_of(np.arange(len(served)))
    test = hosted.dataset.triples["test"]
    digest = hashlib.sha256(raw).hexdigest()
    records = {}
    anchors = served.anchor_pairs()
    for index, part in enumerate(PARTS):
        chosen = served.part[query] == index
        if not chosen.any():
            continue
        rows = query[chosen]
        # counts of the whole benchmark only: a count per part would say which queries it holds
        extra = {"hosted_protocol": HOSTED_PROTOCOL, "benchmark": hosted.name, "benchmark_part": part,
                 "served_sides": [SIDE_NAMES[s] for s in sorted(set(served.side.tolist()))],
                 "served_queries": {SIDE_NAMES[s]: int((served.side == s).sum()) for s in (0, 1)},
                 "served_triples": int(chosen.sum()), "left_out_triples": int(sum(served.left_out.values())),
                 "anchors_filtered": True}
        upload = ServedLists(test[torch.from_numpy(triple[chosen])], served.side[rows] == 1, predictions[rows],
                             extra, digest, anchors)
        scored = evaluate(hosted.dataset, upload, progress=False)
        record = scored.to_dict()
        record["dataset"]["path"] = hosted.name  # the server's folder is none of the submitter's business
        records[part] = (record, scored.ranks)
    return records


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


class _Refused(Exception):
    def __init__(self, status: int, message: str, headers: Optional[dict] = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def create_app(db, benchmarks: Optional[Dict[str, Benchmark]] = None, max_body: int = MAX_BODY_BYTES,
               rate: float = 20.0, burst: int = 60, daily_limit: Optional[int] = DAILY_LIMIT,
               published: Optional[bool] = None):
    """The ASGI application over the store at ``db`` (checked and migrated once, here); the
    published reference rows on its page and in its rows only with ``published`` (or a query naming
    their dataset), as ``leaderboard show`` shows them."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse
    from starlette.responses import JSONResponse as StarletteJSON
    from starlette.routing import Route

    class JSONResponse(StarletteJSON):
        """Strict JSON (an undefined number is null): no stored value can make a route answer 500."""

        def render(self, content) -> bytes:
            return strict_json(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    path = Path(db)
    open_leaderboard(path).close()  # checks, creates or migrates the store before the first request
    benchmarks = dict(benchmarks or {})
    limiter = RateLimiter(rate, burst)
    local = threading.local()
    write_lock = threading.Lock()

    def board() -> Leaderboard:
        """One connection per worker thread (sqlite3 connections stay in their thread)."""
        if getattr(local, "board", None) is None:
            local.board = connect(path)
        return local.board

    async def on_board(method: str, *args, **kwargs):
        """``board().<method>(...)`` in a worker thread, on that thread's own connection. Writes
        queue on one lock in this process: SQLite's own busy handler backs off by sleeping (up to
        100 ms a try), which turns contention into long tails."""
        def call():
            if method in WRITES:
                with write_lock:
                    return getattr(board(), method)(*args, **kwargs)
            return getattr(board(), method)(*args, **kwargs)
        return await run_in_threadpool(call)

    def error(status: int, message: str, headers: Optional[dict] = None) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    async def body_of(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and not (declared.isascii() and declared.isdigit()):
            raise _Refused(400, f"Content-Length {declared[:40]!r} is not a byte count")
        if declared is not None and int(declared) > max_body:
            raise _Refused(413, f"the body is larger than {max_body} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body:
                raise _Refused(413, f"the body is larger than {max_body} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def team_of(request: Request) -> str:
        """The team of the request's token; the token's id (not its spelling) is rate limited."""
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else ""
        found = await on_board("authenticate", token) if token else None
        if found is None:
            raise _Refused(401, "a valid token is needed: Authorization: Bearer <token>",
                           {"WWW-Authenticate": "Bearer"})
        token_id, team = found
        if not limiter.allow(f"token {token_id}"):
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
        return HTMLResponse(await run_in_threadpool(lambda: render(page_rows(board(), published=published), "html")))

    async def leaderboard(request: Request):
        query = request.query_params
        try:
            asked = query.get("published", "") in ("1", "true")
            rows = await on_board("rows", dataset=query.get("dataset"), sort=query.get("sort"),
                                  task=query.get("task", "ranking"), scoped=query.get("scoped", "") in ("1", "true"),
                                  include_published=True if asked else published)
        except LeaderboardError as problem:
            return error(400, str(problem))
        return JSONResponse(rows)

    async def receive(request: Request, content_types: tuple, what: str, benchmark: Optional[str] = None):
        """(team, the submission's fields, the body) of an authorised POST, or _Refused. A scored
        upload is counted before its body is read: refused or accepted, it costs the same."""
        team = await team_of(request)
        if request.headers.get("content-type", "").split(";")[0].strip().lower() not in content_types:
            raise _Refused(415, f"{what} is sent as {' or '.join(content_types)}")
        fields = fields_of(request)
        if benchmark is not None:
            await on_board("count_attempt", team, benchmark, daily_limit)
        return team, fields, await body_of(request)

    def refusal(problem: Exception) -> JSONResponse:
        if isinstance(problem, _Refused):
            return error(problem.status, problem.message, problem.headers)
        if isinstance(problem, LimitReached):
            wait = max(1, int((problem.reset - datetime.datetime.now(datetime.timezone.utc)).total_seconds()))
            return error(429, str(problem), {"Retry-After": str(wait)})
        return error(409 if isinstance(problem, DuplicateRun) else 400, str(problem))

    async def submit(request: Request):
        try:
            team, fields, raw = await receive(request, ("application/json",), "a result record")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as problem:
                raise _Refused(400, f"the body is not UTF-8 JSON ({problem})") from None
            record = parse_json(text, None, "the result record")
            row_id = await on_board("submit", record, team=team, verified="self", **fields)
        except (_Refused, OpenbenchError) as problem:
            return refusal(problem)
        return JSONResponse({"id": row_id, "team": team, "verified": "self"}, status_code=201)

    async def benchmark_list(request: Request):
        return JSONResponse(sorted(benchmarks))

    def hosted_of(request: Request) -> Benchmark:
        name = request.path_params["name"]
        if name not in benchmarks:
            raise _Refused(404, f"no benchmark {name[:100]!r}; hosted: {', '.join(sorted(benchmarks)) or 'none'}")
        return benchmarks[name]

    async def queries(request: Request):
        try:
            hosted = hosted_of(request)
        except _Refused as problem:
            return refusal(problem)
        return JSONResponse(hosted.queries())

    async def predictions(request: Request):
        try:
            hosted = hosted_of(request)
            team, fields, raw = await receive(request, ("application/octet-stream", "application/x-npz"),
                                              "predictions (an .npz file)", hosted.name)
            parts = await run_in_threadpool(scored_parts, hosted, raw, max_body * INFLATE_FACTOR)
            records = {part: record for part, (record, _) in parts.items()}
            ids = await on_board("submit_parts", records, hosted.name, team=team,
                                 ranks={part: ranks for part, (_, ranks) in parts.items()}, **fields)
        except (_Refused, OpenbenchError) as problem:
            return refusal(problem)
        return JSONResponse({"id": ids["test-dev"], "team": team, "verified": "server", "part": "test-dev",
                             "metrics": records["test-dev"]["metrics"]["both"]["realistic"]}, status_code=201)

    return Starlette(routes=[
        Route("/", home), Route("/api/leaderboard", leaderboard), Route("/api/submissions", submit, methods=["POST"]),
        Route("/api/benchmarks", benchmark_list), Route("/api/benchmarks/{name}/queries", queries),
        Route("/api/benchmarks/{name}/predictions", predictions, methods=["POST"])])


def bind(host: str, port: int):
    """A listening TCP socket (``socket.socket``) on ``host``:``port``, bound before anything says the board is served;
    a port in use (or a host this machine does not have) is one error line."""
    import errno
    import socket

    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as error:
        raise OpenbenchError(f"--host {host!r}: not an address of this machine ({error.strerror})") from None
    listener = socket.socket(family, kind)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: no TIME_WAIT wait
        listener.bind(address)
        listener.listen(2048)
    except OSError as error:
        listener.close()
        in_use = error.errno == errno.EADDRINUSE
        reason = "already in use (another server?)" if in_use else (error.strerror or str(error))
        raise OpenbenchError(f"cannot serve on {host}:{port}: {reason}; choose another --port or --host") from None
    listener.set_inheritable(True)
    return listener


def serve(db, host: str = "127.0.0.1", port: int = 8000, benchmarks: Optional[Dict[str, str]] = None,
          max_body: int = MAX_BODY_BYTES, rate: float = 20.0, burst: int = 60,
          daily_limit: Optional[int] = DAILY_LIMIT, announce=None, published: Optional[bool] = None) -> None:
    """Run the server until interrupted: the port is bound first, then ``announce(url)`` (the
    command line's "serving ..." line) is called, then requests are served. A Ctrl-C (or SIGTERM)
    shuts the server down gracefully and then reaches the caller as the interrupt it is
    (uvicorn.run would swallow it and end with status 0)."""
    import uvicorn

    hosted = {name: load_benchmark(name, folder, db) for name, folder in (benchmarks or {}).items()}
    for name, benchmark in hosted.items():
        kept = benchmark.relation_summary()
        logger.info("benchmark %s: %d queries serve %d of %d test triples (left out: %s); per relation: %s", name,
                    len(benchmark.served), sum(k for k, _ in kept.values()), sum(h for _, h in kept.values()),
                    ", ".join(f"{key} {value}" for key, value in benchmark.served.left_out.items()),
                    "; ".join(f"{label} {k}/{h}" for label, (k, h) in kept.items()))
    app = create_app(db, hosted, max_body=max_body, rate=rate, burst=burst, daily_limit=daily_limit,
                     published=published)
    listener = bind(host, port)
    try:
        url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
        if announce is not None:
            announce(url)
        logger.info("serving %s on %s (%d benchmark(s))", db, url, len(hosted))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        server.run(sockets=[listener])  # uvicorn re-raises a caught SIGINT once it has shut down
    finally:
        listener.close()
