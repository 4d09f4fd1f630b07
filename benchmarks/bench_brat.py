"""Benchmark: BRAT/ChEMU scoring of 50,000 synthetic documents of ChEMU density.

Each document has about 15 entities and 13 trigger→argument relations; the "system" copy has
types swapped, spans shifted and items dropped or added (seeded). Times reading both folders and
scoring entities and relations with overlap spans and the optimal (maximum bipartite) matching,
against BRATEval's greedy first-match algorithm on the same parsed documents as the peer measured
in the same run, and prints documents per second and peak memory. Target: under 30 s in all.

    python benchmarks/bench_brat.py [--documents 50000] [--seed 0]
"""
from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from openbench.text import brat  # noqa: E402

TYPES = ["REACTION_PRODUCT", "STARTING_MATERIAL", "REAGENT_CATALYST", "SOLVENT", "OTHER_COMPOUND", "TIME",
         "TEMPERATURE", "YIELD_OTHER", "YIELD_PERCENT", "EXAMPLE_LABEL"]
TARGET_SECONDS = 30.0


def _document(rng: random.Random):
    """(gold lines, system lines) of one synthetic document."""
    entities, position = [], 0
    for index in range(rng.randint(12, 18)):
        position += rng.randint(2, 30)
        length = rng.randint(3, 25)
        kind = "REACTION_STEP" if index % 5 == 0 else rng.choice(TYPES)
        entities.append((f"T{index}", kind, position, position + length))
        position += length
    triggers = [e for e in entities if e[1] == "REACTION_STEP"]
    arguments = [e for e in entities if e[1] != "REACTION_STEP"]
    relations = [(f"R{i}", "ARG1" if "TIME" not in a[1] else "ARGM", rng.choice(triggers)[0], a[0])
                 for i, a in enumerate(arguments)]
    gold = [f"{i}\t{k} {s} {e}\t{'x' * (e - s)}" for i, k, s, e in entities]
    gold += [f"{i}\t{k} Arg1:{a} Arg2:{b}" for i, k, a, b in relations]
    system, kept = [], set()
    for i, k, s, e in entities:
        roll = rng.random()
        if roll < 0.05:
            continue  # dropped
        if roll < 0.15:
            k = rng.choice(TYPES) if k != "REACTION_STEP" else k
        elif roll < 0.30:
            s, e = s + rng.randint(-2, 2), e + rng.randint(-2, 2)
            s, e = max(0, s), max(max(0, s), e)
        system.append(f"{i}\t{k} {s} {e}\t{'x' * (e - s)}")
        kept.add(i)
    system += [f"{i}\t{k} Arg1:{a} Arg2:{b}" for i, k, a, b in relations if a in kept and b in kept
               and rng.random() > 0.05]
    return gold, system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="openbench-bench-brat-"))
    for name in ("gold", "system"):
        (work / name).mkdir()
    started = time.perf_counter()
    for number in range(args.documents):
        gold, system = _document(rng)
        (work / "gold" / f"{number:06d}.ann").write_text("\n".join(gold) + "\n")
        (work / "system" / f"{number:06d}.ann").write_text("\n".join(system) + "\n")
    print(f"wrote {args.documents:,} document pairs in {time.perf_counter() - started:.1f} s under {work}")

    started = time.perf_counter()
    pairs = brat.pair_documents(brat.read_folder(work / "gold"), brat.read_folder(work / "system"))
    reading = time.perf_counter() - started
    rules = brat.Rules("overlap", 0.8, "exact")
    timings = {}
    for matching in ("optimal", "greedy"):
        started = time.perf_counter()
        entities = brat.total(brat.score_entities(pairs, rules, matching))
        relations = brat.total(brat.score_relations(pairs, rules, matching))
        timings[matching] = time.perf_counter() - started
        print(f"{matching:>8}: scoring {timings[matching]:.1f} s; entities tp {entities.tp} fp {entities.fp} "
              f"fn {entities.fn} F1 {brat.half_up(entities.f1)}; relations tp {relations.tp} fp {relations.fp} "
              f"fn {relations.fn} F1 {brat.half_up(relations.f1)}")
    total = reading + timings["optimal"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    print(f"reading {reading:.1f} s; optimal in all {total:.1f} s = {args.documents / total:,.0f} documents/s "
          f"(target under {TARGET_SECONDS:.0f} s: {'met' if total < TARGET_SECONDS else 'MISSED'}); "
          f"optimal/greedy scoring time {timings['optimal'] / timings['greedy']:.2f}x; peak memory {peak:.2f} GB")


if __name__ == "__main__":
    main()
