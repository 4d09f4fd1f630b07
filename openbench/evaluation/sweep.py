"""Several models on one loaded dataset: the sweep file, the evaluation, the records' folder and
the summary table (``openbench evaluate --model-dir A --model-dir B``, ``--sweep FILE``)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from openbench.errors import InputError, UsageError
from openbench.datasets.loader import Dataset
from openbench.models.sources import ModelSpec

__all__ = ["SWEEP_KEYS", "read_sweep", "sweep_models", "evaluate_sweep", "record_file_name", "write_records",
           "sweep_table"]

logger = logging.getLogger(__name__)


# what a sweep file entry may hold: ModelSpec fields, spelled as the command's options
SWEEP_KEYS: Dict[str, str] = {"name": "name", "entity_embeddings": "entity_embeddings", "relation_embeddings": "relation_embeddings",
              "model": "model", "complex_layout": "complex_layout", "model_dir": "model_dir",
              "dglke_data": "dglke_data", "dglke_compat": "dglke_compat", "libkge_data": "libkge_data",
              "predictions": "predictions"}


def read_sweep(path, trust_pickle: bool = False) -> List[Tuple[str, ModelSpec]]:
    """A sweep file: a JSON list of objects, each a model (``name`` plus ``model_dir``, or
    ``entity_embeddings``, ``relation_embeddings`` and ``model``, …); relative paths are taken
    from the file's folder; ``trust_pickle`` (the command's ``--trust-pickle``) lets each entry's
    PyKEEN folder load. Returns (name, spec) pairs."""
    from openbench._io import read_json

    entries = read_json(path, "sweep file")
    if not isinstance(entries, list) or not entries:
        raise InputError("expected a non-empty JSON list of models, e.g. [{\"name\": \"a\", \"model_dir\": \"runs/a\"}]",
                         path)
    base = Path(path).parent
    models = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"].strip():
            raise InputError(f"model {number}: expected an object with a \"name\"", path)
        unknown = sorted(set(entry) - set(SWEEP_KEYS))
        if unknown:
            raise InputError(f"model {number} ({entry['name']}): unknown key(s) {', '.join(unknown)}; expected "
                             f"{', '.join(SWEEP_KEYS)}", path)
        fields: Dict[str, object] = {}
        for key, value in entry.items():
            if key == "name":
                continue
            if key in ("entity_embeddings", "relation_embeddings", "model_dir", "dglke_data", "libkge_data",
                       "predictions") and isinstance(value, str):
                value = str(base / value)
            fields[SWEEP_KEYS[key]] = value
        models.append((entry["name"].strip(), ModelSpec(trust_pickle=trust_pickle, **fields)))  # type: ignore[arg-type]
    return models


def sweep_models(model_dirs: Sequence[str], sweep_path=None, trust_pickle: bool = False) -> List[Tuple[str, ModelSpec]]:
    """(name, spec) of every model of a sweep: each ``--model-dir`` (named by its folder) and the
    sweep file's entries; a name given twice is a usage error."""
    models = [(Path(path).name, ModelSpec(model_dir=path, trust_pickle=trust_pickle)) for path in model_dirs]
    if sweep_path:
        models += read_sweep(sweep_path, trust_pickle)
    names = [name for name, _ in models]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UsageError(f"model name(s) given twice: {', '.join(repeated)} (name them apart in the sweep file)")
    return models


def evaluate_sweep(dataset: Dataset, models: List[Tuple[str, ModelSpec]], options: Dict[str, Any],
                   ) -> Tuple[Dict[str, dict], Dict[str, str]]:
    """Evaluate several models on one loaded dataset (its filter indexes built once and shared),
    each through :func:`openbench.evaluation.evaluate.evaluate` with ``options`` (its keywords):
    ({name: record} of those that worked, {name: error message} of those that failed)."""
    from openbench.errors import OpenbenchError
    from openbench.evaluation.evaluate import evaluate

    results, failures = {}, {}
    for name, spec in models:
        logger.info("model %s", name)
        try:
            results[name] = evaluate(dataset, spec, **options).to_dict()
        except OpenbenchError as error:
            failures[name] = str(error)
            logger.error("%s: %s", name, error)
    return results, failures


def record_file_name(name: str) -> str:
    """A model name as a file name: letters, digits, '.', '-', '_' kept, the rest '_'."""
    cleaned = "".join(c if c.isalnum() or c in ".-_" else "_" for c in name).strip(".")
    return cleaned or "model"


def write_records(output, results: Dict[str, dict], inputs: Sequence = ()) -> None:
    """``<output>/<name>.json`` for every record, as one folder replaced atomically (only over one
    openbench wrote; ``inputs`` it may not be, hold or lie in)."""
    from openbench._io import json_text, replace_folder

    def fill(staging: Path) -> None:
        for name, record in results.items():
            (staging / f"{record_file_name(name)}.json").write_text(json_text(record), encoding="utf-8")

    replace_folder(Path(output), fill, inputs=inputs, kind="evaluation results")


def sweep_table(names: Sequence[str], results: Dict[str, dict], failures: Dict[str, str]) -> str:
    """One line per model, in ``names``' order: realistic MRR, hits@1, hits@10 and AMRI over both
    sides, or why it failed."""
    def cell(value):
        return "-" if value is None else f"{value:.4f}"

    lines = [f"{'model':<28} {'MRR':>7} {'hits@1':>7} {'hits@10':>8} {'AMRI':>7}"]
    for name in names:
        if name in failures:
            lines.append(f"{name:<28} failed: {failures[name]}")
            continue
        block = results[name]["metrics"]["both"]["realistic"]
        lines.append(f"{name:<28} {cell(block['mrr']):>7} {cell(block.get('hits@1')):>7} "
                     f"{cell(block.get('hits@10')):>8} {cell(block.get('amri')):>7}")
    return "\n".join(lines)
