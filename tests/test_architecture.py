"""The package's import graph, read with ``ast``: layers point down only and no module cycle exists
(the design notes' "Layers" section, kept beside the project). Imports inside functions count as well: a lazy import is still
a dependency."""
import ast
import re
import pathlib
from typing import Dict, List, Set

from tests.helpers import PROJECT_ROOT

PACKAGES = ("openbench", "graphgen", "splits")
# DESIGN's layers, lowest first: base, the engine in its stated order from the bottom (graphgen,
# text, datasets, splits, models, evaluation and the code that uses it: the Python API, compat,
# training; text reads HPO with graphgen's parsers, so it sits above graphgen, where DESIGN lists it
# below), the service, the entry points. A module belongs to the layer of its longest matching prefix.
LAYERS = [
    ("base", ("openbench", "openbench._io", "openbench._lazy", "openbench.errors", "openbench._native",
              "openbench.vocabulary", "openbench.record", "openbench.progress")),
    ("engine: graphgen", ("graphgen",)),
    ("engine: text", ("openbench.text",)),
    ("engine: datasets", ("openbench.datasets",)),
    ("engine: splits", ("splits",)),
    ("engine: models", ("openbench.models",)),
    ("engine: evaluation", ("openbench.evaluation", "openbench.training", "openbench.compat", "openbench.api")),
    ("service", ("openbench.leaderboard", "openbench.demo")),
    ("entry", ("openbench.cli", "openbench.entry", "openbench.__main__")),
]
# evaluation/ by stage: the door, the candidates, the tasks beside them; everything else in a stage package
EVALUATION_TOP = {"__init__", "evaluate", "candidates", "sweep"}
EVALUATION_STAGES = {"producers", "counting", "statistics", "tasks"}


