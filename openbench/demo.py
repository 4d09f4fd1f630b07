"""``openbench demo``: a seeded planted-structure graph, a PyKEEN baseline, an openbench evaluation.

The graph is synthetic on purpose: a few hundred entities in typed clusters, relations that map
clusters to clusters, so a trained model must land far above the random baseline (AMRI near 1)
while a constant model would sit at AMRI 0. It is written in OpenBioLink's sample layout
(headerless 6-column TSV, with value-0 negative rows), read back by the same loader the
``evaluate`` command uses, and everything takes an explicit seed.
"""
from __future__ import annotations


import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from openbench._io import replace_folder
from openbench.evaluation.statistics.describe import (AMRI_READING, classification_readings, ranking_readings,
                                                      record_protocol_line)
from openbench.datasets.layouts import SAMPLE_FILES
from openbench.progress import stage

__all__ = ["NODE_TYPES", "RELATIONS", "planted_graph", "PLANTED_ENTRIES", "PIPELINE_ENTRIES", "claim_output",
           "write_samples", "run_demo", "compare_models", "baseline_records", "train_and_evaluate", "trained_scorer", "PIPELINE_MODELS", "run_pipeline_demo",
           "results_table", "submit_to_leaderboard", "entity_heldout", "ENTITY_SPLIT", "write_report"]

logger = logging.getLogger(__name__)

NODE_TYPES = ("GENE", "PHENOTYPE", "DIS")
# relation -> (head type, tail type)
RELATIONS = {
    "GENE_GENE": ("GENE", "GENE"),
    "GENE_PHENOTYPE": ("GENE", "PHENOTYPE"),
    "DIS_PHENOTYPE": ("DIS", "PHENOTYPE"),
    "GENE_DIS": ("GENE", "DIS"),
    "IS_A": ("PHENOTYPE", "PHENOTYPE"),
}
Triple = Tuple[str, str, str]


def planted_graph(seed: int, entities_per_type: int = 150, clusters_per_type: int = 10,
                  edges_per_relation: int = 900) -> Dict[str, List[Triple]]:
    """Triples where relation r links cluster c of its head type to cluster π_r(c) of its tail type.

    Returns {"train", "valid", "test"} (80/10/10), with every evaluation entity seen in training.
    """
    rng = np.random.default_rng(seed)
    labels = {kind: [f"demo:{kind.lower()}_{i:04d}" for i in range(entities_per_type)] for kind in NODE_TYPES}
    cluster = {kind: rng.integers(0, clusters_per_type, entities_per_type) for kind in NODE_TYPES}
    members = {kind: [np.flatnonzero(cluster[kind] == c) for c in range(clusters_per_type)] for kind in NODE_TYPES}
    triples = set()
    for relation, (head_type, tail_type) in RELATIONS.items():
        mapping = rng.permutation(clusters_per_type)
        heads = rng.integers(0, entities_per_type, edges_per_relation)
        for head in heads:
            pool = members[tail_type][mapping[cluster[head_type][head]]]
            if len(pool):
                tail = pool[rng.integers(0, len(pool))]
                if not (head_type == tail_type and head == tail):
                    triples.add((labels[head_type][head], relation, labels[tail_type][tail]))
    ordered = sorted(triples)
    order = rng.permutation(len(ordered))
    n_eval = len(ordered) // 10
    splits = {"test": [ordered[i] for i in order[:n_eval]], "valid": [ordered[i] for i in order[n_eval:2 * n_eval]],
              "train": [ordered[i] for i in order[2 * n_eval:]]}
    seen = {entity for h, _, t in splits["train"] for entity in (h, t)}
    for split in ("valid", "test"):
        splits[split] = [(h, r, t) for h, r, t in splits[split] if h in seen and t in seen]
    return splits


PLANTED_ENTRIES = ("dataset", "model", "result.json")
PIPELINE_ENTRIES = ("graph", "split", "split_entity", "models", "results", "leaderboard.sqlite", "leaderboard",
                    "report")


