"""Model sources: everything openbench evaluates, as one registry, and :func:`evaluate_model`.

A source declares which options select it (:attr:`ModelSource.selects`), what it needs, and how
it becomes an evaluator (:attr:`ModelSource.build`). Model folders are recognised by their
files, in the order of :data:`SOURCES`. The command line, the demo and :mod:`openbench.compat`
all go through :func:`evaluate_model`, so a source added here works everywhere at once.

==========  =======================================================================
source      selected by
==========  =======================================================================
embeddings  ``entity_embeddings``, ``relation_embeddings`` and ``model`` (a scorer)
pykeen      ``model_dir`` holding ``trained_model.pkl`` (needs ``trust_pickle``)
dglke       ``model_dir`` holding ``config.json`` and ``<dataset>_<model>_entity.npy``
libkge      ``model_dir`` holding a ``checkpoint_*.pt``
anyburl     ``predictions``: an AnyBURL/SAFRAN top-k file
obl2021     ``submission``: an OBL2021 ``pred_top10`` ``.npz``
==========  =======================================================================
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from openbench.errors import InputError, UsageError
from openbench.evaluation import catalog
from openbench.evaluation.dataset import Dataset
from openbench.evaluation.evaluator import DEFAULT_HITS_AT, EmbeddingEvaluator, Evaluator
from openbench.layouts import SPLITS

__all__ = ["classify_model", "read_entity_list", "read_sweep", "SWEEP_KEYS", "evaluate_sweep", "ModelSpec", "EvaluationOptions", "ModelSource", "SOURCES", "select_source", "evaluate_model", "embedding_evaluator",
           "build_evaluator"]

logger = logging.getLogger(__name__)


@dataclass
class ModelSpec:
    """What the user gave as the model; exactly one source's options may be set."""

    entity_embeddings: Optional[str] = None
    relation_embeddings: Optional[str] = None
    model: Optional[str] = None
    complex_layout: str = "halves"
    model_dir: Optional[str] = None
    trust_pickle: bool = False
    dglke_data: Optional[str] = None
    dglke_compat: bool = False
    libkge_data: Optional[str] = None
    predictions: Optional[str] = None
    submission: Optional[str] = None

    def files(self) -> List[str]:
        """Every path the spec names (the inputs an output may never replace)."""
        paths = (self.entity_embeddings, self.relation_embeddings, self.model_dir, self.dglke_data,
                 self.libkge_data, self.predictions, self.submission)
        return [str(path) for path in paths if path]


@dataclass
class EvaluationOptions:
    """The protocol and run settings of a ranking evaluation (recorded in the result)."""

    filter_sets: Optional[Sequence[str]] = None  # None: train, valid and test
    hits_at: Sequence[int] = DEFAULT_HITS_AT
    lower_is_better: bool = False
    exclude_query_entity: bool = False
    candidates: str = "all"
    device: str = "auto"
    batch_size: Optional[int] = None
    seed: int = 0
    progress: bool = True
    distributed: bool = False
    shard: str = "queries"
    filter_given: bool = field(default=False, repr=False)  # the user chose the filter sets explicitly
    sides: Sequence[str] = ("head", "tail")
    relations: Optional[Sequence[str]] = None  # None: every relation
    entities: Optional[Sequence[str]] = None  # None: every entity is a candidate
    ranks: str = "exact"  # embeddings: "exact" or "fast" (compare the computed scores as they are)
    # "sampled": each query against its own negatives (OGB's protocol); "full": against every
    # entity, filtered; None: sampled for OGB folders, else full
    protocol: Optional[str] = None
    sampled_negatives: Optional[object] = field(default=None, repr=False)  # set by build_evaluator

    def evaluator_options(self) -> dict:
        return dict(filter_sets=list(SPLITS if self.filter_sets is None else self.filter_sets),
                    hits_at=list(self.hits_at), lower_is_better=self.lower_is_better,
                    exclude_query_entity=self.exclude_query_entity, seed=self.seed, progress=self.progress,
                    candidates=self.candidates, sides=list(self.sides), scope_relations=self.relations,
                    scope_entities=self.entities,
                    **({"sampled_negatives": self.sampled_negatives} if self.sampled_negatives is not None else {}))


Builder = Callable[[Dataset, ModelSpec, EvaluationOptions], Evaluator]


