"""Model sources: everything openbench evaluates, as one registry from what the user gave to a model.

A source declares which options select it (:attr:`ModelSource.selects`) and how it loads
(:attr:`ModelSource.load`): into a scorer (:mod:`openbench.models.base`) or ranked lists
(:mod:`openbench.models.lists`). Model folders are recognised by their files, in the order of
:data:`SOURCES`. The command line, the demo and :mod:`openbench.compat` all go through
:func:`load_model`, so a source added here works everywhere at once.

==========  =======================================================================
source      selected by
==========  =======================================================================
embeddings  ``entity_embeddings``, ``relation_embeddings`` and ``model`` (a scorer)
arrays      ``model_dir`` holding ``entities.npy`` and ``relations.npy`` (``openbench train``'s, the demo's)
pyg         ``model_dir`` holding ``openbench-pyg.json`` and ``model.pt`` (:func:`openbench.save_pyg`)
pykeen      ``model_dir`` holding ``trained_model.pkl`` (needs ``trust_pickle``)
dglke       ``model_dir`` holding ``config.json`` and ``<dataset>_<model>_entity.npy``
libkge      ``model_dir`` holding a ``checkpoint_*.pt``
anyburl     ``predictions``: an AnyBURL/SAFRAN top-k file
obl2021     ``submission``: an OBL2021 ``pred_top10`` ``.npz``
==========  =======================================================================
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from openbench import vocabulary
from openbench.datasets.loader import Dataset
from openbench.errors import InputError, UsageError, option

__all__ = ["ModelSpec", "ModelSource", "SOURCES", "select_source", "load_model"]


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
    pyg_compat: bool = False  # a PyG model: PyG's own test() numbers beside openbench's
    # predictions as a table (openbench.models.tables), or a ranked list of names (openbench.models.names)
    scores: Optional[str] = None
    score_column: Optional[str] = None
    id_columns: Optional[List[str]] = None
    ranked_list: Optional[str] = None
    names: Optional[str] = None
    require_complete: bool = False
    drop_unknown: bool = False
    drugs: Optional[List[str]] = None  # a dense matrix's row labels
    diseases: Optional[List[str]] = None  # and its column labels

    def files(self) -> List[str]:
        """Every path the spec names (the inputs an output may never replace)."""
        paths = (self.entity_embeddings, self.relation_embeddings, self.model_dir, self.dglke_data,
                 self.libkge_data, self.predictions, self.submission, self.scores, self.ranked_list, self.names)
        return [str(path) for path in paths if path]


Loader = Callable[[Dataset, ModelSpec], Any]


@dataclass(frozen=True)
class ModelSource:
    """One kind of model input: how it is selected and how it loads."""

    name: str
    selects: Callable[[ModelSpec], bool]
    load: Loader
    scores_every_entity: bool = True  # False: truncated top-k lists
    distributable: bool = False  # embedding scorers can run on several processes

    @property
    def description(self) -> str:
        return vocabulary.MODEL_SOURCES[self.name]


# ------------------------------------------------------------------------------------------
# detection


def _is_pyg(folder: Path) -> bool:
    from openbench.models.pyg import is_pyg_folder

    return is_pyg_folder(folder)


def _is_pykeen(folder: Path) -> bool:
    from openbench.models.pykeen import is_pykeen_directory

    return is_pykeen_directory(folder)


def _is_dglke(folder: Path) -> bool:
    from openbench.models.dglke import is_dglke_checkpoint

    return is_dglke_checkpoint(folder)


def _is_libkge(folder: Path) -> bool:
    from openbench.models.libkge import is_libkge_checkpoint

    return is_libkge_checkpoint(folder)


def _popularity(spec: ModelSpec) -> bool:
    return (spec.model or "").lower() == vocabulary.POPULARITY and not (spec.entity_embeddings or
                                                                         spec.relation_embeddings)


def _rules(spec: ModelSpec) -> bool:
    return (spec.model or "").lower() == vocabulary.RULES and not (spec.entity_embeddings or spec.relation_embeddings)


def _neighbours(spec: ModelSpec) -> bool:
    return (spec.model or "").lower() == vocabulary.NEIGHBOURS and not (spec.entity_embeddings or
                                                                         spec.relation_embeddings)


def _embedding_inputs(spec: ModelSpec) -> bool:
    return bool(spec.entity_embeddings or spec.relation_embeddings or (spec.model and not spec.model_dir)) and not (
        _popularity(spec) or _rules(spec) or _neighbours(spec))


def _arrays(spec: ModelSpec) -> bool:
    """A folder of arrays; where it also holds a PyKEEN pickle, --trust-pickle chooses the pickle."""
    from openbench.models.arrays import is_arrays_folder

    if not spec.model_dir:
        return False
    folder = Path(spec.model_dir)
    return is_arrays_folder(folder) and not (spec.trust_pickle and _is_pykeen(folder))


def _folder(kind: Callable[[Path], bool]) -> Callable[[ModelSpec], bool]:
    def selects(spec: ModelSpec) -> bool:
        return bool(spec.model_dir) and kind(Path(spec.model_dir or ""))

    return selects


# ------------------------------------------------------------------------------------------
# loaders


def _load_embeddings(dataset: Dataset, spec: ModelSpec):
    from openbench._io import load_npy
    from openbench.models.scorers import build_scorer, file_sha256, get_scorer_class

    entity_path, relation_path, model = spec.entity_embeddings, spec.relation_embeddings, spec.model
    if not (entity_path and relation_path and model):
        missing = [name for name, value in (("--entity-embeddings", entity_path),
                                            ("--relation-embeddings", relation_path), ("--model", model)) if not value]
        raise UsageError(f"a model is needed: give --entity-embeddings, --relation-embeddings and --model "
                         f"(missing: {', '.join(missing)})")
    get_scorer_class(model)
    scorer = build_scorer(model, load_npy(entity_path, mmap=True), load_npy(relation_path), dataset.num_entities,
                          dataset.num_relations, complex_layout=spec.complex_layout, entity_path=entity_path,
                          relation_path=relation_path)
    params = {"complex_layout": spec.complex_layout} if scorer.complex_valued else {}
    return scorer.described(params, file_sha256(entity_path, relation_path))


def _load_arrays(dataset: Dataset, spec: ModelSpec):
    from openbench.models.arrays import arrays_model

    return arrays_model(dataset, Path(spec.model_dir or ""), spec.model, spec.complex_layout)


def _model_dir(spec: ModelSpec) -> Path:
    if not spec.model_dir:
        raise UsageError(f"{option('model_dir')} is needed for this model source")
    return Path(spec.model_dir)


def _load_pyg(dataset: Dataset, spec: ModelSpec):
    from openbench.models.pyg import pyg_folder

    return pyg_folder(_model_dir(spec), dataset, compat=spec.pyg_compat)


def _load_pykeen(dataset: Dataset, spec: ModelSpec):
    from openbench.models.pykeen import pykeen_folder
    from openbench.models.pykeen_inductive import inductive_folder, is_inductive_folder

    read = inductive_folder if is_inductive_folder(_model_dir(spec)) else pykeen_folder
    return read(_model_dir(spec), trust_pickle=spec.trust_pickle).for_dataset(dataset)


def _load_dglke(dataset: Dataset, spec: ModelSpec):
    from openbench.models.dglke import dglke_model

    return dglke_model(_model_dir(spec), dataset, spec.dglke_data, compat=spec.dglke_compat)


def _load_libkge(dataset: Dataset, spec: ModelSpec):
    from openbench.models.libkge import libkge_model

    return libkge_model(_model_dir(spec), dataset, spec.libkge_data)


def _load_anyburl(dataset: Dataset, spec: ModelSpec):
    from openbench.models.lists import topk_lists

    return topk_lists(Path(spec.predictions or ""), dataset)


def _load_popularity(dataset: Dataset, spec: ModelSpec):
    from openbench.models.popularity import popularity_model

    return popularity_model(dataset)


def _load_rules(dataset: Dataset, spec: ModelSpec):
    from openbench.models.rules import rules_model

    return rules_model(dataset)


def _load_neighbours(dataset: Dataset, spec: ModelSpec):
    from openbench.models.structure import neighbour_model

    return neighbour_model(dataset)


def _scores(spec: ModelSpec) -> bool:
    return bool(spec.scores or spec.ranked_list)


def _load_scores(dataset: Dataset, spec: ModelSpec):
    """A table of scores, TxGNN's pickled results or a ranked list of names, as a scorer."""
    from openbench.models.tables import TableSpec, TableScorer, read_scores

    if spec.scores and spec.ranked_list:
        raise UsageError("give one table: --scores or --ranked-list")
    if spec.ranked_list:
        from openbench.models.names import ranked_list_table

        table, name = ranked_list_table(spec.ranked_list, dataset, spec.names), "ranked list"
    elif Path(spec.scores or "").suffix in (".pkl", ".pickle"):
        from openbench.models.txgnn_results import read_txgnn_results

        table = read_txgnn_results(spec.scores, dataset, spec.score_column, spec.trust_pickle)
        name = "TxGNN results"
    else:
        table = read_scores(spec.scores, dataset, TableSpec(spec.score_column, spec.id_columns, spec.drugs,
                                                            spec.diseases, spec.drop_unknown))
        name = "score table"
    return TableScorer(table, dataset.num_entities, dataset.num_relations, name, spec.require_complete)


