"""Mutation check: does the test suite catch the bugs that matter?

Each named mutation is one plausible bug, a text substitution in a core module. For each, the
script copies the project into a temporary folder, applies the mutation there (the working tree
is never touched), runs the tests that cover that module and reports whether they failed
("caught") or passed ("MISSED"). A mutation whose text is no longer in its file is reported as
"stale" (the code moved: update the list). Exit status 1 when any mutation is missed or stale.

    python benchmarks/mutation_check.py [--only NAME ...] [--list]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # relative to the project
    old: str
    new: str
    tests: Tuple[str, ...]
    fast: bool = False  # caught by the fast loop: the tests run with -m "not slow"


MUTATIONS: List[Mutation] = [
    Mutation("scale: full score rows of a handful of queries (the table streamed once per 8 queries)",
             "openbench/evaluation/producers/full.py", "        if setup.num_entities * QUERY_TILE <= budget:",
             "        if setup.num_entities * 8 <= budget:", ("tests/evaluation/test_scale.py",)),
    Mutation("scale: exact ranks' true keys read for the wrong candidate in tiled chunks", "openbench/models/scorers.py",
             "true_scores = self.score_lists(queries, side, true_ids[:, None], entity_offset,",
             "true_scores = self.score_lists(queries, side, (true_ids[:, None] + 1) % total, entity_offset,",
             ("tests/evaluation/test_scale.py",)),
    Mutation("counting kernel: the finite-scores pass counts the window's high end as beyond", "openbench/evaluation/counting/_counting.c",
             "                            gs += row[j] > high;", "                            gs += row[j] >= high;",
             ("tests/evaluation/test_kernels.py",)),
    Mutation("fraction bits: subnormals read as normal numbers", "openbench/evaluation/counting/_counting.c",
             "        const int64_t digits = 150 - (exponent ? exponent : 1) - trailing_zeros64(significand);",
             "        const int64_t digits = 150 - exponent - trailing_zeros64(significand);",
             ("tests/evaluation/test_exact_kernels.py",)),
    Mutation("audit: the threshold bound not checked", "splits/audit.py",
             "    if not 0.0 < threshold <= 1.0:", "    if False:", ("tests/splits/test_audit.py",)),
    Mutation("audit: inverse partners matched in the same orientation", "splits/audit.py",
             '    other = (_reversed(pairs) if inverse else pairs).rename({"r": "r2"})',
             '    other = pairs.rename({"r": "r2"})', ("tests/splits/test_audit.py",)),
    Mutation("split: duplicate-relation copies in training not cleaned from the test set", "splits/leakage.py",
             '    copies = [indexed.join(_partners(patterns["duplicate_relations"], "duplicate"), on="relation")',
             '    copies = [indexed.join(_partners([], "duplicate"), on="relation")',
             ("tests/splits/test_random_split.py",)),
    Mutation("outputs: a record over the recognition bound read anyway", "openbench/_io/outputs.py",
             "        if path.stat().st_size > RECOGNISED_JSON_BYTES:", "        if False:",
             ("tests/test_outputs.py",)),
    Mutation("exact ranks: a window without the rounding-error bound", "openbench/evaluation/counting/exact.py",
             "        delta = delta * (1 + 2.0 ** -30) + true_bound", "        delta = 0 * delta + true_bound",
             ("tests/evaluation/test_exact_ranks.py",)),
    Mutation("exact ranks: RotatE's head rewrite term reads the real and imaginary halves as moduli", "openbench/models/scorers.py",
             "squared_modulus = relation[:, :half] ** 2 + relation[:, half:] ** 2", "squared_modulus = relation.abs() ** 2",
             ("tests/evaluation/test_exact_kernels.py",)),
    Mutation("exact ranks: the true and known answers left in the re-scored pairs", "openbench/evaluation/counting/counts.py",
             "        scores[rows, cols] = worst\n", "        pass\n",
             ("tests/evaluation/test_exact_ranks.py",)),
    Mutation("sampled evaluation negatives may be known answers", "splits/eval_negatives.py",
             "refused = np.isin(key, known_keys) | (chosen == true[:, None]) | _repeats(chosen)",
             "refused = (chosen == true[:, None]) | _repeats(chosen)", ("tests/splits/test_eval_negatives.py",)),
    Mutation("realistic rank off by 1/2", "openbench/evaluation/statistics/metrics.py",
             '"realistic": g + (ties + 1.0) / 2.0', '"realistic": g + ties / 2.0',
             ("tests/evaluation/test_metrics.py", "tests/evaluation/test_ranking.py")),
    Mutation("filtered candidates that tie still counted as ties", "openbench/evaluation/counting/counts.py",
             "        n_equal -= torch.bincount(rows, weights=inside.to(torch.float64), minlength=batch_size).to(torch.long)",
             "        pass", ("tests/evaluation/test_ranking.py", "tests/evaluation/test_evaluator.py")),
    Mutation("AMRI random-rank term C/2 instead of (C+1)/2", "openbench/evaluation/statistics/metrics.py",
             'values["random.mr"] = (candidates + 1.0) / 2.0', 'values["random.mr"] = candidates / 2.0',
             ("tests/evaluation/test_metrics.py",)),
    Mutation("reverse-edge removal ignores the value column", "splits/leakage.py",
             'keys = ["id1", "relation", "id2", "value"]', 'keys = ["id1", "relation", "id2"]',
             ("tests/splits/test_leakage.py", "tests/splits/test_random_split.py")),
    Mutation("hierarchy check drops the child->parent direction", "splits/leakage.py",
             '& ((pl.col("train_relation") == pl.col("_parent")) | (pl.col("train_parent") == pl.col("relation"))))',
             '& (pl.col("train_relation") == pl.col("_parent")))',
             ("tests/splits/test_leakage.py", "tests/splits/test_random_split.py")),
    Mutation("negatives: a relation's excluded family leaves out its children", "splits/negatives.py",
             "return sorted({relation} | parent | {name for name, other in EDGE_TYPES.items() if other.parent == relation})",
             "return sorted({relation} | parent)",
             ("tests/splits/test_negatives.py", "tests/splits/test_random_split.py")),
    Mutation("unseen nodes: any training row makes a node seen", "splits/leakage.py",
             '    if seen_rule == "positives":\n        training = training.filter(pl.col("value") == "1")\n    seen',
             "    seen", ("tests/splits/test_leakage.py", "tests/splits/test_time_split.py")),
    Mutation("time split: training negatives ignore the positives at t", "splits/time_split.py",
             "known=positives, stats=stats[\"train_val\"])", "known=None, stats=stats[\"train_val\"])",
             ("tests/splits/test_time_split.py",)),
    Mutation("leaderboard: hits@k order check without sorting k", "openbench/record.py",
             "    return sorted(hits)\n", "    return hits\n", ("tests/test_record.py", "tests/test_leaderboard.py")),
    Mutation("leaderboard: hits@k check only for the realistic rank type", "openbench/record.py",
             "    for (k_low, low), (k_high, high) in zip(hits, hits[1:]):",
             "    for (k_low, low), (k_high, high) in (zip(hits, hits[1:]) if rank_type == \"realistic\" else []):",
             ("tests/test_record.py", "tests/test_leaderboard.py")),
    Mutation("leaderboard: optimistic/pessimistic order unchecked", "openbench/record.py",
             "        if not high + SLACK >= middle >= low - SLACK:", "        if False:",
             ("tests/test_record.py", "tests/test_leaderboard.py")),
    Mutation("Meta-Eval: truth-only papers get precision 0 instead of undefined", "openbench/text/metaeval.py",
             "return (hits / len(p) if p else None), (hits / len(t) if t else None)",
             "return (hits / len(p) if p else 0.0), (hits / len(t) if t else None)",
             ("tests/text/test_metaeval.py",)),
    Mutation("outputs: a foreign folder may be replaced", "openbench/_io/outputs.py",
             '    if marker is None and not extra:\n        raise OutputRefused(target, "a folder with content openbench did not write',
             '    if False:\n        raise OutputRefused(target, "a folder with content openbench did not write',
             ("tests/test_outputs.py",)),
    Mutation("inputs: a BOM stays in the first value", "openbench/_io/inputs.py",
             "    return data[len(BOM):] if data.startswith(BOM) and not keep_bom else data",
             "    return data", ("tests/text/test_metaeval.py", "tests/datasets/test_loader.py")),
    Mutation("HPO diseases map through OMIM xrefs only (OpenBioLink's rule)", "graphgen/recipes.py",
             'HPO_DISEASE_XREFS = {"OMIM": ("OMIM", "MIM"), "ORPHA": ("ORDO", "ORPHA", "Orphanet", "ORPHANET"),',
             'HPO_DISEASE_XREFS = {"OMIM": ("OMIM", "MIM"), "ORPHA": (),',
             ("tests/graphgen/test_disease_mapping.py",)),
    Mutation("split_info: test_cleaning reports the second pass only", "splits/random_split.py",
             "    counts[\"test_cleaning\"] = {step: test.removed.get(step, 0) + removed for step, removed in",
             "    counts[\"test_cleaning\"] = {step: removed for step, removed in",
             ("tests/splits/test_random_split.py", "tests/splits/test_time_split.py")),
    Mutation("dataset cache: a same-size edit goes unnoticed", "openbench/datasets/cache.py",
             "        if not racy and all(before.get(key) == value for key, value in now.items()):",
             "        if True:", ("tests/datasets/test_cache.py",)),
    # issue 43: a window a constant factor too narrow, each half of the rank order, revoked tokens,
    # thresholds chosen on test
    Mutation("exact ranks: the window half as wide as its stated bound", "openbench/evaluation/counting/exact.py",
             "        delta = delta * (1 + 2.0 ** -30) + true_bound", "        delta = delta * 0.5 + true_bound",
             ("tests/evaluation/test_exact_ranks.py",)),
    Mutation("exact ranks: dot-product windows forget the query's own rounding", "openbench/evaluation/counting/exact.py",
             "            delta = gamma(scorer.query_rounding + width, u) * query_norms[0] * c2",
             "            delta = gamma(width, u) * query_norms[0] * c2", ("tests/evaluation/test_exact_ranks.py",)),
    Mutation("exact ranks: RotatE heads bound their query's rounding by the anchor's magnitude, not t∘conj(r)'s",
             "openbench/evaluation/counting/exact.py",
             "            fast_magnitudes = (rewritten_two.numpy(), rewritten_one.numpy())",
             "            fast_magnitudes = query_norms", ("tests/evaluation/test_exact_ranks.py",)),
    Mutation("exact ranks: a rewritten formula computed exactly is trusted", "openbench/evaluation/counting/exact.py",
             "            computed_exactly[:] = False", "            pass", ("tests/evaluation/test_exact_ranks.py",)),
    Mutation("exact ranks: the window only below the true key", "openbench/evaluation/counting/exact.py",
             "        lows, highs = true_key - margin, true_key + margin",
             "        lows, highs = true_key - margin, true_key + 0 * margin", ("tests/evaluation/test_exact_ranks.py",)),
    Mutation("record: a realistic value better than the optimistic one passes", "openbench/record.py",
             "        if not high + SLACK >= middle >= low - SLACK:", "        if not middle >= low - SLACK:",
             ("tests/test_record.py",)),
    Mutation("record: a realistic value worse than the pessimistic one passes", "openbench/record.py",
             "        if not high + SLACK >= middle >= low - SLACK:", "        if not high + SLACK >= middle:",
             ("tests/test_record.py",)),
    Mutation("record: an expected value above the optimistic one passes", "openbench/record.py",
             "not o + SLACK >= expected >= p - SLACK:", "not expected >= p - SLACK:", ("tests/test_record.py",)),
    Mutation("tokens: a revoked token still resolves to its team", "openbench/leaderboard/teams.py",
             '        if row is None or row["revoked_at"] is not None:', "        if row is None:",
             ("tests/test_server.py",)),
    Mutation("classification: thresholds chosen on the test split", "openbench/evaluation/classification.py",
             '        scores["valid"], data["valid"], data["test"], names, threshold_metric)',
             '        scores["test"], data["test"], data["test"], names, threshold_metric)',
             ("tests/evaluation/test_classification.py",)),
    # issue 39: adjusted metrics, the ranks file, the paired bootstrap's units, their record checks
    Mutation("adjusted metrics: zmrr's variance not divided by the query count", "openbench/evaluation/statistics/metrics.py",
             'values["zmrr"] = _ratios(mrr - expected_mrr, _spread(means["random.mrr_var"], queries))',
             'values["zmrr"] = _ratios(mrr - expected_mrr, _spread(means["random.mrr_var"], np.ones_like(queries)))',
             ("tests/evaluation/test_ranks.py",)),
    Mutation("ranks file: n_equal without the answer", "openbench/evaluation/statistics/ranks_table.py",
             "    n_equal = counts.n_equal.cpu().numpy().astype(np.int64) + 1",
             "    n_equal = counts.n_equal.cpu().numpy().astype(np.int64)", ("tests/evaluation/test_ranks.py",)),
    Mutation("compare: both sides' bootstrap draws queries, not triples", "openbench/evaluation/statistics/compare.py",
             '    unit_key = list(_TRIPLE_KEY) if side == "both" else list(QUERY_KEY)', "    unit_key = list(QUERY_KEY)",
             ("tests/evaluation/test_compare.py",)),
    Mutation("record: AMR's rank order the wrong way round", "openbench/record.py",
             '        high, middle, low = (p, r, o) if name in ("mr", "amr") else (o, r, p)',
             '        high, middle, low = (p, r, o) if name in ("mr",) else (o, r, p)', ("tests/test_record.py",)),
    Mutation("record: an AMR outside (0, 2] passes", "openbench/record.py",
             "        elif name == \"amr\" and not 0.0 < number <= 2.0 + SLACK:", "        elif False:",
             ("tests/test_record.py",)),
    Mutation("leaderboard: ranks of another evaluation accepted", "openbench/evaluation/statistics/evidence.py",
             '    _expect(diagnostics.get("queries_sha256") == queries_digest(ranks),', "    _expect(True,",
             ("tests/test_uncertainty.py", "tests/evaluation/test_evidence.py")),
    Mutation("leaderboard: tests against the best row not Holm-corrected", "openbench/leaderboard/uncertainty.py",
             "            for (row, difference, _), adjusted in zip(compared, holm([p for _, _, p in compared])):",
             "            for (row, difference, _), adjusted in zip(compared, [p for _, _, p in compared]):",
             ("tests/test_uncertainty.py",)),
    # issues 36 and 37: a token's one spelling, the JSON depth bound, a user's file in a nested output
    Mutation("tokens: any secret length is a token", "openbench/leaderboard/teams.py",
             'TOKEN_PATTERN = re.compile(r"obt_([1-9][0-9]{0,17})_([A-Za-z0-9_-]{43})")',
             'TOKEN_PATTERN = re.compile(r"obt_([0-9]+)_([A-Za-z0-9_-]+)")', ("tests/test_server.py",)),
    Mutation("JSON: no nesting bound", "openbench/_io/inputs.py",
             "JSON_MAX_DEPTH = 200", "JSON_MAX_DEPTH = 10 ** 9", ("tests/test_io.py", "tests/test_server.py")),
    Mutation("server: a chunked body is not bounded as it streams in", "openbench/leaderboard/server.py",
             "            if size > max_body:", "            if False:", ("tests/test_server.py",)),
    Mutation("record: an AMRI outside [-1, 1] passes", "openbench/record.py",
             '        elif name == "amri" and not -1.0 - SLACK <= number <= 1.0 + SLACK:', "        elif False:",
             ("tests/test_record.py",)),
    Mutation("outputs: a nested output's marker owns the whole subfolder", "openbench/_io/outputs.py",
             '                    owned.add(f"{name}/{MARKER}")\n'
             '                    owned.update(f"{name}/{listed}" for listed in nested["entries"])\n'
             '                walk(Path(entry.path), name + "/")',
             '                    owned.add(f"{name}/{MARKER}")\n'
             '                    continue\n'
             '                walk(Path(entry.path), name + "/")', ("tests/test_outputs.py",)),
    # issue 40: the published KGs (checksums, counts, the readers' fixes, OGB's type order)
    Mutation("published KGs: the first download's checksum is not checked again", "openbench/datasets/published/fetch.py",
             "            _check_pin(entry, root, fetched[-1][2], path, file)\n", "",
             ("tests/datasets/test_published_kgs.py",)),
    Mutation("published KGs: the publisher's counts are not checked", "openbench/datasets/published/native/__init__.py",
             '    check_counts(stated_counts, graph.counts, fmt)\n', "",
             ("tests/datasets/test_published_kgs.py",)),
    Mutation("published KGs: PrimeKG's swapped copies kept as two edges", "openbench/datasets/published/native/primekg.py",
             "undirected=frozenset(relations)", "undirected=frozenset()", ("tests/datasets/test_published_kgs.py",)),
    Mutation("published KGs: ogbl-biokg offsets in the CSV's column order", "openbench/datasets/ogb.py",
             "for name, count in sorted(counts.items()):", "for name, count in counts.items():",
             ("tests/datasets/test_ogb_folders.py", "tests/datasets/test_published_kgs.py")),
    Mutation("published KGs: a git blob id is not checked", "openbench/_io/download.py",
             "        if digest != remote.git_sha1:", "        if False:", ("tests/graphgen/test_download.py",)),
    Mutation("published KGs: an undirected relation's edge filtered in its stored orientation only",
             "openbench/evaluation/candidates.py",
             "        known_triples = with_reverses(known_triples, [dataset.relation_labels.index(label) for label in "
             "self.undirected])\n", "", ("tests/datasets/test_published_kgs.py",)),
    Mutation("published KGs: tar members may unpack anywhere", "openbench/datasets/published/fetch.py",
             'filter="data"', 'filter="fully_trusted"', ("tests/datasets/test_published_kgs.py",)),
    # issue 49: inputs from strangers (ranks files, registries, downloads, readers, the served board)
    Mutation("strangers: a rank that is not its counts' realistic rank accepted", "openbench/evaluation/statistics/evidence.py",
             "                (~np.isfinite(r) | (r != g + (k + 1) / 2.0),", "                (~np.isfinite(r),",
             ("tests/evaluation/test_evidence.py",)),
    Mutation("strangers: the record's metrics not recomputed from the ranks", "openbench/evaluation/statistics/evidence.py",
             '    _disagreement(metrics, record.get("metrics"), "metrics", name)\n', "",
             ("tests/evaluation/test_evidence.py",)),
    Mutation("strangers: the footer's row count not bounded", "openbench/evaluation/statistics/evidence.py",
             "    if footer.rows > max_rows:", "    if False:", ("tests/evaluation/test_evidence.py",)),
    Mutation("strangers: another dataset's ranks accepted", "openbench/evaluation/statistics/evidence.py",
             '        _expect(provenance["dataset_fingerprint"] == dataset.get("fingerprint"),',
             '        _expect(True,', ("tests/evaluation/test_evidence.py",)),
    Mutation("strangers: the served board does not filter the anchors", "openbench/leaderboard/server.py",
             "                             extra, digest, anchors)", "                             extra, digest, None)",
             ("tests/test_hosting.py",)),
    Mutation("strangers: every relation's first served query in test-dev", "openbench/leaderboard/hosting.py",
             "    part[by_relation] = (np.arange(n_queries) - starts + first_part[first_of.reshape(-1)]) % len(PARTS)",
             "    part[by_relation] = (np.arange(n_queries) - starts) % len(PARTS)", ("tests/test_hosting.py",)),
    Mutation("strangers: link-local addresses reachable", "openbench/_io/download.py",
             "    if ip.is_link_local:\n        return False\n", "", ("tests/graphgen/test_download.py",)),
    Mutation("strangers: a stream past its stated size written on", "openbench/_io/download.py",
             "                    if written > cap:", "                    if False:", ("tests/graphgen/test_download.py",)),
    Mutation("strangers: a download without a deadline", "openbench/_io/download.py",
             "                    if time.monotonic() > deadline:", "                    if False:",
             ("tests/graphgen/test_download.py",)),
    Mutation("strangers: plain files read without the line bound", "openbench/_io/inputs.py",
             "    for chunk in _checked_lines(path):\n        holds_nul = holds_nul or b\"\\x00\" in chunk\n",
             "    holds_nul = True  # the lines never checked\n",
             ("tests/datasets/test_native_readers.py", "tests/splits/test_audit.py")),
    Mutation("strangers: the API's tables not checked against the dataset", "openbench/evaluation/evaluate.py",
             "    return (model.for_dataset(dataset) if hasattr(model, \"for_dataset\") else model), None",
             "    return model, None", ("tests/test_api.py",)),
    Mutation("strangers: non-finite numbers printed as JSON's NaN", "openbench/_io/outputs.py",
             "        return value if math.isfinite(value) else None", "        return value",
             ("tests/test_strict_json.py",)),
    Mutation("strangers: registry text printed with its control characters", "openbench/datasets/published/registries.py",
             "        name, family, layout, version, url = (printable(value) for value in",
             "        name, family, layout, version, url = ((value) for value in", ("tests/test_registry.py",)),
    Mutation("held out: inverse-relation copies of held-out pairs kept in training", "splits/entity_split.py",
             'edges.join(partner_table(patterns["inverse_pairs"], "inverse"), on="relation")',
             'edges.join(partner_table([], "inverse"), on="relation")', ("tests/splits/test_entity_split.py",)),
    Mutation("held out: only the graph's patterns, not training's, clean training", "splits/entity_split.py",
             "relation_patterns(training, involving=_thinned(positives, training))",
             "relation_patterns(training, involving=[])", ("tests/splits/test_entity_split.py",)),
    Mutation("held out: training negatives that draw a held-out entity kept", "splits/entity_split.py",
             "        negatives[name] = negatives[name].filter(~leaking)", "        pass",
             ("tests/splits/test_entity_split.py",)),
    Mutation("held out: validation entities may be test entities", "splits/entity_split.py",
             "    shared = sorted(set(test) & set(valid))", "    shared = []", ("tests/splits/test_entity_split.py",)),
    Mutation("held out: a transductive model scored on a cold split", "openbench/evaluation/evaluate.py",
             "    _refuse_untrained_rows(dataset, loaded, evaluation_split)", "    pass",
             ("tests/splits/test_entity_split.py",)),
    Mutation("held out: a changed held-out file read anyway", "openbench/datasets/loader.py",
             "    if digest != heldout.get(\"sha256\"):", "    if False:", ("tests/splits/test_entity_split.py",)),
    Mutation("held out: the audit misses held-out entities in training", "splits/audit.py",
             "    in_training = held.filter(pl.col(\"h\").is_in(chosen) | pl.col(\"t\").is_in(chosen)).height",
             "    in_training = 0", ("tests/splits/test_entity_split.py",)),
    Mutation("held out: one split kind ranked with another on the board", "openbench/leaderboard/runs.py",
             "    if isinstance(split, dict):  # what the split asks", "    if False:  # what the split asks",
             ("tests/test_leaderboard.py",)),
    Mutation("split files: rows in categorical-code order, not text order", "splits/random_split.py",
             '"text": values.cast(pl.String)}).sort("text")', '"text": values.cast(pl.String)})',
             ("tests/splits/test_random_split.py",)),
    Mutation("inductive: edges between the two entity sets kept in training", "splits/inductive_split.py",
             "    training = positives.filter(pl.Series(~head_side & ~tail_side))",
             "    training = positives.filter(pl.Series(~head_side | ~tail_side))", ("tests/splits/test_inductive_split.py",)),
    Mutation("inductive: inference relations training lacks kept", "splits/inductive_split.py",
             '    known = inference.filter(pl.col("relation").is_in(trained_relations))', "    known = inference",
             ("tests/splits/test_inductive_split.py",)),
    Mutation("inductive: test triples keep their reverse in the inference graph", "splits/inductive_split.py",
             '    cleaned_test = clean_evaluation(test, inference, directed, "positives", patterns)',
             '    cleaned_test = clean_evaluation(test, inference, False, "positives", patterns)',
             ("tests/splits/test_inductive_split.py",)),
    Mutation("inductive: regions not grown along edges", "splits/inductive_split.py",
             "            reached = np.unique(adjacency[frontier].indices)", "            reached = np.arange(num_entities)",
             ("tests/splits/test_inductive_split.py",)),
    Mutation("inductive: every entity a candidate", "openbench/evaluation/candidates.py",
             "        self.inference_scope = self.entity_scope is None and dataset.inductive",
             "        self.inference_scope = False", ("tests/splits/test_inductive_split.py",)),
    Mutation("inductive: the filter misses the inference graph", "openbench/datasets/loader.py",
             '        return (INFERENCE, "valid", "test") if self.inductive else SPLITS', "        return SPLITS",
             ("tests/splits/test_inductive_split.py",)),
    Mutation("inductive: a model built on another inference graph scored", "openbench/models/pykeen_inductive.py",
             "        if not same:", "        if False:", ("tests/splits/test_inductive_split.py",)),
    Mutation("inductive: the audit misses entities the two graphs share", "splits/audit.py",
             '    shared = int(trained.is_in(entities("inference", "valid", "test").implode()).sum())', "    shared = 0",
             ("tests/splits/test_inductive_split.py",)),
    # issue 56: plausible bugs in the code of round three, each caught by the fast loop
    Mutation("fast ranks: an answer in a chunk's first column never scored", "openbench/models/scorers.py",
             "                here = ((local_ids >= start) & (local_ids < stop)).nonzero().squeeze(1)",
             "                here = ((local_ids > start) & (local_ids < stop)).nonzero().squeeze(1)",
             ("tests/evaluation/test_chunk_edges.py",), fast=True),
    Mutation("compare: the Monte Carlo p-value without its +1", "openbench/evaluation/statistics/compare.py",
             "    return (1 + hits) / (1 + permutations)", "    return hits / permutations",
             ("tests/evaluation/test_compare.py",), fast=True),
    Mutation("bootstrap: a relation a resample missed counts 0 in the macro average",
             "openbench/evaluation/statistics/intervals.py",
             '        samples["macro_relation"].append(np.nanmean(means, axis=1))',
             '        samples["macro_relation"].append(np.nan_to_num(means).mean(axis=1))',
             ("tests/evaluation/test_confidence.py",), fast=True),
    Mutation("strata: a self-loop counted once", "openbench/evaluation/statistics/strata.py",
             "            + np.bincount(triples[:, 2], minlength=num_entities)).astype(np.int64)",
             "            + np.bincount(triples[triples[:, 0] != triples[:, 2], 2], minlength=num_entities)).astype(np.int64)",
             ("tests/evaluation/test_strata.py",), fast=True),
    Mutation("audit: super-property leakage in one orientation only", "splits/audit.py",
             '    unordered = [pl.min_horizontal("h", "t").alias("lo"), pl.max_horizontal("h", "t").alias("hi")]',
             '    unordered = [pl.col("h").alias("lo"), pl.col("t").alias("hi")]', ("tests/splits/test_audit.py",),
             fast=True),
    Mutation("audit: reverse copies' fraction halved", "splits/audit.py",
             '            "fraction": _fraction(affected.height, distinct.height),',
             '            "fraction": _fraction(affected.height // 2, distinct.height),', ("tests/splits/test_audit.py",),
             fast=True),
    Mutation("rules: a symmetric relation implies its stored triples, not their reverses", "splits/audit.py",
             '    parts = [_reversed(frame.filter(pl.col("r").is_in(symmetric))),',
             '    parts = [frame.filter(pl.col("r").is_in(symmetric)),', ("tests/splits/test_audit.py",), fast=True),
    Mutation("readers: BioKG's DDI read as directed", "openbench/datasets/published/native/biokg.py",
             'SYMMETRIC = frozenset({"PPI", "DDI"})', 'SYMMETRIC = frozenset({"PPI"})',
             ("tests/datasets/test_published_kgs.py",), fast=True),
    Mutation("readers: BioKG's PPI read as directed", "openbench/datasets/published/native/biokg.py",
             'SYMMETRIC = frozenset({"PPI", "DDI"})', 'SYMMETRIC = frozenset({"DDI"})',
             ("tests/datasets/test_published_kgs.py",), fast=True),
    Mutation("readers: PharmKG-8k's train/test overlap counts test and valid", "openbench/datasets/published/native/pharmkg.py",
             '"triples_in_train_and_test": test.join(train, on=["h", "r", "t"], how="semi").height,',
             '"triples_in_train_and_test": test.join(valid, on=["h", "r", "t"], how="semi").height,',
             ("tests/datasets/test_published_kgs.py",), fast=True),
    Mutation("board: a row of several runs annotated from its first run's ranks", "openbench/leaderboard/uncertainty.py",
             "        stored = load(ids[0]) if comparable and ids and len(ids) == 1 else None",
             "        stored = load(ids[0]) if comparable and ids else None", ("tests/test_uncertainty.py",), fast=True),
    Mutation("coded load: the fingerprint sorts by codes even where a label holds a byte below the tab",
             "openbench/datasets/coding.py",
             "    if bool(coded.entities.str.contains(_BELOW_TAB).any()) or bool(coded.relations.str.contains(_BELOW_TAB).any()):\n        return None\n",
             "", ("tests/datasets/test_coding.py",), fast=True),
    Mutation("coded load: repeated triples kept (the distinct-key count skipped)", "openbench/datasets/coding.py",
             "    if frame.select(rows.n_unique()).item() == heads.shape[0]:\n        return None\n",
             "    return None\n", ("tests/datasets/test_coding.py",), fast=True),
    Mutation("coded load: entities of training only where every split's were asked for",
             "openbench/datasets/loader.py", "entity_lookup, entities = _present(coded, every, (0, 2),",
             'entity_lookup, entities = _present(coded, ("train",), (0, 2),', ("tests/datasets/test_coding.py",),
             fast=True),
    Mutation("split: a fold's test set spared the leakage steps though nothing cleaned it before (the time split)",
             "splits/random_split.py", "    test_settled = patterns is not None", "    test_settled = True",
             ("tests/splits/test_time_split.py",), fast=True),
    Mutation("fused count: a known answer in a chunk's last column not excluded", "openbench/evaluation/counting/_counting.c",
             "                                                       start + width);",
             "                                                       start + width - 1);",
             ("tests/evaluation/test_chunk_kernel.py", "tests/evaluation/test_fused_counting.py"), fast=True),
    Mutation("fused count: exact ranks' excluded entries keep their score in the block", "openbench/evaluation/counting/_counting.c",
             "                    row[column] = value = worst;", "                    value = worst;",
             ("tests/evaluation/test_chunk_kernel.py", "tests/evaluation/test_fused_counting.py"), fast=True),
    # issue 50: a batch's values (candidates and the window settled from them)
    Mutation("exact ranks: the settling keeps a point window's pairs and drops the undecided ones",
             "openbench/evaluation/counting/exact.py",
             "            undecided = ~point.to(pair_rows.device)[pair_rows]",
             "            undecided = point.to(pair_rows.device)[pair_rows]", ("tests/evaluation/test_side_pass.py",),
             fast=True),
    Mutation("typed candidates: the true answer excluded with the candidates its query does not admit",
             "openbench/evaluation/counting/tally.py",
             "    excluded[inside, true_ids[inside] - start] = False\n", "",
             ("tests/evaluation/test_typed_candidates.py",), fast=True),
    Mutation("fused count: a full record's rows not taken out (their later window columns lost)",
             "openbench/evaluation/counting/tally.py",
             "        if before is not None and int(tally.fill.max()) > tally.capacity:",
             "        if False:", ("tests/evaluation/test_fused_counting.py",), fast=True),
    Mutation("block-by-block exact ranks: a chunk's window pairs kept at their column, not their entity id",
             "openbench/evaluation/counting/tally.py",
             "                pair_ids = columns + start",
             "                pair_ids = columns", ("tests/evaluation/test_fused_counting.py",),
             fast=True),
    Mutation("block-by-block exact ranks: a block's window pairs settled against the counts beyond the window only",
             "openbench/evaluation/counting/tally.py",
             "            greater, equal = self.settle((greater, equal), pair_rows, pair_ids)",
             "            greater, equal = self.settle((greater, equal.zero_()), pair_rows, pair_ids)",
             ("tests/evaluation/test_fused_counting.py", "tests/evaluation/test_side_pass.py"), fast=True),
    Mutation("coded load: the C hash table forgets its keys when it grows", "openbench/datasets/_coding.c",
             "        bigger[t] = table[s];", "        (void)t;", ("tests/datasets/test_coding.py",), fast=True),
    Mutation("coded load: the C-rendered fingerprint lines end without a newline", "openbench/datasets/_coding.c",
             "        *at++ = '\\n';", "        *at++ = ' ';", ("tests/datasets/test_coding.py",), fast=True),
    Mutation("coded load: codes taken for ids where some label has no id", "openbench/datasets/loader.py",
             "    return bool(np.array_equal(lookup, np.arange(lookup.shape[0], dtype=lookup.dtype)))",
             "    return True", ("tests/datasets/test_coding.py",), fast=True),
]


def run(mutation: Mutation, python: str) -> Tuple[str, float]:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="openbench-mutant-") as temporary:
        copy = Path(temporary) / "project"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv*", "__pycache__", ".hypothesis",
                                                                  "*.egg-info", "bench_out", "demo_out"))
        target = copy / mutation.path
        text = target.read_text(encoding="utf-8")
        if text.count(mutation.old) != 1:
            return "stale", time.perf_counter() - started
        target.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")
        if mutation.path.endswith(".c"):  # a C helper: the mutant is what gets built and loaded
            built = subprocess.run([python, "setup.py", "-q", "build_ext", "--inplace", "--force"], cwd=copy,
                                   capture_output=True, text=True)
            if built.returncode != 0 or "error" in built.stderr.lower():
                return "error (build)", time.perf_counter() - started
        environment = dict(os.environ, PYTHONPATH=str(copy), OPENBENCH_CACHE_DIR=str(Path(temporary) / "cache"),
                           HYPOTHESIS_PROFILE="deterministic")
        marks = ["-m", "not slow"] if mutation.fast else []
        done = subprocess.run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *marks, *mutation.tests],
                              cwd=copy, env=environment, capture_output=True, text=True)
        verdict = "caught" if done.returncode == 1 else "MISSED" if done.returncode == 0 else f"error {done.returncode}"
        return verdict, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="run only mutations whose name contains these words")
    parser.add_argument("--list", action="store_true", help="print the mutations and exit")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or any(word in m.name for word in args.only)]
    if args.list:
        for mutation in chosen:
            print(f"{mutation.name}  ({mutation.path})")
        return
    print("| mutation | file | verdict | seconds |\n|---|---|---|---|")
    bad = 0
    for mutation in chosen:
        verdict, seconds = run(mutation, sys.executable)
        bad += verdict != "caught"
        print(f"| {mutation.name} | {mutation.path} | {verdict} | {seconds:.0f} |", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
