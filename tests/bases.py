"""Shared test bases: graphs, scorers and workers that several test modules use (tests never
import other test modules; what they share lives here or in :mod:`tests.helpers`)."""
import datetime
import json
from pathlib import Path
import random
from fractions import Fraction
from html.parser import HTMLParser

import numpy as np
import torch
import torch.distributed as dist

from openbench.datasets.loader import load_dataset
from openbench.evaluation.evaluate import evaluate
from openbench.models.scorers import build_scorer
from tests.helpers import integer_embeddings, known_answers, random_labelled_graph, write_samples

# typed candidates: node types by CURIE prefix, relations with one admitted signature each
PREFIXES = {"GENE": "NCBIGENE", "DIS": "DOID", "PHENOTYPE": "HP", "GO": "GO"}
RELATIONS = {"GENE_DIS": ("GENE", "DIS"), "GENE_GENE": ("GENE", "GENE"), "DIS_PHENOTYPE": ("DIS", "PHENOTYPE"),
             "IS_A": ("GO", "GO"), "CUSTOM_REL": ("GENE", "GO")}


def typed_graph(seed):
    """Labelled splits whose triples respect :data:`RELATIONS`' types; every entity is in train."""
    rng = random.Random(seed)
    entities = {kind: [f"{prefix}:{i}" for i in range(5)] for kind, prefix in PREFIXES.items()}

    def triple():
        relation = rng.choice(list(RELATIONS))
        head, tail = RELATIONS[relation]
        return rng.choice(entities[head]), relation, rng.choice(entities[tail])

    splits = {"train": sorted({triple() for _ in range(60)}), "valid": sorted({triple() for _ in range(5)}),
              "test": sorted({triple() for _ in range(12)})}
    splits["train"] += [(e, "IS_A", e) for kind in entities for e in entities[kind]]  # every entity known
    return splits


def sample_graph(out):
    """(positives, true negatives, nodes) of the graph generated from the embedded sample sources
    (quality cutoff nq) under ``out``: what the split tests split."""
    from graphgen.graph_files import read_edges, read_nodes
    from graphgen.pipeline import SAMPLE_DIR, generate

    generate(out, sources_dir=SAMPLE_DIR, steps=("parse", "build"), quality="nq", progress=False)
    folder = out / "graph_files"
    return read_edges(folder / "edges.csv", "1"), read_edges(folder / "TN_edges.csv", "0"), \
        read_nodes(folder / "ALL_nodes.csv")


def small_dataset(folder, test_size):
    """A 23-entity, 3-relation dataset written to ``folder`` and loaded (the distributed tests')."""
    splits = random_labelled_graph(5, 23, 3, {"train": 80, "valid": 6, "test": test_size})
    return load_dataset(write_samples(folder, splits, negatives=False))


def tie_heavy_scorer(dataset, model):
    """Integer embeddings in {-1, 0, 1}: exact arithmetic and many ties."""
    entities = integer_embeddings(1, dataset.num_entities, 3, low=-1, high=2)
    dim = entities.shape[1]
    relations = integer_embeddings(2, dataset.num_relations, dim * dim if model == "RESCAL" else dim, low=-1, high=2)
    return build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)


