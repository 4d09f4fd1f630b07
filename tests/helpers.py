"""Shared test helpers: fixture paths, small random graphs in OpenBioLink's layout, slow references."""
import pathlib
import random
from typing import Dict, List, Sequence, Tuple

import numpy as np

PROJECT_ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = PROJECT_ROOT / "tests" / "data"  # real public files with their provenance (tests/data/SOURCES.md)


def use_native(monkeypatch, library, switch: str, value=None) -> None:
    """Make an ``openbench._native.OptionalLibrary`` look at the environment again, with its
    ``switch`` variable set to ``value`` (None: unset); monkeypatch restores all of it afterwards."""
    monkeypatch.setattr(library, "_library", None)
    monkeypatch.setattr(library, "_loaded", False)
    if value is None:
        monkeypatch.delenv(switch, raising=False)
    else:
        monkeypatch.setenv(switch, value)


def fixture(*parts):
    """Path of a test data file (tests/data/); a missing one is an error, never a skip."""
    path = FIXTURES.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"test data missing: {path}")
    return path


Triple = Tuple[str, str, str]


def random_labelled_graph(seed: int, n_entities: int, n_relations: int, sizes: Dict[str, int]) -> Dict[str, List[Triple]]:
    """Random labelled triples per split; every evaluation label also occurs in train."""
    rng = random.Random(seed)
    entities = [f"NCBIGENE:{i}" for i in range(n_entities)]
    relations = [f"REL_{chr(65 + i)}" for i in range(n_relations)]
    train = [(e, relations[i % n_relations], entities[(i * 7 + 1) % n_entities]) for i, e in enumerate(entities)]
    train += [(rng.choice(entities), rng.choice(relations), rng.choice(entities)) for _ in range(sizes["train"])]
    splits = {"train": train}
    for split in ("valid", "test"):
        splits[split] = [(rng.choice(entities), rng.choice(relations), rng.choice(entities))
                         for _ in range(sizes.get(split, 0))]
    return splits


SAMPLE_NAMES = {"train": "train_sample.csv", "valid": "val_sample.csv", "test": "test_sample.csv"}


def write_samples(folder: pathlib.Path, splits: Dict[str, Sequence[Triple]], negatives: bool = True) -> pathlib.Path:
    """Write OpenBioLink 6-column sample files (plus a negative row each) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, triples in splits.items():
        lines = [f"{h}\t{r}\t{t}\t700\t1\tSTRING" for h, r, t in triples]
        if negatives and triples:
            h, r, t = triples[0]
            lines.append(f"{t}\t{r}\tNEGATIVE:ONLY\t\t0\tGENERATED")
        (folder / SAMPLE_NAMES[split]).write_text("\n".join(lines) + "\n")
    return folder


def slow_counts(row: Sequence[float], true: int, removed: set, lower_is_better: bool = False):
    """Reference: (n_greater, n_equal, n_candidates) by a plain loop over one score row."""
    target = row[true]
    greater = equal = candidates = 0
    for entity, value in enumerate(row):
        if entity == true:
            candidates += 1
            continue
        if entity in removed:
            continue
        candidates += 1
        better = value < target if lower_is_better else value > target
        if better:
            greater += 1
        elif value == target:
            equal += 1
    return greater, equal, candidates


def known_answers(triples: Sequence[Tuple[int, int, int]]):
    """Reference filter: dicts (h, r) -> tails and (r, t) -> heads."""
    tails, heads = {}, {}
    for h, r, t in triples:
        tails.setdefault((h, r), set()).add(t)
        heads.setdefault((r, t), set()).add(h)
    return heads, tails


def integer_embeddings(seed: int, rows: int, dim: int, low: int = -3, high: int = 4) -> np.ndarray:
    """Integer-valued float32 embeddings: float32 arithmetic on them is exact, so ties are real."""
    return np.random.default_rng(seed).integers(low, high, size=(rows, dim)).astype(np.float32)


def snapshot(path: pathlib.Path):
    """Every file under ``path`` (or ``path`` itself) as {relative name: (sha256, mode)}; None when absent.
    Two equal snapshots mean every byte and permission stayed as it was."""
    import hashlib

    path = pathlib.Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_file():
        return {".": (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mode)}
    found = {}
    for item in sorted(path.rglob("*")):
        name = str(item.relative_to(path))
        if item.is_symlink():
            found[name] = ("link", str(item.readlink()))
        elif item.is_file():
            found[name] = (hashlib.sha256(item.read_bytes()).hexdigest(), item.stat().st_mode)
        else:
            found[name] = ("folder", item.stat().st_mode)
    return found


def missing_implementation(name: str) -> None:
    """A comparison test found ``name`` (the C kernel, sort or writer, or Triton) missing: in CI,
    which installs everything, a failure; elsewhere a warning in pytest's summary, so that fewer
    implementations compared is never silent."""
    import os
    import warnings

    import pytest

    if os.environ.get("CI") == "true":
        pytest.fail(f"{name} is missing in CI: the comparison would quietly cover fewer implementations")
    warnings.warn(f"{name} is not available here: this test compares fewer implementations", UserWarning,
                  stacklevel=2)


def sampled_protocol(dataset, negatives_per_query: int, seed: int) -> dict:
    """``openbench.evaluate`` options for the sampled protocol: each test query against its own
    ``negatives_per_query`` uniformly drawn entities (seeded), head and tail alike."""
    import torch

    from openbench.datasets.negatives import SampledNegatives

    rng = np.random.default_rng(seed)
    shape = (dataset.triples["test"].shape[0], negatives_per_query)
    return {"protocol": "sampled", "negatives": SampledNegatives(
        torch.from_numpy(rng.integers(0, dataset.num_entities, shape)),
        torch.from_numpy(rng.integers(0, dataset.num_entities, shape)))}


def zip_bytes(members) -> bytes:
    """A zip archive (deflated, members in name order) of {member name: bytes}, as bytes."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in sorted(members.items()):
            bundle.writestr(name, data)
    return buffer.getvalue()


