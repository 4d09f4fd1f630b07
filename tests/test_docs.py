"""The documentation runs as written: every Python and shell block of README.md and docs/ is
executed (sybil parses the Markdown) in a fresh folder holding ``demo_out/``, the output of one
``openbench demo`` run, and a link to the repository's ``tests/`` (the real data excerpts the
text-mining pages read). A block that cannot run here carries a mark, ``<!-- skip: next NAME -->``
with NAME one of :data:`MARKS` (listed here and nowhere else). An unmarked block that fails,
a fenced block without a language, or one in a language this file neither runs nor lists as shown
output fails the test. Each document's test prints the blocks it ran and skipped."""
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from unittest import SkipTest

import pytest

pytest.importorskip("sybil")
from sybil import Sybil  # noqa: E402
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser  # noqa: E402

pytestmark = pytest.mark.slow  # minutes in all: the examples train, evaluate and split

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
# why a block is not run here: the only marks there are
MARKS = {
    "SETUP": "installs packages or runs the test suite itself: .ci/run does, on a clean clone",
    "NETWORK": "downloads from the internet (tests/datasets serve the same files from 127.0.0.1)",
    "MACHINES": "needs several machines or GPUs (tests/evaluation/test_distributed.py runs 2 and 3 processes)",
    "SERVER": "starts a server that runs until stopped (tests/test_hosting.py drives every route)",
    "YOURS": "reads files only you have: a checkpoint of your own or a second graph release (tests/models "
             "and tests/splits read real ones)",
}
RUN = {"python", "bash"}
SHOWN = {"text", "json", "tsv", "toml"}  # shown output and file contents, not commands
SHELL_TIMEOUT = 600


def _run_bash(example):
    """Run a shell block with bash -e -o pipefail in the document's folder."""
    folder = example.namespace["__folder__"]
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", example.parsed], cwd=folder,
                          env=example.namespace["__environment__"], capture_output=True, text=True,
                          timeout=SHELL_TIMEOUT)
    if done.returncode != 0:
        return (f"exit status {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n"
                f"{done.stderr[-3000:]}")
    return None


SYBIL = Sybil(parsers=[PythonCodeBlockParser(), CodeBlockParser("bash", _run_bash), SkipParser()])


def _fences(text: str):
    """(line, language) of every fenced block's opening line (``{eval-rst}`` and other directives excluded)."""
    found, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if not inside:
                found.append((number, line[3:].strip()))
            inside = not inside
    return found


@pytest.fixture(scope="module")
def demo_folder(pipeline_demo):
    return pipeline_demo[0]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_of_the_document_runs(document, demo_folder, tmp_path, monkeypatch):
    fences = _fences(document.read_text(encoding="utf-8"))
    unknown = [(line, language) for line, language in fences
               if language not in RUN | SHOWN and not language.startswith("{")]
    assert not unknown, f"{document.name}: blocks in no known language (line, language): {unknown}"
    shutil.copytree(demo_folder, tmp_path / "demo_out")
    (tmp_path / "tests").symlink_to(ROOT / "tests", target_is_directory=True)
    environment = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
                       PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    parsed = SYBIL.parse(document)
    parsed.namespace.update({"__folder__": tmp_path, "__environment__": environment, **MARKS})
    monkeypatch.chdir(tmp_path)
    try:
        ran, skipped = _evaluate(document, parsed)
    finally:  # a tutorial's server is stopped even when one of its blocks failed
        _stop_server(tmp_path / "server.pid")
    print(f"{document.name}: ran {len(ran)} block(s): {', '.join(ran) or '-'}; skipped {len(skipped)}: "
          f"{'; '.join(skipped) or '-'}")
    code_blocks = [language for _, language in fences if language in RUN]
    assert len(ran) + len(skipped) == len(code_blocks), \
        f"{document.name}: {len(code_blocks)} code blocks, {len(ran)} ran and {len(skipped)} skipped"


def _stop_server(pid_file: Path) -> None:
    if pid_file.is_file():
        try:
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass


def _evaluate(document: Path, parsed):
    """([blocks run], [blocks skipped, with why]) of the parsed document, evaluated in order."""
    ran, skipped = [], []
    for example in parsed:
        if example.region.evaluator is None:
            continue
        what = f"{document.name}:{example.line}"
        try:
            outcome = example.evaluate()
        except SkipTest as reason:
            skipped.append(f"{what} ({reason})")
            continue
        except Exception as error:  # the block's own exception, with where it is
            raise AssertionError(f"{what}: {type(error).__name__}: {error}") from error
        if outcome:
            raise AssertionError(f"{what}: {outcome}")
        if not isinstance(example.region.parsed, tuple):  # a code block, not a skip directive
            ran.append(what)
    return ran, skipped


def test_every_mark_in_the_documents_is_a_listed_one():
    """A mark names one of MARKS: a skip for another reason would be invisible here."""
    used = set()
    for document in DOCUMENTS:
        for reason in re.findall(r"<!--\s*skip:\s*next\s+(\S+)\s*-->", document.read_text(encoding="utf-8")):
            assert reason in MARKS, f"{document.name}: unknown mark {reason!r}; expected one of {sorted(MARKS)}"
            used.add(reason)
    assert used <= set(MARKS)


def test_the_registry_tables_are_the_registries():
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "tables.py"), "--check"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250
