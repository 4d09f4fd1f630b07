"""Are the records of a fixed set of evaluations byte for byte what they were? (a refactoring's check)

Runs the same ``openbench evaluate`` commands on the demo's output with the code at a git
reference (a worktree of it, its C helpers built from its own sources) and with this working tree, and
compares each record's JSON text with its ``timing`` block removed:

* ranking: exact ranks, fast ranks, the sampled protocol, typed candidates, bootstrap intervals;
* classification;
* repurposing: TxGNN's protocol; a ground-truth file with bootstrap intervals;
* an entity-held-out split (the popularity baseline).

    python benchmarks/same_records.py REF [--demo demo_out]

Prints one line per record ("same" or "DIFFERENT") and exits 1 when any differs. The demo's output
is made first where it is missing (``openbench demo --out DEMO``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]


def commands(demo: Path, truth: Path) -> Dict[str, List[str]]:
    """{record name: the evaluate arguments}."""
    model = ["--model", "DistMult", "--entity-embeddings", str(demo / "models/DistMult/entities.npy"),
             "--relation-embeddings", str(demo / "models/DistMult/relations.npy"), "--no-progress"]
    split = ["evaluate", "--dataset", str(demo / "split"), *model]
    repurposing = ["--task", "repurposing", "--relation", "DIS_DRUG"]
    return {"exact": split, "fast": split + ["--fast"], "sampled": split + ["--protocol", "sampled"],
            "typed": split + ["--candidates", "typed"], "bootstrap": split + ["--bootstrap", "50"],
            "classification": split + ["--task", "classification"],
            "txgnn": split + repurposing + ["--protocol", "txgnn"],
            "truth": split + repurposing + ["--bootstrap", "50", "--ground-truth", str(truth)],
            "entity": ["evaluate", "--dataset", str(demo / "split_entity"), "--model", "popularity", "--no-progress"]}


def _run(python_path: str, arguments: List[str], output: Path) -> str:
    environment = dict(os.environ, PYTHONPATH=python_path)
    # run beside the output, not in the repository: ``python -m`` puts the working folder first on
    # sys.path, ahead of PYTHONPATH, so a run from the repository root would import its tree twice
    done = subprocess.run([sys.executable, "-m", "openbench", *arguments, "--output", str(output)],
                          env=environment, capture_output=True, text=True, cwd=output.parent)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(arguments)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    record = json.loads(output.read_text())
    record.pop("timing", None)
    return json.dumps(record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ref", help="the git reference whose records are the reference (a commit, a branch)")
    parser.add_argument("--demo", default=str(ROOT / "demo_out"), help="the demo's output folder")
    args = parser.parse_args()
    demo = Path(args.demo).resolve()
    if not (demo / "split").is_dir():
        subprocess.run([sys.executable, "-m", "openbench", "demo", "--out", str(demo)], check=True)
    with tempfile.TemporaryDirectory(prefix="openbench-same-records-") as temporary:
        work = Path(temporary)
        tree = work / "tree"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tree), args.ref], cwd=ROOT, check=True)
        try:
            # the reference's own C helpers, built from its sources (its C may take other arguments than ours)
            subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            truth = work / "truth.csv"
            truth.write_text("drug,disease,label\nPUBCHEM.COMPOUND:2011,DOID:0000005,treat\n"
                             "PUBCHEM.COMPOUND:2008,DOID:0000009,not-treat\nPUBCHEM.COMPOUND:2004,DOID:0000008,treat\n")
            differing = 0
            for name, arguments in commands(demo, truth).items():
                before = _run(str(tree), arguments, work / f"{name}.before.json")
                after = _run(str(ROOT), arguments, work / f"{name}.after.json")
                same = before == after
                differing += not same
                print(f"{name:<15} {'same' if same else 'DIFFERENT'}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