def _modules() -> Dict[str, pathlib.Path]:
    modules = {}
    for package in PACKAGES:
        for path in (PROJECT_ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(PROJECT_ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: Dict[str, pathlib.Path]) -> str:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def import_graph() -> Dict[str, Set[str]]:
    modules = _modules()
    graph: Dict[str, Set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    targets.append(submodule if submodule in modules else node.module)
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved and resolved != name:
                    graph[name].add(resolved)
    return graph


def layer_of(module: str) -> int:
    best, best_length = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS"
    return best


def test_imports_point_down_only():
    upward = [f"{source} ({LAYERS[layer_of(source)][0]}) -> {target} ({LAYERS[layer_of(target)][0]})"
              for source, targets in import_graph().items() for target in targets
              if layer_of(target) > layer_of(source)]
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def test_no_import_cycles():
    graph = import_graph()
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    cycles: List[List[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"


def test_nothing_imports_the_cli():
    importers = [source for source, targets in import_graph().items()
                 if "openbench.cli" in targets and source not in ("openbench.__main__", "openbench.entry")]
    assert not importers


def test_the_graph_is_read_as_expected():
    """The checks above only mean something if the reader sees real edges."""
    graph = import_graph()
    assert "openbench.errors" in graph["openbench._io.inputs"]
    assert "graphgen.graph_files" in graph["graphgen.export"]
    assert "openbench.evaluation.counting._triton" in graph["openbench.evaluation.counting.kernels"]
    assert LAYERS[layer_of("openbench.models.scorers")][0] == "engine: models" and layer_of("openbench._io.outputs") == 0


def test_tests_share_code_through_bases_not_through_each_other():
    offenders = []
    for path in (PROJECT_ROOT / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests.") and ".test_" in node.module:
                offenders.append(f"{path.relative_to(PROJECT_ROOT)} imports {node.module}")
    assert not offenders, offenders


def test_public_modules_declare_all_and_it_names_real_things():
    import importlib

    lacking, dangling = [], []
    for name, path in _modules().items():
        if path.name in ("__init__.py", "__main__.py", "_triton.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = [node for node in tree.body if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)]
        if not declared:
            lacking.append(name)
            continue
        if name.startswith(("openbench.evaluation", "openbench.record", "openbench._io", "splits", "graphgen.graph")):
            module = importlib.import_module(name)
            dangling += [f"{name}.{item}" for item in module.__all__ if not hasattr(module, item)]
    assert not lacking and not dangling, (lacking, dangling)


def test_every_override_in_evaluation_says_what_it_returns():
    """Overrides carry their own docstring (with tensor shapes where they take or give tensors)."""
    import importlib
    import inspect

    undocumented = []
    for name in ("models.scorers", "models.base", "models.pykeen", "models.dglke", "models.libkge", "compat",
                 "evaluation.producers.base", "evaluation.producers.full", "evaluation.producers.sampled",
                 "evaluation.producers.topk", "evaluation.producers.sharded", "evaluation.counting.chain",
                 "evaluation.candidates"):
        module = importlib.import_module(f"openbench.{name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            for method, function in vars(cls).items():
                if not callable(function) or method.startswith("__"):
                    continue
                if any(method in vars(base) for base in cls.__mro__[1:]) and not (function.__doc__ or "").strip():
                    undocumented.append(f"{cls.__name__}.{method}")
    assert not undocumented, undocumented


def test_evaluation_is_grouped_by_stage():
    """DESIGN's engine: ``evaluate.py`` (the door), ``candidates.py``, ``sweep.py``, the stage
    packages producers/, counting/, statistics/ and the tasks beside ranking (tasks/:
    classification, repurposing); nothing else at the top."""
    folder = PROJECT_ROOT / "openbench" / "evaluation"
    modules = {path.stem for path in folder.glob("*.py")}
    packages = {path.name for path in folder.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    assert modules == EVALUATION_TOP, sorted(modules ^ EVALUATION_TOP)
    assert packages == EVALUATION_STAGES, sorted(packages ^ EVALUATION_STAGES)


def test_one_door_into_the_engine():
    """The CLI, the sweeps, the demo, compat, the server and the Python API reach the engine through
    ``openbench.evaluation.evaluate.evaluate`` only: none of them imports a producer, the counting
    or the candidates (the door's own steps)."""
    graph = import_graph()
    users = [name for name in graph if name.startswith(("openbench.cli", "openbench.demo", "openbench.compat",
                                                          "openbench.api", "openbench.leaderboard",
                                                          "openbench.evaluation.sweep", "openbench.training"))]
    inner = ("openbench.evaluation.producers", "openbench.evaluation.counting", "openbench.evaluation.candidates")
    shared = ("openbench.evaluation.counting.device",)  # the one device resolver, everyone's
    reaching = sorted(f"{user} -> {target}" for user in users for target in graph[user]
                      if target.startswith(inner) and target not in shared)
    assert not reaching, reaching


def test_the_matrix_pass_is_in_rooms_and_its_numerics_are_defined_once():
    """Issue 76: the repurposing matrix pass is a package of rooms, and no module of the counting
    engine (exact ranks' steps, keys, bounds and table facts included) is over ~600 lines, none of
    whose functions is over ~80 lines; the rounding facts it shares with exact ranks (the bound
    widening, outward rounding, unit roundoff, the grid criterion) are written once, in
    ``counting/rounding.py``."""
    assert len(sorted((PROJECT_ROOT / "openbench" / "evaluation" / "counting" / "matrix").glob("*.py"))) >= 8
    rooms = sorted((PROJECT_ROOT / "openbench" / "evaluation" / "counting").rglob("*.py"))  # the whole engine
    long_modules = [path.name for path in rooms if len(path.read_text(encoding="utf-8").splitlines()) > 600]
    long_functions = [f"{path.name}:{node.name}" for path in rooms
                      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.end_lineno - node.lineno + 1 > 80]
    assert not long_modules and not long_functions, (long_modules, long_functions)
    counting = PROJECT_ROOT / "openbench" / "evaluation" / "counting"
    for fact in ("2.0 ** -30", "def round_outwards", "def unit_roundoff", "significand - 3", "SUBNORMAL_SPACING = "):
        holders = sorted(str(path.relative_to(counting)) for path in counting.rglob("*.py")
                         if fact in path.read_text(encoding="utf-8"))
        assert holders == ["rounding.py"], (fact, holders)


def test_the_c_helpers_are_in_rooms_and_the_matrix_entry_points_take_one_struct():
    """Issue 76: the C kernels are one file per concern under ``counting/csrc`` (none over ~600
    lines); each matrix entry point takes one ``const ob_matrix_pass *`` (Python's
    ``c_pass.MatrixPassArgs``), the chunk count and the queries theirs (``c_structs``): no long
    positional argument list kept in step with the C by hand."""
    csrc = PROJECT_ROOT / "openbench" / "evaluation" / "counting" / "csrc"
    sources = sorted(path.name for path in csrc.iterdir())
    assert {"counting.h", "matrix.h", "dispatch.c", "rank_scan.c", "exact_keys.c", "table_summary.c",
            "matrix_pass.c", "fused_pass.c"} <= set(sources)
    assert not (PROJECT_ROOT / "openbench" / "evaluation" / "counting" / "_counting.c").exists()
    long_files = [name for name in sources if len((csrc / name).read_text(encoding="utf-8").splitlines()) > 600]
    assert not long_files
    text = "\n".join((csrc / name).read_text(encoding="utf-8") for name in sources)
    for entry in ("openbench_matrix_fused_f32", "openbench_matrix_fused_keys_f32"):
        assert re.search(rf"int64_t {entry}\(const ob_matrix_pass \*args\)", text), entry
    assert re.search(r"int64_t NAME\(const ob_matrix_pass \*args\)", text)  # the plain pass's f32 and f64
    assert re.search(r"void NAME\(const ob_chunk_count \*args\)", text)  # the ranking chunk count
    assert re.search(r"void NAME\(const ob_query_rows \*args\)", text)  # exact ranks' queries
    assert re.search(r"void NAME\(const ob_pair_keys \*args\)", text)  # exact ranks' pair keys
    assert re.search(r"void NAME\(const ob_count_window \*args\)", text)  # the window count
    python = (PROJECT_ROOT / "openbench" / "evaluation" / "counting").rglob("*.py")
    long_lists = [path.name for path in python  # no argtypes list of more than 13 entries kept by hand
                  for line in [" ".join(path.read_text(encoding="utf-8").split())]
                  for found in re.findall(r"argtypes = \[([^\]]*)\]", line) if found.count(",") >= 9]
    assert not long_lists, long_lists