def claim_output(out: Path, entries) -> None:
    """Make ``out`` the demo's folder: refused unless it is new, empty or an earlier demo's (it then
    holds nothing but ``entries``); marked at once, so that a rerun after a kill is accepted."""
    from graphgen.pipeline import SAMPLE_DIR
    from openbench._io import check_output_folder, write_marker

    check_output_folder(out, [SAMPLE_DIR])
    out.mkdir(parents=True, exist_ok=True)
    write_marker(out, "demo", entries)


def write_samples(folder: Path, splits: Dict[str, List[Triple]], seed: int) -> None:
    """OpenBioLink sample files: positives (value 1) plus as many type-respecting random negatives (value 0)."""
    rng = np.random.default_rng(seed + 1)
    known = {triple for triples in splits.values() for triple in triples}
    tails_by_relation = {rel: sorted({t for triples in splits.values() for _, r, t in triples if r == rel})
                         for rel in RELATIONS}
    texts = {}
    for split, triples in splits.items():
        lines = [f"{h}\t{r}\t{t}\t\t1\tDEMO" for h, r, t in triples]
        for h, r, _ in triples:
            tails = tails_by_relation[r]
            t = tails[rng.integers(0, len(tails))]
            if (h, r, t) not in known:
                lines.append(f"{h}\t{r}\t{t}\t\t0\tGENERATED")
        texts[SAMPLE_FILES[split]] = "\n".join(lines) + "\n"

    def fill(staging: Path) -> None:
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")

    replace_folder(folder, fill, kind="dataset")


def run_demo(out: Path, seed: int = 0, epochs: int = 40, model: str = "DistMult", dim: int = 32,
             device: str = "auto", progress: bool = True) -> dict:
    """Build the demo graph under ``out``, train ``model`` with PyKEEN, evaluate it; return the result."""
    from openbench.datasets.loader import load_dataset

    from openbench._io import write_json

    out = Path(out)
    claim_output(out, PLANTED_ENTRIES)
    data = out / "dataset"
    logger.info("writing the planted graph (seed %d) to %s", seed, data)
    write_samples(data, planted_graph(seed), seed)
    result = train_and_evaluate(load_dataset(data), model, out / "model", dim, epochs, seed, device, progress)
    write_json(out / "result.json", result)
    return result


def train_and_evaluate(dataset, model: str, folder: Path, dim: int, epochs: int, seed: int, device: str,
                       progress: bool) -> dict:
    """Train ``model`` with PyKEEN, save ``folder/{entities,relations}.npy``, evaluate with openbench."""
    from openbench.evaluation.evaluate import evaluate

    scorer = trained_scorer(dataset, model, folder, dim, epochs, seed, progress)
    return evaluate(dataset, scorer, device=device, seed=seed, progress=progress).to_dict()


def trained_scorer(dataset, model: str, folder: Path, dim: int, epochs: int, seed: int, progress: bool):
    """Train ``model`` with PyKEEN, save ``folder/{entities,relations}.npy``; the embedding scorer
    of the saved arrays (recording the training and the files' sha256)."""
    from openbench.models.arrays import ENTITY_FILE, RELATION_FILE, write_arrays
    from openbench.models.scorers import build_scorer, file_sha256
    from openbench.training import train_embeddings

    stage("demo: training %s with PyKEEN (%d epochs)", model, epochs)
    entities, relations = train_embeddings(dataset, model=model, dim=dim, epochs=epochs, seed=seed,
                                           progress=progress)

    def fill(staging: Path) -> None:
        write_arrays(staging, {"kind": "pykeen-arrays", "scorer": model, "dimensions": dim, "epochs": epochs,
                               "seed": seed}, entities, relations)

    replace_folder(folder, fill, kind="embeddings")
    scorer = build_scorer(model, entities, relations, dataset.num_entities, dataset.num_relations)
    return scorer.described({"trained_by": "pykeen", "epochs": epochs},
                            file_sha256(folder / ENTITY_FILE, folder / RELATION_FILE))