def near_tie_embeddings(seed: int, rows: int, dim: int) -> np.ndarray:
    """Continuous float32 rows where a third are copies of earlier rows, most with one coordinate
    moved by one ulp: scores within rounding of each other, which float32 arithmetic may order
    either way (exact ranks must not)."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((rows, dim)).astype(np.float32)
    originals = max(1, rows * 2 // 3)
    for row in range(originals, rows):
        values[row] = values[rng.integers(0, originals)]
        if rng.random() < 0.8:
            column = rng.integers(0, dim)
            values[row, column] = np.nextafter(values[row, column], np.float32(np.inf if rng.random() < 0.5
                                                                              else -np.inf))
    return values


def near_tie_scorer(dataset, model, seed=0, dim=4, dtype=np.float32):
    """``model`` over :func:`near_tie_embeddings` (complex models: real and imaginary halves; RotatE:
    rotations cos θ + i sin θ rounded to float32, unit only to within rounding)."""
    entities = near_tie_embeddings(seed, dataset.num_entities, 2 * dim if model in COMPLEX_MODELS else dim)
    rng = np.random.default_rng(seed + 1)
    if model in ("RotatE", "RotatE-DGLKE"):
        angles = rng.uniform(-np.pi, np.pi, (dataset.num_relations, dim))
        relations = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    else:
        width = dim * dim if model == "RESCAL" else (2 * dim if model in COMPLEX_MODELS else dim)
        relations = rng.standard_normal((dataset.num_relations, width)).astype(np.float32)
    return build_scorer(model, entities.astype(dtype), relations.astype(dtype), dataset.num_entities,
                        dataset.num_relations)


COMPLEX_MODELS = ("ComplEx", "RotatE", "RotatE-DGLKE")


def scorer_for(dataset, model):
    """``near:<Model>``: :func:`near_tie_scorer`; otherwise :func:`tie_heavy_scorer`."""
    if model.startswith("near:"):
        return near_tie_scorer(dataset, model[5:])
    return tie_heavy_scorer(dataset, model)


def distributed_worker(rank, world, folder, rendezvous, shard, model, out, fail_rank, backend="gloo"):
    """One rank: gloo on CPU, or NCCL with one GPU per rank (tests/evaluation/test_cuda.py).
    ``model``: a :func:`scorer_for` name, or several joined by commas (``out`` then holds
    {name: record})."""
    dist.init_process_group(backend, init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=60))
    try:
        if rank == fail_rank:
            raise RuntimeError(f"rank {rank} dies on purpose")
        dataset = load_dataset(folder)  # written by the parent before the spawn
        results = {name: evaluate(dataset, scorer_for(dataset, name), shard=shard, batch_size=4,
                                  device=f"cuda:{rank}" if backend == "nccl" else "cpu").to_dict()
                   for name in model.split(",")}  # several models share one spawn (process start-up is the cost)
        if rank == 0:
            with open(out, "w") as handle:
                json.dump(results[model] if "," not in model else results, handle)
    finally:
        dist.destroy_process_group()


def overflow_refusal_worker(rank, world, folder, rendezvous, out):
    """One gloo rank evaluating typed candidates with exact ranks over entity shards, float32
    embeddings whose scores overflow: ``out`` + rank holds the error the rank raised."""
    from openbench.errors import ScoreError

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=60))
    try:
        dataset = load_dataset(folder)
        rng = np.random.default_rng(0)
        entities = (np.abs(rng.standard_normal((dataset.num_entities, 4))) * 2.0 ** 62).astype(np.float32)
        relations = (-np.abs(rng.standard_normal((dataset.num_relations, 4))) * 2.0 ** 62).astype(np.float32)
        scorer = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
        try:
            evaluate(dataset, scorer, shard="entities", candidates="typed", device="cpu")
            message = "evaluated"
        except ScoreError as error:
            message = str(error)
        Path(f"{out}{rank}").write_text(message)
    finally:
        dist.destroy_process_group()


class TableReader(HTMLParser):
    """The cells of the <table class="leaderboard"> elements as rendered, the links in them
    (``links``) and the page's section and table headings (``headings["h2"]``, ``["h3"]``)."""

    def __init__(self):
        super().__init__()
        self.inside, self.rows, self.cell = False, [], None
        self.links, self.headings, self.heading = [], {"h2": [], "h3": []}, None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("class", "leaderboard") in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append({})
        elif self.inside and tag in ("td", "th"):
            self.cell = [dict(attrs).get("data-key"), tag, ""]
        elif self.inside and tag == "a":
            self.links.append(dict(attrs).get("href"))
        elif tag in self.headings:
            self.heading = [tag, ""]

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[2] += data
        if self.heading is not None:
            self.heading[1] += data

    def handle_endtag(self, tag):
        if self.heading is not None and tag == self.heading[0]:
            self.headings[tag].append(self.heading[1])
            self.heading = None
        if tag == "table":
            self.inside = False
        elif tag in ("td", "th") and self.cell is not None:
            key, kind, text = self.cell
            if kind == "td":
                self.rows[-1][key] = text
            self.cell = None


