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

from tests.helpers import needs_module  # noqa: E402

needs_module("sybil")
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


def _python_blocks(text: str):
    """(line, code) of every Python block."""
    found, inside, code, start = [], None, [], 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if inside is None:
                inside, code, start = line[3:].strip(), [], number
            else:
                if inside == "python":
                    found.append((start, "\n".join(code)))
                inside = None
        elif inside is not None:
            code.append(line)
    return found


def _free_names(code: str):
    """Names a block reads without importing or assigning them itself (builtins aside)."""
    import ast
    import builtins

    tree = ast.parse(code)
    defined = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            defined.add(node.id)
    return sorted({node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
                   and isinstance(node.ctx, ast.Load)} - defined)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_python_block_runs_on_its_own_or_says_which_it_continues(document):
    """Issue 66: a model-sources block failed on its own (it read names of the block before). A
    block that reads a name it does not define opens with a comment saying which block it continues."""
    for line, code in _python_blocks(document.read_text(encoding="utf-8")):
        free = _free_names(code)
        assert not free or code.lstrip().startswith("# continues"), \
            f"{document.name}:{line}: reads {', '.join(free)} from an earlier block without a '# continues' line"


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


def test_the_built_pages_print_options_as_typed(tmp_path):
    """Issue 66: the built CLI reference printed every --option with an en dash ("–ranks-output"),
    which fails when copied. Built with -W, no page holds an en or em dash glued to an option name
    or a curly quote inside a code span."""
    needs_module("sphinx")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(ROOT / "docs"),
                           str(tmp_path / "html")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    pages = sorted((tmp_path / "html").rglob("*.html"))
    assert any(page.name == "cli.html" for page in pages)
    glued = re.compile(r"(?<![\w-])[\u2013\u2014][a-z][a-z-]+")
    for page in pages:
        text = page.read_text(encoding="utf-8")
        found = glued.findall(text)
        assert not found, f"{page.relative_to(tmp_path)}: {found[:5]}"
    cli = (tmp_path / "html" / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "--ranks-output" in cli