PIPELINE_MODELS = ("DistMult", "TransE-L2")
DEMO_NEGATIVES = 20  # sampled negatives per test query and side (filtered, distinct) in the demo's split


def run_pipeline_demo(out: Path, seed: int = 0, epochs: int = 60, dim: int = 32, device: str = "auto",
                      progress: bool = True) -> Dict[str, dict]:
    """The whole job on the embedded sample sources, offline: generate the graph (nq), split it
    (random, with negatives and leakage removal), train two PyKEEN baselines, evaluate both.

    Writes ``out/graph/graph_files``, ``out/split``, ``out/models/<model>/*.npy``,
    ``out/results/<model>.json`` and the per-query ranks ``out/results/<model>.ranks.parquet``;
    returns {model: result}.
    """
    from graphgen.pipeline import SAMPLE_DIR, generate
    from openbench._io import write_json
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate
    from openbench.evaluation.statistics.ranks_table import write_ranks
    from splits.pipeline import split_random

    out = Path(out)
    claim_output(out, PIPELINE_ENTRIES)
    stage("demo: generating the graph from the embedded sample sources")
    generate(out / "graph", sources_dir=SAMPLE_DIR, steps=("parse", "build"), quality="nq", progress=progress)
    graph = out / "graph" / "graph_files"
    stage("demo: splitting %s", graph)
    split_random(graph / "edges.csv", graph / "TN_edges.csv", graph / "ALL_nodes.csv", out / "split",
                 test_frac=0.1, val=0.1, seed=seed, eval_negatives=DEMO_NEGATIVES)
    dataset = load_dataset(out / "split")
    results = {}
    for model in PIPELINE_MODELS:
        scorer = trained_scorer(dataset, model, out / "models" / model, dim, epochs, seed, progress)
        stage("demo: evaluating %s (full filtered ranking, classification, sampled protocol)", model)
        settings = dict(device=device, seed=seed, progress=progress)
        full = evaluate(dataset, scorer, **settings)
        results[model] = full.to_dict()
        write_json(out / "results" / f"{model}.json", results[model])
        write_ranks(out / "results" / f"{model}.ranks.parquet", full.ranks, results[model])  # for compare
        classification = evaluate(dataset, scorer, task="classification", **settings).to_dict()
        write_json(out / "results" / f"{model}.classification.json", classification)
        # the same embeddings under OGB's sampled protocol: each test query against its own
        # negatives of the split's test_negatives.npz, unfiltered
        sampled = evaluate(dataset, scorer, protocol="sampled", **settings).to_dict()
        write_json(out / "results" / f"{model}.sampled.json", sampled)
        results[model] = dict(results[model], classification_record=classification, sampled_record=sampled)
    return results


# the demo's zero-shot question: diseases whose drugs and genes the model never saw in training
# (TxGNN's kind of split), the diseases keeping their phenotypes and hierarchy
ENTITY_SPLIT: Dict[str, Any] = {"node_type": "DIS", "fraction": 0.3, "relations": ["DIS_DRUG", "GENE_DIS"]}