@dataclass(frozen=True)
class ModelSource:
    """One kind of model input: how it is selected and how it becomes an evaluator."""

    name: str
    selects: Callable[[ModelSpec], bool]
    build: Builder
    scores_every_entity: bool = True  # False: truncated top-k lists
    distributable: bool = False  # embedding scorers can run on several processes

    @property
    def description(self) -> str:
        return catalog.MODEL_SOURCES[self.name]


# ------------------------------------------------------------------------------------------
# detection


def _is_pykeen(folder: Path) -> bool:
    from openbench.evaluation.pykeen_model import is_pykeen_directory

    return is_pykeen_directory(folder)


def _is_dglke(folder: Path) -> bool:
    from openbench.evaluation.dglke import is_dglke_checkpoint

    return is_dglke_checkpoint(folder)


def _is_libkge(folder: Path) -> bool:
    from openbench.evaluation.libkge import is_libkge_checkpoint

    return is_libkge_checkpoint(folder)


def _embedding_inputs(spec: ModelSpec) -> bool:
    return bool(spec.entity_embeddings or spec.relation_embeddings or spec.model)


def _folder(kind: Callable[[Path], bool]) -> Callable[[ModelSpec], bool]:
    def selects(spec: ModelSpec) -> bool:
        return bool(spec.model_dir) and kind(Path(spec.model_dir or ""))

    return selects


# ------------------------------------------------------------------------------------------
# builders


def _build_embeddings(dataset: Dataset, spec: ModelSpec, options: EvaluationOptions) -> Evaluator:
    from openbench._io import load_npy
    from openbench.evaluation.scorers import build_scorer, file_sha256, get_scorer_class

    entity_path, relation_path, model = spec.entity_embeddings, spec.relation_embeddings, spec.model
    if not (entity_path and relation_path and model):
        missing = [name for name, value in (("--entity-embeddings", entity_path),
                                            ("--relation-embeddings", relation_path), ("--model", model)) if not value]
        raise UsageError(f"a model is needed: give --entity-embeddings, --relation-embeddings and --model "
                         f"(missing: {', '.join(missing)})")
    get_scorer_class(model)
    scorer = build_scorer(model, load_npy(entity_path), load_npy(relation_path), dataset.num_entities,
                          dataset.num_relations, complex_layout=spec.complex_layout, entity_path=entity_path,
                          relation_path=relation_path)
    params = {"complex_layout": spec.complex_layout} if scorer.complex_valued else {}
    return embedding_evaluator(dataset, scorer, params, file_sha256(entity_path, relation_path), options)


def _model_dir(spec: ModelSpec) -> Path:
    if not spec.model_dir:
        raise UsageError("--model-dir is needed for this model source")
    return Path(spec.model_dir)


def _build_pykeen(dataset: Dataset, spec: ModelSpec, options: EvaluationOptions) -> Evaluator:
    from openbench.evaluation.pykeen_model import pykeen_evaluator

    return pykeen_evaluator(_model_dir(spec), dataset, trust_pickle=spec.trust_pickle, device=options.device,
                            **options.evaluator_options())


def _build_dglke(dataset: Dataset, spec: ModelSpec, options: EvaluationOptions) -> Evaluator:
    from openbench.evaluation.dglke import PROJECTED, dglke_evaluator, load_dglke, read_config

    if read_config(_model_dir(spec))["model_name"] in PROJECTED:
        return dglke_evaluator(_model_dir(spec), dataset, data_dir=spec.dglke_data, device=options.device,
                               **options.evaluator_options())
    scorer, description = load_dglke(_model_dir(spec), dataset, spec.dglke_data, compat=spec.dglke_compat)
    return embedding_evaluator(dataset, scorer, description["params"], description["source_sha256"], options)


def _build_libkge(dataset: Dataset, spec: ModelSpec, options: EvaluationOptions) -> Evaluator:
    from openbench.evaluation.libkge import load_libkge

    scorer, description = load_libkge(_model_dir(spec), dataset, spec.libkge_data)
    return embedding_evaluator(dataset, scorer, description["params"], description["source_sha256"], options)


def _build_anyburl(dataset: Dataset, spec: ModelSpec, options: EvaluationOptions) -> Evaluator:
    from openbench.evaluation.topk import TopKEvaluator, read_safran_predictions

    if options.entities is not None:
        raise UsageError("--entities restricts the candidates a model scores; top-k prediction files rank only "
                         "what they list: use --relations or --sides to scope them")
    settings = options.evaluator_options()
    settings.update(progress=False)
    settings.pop("candidates")
    settings.pop("lower_is_better")
    settings.pop("exclude_query_entity")  # always on: SAFRAN never proposes the query entity
    path = Path(spec.predictions or "")
    return TopKEvaluator(dataset, read_safran_predictions(path, dataset), path, **settings)


