"""pytest configuration: the helpers live in tests/helpers.py.

Without a GPU, Triton kernels (where Triton is installed) run in Triton's interpreter on CPU
tensors; the flag must be set before Triton is first imported.
"""
import os

# MKL's results depend on memory alignment unless its reproducible mode is on (what the command
# line sets, openbench.entry): before torch loads MKL, so that trained arrays are byte-identical
os.environ.setdefault("MKL_CBWR", "AUTO")

import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("OUTDATED_IGNORE", "1")  # ogb's import would ask PyPI for its latest version


def pytest_configure(config):
    """The dataset cache of the tests lives in a temporary folder, never in the user's cache."""
    import tempfile

    os.environ.setdefault("OPENBENCH_CACHE_DIR", tempfile.mkdtemp(prefix="openbench-test-cache-"))


# property tests are deterministic by default, so that a regression fails every run, not one in
# three; HYPOTHESIS_PROFILE=explore draws new examples each run
from hypothesis import settings  # noqa: E402

settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def pipeline_demo(tmp_path_factory):
    """One ``openbench demo`` run (folder, click result), shared by the demo's tests and the
    documentation's executed examples, which read its outputs."""
    from click.testing import CliRunner

    from openbench.cli import main

    out = tmp_path_factory.mktemp("demo") / "demo_out"
    result = CliRunner().invoke(main, ["demo", "--out", str(out), "--no-progress"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out, result