def entity_heldout(out: Path, seed: int = 0, epochs: int = 60, dim: int = 32, device: str = "auto",
                   progress: bool = True) -> str:
    """The demo's entity-held-out evaluation: split the demo's graph holding out diseases
    (:data:`ENTITY_SPLIT`, ``out/split_entity``), train DistMult on its training set and evaluate it
    with the three baselines every such table shows (popularity, rules, the structure baseline);
    writes ``out/results/entity/<model>.json`` and returns the table."""
    from openbench._io import write_json
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate
    from openbench.models.popularity import popularity_model
    from openbench.models.rules import rules_model
    from openbench.models.structure import neighbour_model
    from splits.entity_split import Selection
    from splits.pipeline import split_entity

    graph = Path(out) / "graph" / "graph_files"
    stage("demo: holding out %.0f%% of the diseases (their %s edges) in %s", 100 * ENTITY_SPLIT["fraction"],
          " and ".join(ENTITY_SPLIT["relations"]), Path(out) / "split_entity")
    info = split_entity(graph / "edges.csv", graph / "TN_edges.csv", graph / "ALL_nodes.csv", Path(out) / "split_entity",
                        selection=Selection(node_type=ENTITY_SPLIT["node_type"], fraction=ENTITY_SPLIT["fraction"]),
                        relations=list(ENTITY_SPLIT["relations"]), seed=seed)
    dataset = load_dataset(Path(out) / "split_entity")
    models = {"DistMult": trained_scorer(dataset, "DistMult", Path(out) / "models" / "DistMult-entity", dim, epochs,
                                         seed, progress),
              "popularity": popularity_model(dataset), "rules": rules_model(dataset),
              "neighbours": neighbour_model(dataset)}
    from openbench.evaluation.statistics.ranks_table import write_ranks

    records = {}
    for name, model in models.items():
        evaluated = evaluate(dataset, model, device=device, seed=seed)
        records[name] = evaluated.to_dict()
        write_json(Path(out) / "results" / "entity" / f"{name}.json", records[name])
        write_ranks(Path(out) / "results" / "entity" / f"{name}.ranks.parquet", evaluated.ranks, records[name])
    rows = [f"the zero-shot disease question: {info['heldout']['test']} held-out diseases, none of their "
            f"{' or '.join(ENTITY_SPLIT['relations'])} edges in training (openbench split entity); "
            + record_protocol_line(records["DistMult"]),
            *_ranking_rows(records, "popularity"),
            *verdicts_against_popularity(Path(out), seed, "results/entity", ("DistMult",)),
            "(rules: what leakage patterns alone predict; neighbours: what the graph's structure alone predicts)"]
    rows += ["", *_repurposing_rows(dataset, models, Path(out), device, seed)]
    return "\n".join(rows)


def _repurposing_rows(dataset, models: Dict[str, object], out: Path, device: str, seed: int) -> List[str]:
    """The same held-out diseases as TxGNN asks about them: each held-out disease's test
    indications among all drugs (the repurposing task's disease-specific view; the whole drug ×
    disease matrix beside it); writes ``out/results/entity/<model>.repurposing.json``."""
    from openbench._io import write_json
    from openbench.evaluation.evaluate import evaluate

    records = {}
    for name, model in models.items():
        records[name] = evaluate(dataset, model, task="repurposing", relations=["DIS_DRUG"], recall_at=[10, 100],
                                 hits_at=[1, 3, 10], device=device, seed=seed).to_dict()
        write_json(out / "results" / "entity" / f"{name}.repurposing.json", records[name])
    first = records["DistMult"]["repurposing"]
    matrix, view = first["matrix"], first["views"]["test"]
    disease = view.get("disease_specific") or {}
    lines = [f"the same held-out diseases as drug repurposing (openbench evaluate --task repurposing --relation DIS_DRUG):"
             f" each held-out disease's {view['positives']} test indication(s) ranked among all {matrix['drugs']} drugs"
             f" ({disease.get('diseases', 0)} diseases, macro averages), and among the whole {matrix['drugs']} × "
             f"{matrix['diseases']} matrix; realistic ranks, the known indications filtered",
             f"{'model':<12}{'MRR':>8}{'Hit@3':>8}{'Hit@10':>8}{'AUROC':>8}{'AUPRC':>8}  {'matrix AUROC':>12}"]
    for name, record in records.items():
        test = record["repurposing"]["views"]["test"]
        specific = test.get("disease_specific") or {}
        macro = ((specific.get("macro") or {}).get("realistic") or {})
        lines.append(f"{name:<12}{_cell(macro.get('mrr')):>8}{_cell(macro.get('hits@3')):>8}"
                     f"{_cell(macro.get('hits@10')):>8}{_cell(specific.get('auroc')):>8}"
                     f"{_cell(specific.get('auprc')):>8}  {_cell((test.get('full_matrix') or {}).get('auroc')):>12}")
    return lines


