"""How long the reading commands take from the shell: `leaderboard show` of a small board (target:
under 1 s on two cores) and the other commands that need no tensor, each checked to import no torch.

Builds a two-row board (the popularity baseline and a DistMult model on a small labelled graph,
their ranks stored) and a ranks file, then runs each command as its own process ``--repeats``
times: the median wall time, the command's peak memory, and whether torch was imported (a child
python that runs the command and reports ``sys.modules``). The peer, measured in the same run, is
``python -c "import torch"``: what a command that imports torch pays before doing anything.

    python benchmarks/bench_cli_latency.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peak import run_measured  # noqa: E402

TARGET_SHOW_S = 1.0
_PROBE = ("import sys\nfrom openbench.cli import main\n"
          "try:\n    main(sys.argv[1:], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
          "sys.stderr.write('\\nTORCH\\n' if 'torch' in sys.modules else '\\nNO-TORCH\\n')\n")


def _board(work: Path) -> Path:
    """A board of two self-reported rows with ranks; the records and ranks beside it."""
    from openbench.datasets.loader import load_dataset
    from openbench.models.popularity import popularity_model
    from openbench.models.scorers import build_scorer
    from tests.helpers import board_with_ranks, integer_embeddings, random_labelled_graph, write_samples

    splits = random_labelled_graph(1, 60, 4, {"train": 400, "valid": 20, "test": 40})
    dataset = load_dataset(write_samples(work / "split", splits, negatives=False))
    distmult = build_scorer("DistMult", integer_embeddings(0, dataset.num_entities, 4),
                            integer_embeddings(1, dataset.num_relations, 4), dataset.num_entities,
                            dataset.num_relations)
    return board_with_ranks(work, dataset, (("DistMult", distmult), ("popularity", popularity_model(dataset))))


def _timed(command: list, repeats: int):
    """(median seconds, peak GB of the slowest, torch imported) of a command run ``repeats`` times."""
    times, peaks, torch = [], [], None
    for _ in range(repeats):
        seconds, peak, _, stderr, status = run_measured([sys.executable, "-c", _PROBE, *command])
        if status != 0:
            raise SystemExit(f"{' '.join(command)} failed: {stderr[-2000:]}")
        times.append(seconds)
        peaks.append(peak)
        torch = "\nTORCH\n" in stderr
    return statistics.median(times), max(peaks), torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        board = _board(work)
        commands = {
            "leaderboard show": ["leaderboard", "show", "--db", str(board)],
            "leaderboard show --format json": ["leaderboard", "show", "--format", "json", "--db", str(board)],
            "leaderboard export": ["leaderboard", "export", "--db", str(board), "--output", str(work / "page")],
            "compare (two ranks files)": ["compare", str(work / "DistMult.ranks.parquet"),
                                          str(work / "popularity.ranks.parquet")],
            "audit (a split)": ["audit", str(work / "split")],
            "datasets list": ["datasets", "list"],
        }
        peer = statistics.median(run_measured([sys.executable, "-c", "import torch"])[0]
                                 for _ in range(args.repeats))
        print(f"peer: python -c 'import torch' {peer:.2f} s (median of {args.repeats})")
        print(f"{'command':<32} {'median s':>9} {'× import torch':>15} {'peak GB':>8}  torch imported")
        show = None
        for name, command in commands.items():
            seconds, peak, torch = _timed(command, args.repeats)
            show = seconds if name == "leaderboard show" else show
            print(f"{name:<32} {seconds:>9.2f} {seconds / peer:>15.2f} {peak:>8.3f}  {'yes' if torch else 'no'}")
        verdict = "meets" if show is not None and show < TARGET_SHOW_S else "misses"
        print(f"leaderboard show of a two-row board: {show:.2f} s, {verdict} the target (< {TARGET_SHOW_S:.0f} s)")


if __name__ == "__main__":
    main()