def _load_obl2021(dataset: Dataset, spec: ModelSpec):
    from openbench.models.lists import obl2021_submission

    return obl2021_submission(Path(spec.submission or ""))


SOURCES: Dict[str, ModelSource] = {source.name: source for source in (
    ModelSource("embeddings", _embedding_inputs, _load_embeddings, distributable=True),
    ModelSource("arrays", _arrays, _load_arrays, distributable=True),
    ModelSource("pyg", _folder(_is_pyg), _load_pyg, distributable=True),
    ModelSource("pykeen", _folder(_is_pykeen), _load_pykeen),
    ModelSource("dglke", _folder(_is_dglke), _load_dglke, distributable=True),
    ModelSource("libkge", _folder(_is_libkge), _load_libkge, distributable=True),
    ModelSource("anyburl", lambda spec: bool(spec.predictions), _load_anyburl, scores_every_entity=False),
    ModelSource("obl2021", lambda spec: bool(spec.submission), _load_obl2021, scores_every_entity=False),
    ModelSource("popularity", _popularity, _load_popularity),
    ModelSource("rules", _rules, _load_rules),
    ModelSource("neighbours", _neighbours, _load_neighbours),
    ModelSource("scores", _scores, _load_scores),
)}
vocabulary.check_names("model source", SOURCES, vocabulary.MODEL_SOURCES)