def baseline_records(out: Path, seed: int = 0, device: str = "auto") -> Dict[str, dict]:
    """The baselines on the demo's split, each written as ``out/results/<name>.json`` with its
    ranks ``<name>.ranks.parquet``: popularity (each candidate scored by its training degree within
    the query's relation and side) and,
    where the training set shows leakage patterns, rules (what those patterns alone predict;
    without patterns it would be popularity again). Returns {name: record}."""
    from openbench._io import write_json
    from openbench.datasets.loader import load_dataset
    from openbench.evaluation.evaluate import evaluate
    from openbench.evaluation.statistics.ranks_table import write_ranks
    from openbench.models.popularity import popularity_model
    from openbench.models.rules import rules_model

    dataset = load_dataset(Path(out) / "split")
    models = {"popularity": popularity_model(dataset), "rules": rules_model(dataset)}
    if models["rules"].implied_count == 0:
        del models["rules"]
    records = {}
    for name, model in models.items():
        evaluated = evaluate(dataset, model, device=device, seed=seed)
        records[name] = evaluated.to_dict()
        write_json(Path(out) / "results" / f"{name}.json", records[name])
        write_ranks(Path(out) / "results" / f"{name}.ranks.parquet", evaluated.ranks, records[name])
    return records


def verdicts_against_popularity(out: Path, seed: int = 0, folder: str = "results",
                                models: Sequence[str] = PIPELINE_MODELS) -> List[str]:
    """One line per model: its paired comparison with the popularity baseline on the same test
    queries (``openbench compare`` of their ranks files): the MRR difference with its 95 %
    interval, the query count, and the verdict."""
    from openbench.evaluation.statistics.compare import compare_ranks

    results = Path(out) / folder
    lines = []
    for model in models:
        result = compare_ranks(results / f"{model}.ranks.parquet", results / "popularity.ranks.parquet", seed=seed,
                               names=(model, "popularity"))
        low, high = result["ci"]
        if low > 0 or high < 0:
            verdict = f"{model if result['difference'] > 0 else 'popularity'} is better"
        else:
            verdict = "no clear difference (the interval includes 0)"
        lines.append(f"{model} against popularity on {result['queries']} queries: MRR {result['a']:.4f} against "
                     f"{result['b']:.4f}, difference {result['difference']:+.4f}, 95 % interval [{low:+.4f}, "
                     f"{high:+.4f}] (paired bootstrap; p = {result['p_value']:.2g}, sign-flip test): {verdict}")
    return lines


def compare_models(out: Path, seed: int = 0) -> str:
    """The paired comparison of the two baselines from their ranks files (``openbench compare``'s
    table): DistMult - TransE-L2 on the realistic MRR, interval, p-values."""
    from openbench.evaluation.statistics.compare import compare_ranks, format_comparison

    first, second = (Path(out) / "results" / f"{model}.ranks.parquet" for model in PIPELINE_MODELS)
    result = compare_ranks(first, second, seed=seed, names=PIPELINE_MODELS)
    return format_comparison(result, *PIPELINE_MODELS)


