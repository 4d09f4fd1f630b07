"""Shared test bases: graphs, scorers and workers that several test modules use (tests never
import other test modules; what they share lives here or in :mod:`tests.helpers`)."""
import json
import random
from html.parser import HTMLParser

import torch.distributed as dist

from openbench.evaluation.dataset import load_dataset
from openbench.evaluation.distributed import DistributedEmbeddingEvaluator
from openbench.evaluation.scorers import build_scorer
from tests.helpers import integer_embeddings, random_labelled_graph, write_samples

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


def distributed_worker(rank, world, folder, rendezvous, shard, model, out, fail_rank, backend="gloo"):
    """One rank: gloo on CPU, or NCCL with one GPU per rank (tests/evaluation/test_cuda.py)."""
    dist.init_process_group(backend, init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=60))
    try:
        if rank == fail_rank:
            raise RuntimeError(f"rank {rank} dies on purpose")
        dataset = load_dataset(folder)  # written by the parent before the spawn
        evaluator = DistributedEmbeddingEvaluator(dataset, tie_heavy_scorer(dataset, model), shard=shard,
                                                  progress=False, device=f"cuda:{rank}" if backend == "nccl" else "cpu")
        result = evaluator.evaluate(batch_size=4)
        if rank == 0:
            with open(out, "w") as handle:
                json.dump(result, handle)
    finally:
        dist.destroy_process_group()


class TableReader(HTMLParser):
    """The cells of the <table class="leaderboard"> elements (one per dataset) as rendered."""

    def __init__(self):
        super().__init__()
        self.inside, self.rows, self.cell = False, [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("class", "leaderboard") in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append({})
        elif self.inside and tag in ("td", "th"):
            self.cell = [dict(attrs).get("data-key"), tag, ""]

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[2] += data

    def handle_endtag(self, tag):
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