def select_source(spec: ModelSpec) -> ModelSource:
    """The one source the spec selects; none or several given is a usage error naming the choices."""
    kinds = {"embeddings": _embedding_inputs(spec), "--model popularity": _popularity(spec), "--model rules": _rules(spec),
             "--model neighbours": _neighbours(spec),
             "--model-dir": bool(spec.model_dir),
             "--predictions": bool(spec.predictions), "--submission": bool(spec.submission),
             "--scores": _scores(spec)}
    if sum(kinds.values()) > 1:
        raise UsageError("give one model: embeddings (--entity-embeddings, --relation-embeddings, --model), "
                         "--model popularity, --model rules, --model neighbours, --model-dir, --predictions, "
                         "--submission, --scores or --ranked-list")
    if not any(kinds.values()):
        raise UsageError("a model is needed: give --entity-embeddings, --relation-embeddings and --model "
                         "(missing: --entity-embeddings, --relation-embeddings, --model), or --model popularity, "
                         "--model rules, --model neighbours, --model-dir, --predictions, --submission, --scores or "
                         "--ranked-list")
    for source in SOURCES.values():
        if source.selects(spec):
            return source
    folders = "; ".join(f"{name}: {SOURCES[name].description}" for name in ("arrays", "pyg", "pykeen", "dglke", "libkge"))
    raise InputError(f"not a model folder openbench reads (expected {folders})", spec.model_dir)


def load_model(dataset: Dataset, spec: ModelSpec):
    """The model ``spec`` names, over ``dataset``'s ids: a scorer, or ranked lists."""
    return select_source(spec).load(dataset, spec)