def _cell(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _ranking_rows(records: Dict[str, dict], baseline: Optional[str] = None) -> List[str]:
    """Rows of realistic MRR, hits@1, hits@10 and AMRI over both sides, then the readings (near
    chance, below the ``baseline`` row)."""
    rows = [f"{'model':<12} {'MRR':>7} {'hits@1':>7} {'hits@10':>8} {'AMRI':>7}"]
    blocks = {model: record["metrics"]["both"]["realistic"] for model, record in records.items()}
    for model, block in blocks.items():
        rows.append(f"{model:<12} {_cell(block['mrr']):>7} {_cell(block.get('hits@1')):>7} "
                    f"{_cell(block.get('hits@10')):>8} {_cell(block['amri']):>7}")
    for model, block in blocks.items():
        against = blocks.get(baseline) if baseline and model != baseline else None
        rows += [f"reading: {line}" for line in ranking_readings(model, block, against, baseline or "popularity")]
    return rows


def results_table(results: Dict[str, dict], baselines: Optional[Dict[str, dict]] = None) -> str:
    """The demo's tables, each titled with what it holds (:mod:`openbench.evaluation.statistics.describe`):
    full filtered ranking of the trained models beside the ``baselines`` records (popularity,
    rules), the same models under the sampled protocol, and as triple classifiers."""
    ranking = {**results, **(baselines or {})}
    first = next(iter(results.values()))
    from openbench.models.popularity import POPULARITY_SCORE

    explained = [f"popularity: each candidate scored by its {POPULARITY_SCORE}"]
    if "rules" in ranking:
        explained.append("rules: what the training set's leakage patterns alone predict")
    rows = ["link prediction on the demo's split: " + record_protocol_line(first),
            *_ranking_rows(ranking, "popularity" if "popularity" in ranking else None),
            "(" + "; ".join(explained + [AMRI_READING]) + ")"]
    if "rules" in ranking and "popularity" in ranking and \
            ranking["rules"]["metrics"]["both"]["realistic"]["mrr"] == ranking["popularity"]["metrics"]["both"]["realistic"]["mrr"]:
        rows.insert(-1, "reading: rules scores exactly what popularity does: no test answer is given away by a "
                        "leakage pattern of the training set (the split removed those triples)")
    sampled = {model: result["sampled_record"] for model, result in results.items() if "sampled_record" in result}
    if sampled:
        rows += ["", "the same models under OGB's sampled protocol: " + record_protocol_line(next(iter(sampled.values()))),
                 f"{'model':<12} {'MRR':>7} {'hits@1':>7} {'hits@10':>8} {'full MRR':>9}"]
        for model, record in sampled.items():
            block = record["metrics"]["both"]["realistic"]
            full = results[model]["metrics"]["both"]["realistic"]["mrr"]
            rows.append(f"{model:<12} {block['mrr']:>7.4f} {block['hits@1']:>7.4f} {block['hits@10']:>8.4f} "
                        f"{full:>9.4f}")
        rows.append("(the sampled MRR is higher because each answer competes with 20 negatives, not every entity)")
    classified = {model: result["classification_record"] for model, result in results.items()
                  if "classification_record" in result}
    if classified:
        overall = next(iter(classified.values()))["classification"]["test"]["overall"]
        rows += ["", f"triple classification, test set: {overall['positives']} positives against {overall['negatives']} "
                     "negatives (true negatives and generated ones), a threshold per relation chosen on validation; "
                     "AUROC 0.5 = chance:",
                 f"{'model':<12} {'AUROC':>7} {'AUPRC':>7} {'accuracy':>8} {'F1':>7} {'AUROC vs true negatives':>24}"]
        readings = []
        for model, record in classified.items():
            test = record["classification"]["test"]
            block = test["overall"]
            rows.append(f"{model:<12} {_cell(block['auroc']):>7} {_cell(block['auprc']):>7} "
                        f"{_cell(block['accuracy']):>8} {_cell(block['f1']):>7} "
                        f"{_cell(test['by_negative_kind']['true_negatives']['auroc']):>24}")
            readings += classification_readings(model, block["auroc"], block.get("positives"), block.get("negatives"))
            true_negatives = test["by_negative_kind"]["true_negatives"]
            readings += classification_readings(f"{model} against the true negatives", true_negatives["auroc"],
                                                block.get("positives"), true_negatives.get("negatives"))
        rows += [f"reading: {line}" for line in readings]
    return "\n".join(rows)


def _submit_entity_records(board, out: Path, seed: int) -> None:
    """The zero-shot records (``out/results/entity``: ranking and repurposing) on the demo's board,
    each reproduced from its model on ``out/split_entity`` (their split's own tables)."""
    from openbench._io import read_json
    from openbench.leaderboard.reproduce import reproduce
    from openbench.models.sources import ModelSpec

    folder = out / "results" / "entity"
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.json")):
        name = path.name.split(".")[0]
        files = out / "models" / f"{name}-entity"
        spec = ModelSpec(str(files / "entities.npy"), str(files / "relations.npy"), name) \
            if (files / "entities.npy").is_file() else ModelSpec(model=name)
        reproduced, certificate = reproduce(read_json(path, "result record"), spec, out / "split_entity")
        kind = {"popularity": "other", "rules": "interpretable", "neighbours": "other"}.get(name, "latent")
        board.submit(reproduced.to_dict(), name=f"{name} (demo zero-shot, seed {seed})", model_type=kind,
                     notes="openbench demo: diseases held out (openbench split entity)", verified="reproduced",
                     ranks=reproduced.ranks, certificate=certificate)


def submit_to_leaderboard(results: Dict[str, dict], out: Path, seed: int) -> Path:
    """Put the demo's results on a fresh local leaderboard (``out/leaderboard.sqlite``) and write its
    HTML page (``out/leaderboard/index.html``); returns the page."""
    from openbench.leaderboard import open_leaderboard
    from openbench.leaderboard.render import render

    from openbench.leaderboard.reproduce import reproduce
    from openbench.models.sources import ModelSpec

    database = out / "leaderboard.sqlite"
    database.unlink(missing_ok=True)  # the demo's own board: a rerun starts it afresh
    board = open_leaderboard(database)
    try:
        for model, result in results.items():
            ranking = {key: value for key, value in result.items()
                       if key not in ("classification_record", "sampled_record")}
            # the board re-evaluates each model from its files on the split (as leaderboard submit
            # --dataset --model does): its own record and ranks, so it may compare them ("≈ best")
            files = out / "models" / model
            spec = ModelSpec(str(files / "entities.npy"), str(files / "relations.npy"), model) \
                if (files / "entities.npy").is_file() else ModelSpec(model=model)
            reproduced, certificate = reproduce(ranking, spec, out / "split")
            kind = {"popularity": "other", "rules": "interpretable"}.get(model, "latent")
            board.submit(reproduced.to_dict(), name=f"{model} (demo, seed {seed})", model_type=kind,
                         notes="openbench demo on the embedded sample graph", verified="reproduced",
                         ranks=reproduced.ranks, certificate=certificate)
            for record in (result.get("classification_record"), result.get("sampled_record")):
                if record is not None:  # the classification record is its own task on the board
                    again, its_certificate = reproduce(record, spec, out / "split")
                    board.submit(again.to_dict(), name=f"{model} (demo, seed {seed})", model_type=kind,
                                 notes="openbench demo on the embedded sample graph", verified="reproduced",
                                 ranks=again.ranks, certificate=its_certificate)
        _submit_entity_records(board, out, seed)
        from openbench.leaderboard.store import page_rows

        rows = page_rows(board)
    finally:
        board.close()
    replace_folder(out / "leaderboard", lambda staging: (staging / "index.html").write_text(render(rows, "html"),
                                                                                           encoding="utf-8"),
                   inputs=[database], kind="leaderboard page")
    return out / "leaderboard" / "index.html"



def write_report(out: Path, seed: int = 0) -> Path:
    """``openbench report`` of the demo's two trained models and the popularity baseline
    (``out/report/index.html``): per-relation MRR with intervals, rank distributions, degree
    strata and the paired comparison of DistMult and TransE-L2."""
    from openbench.evaluation.statistics.figures import build_report

    results = Path(out) / "results"
    return build_report([results / f"{model}.json" for model in (*PIPELINE_MODELS, "popularity")
                         if (results / f"{model}.json").is_file()],
                        Path(out) / "report", seed=seed)