def chromium():
    """A headless-capable Chromium on PATH, or None."""
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def render_in_chromium(page) -> tuple:
    """(the DOM after the page's scripts ran, [its console messages]) of a local HTML file in
    headless Chromium; a script error or a console.error shows up in the messages."""
    import subprocess

    done = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", "--dump-dom", Path(page).as_uri()], capture_output=True, text=True, timeout=120,
                          check=True)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


# -- an independent exact reference: each model's definition, in rational arithmetic -------------

def fractions(row):
    """The float values of ``row`` as exact Fractions."""
    return [Fraction(float(x)) for x in row]


def _complex(row):
    half = len(row) // 2
    return list(zip(row[:half], row[half:]))


def _multiply(a, b):
    return (a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0])


def _sqrt_sum_key(values):
    """Σ sqrt(v) of non-negative Fractions, to 80 significant digits."""
    import decimal
    with decimal.localcontext(decimal.Context(prec=80)):
        return sum((decimal.Decimal(v.numerator) / decimal.Decimal(v.denominator)).sqrt() for v in values)


def exact_score_key(model, h, r, t):
    """A key ordering (h, r, t) as the model's score does, exactly: the score itself, or for
    TransE-L2 and RotatE the negated squared distance (same order as the negated distance)."""
    if model == "DistMult":
        return sum(a * b * c for a, b, c in zip(h, r, t))
    if model == "RESCAL":
        d = len(h)
        return sum(h[i] * r[i * d + j] * t[j] for i in range(d) for j in range(d))
    if model == "SimplE":
        d = len(h) // 2
        return Fraction(1, 2) * sum(h[k] * r[k] * t[d + k] + t[k] * r[d + k] * h[d + k] for k in range(d))
    if model in ("TransE-L1", "TransE-L2"):
        x = [a + b - c for a, b, c in zip(h, r, t)]
        return -sum(abs(v) for v in x) if model == "TransE-L1" else -sum(v * v for v in x)
    hc, rc, tc = _complex(h), _complex(r), _complex(t)
    if model == "ComplEx":  # Re Σ h r conj(t)
        return sum(hr[0] * c[0] + hr[1] * c[1] for hr, c in ((_multiply(a, b), c) for a, b, c in zip(hc, rc, tc)))
    moduli = [(hr[0] - c[0]) ** 2 + (hr[1] - c[1]) ** 2 for hr, c in ((_multiply(a, b), c) for a, b, c in zip(hc, rc, tc))]
    if model == "RotatE":
        return -sum(moduli)
    return -_sqrt_sum_key(moduli)  # RotatE-DGLKE: Σ |h r - t| (80 digits: far beyond any near-tie here)


def stored_rows(table):
    """The stored rows of an embedding table as real float64 (N, w): complex as [Re | Im] halves."""
    table = table.detach().cpu()
    if table.is_complex():
        table = torch.cat([table.real, table.imag], dim=-1)
    return table.reshape(table.shape[0], -1).double().numpy()


def rational_counts(dataset, scorer, model, filter_sets=("train", "valid", "test")):
    """{side: [(n_greater, n_equal, n_candidates)]} per test triple of ``model`` (its stored tables in
    ``scorer``), by loops over each candidate's exact key (:func:`exact_score_key`, rational arithmetic)."""
    entities = [fractions(row) for row in stored_rows(scorer.entities)]
    relations = [fractions(row) for row in stored_rows(scorer.relations)]
    known = [tuple(row) for split in filter_sets for row in dataset.triples[split].tolist()]
    heads, tails = known_answers(known)
    counts = {"head": [], "tail": []}
    for h, r, t in dataset.triples["test"].tolist():
        for side in ("head", "tail"):
            true = h if side == "head" else t
            removed = (heads.get((r, t), set()) if side == "head" else tails.get((h, r), set())) - {true}

            def key(c, h=h, r=r, t=t, side=side):
                return exact_score_key(model, entities[c], relations[r], entities[t]) if side == "head" else \
                    exact_score_key(model, entities[h], relations[r], entities[c])

            target = key(true)
            others = [key(c) for c in range(dataset.num_entities) if c != true and c not in removed]
            counts[side].append((sum(v > target for v in others), sum(v == target for v in others), len(others) + 1))
    return counts


