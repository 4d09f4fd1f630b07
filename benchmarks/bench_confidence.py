"""Benchmark: the cost of bootstrap intervals and of a paired comparison against the evaluation
they come from, measured in the same run (issue 39: 1,000 resamples under 10 % of the evaluation).

On ``bench_evaluator.py``'s graph (seeded; ``--scale default``: 20,000 entities, 5,000 test
triples, d = 200; ``small``: 2,000 and 500), for DistMult and TransE-L2, in process and warm:

* the evaluation alone (``openbench.evaluate``), best of ``--repeats``;
* the same evaluation with ``bootstrap=1000``: the extra seconds, and their ratio to the evaluation;
* ``openbench.compare`` of the two models (1,000 resamples, 10,000 sign flips, Wilcoxon);
* the peak memory of the process (ru_maxrss).

    python benchmarks/bench_confidence.py [--scale default|small] [--resamples 1000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("MKL_CBWR", "AUTO")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_evaluator import SCALES, _timed, make_dataset  # noqa: E402

TARGET_RATIO = 0.10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=("small", "default"), default="default")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    import openbench
    from openbench.evaluation.statistics.intervals import confidence_block

    with tempfile.TemporaryDirectory() as workdir:
        folder = Path(workdir) / "data"
        make_dataset(folder, arguments.seed, **SCALES[arguments.scale])
        dataset = openbench.load_dataset(str(folder))
        entities, relations = np.load(folder / "entities.npy"), np.load(folder / "relations.npy")
        records = {}
        print(f"scale {arguments.scale}: {dataset.num_entities} entities, {dataset.triples['test'].shape[0]} test "
              f"triples; {arguments.resamples} resamples")
        for name in ("DistMult", "TransE-L2"):
            model = openbench.embedding_model(name, entities, relations)
            evaluation = _timed(lambda: openbench.evaluate(dataset, model, device="cpu"), arguments.repeats)
            records[name] = openbench.evaluate(dataset, model, device="cpu")
            ranks, hits = records[name].ranks, records[name].protocol.hits_at
            bootstrap = _timed(lambda: confidence_block(ranks, hits, arguments.resamples, 0), arguments.repeats)
            ratio = bootstrap / evaluation
            print(f"{name:<10} evaluation {evaluation:7.3f} s   bootstrap {bootstrap:6.3f} s   ratio {ratio:.3f} "
                  f"(target < {TARGET_RATIO:.2f}: {'met' if ratio < TARGET_RATIO else 'NOT met'})")
        comparison = _timed(lambda: openbench.compare(records["DistMult"], records["TransE-L2"]), arguments.repeats)
        print(f"compare DistMult vs TransE-L2 ({records['DistMult'].ranks.height} queries): {comparison:.3f} s")
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