def board_with_ranks(work: pathlib.Path, dataset, models) -> pathlib.Path:
    """``work/board.sqlite`` holding one self-reported row per (name, model) of ``models`` with its
    ranks; each record and ranks file also written as ``work/NAME.json`` and ``NAME.ranks.parquet``."""
    import json

    from openbench.evaluation.evaluate import evaluate
    from openbench.evaluation.statistics.ranks_table import write_ranks
    from openbench.leaderboard import open_leaderboard

    board = open_leaderboard(work / "board.sqlite")
    try:
        for name, model in models:
            evaluated = evaluate(dataset, model, device="cpu")
            record = evaluated.to_dict()
            (work / f"{name}.json").write_text(json.dumps(record))
            write_ranks(work / f"{name}.ranks.parquet", evaluated.ranks, record)
            board.submit(record, name=name, ranks=evaluated.ranks)
    finally:
        board.close()
    return work / "board.sqlite"


# -- kill -9 at a chosen step of a real command (tests/test_kill_points.py, tests/test_outputs.py) --

KILL_SCRIPT = '''
import builtins, os, signal, sqlite3, sys
from openbench._io import outputs

steps = {"count": 0}
kill_at = int(os.environ["KILL_AT"])


def step():
    steps["count"] += 1
    if steps["count"] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)


def counted(function):
    def wrapper(*args, **kwargs):
        step()
        result = function(*args, **kwargs)
        step()
        return result
    return wrapper


# the outputs' own steps, every rename, folder and removal anywhere, every file opened to write
for name in ("write_marker", "exchange_paths", "_remove", "clean_leftovers"):
    setattr(outputs, name, counted(getattr(outputs, name)))
for name in ("mkdir", "rename", "replace", "unlink", "rmdir"):
    setattr(os, name, counted(getattr(os, name)))
real_open = builtins.open


def open_counted(file, mode="r", *args, **kwargs):
    if any(flag in mode for flag in "wax+"):
        step()
    return real_open(file, mode, *args, **kwargs)


builtins.open = open_counted


class Counted(sqlite3.Connection):  # the board's statements, each a step (BEGIN, INSERT, COMMIT, ...)
    def execute(self, *args, **kwargs):
        step()
        return super().execute(*args, **kwargs)

    def executemany(self, *args, **kwargs):
        step()
        return super().executemany(*args, **kwargs)


real_connect = sqlite3.connect
sqlite3.connect = lambda *args, **kwargs: real_connect(*args, **{**kwargs, "factory": Counted})
if os.environ.get("NO_EXCHANGE"):
    outputs._EXCHANGE = None
from openbench.cli import main
main(sys.argv[1:])
'''


def killed_at(step: int, arguments: Sequence[str], no_exchange: bool = False):
    """Run ``openbench ARGUMENTS`` in a new process killed (SIGKILL) at its ``step``-th counted step
    (:data:`KILL_SCRIPT`); the finished process (return code 0: the run ended before that step,
    -9: killed)."""
    import os
    import subprocess
    import sys

    environment = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), KILL_AT=str(step))
    if no_exchange:
        environment["NO_EXCHANGE"] = "1"
    return subprocess.run([sys.executable, "-c", KILL_SCRIPT, *arguments], env=environment, capture_output=True,
                          text=True)


# -- optional tools: named when missing here, a failure in CI -------------------------------------

INSTALL_TEST_EXTRA = 'pip install -e ".[test]", the README\'s set-up'
OPTIONAL_TOOLS = {  # module -> (what it is, how to have it)
    "pykeen": ("PyKEEN", INSTALL_TEST_EXTRA), "ogb": ("OGB", INSTALL_TEST_EXTRA),
    "pybel": ("PyBEL", INSTALL_TEST_EXTRA), "rdflib": ("rdflib", INSTALL_TEST_EXTRA),
    "torch_geometric": ("PyTorch Geometric", INSTALL_TEST_EXTRA), "sybil": ("Sybil", INSTALL_TEST_EXTRA),
    "starlette": ("Starlette", INSTALL_TEST_EXTRA), "uvicorn": ("uvicorn", INSTALL_TEST_EXTRA),
    "sphinx": ("Sphinx", INSTALL_TEST_EXTRA), "pandas": ("pandas (TxGNN's pickled DataFrames)", INSTALL_TEST_EXTRA),
    "triton": ("Triton (its CPU interpreter runs the GPU counting kernel)", "pip install triton==3.6.0; .ci/run does"),
}


def needs(what: str, available: bool, install: str) -> None:
    """A test needs an optional tool: where it is missing, CI (which installs every tool) fails the
    test, and a developer's run skips it naming the tool and how to have it; never a bare
    ``ModuleNotFoundError``."""
    import os

    import pytest

    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing in CI, which installs it ({install})", pytrace=False)
    pytest.skip(f"needs {what}, not installed here ({install})", allow_module_level=True)


def needs_module(module: str):
    """:func:`needs` of an importable tool (:data:`OPTIONAL_TOOLS` names it); the module itself."""
    import importlib

    what, install = OPTIONAL_TOOLS[module.split(".")[0]]
    try:
        return importlib.import_module(module)
    except ImportError:
        needs(what, False, install)


def needs_chromium() -> str:
    """:func:`needs` of a headless Chromium on PATH (the page tests); its path."""
    import shutil

    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    needs("headless Chromium", found is not None, "Debian's chromium package; .ci/run installs it")
    return found