def lifted_scorer(dataset, hit_rate, seed):
    """A scoring function: random scores, and the true answer lifted to the top for a share
    ``hit_rate`` of the queries (each query's draws fixed by its own ids, whatever the batch)."""
    from openbench.models.base import score_function

    def scores(batch, side):
        rows = []
        for h, r, t in batch.tolist():
            query = np.random.default_rng([seed, h, r, t, side == "head"])
            row = query.random(dataset.num_entities)
            if np.random.default_rng([7, h, r, t, side == "head"]).random() < hit_rate:
                row[h if side == "head" else t] += 2.0
            rows.append(row)
        return torch.tensor(np.array(rows))

    return score_function(scores, dataset.num_entities, name=f"oracle {hit_rate}")


def evaluated(dataset, scorer, batch_size=None, **options):
    """The record (JSON values) of ``scorer`` on ``dataset`` through the one door, on the CPU
    unless told otherwise (what the old evaluator shells' ``evaluate()`` returned)."""
    from openbench.evaluation.evaluate import evaluate

    options.setdefault("device", "cpu")
    return evaluate(dataset, scorer, batch_size=batch_size, **options).to_dict()


def record_counts(record):
    """{side: [(n_greater, n_equal without the answer, n_candidates)]} of a record evaluated in
    this process (its ``ranks``), each side in evaluation order."""
    ranks = record.ranks
    return {side: [(g, e - 1, c) for g, e, c in ranks.filter(ranks["side"] == side)
                   .select("n_greater", "n_equal", "n_candidates").iter_rows()]
            for side in ("head", "tail") if side in set(ranks["side"].to_list())}


def exact_stats(record):
    """The exact-ranks statistics of a record (``timing.exact_ranks``): rescored, float64,
    identical, decimal, unresolved, ..."""
    values = record.to_dict() if hasattr(record, "to_dict") else record
    return values["timing"]["exact_ranks"]


def repurposing_worker(rank, world, folder, rendezvous, out, model_seed):
    """One gloo rank of a sharded repurposing evaluation (``shard="entities"``): rank 0 writes the
    record to ``out``."""
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=120))
    try:
        dataset = load_dataset(folder)
        rng = np.random.default_rng(model_seed)
        entities = rng.normal(size=(dataset.num_entities, 6)).astype(np.float32)
        relations = rng.normal(size=(dataset.num_relations, 6)).astype(np.float32)
        scorer = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
        record = evaluate(dataset, scorer, task="repurposing", relations=["indication"],
                          negative_relations=["contraindication"], recall_at=[1, 10, 50], keep_top=30,
                          shard="entities").to_dict()
        record.pop("timing")
        if rank == 0:
            Path(out).write_text(json.dumps(record, sort_keys=True))
    finally:
        dist.destroy_process_group()


def planted_graph(seed, drugs=14, diseases=11, genes=8):
    """Labelled splits: indications (a fifth stored disease first), contraindications, gene edges."""
    rng = np.random.default_rng(seed)
    drug = [f"drug::D{i:02d}" for i in range(drugs)]
    disease = [f"disease::S{i:02d}" for i in range(diseases)]
    gene = [f"gene::G{i:02d}" for i in range(genes)]
    pairs = sorted({(int(a), int(b)) for a, b in zip(rng.integers(0, drugs, 70), rng.integers(0, diseases, 70))})
    rng.shuffle(pairs)
    splits = {"train": [], "valid": [], "test": []}
    for index, (a, b) in enumerate(pairs):
        split = "test" if index % 5 == 0 else "valid" if index % 7 == 1 else "train"
        triple = (disease[b], "indication", drug[a]) if index % 5 == 2 else (drug[a], "indication", disease[b])
        splits[split].append(triple)
    contra = sorted({(int(a), int(b)) for a, b in zip(rng.integers(0, drugs, 25), rng.integers(0, diseases, 25))})
    for index, (a, b) in enumerate(contra):
        splits["test" if index % 3 == 0 else "train"].append((drug[a], "contraindication", disease[b]))
    for i in range(drugs):
        splits["train"].append((drug[i], "targets", gene[i % genes]))
    for i in range(diseases):
        splits["train"].append((gene[i % genes], "associated", disease[i]))
    return splits


