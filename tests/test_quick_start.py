"""The README's quick start is what CI runs (issue 72): its set-up and test commands stand in
``.ci/run`` exactly as the README spells them, in order, after CI's own preparation; and what the
tests need comes with the README's set-up (the extra it installs), or is named when missing."""
import re
from pathlib import Path

from tests.helpers import OPTIONAL_TOOLS, PROJECT_ROOT


def quick_start():
    """The quick start's commands (set-up, demo, tests), each without its trailing comment."""
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Quick start"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def _ci_commands():
    """``.ci/run``'s lines, each without a trailing comment or its exit-status capture."""
    lines = (PROJECT_ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line.split("  #")[0].replace(" || status=$?", "").strip() for line in lines
            if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_the_readme_s_commands_as_spelled():
    setup, demo, tests = quick_start()
    assert setup.startswith("pip install") and demo.startswith("openbench demo") and "pytest" in tests
    commands = _ci_commands()
    assert setup in commands, f".ci/run does not run the README's set-up line as spelled: {setup}"
    assert tests in commands, f".ci/run does not run the README's test line as spelled: {tests}"
    torch = next(i for i, line in enumerate(commands) if "install --quiet torch==" in line)
    assert torch < commands.index(setup) < commands.index(tests)  # the CPU wheel first, the tests last


def test_the_readme_s_set_up_installs_what_the_tests_import():
    """Every optional tool the tests import (tests/helpers.OPTIONAL_TOOLS, bar Triton, which
    CI's preparation adds) is in the extra the README's set-up installs."""
    setup = quick_start()[0]
    extra = re.search(r'"\.\[([a-z,]+)\]"', setup).group(1).split(",")
    text = (PROJECT_ROOT / "setup.py").read_text(encoding="utf-8")
    extras = text[text.index("extras_require"):]
    installed = set()
    for name in extra:
        listed = re.search(rf'"{name}": \[(.*?)\]', extras, re.S).group(1)
        installed |= {re.split(r"[<>=!;\[ ]", item.strip().strip('"'))[0].lower().replace("_", "-")
                      for item in re.findall(r'"[^"]+"', listed)}
    requirements = text[text.index("install_requires"):text.index("extras_require")]
    installed |= {re.split(r"[<>=!;\[ ]", item.strip('"'))[0].lower() for item in re.findall(r'"[^"]+"', requirements)}
    distributions = {"torch_geometric": "torch-geometric", "pybel": "pybel", "sphinx": "sphinx"}
    for module in OPTIONAL_TOOLS:
        if module == "triton":
            continue
        assert distributions.get(module, module) in installed, f"{module}: not installed by {setup}"