def _build_obl2021(dataset: Dataset, spec: ModelSpec, options: EvaluationOptions) -> Evaluator:
    from openbench.evaluation.topk import OBL2021Evaluator, read_obl2021_submission

    if options.filter_given:
        raise UsageError("OBL2021 submissions are filtered by the submitter; --filter does not apply")
    if options.relations is not None or options.entities is not None or list(options.sides) != ["head", "tail"]:
        raise UsageError("an OBL2021 submission is scored on the whole test split: --relations, --sides and "
                         "--entities do not apply")
    path = Path(spec.submission or "")
    return OBL2021Evaluator(dataset, read_obl2021_submission(path), path, hits_at=list(options.hits_at),
                            seed=options.seed, progress=False)


def embedding_evaluator(dataset: Dataset, scorer, params: dict, source_sha256: Optional[str],
                         options: EvaluationOptions) -> EmbeddingEvaluator:
    settings = dict(model_params=params, source_sha256=source_sha256, ranks=options.ranks,
                    **options.evaluator_options())
    if not options.distributed:
        return EmbeddingEvaluator(dataset, scorer, device=options.device, **settings)
    from openbench.evaluation.device import resolve_device
    from openbench.evaluation.distributed import DistributedEmbeddingEvaluator, init_from_environment

    init_from_environment()
    device = resolve_device(options.device, local_rank=int(os.environ.get("LOCAL_RANK", 0)))
    return DistributedEmbeddingEvaluator(dataset, scorer, shard=options.shard, device=device, **settings)


SOURCES: Dict[str, ModelSource] = {source.name: source for source in (
    ModelSource("embeddings", _embedding_inputs, _build_embeddings, distributable=True),
    ModelSource("pykeen", _folder(_is_pykeen), _build_pykeen),
    ModelSource("dglke", _folder(_is_dglke), _build_dglke, distributable=True),
    ModelSource("libkge", _folder(_is_libkge), _build_libkge, distributable=True),
    ModelSource("anyburl", lambda spec: bool(spec.predictions), _build_anyburl, scores_every_entity=False),
    ModelSource("obl2021", lambda spec: bool(spec.submission), _build_obl2021, scores_every_entity=False),
)}
catalog.check_names("model source", SOURCES, catalog.MODEL_SOURCES)


def select_source(spec: ModelSpec) -> ModelSource:
    """The one source the spec selects; none or several given is a usage error naming the choices."""
    kinds = {"embeddings": _embedding_inputs(spec), "--model-dir": bool(spec.model_dir),
             "--predictions": bool(spec.predictions), "--submission": bool(spec.submission)}
    if sum(kinds.values()) > 1:
        raise UsageError("give one model: embeddings (--entity-embeddings, --relation-embeddings, --model), "
                         "--model-dir, --predictions or --submission")
    if not any(kinds.values()):
        raise UsageError("a model is needed: give --entity-embeddings, --relation-embeddings and --model "
                         "(missing: --entity-embeddings, --relation-embeddings, --model), or --model-dir, "
                         "--predictions or --submission")
    for source in SOURCES.values():
        if source.selects(spec):
            return source
    folders = "; ".join(f"{name}: {SOURCES[name].description}" for name in ("pykeen", "dglke", "libkge"))
    raise InputError(f"not a model folder openbench reads (expected {folders})", spec.model_dir)


def build_evaluator(dataset: Dataset, spec: ModelSpec, options: EvaluationOptions) -> Evaluator:
    """The evaluator of the spec's source over ``dataset``, with the options checked against it."""
    source = select_source(spec)
    if options.distributed and not source.distributable:
        raise UsageError(f"--distributed evaluates embedding scorers (embeddings, DGL-KE and LibKGE checkpoints), "
                         f"not a {source.name} model")
    options = with_protocol(dataset, source, options)
    logger.info("evaluating a %s model", source.name)
    return source.build(dataset, spec, options)


PROTOCOLS = ("sampled", "full")