def fused_matrix_pass_available() -> bool:
    """Whether the repurposing matrix's fused pass runs here (the C helper, AVX-512 chosen)."""
    from openbench.evaluation.counting import matrix

    library = matrix.passes._library()
    return library is not None and hasattr(library, "openbench_matrix_fused_f32") and \
        bool(library.openbench_matrix_fused_available())


def exact_embedding_key(name, h, r, t):
    """The exact key (a Fraction) of DistMult, TransE-L1 or TransE-L2 (-‖h + r - t‖²) on stored rows."""
    h, r, t = ([Fraction(float(x)) for x in v] for v in (h, r, t))
    if name == "DistMult":
        return sum(a * b * c for a, b, c in zip(h, r, t))
    if name == "TransE-L1":
        return -sum(abs(a + b - c) for a, b, c in zip(h, r, t))
    return -sum((a + b - c) ** 2 for a, b, c in zip(h, r, t))


def near_tie_matrix(name, drugs, diseases=300, dim=6, seed=5):
    """(scorer, spec, exact keys {(row, col): Fraction}) of a seeded drugs × diseases matrix under
    relation 0, with column 200 a copy of column 3 (exact ties across spans and tiles) and column 150
    one float32 step from it (a near-tie only the float64 step decides)."""
    from openbench.evaluation.counting.matrix import MatrixSpec

    rng = np.random.default_rng(seed)
    entities = rng.normal(size=(drugs + diseases, dim)).astype(np.float32)
    relations = rng.normal(size=(1, dim)).astype(np.float32)
    entities[drugs + 200] = entities[drugs + 3]
    entities[drugs + 150] = np.nextafter(entities[drugs + 3], np.float32(np.inf))
    scorer = build_scorer(name, entities, relations, drugs + diseases, 1)
    spec = MatrixSpec(torch.arange(drugs), torch.arange(drugs, drugs + diseases), 0, True)
    keys = {(i, j): exact_embedding_key(name, entities[i], relations[0], entities[drugs + j]) for i in range(drugs)
            for j in range(diseases)}
    return scorer, spec, keys


def counted_in_parts(monkeypatch, function: str, keys_of_call, limit: int, *count_args, **count_options):
    """(count_matrix's result, the keys each call of the C helper ``function`` counted): the pass
    held to ``limit`` keys a call (COUNTER_LIMIT), each call's keys read by ``keys_of_call(args)`` from
    its one argument (a :class:`~openbench.evaluation.counting.matrix.c_pass.MatrixPassArgs`)."""
    from openbench.evaluation.counting import matrix

    library = matrix.passes._library()
    sizes = []
    real = getattr(library, function)

    def spy(arguments):
        sizes.append(keys_of_call(arguments._obj))  # the struct behind ctypes.byref
        return real(arguments)

    monkeypatch.setattr(library, function, spy)
    monkeypatch.setattr(matrix.core, "COUNTER_LIMIT", limit)
    return matrix.count_matrix(*count_args, **count_options), sizes


def assert_matrix_counts_are_the_definition(counted, keys, rows, cols, top=5):
    """Every special pair's greater and equal counts, and the best ``top`` pairs through the end of
    the last one's tie group, are the exact keys' ``keys`` {(row, col): Fraction}; the near-ties
    went through the float64 step."""
    import bisect

    ordered = sorted(keys.values())
    assert counted.stats["float64_in_pass"] and counted.stats["rescored"] > 0
    for p in range(rows.size):
        k = keys[(rows[p], cols[p])]
        assert counted.greater[p] == len(ordered) - bisect.bisect_right(ordered, k)
        assert counted.equal[p] == bisect.bisect_right(ordered, k) - bisect.bisect_left(ordered, k)
    cut = ordered[-top]
    assert {tuple(pair) for pair in counted.top.tolist()} == {pair for pair, v in keys.items() if v >= cut}


# -- planted values (non-finite, near a limit: tests/evaluation/test_nonfinite.py) -------------------

PLANTED_COLUMN = 1


def _planted_tables(dataset, model, dtype):
    """Random tables of ``model`` (complex models: [Re | Im] halves; RotatE: unit rotations)."""
    rng = np.random.default_rng(7)
    width = 8 if model in COMPLEX_MODELS else 4
    entities = rng.standard_normal((dataset.num_entities, width))
    if model == "RotatE":
        angles = rng.uniform(-np.pi, np.pi, (dataset.num_relations, width // 2))
        relations = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
    else:
        relations = rng.standard_normal((dataset.num_relations, width))
    return entities.astype(dtype), relations.astype(dtype)


def _planted_place(dataset, place):
    """(table, row) of a planted value: the head of the first test triple (a tail query's anchor,
    a head query's answer and every query's candidate), an entity no test triple names, or the
    first test triple's relation."""
    test = dataset.triples["test"]
    if place == "relation":
        return "relations", int(test[0, 1])
    if place == "query entity":
        return "entities", int(test[0, 0])
    named = set(test[:, 0].tolist()) | set(test[:, 2].tolist())
    return "entities", min(set(range(dataset.num_entities)) - named)


def planted_value_tables(dataset, model, value, dtype, place):
    """(entities, relations, the planted table's name, its row): :func:`_planted_tables` with
    ``value`` at column :data:`PLANTED_COLUMN` of the row :func:`_planted_place` picks."""
    entities, relations = _planted_tables(dataset, model, dtype)
    table, row = _planted_place(dataset, place)
    (entities if table == "entities" else relations)[row, PLANTED_COLUMN] = value
    return entities, relations, table, row


def planted_value_worker(rank, world, folder, rendezvous, out, value):
    """One gloo rank of an entity-sharded DistMult evaluation with ``value`` planted in a query
    entity's row: ``out`` + rank holds the counts' repr, or the one-line error the rank raised."""
    from openbench.errors import OpenbenchError

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=60))
    try:
        dataset = load_dataset(folder)
        entities, relations, _, _ = planted_value_tables(dataset, "DistMult", value, np.float32, "query entity")
        scorer = build_scorer("DistMult", entities, relations, dataset.num_entities, dataset.num_relations)
        try:
            found = repr(sorted(record_counts(evaluate(dataset, scorer, shard="entities", batch_size=4,
                                                       device="cpu")).items()))
        except OpenbenchError as error:
            found = str(error)
        Path(f"{out}{rank}").write_text(found)
    finally:
        dist.destroy_process_group()


# -- dated graphs (a split by the edges' dates, issue 75) ------------------------------------------

DRUGS = [f"DB{i:05d}" for i in range(12)]
DISEASES = [f"MONDO:{i:07d}" for i in range(10)]
GENES = [f"NCBIGENE:{i}" for i in range(30)]
CUTOFF, VALID_CUTOFF = datetime.date(2020, 6, 30), datetime.date(2019, 12, 31)


def dated_graph(seed: int):
    """[(head, relation, tail)]: treats (drug → disease), targets (drug → gene), GENE_GENE."""
    rng = np.random.default_rng(seed)
    edges = set()
    for _ in range(160):
        edges.add((DRUGS[rng.integers(len(DRUGS))], "treats", DISEASES[rng.integers(len(DISEASES))]))
        edges.add((DRUGS[rng.integers(len(DRUGS))], "targets", GENES[rng.integers(len(GENES))]))
        a, b = rng.integers(len(GENES), size=2)
        if a != b:
            edges.add((GENES[a], "GENE_GENE", GENES[b]))
    return sorted(edges)


def dated_rows(edges, seed: int):
    """[(head, relation, tail, date or "")]: dates from 2015 to 2022, a few undated, and some edges
    listed twice with two dates (the earlier one counts)."""
    rng = np.random.default_rng(seed)
    rows = []
    for index, edge in enumerate(edges):
        day = datetime.date(2015, 1, 1) + datetime.timedelta(days=int(rng.integers(0, 8 * 365)))
        rows.append((*edge, "" if index % 23 == 0 else day.isoformat()))
        if index % 17 == 0:  # listed again, later
            rows.append((*edge, (day + datetime.timedelta(days=400)).isoformat()))
    return rows


def write_dated(path, rows, header=True):
    lines = (["head\trelation\ttail\tdate"] if header else []) + ["\t".join(row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path