def with_protocol(dataset: Dataset, source: "ModelSource", options: EvaluationOptions) -> EvaluationOptions:
    """``options`` with the protocol resolved: under the sampled protocol the test split's
    negatives (``dataset.sampled``) and no filter sets (OGB's definition)."""
    protocol = options.protocol or ("sampled" if dataset.layout == "ogb" else "full")
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    if protocol == "full":
        return replace(options, protocol="full", sampled_negatives=None)
    if "test" not in dataset.sampled:
        raise UsageError("--protocol sampled needs negatives per test triple: an OGB dataset folder, or a split "
                         "written with --eval-negatives (test_negatives.npz)")
    if options.filter_given and options.filter_sets:
        raise UsageError("the sampled protocol ranks against the given negatives without filtering (OGB's "
                         "definition): --filter does not apply (use --protocol full)")
    if not source.scores_every_entity or source.name == "obl2021":
        raise UsageError(f"the sampled protocol scores each query's own negatives: a {source.name} input has no "
                         "scores for them (use --protocol full)")
    if options.distributed:
        raise UsageError("the sampled protocol runs on one process (its candidates are few per query)")
    return replace(options, protocol="sampled", filter_sets=[], sampled_negatives=dataset.sampled["test"])


def evaluate_model(dataset: Dataset, spec: ModelSpec, options: Optional[EvaluationOptions] = None) -> Optional[dict]:
    """Evaluate the model ``spec`` names on ``dataset``; returns the result record.

    In a distributed run every rank evaluates its share and only rank 0 returns the record (the
    others return None); the process group is closed afterwards.
    """
    options = options or EvaluationOptions()
    evaluator = build_evaluator(dataset, spec, options)
    if not options.distributed:
        return evaluator.evaluate(batch_size=options.batch_size)
    import torch.distributed as dist

    try:
        result = evaluator.evaluate(batch_size=options.batch_size)
    finally:
        rank = dist.get_rank()
        dist.destroy_process_group()
    return result if rank == 0 else None


def classify_model(dataset: Dataset, spec: ModelSpec, options: Optional[EvaluationOptions] = None,
                   threshold_metric: str = "accuracy", fold: Optional[int] = None) -> dict:
    """Triple classification of the validation and test positives and negatives by the model
    ``spec`` names (:mod:`openbench.evaluation.classification`); returns the record."""
    from openbench.evaluation.classification import classification_record

    options = options or EvaluationOptions()
    evaluator = build_evaluator(dataset, spec, options)
    return classification_record(evaluator, threshold_metric, options.batch_size, fold)


def read_entity_list(path) -> List[str]:
    """The entity labels of an ``--entities`` file: one per line (blank lines and a BOM ignored)."""
    from openbench._io import read_text

    labels = [line.strip() for line in read_text(path).splitlines() if line.strip()]
    if not labels:
        raise InputError("the entity list is empty; expected one entity label per line", path)
    return labels


# what a sweep file entry may hold: ModelSpec fields, spelled as the command's options
SWEEP_KEYS: Dict[str, str] = {"name": "name", "entity_embeddings": "entity_embeddings", "relation_embeddings": "relation_embeddings",
              "model": "model", "complex_layout": "complex_layout", "model_dir": "model_dir",
              "dglke_data": "dglke_data", "dglke_compat": "dglke_compat", "libkge_data": "libkge_data",
              "predictions": "predictions"}


def read_sweep(path) -> List[Tuple[str, ModelSpec]]:
    """A sweep file: a JSON list of objects, each a model (``name`` plus ``model_dir``, or
    ``entity_embeddings``, ``relation_embeddings`` and ``model``, …); relative paths are taken
    from the file's folder. Returns (name, spec) pairs."""
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
        models.append((entry["name"].strip(), ModelSpec(**fields)))  # type: ignore[arg-type]
    return models


def evaluate_sweep(dataset: Dataset, models: List[Tuple[str, ModelSpec]], options: EvaluationOptions,
                   ) -> Tuple[Dict[str, dict], Dict[str, str]]:
    """Evaluate several models on one loaded dataset (its filter indexes built once and shared):
    ({name: record} of those that worked, {name: error message} of those that failed)."""
    from openbench.errors import OpenbenchError

    results, failures = {}, {}
    for name, spec in models:
        logger.info("model %s", name)
        try:
            record = evaluate_model(dataset, spec, options)
        except OpenbenchError as error:
            failures[name] = str(error)
            logger.error("%s: %s", name, error)
            continue
        if record is not None:
            results[name] = record
    return results, failures
