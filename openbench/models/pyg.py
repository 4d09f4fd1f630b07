"""PyTorch Geometric's knowledge-graph embeddings (``torch_geometric.nn.kge``), evaluated as they
should be: filtered, both sides, ties exact.

:func:`from_pyg` takes any ``KGEModel`` whose ``num_nodes`` and ``num_relations`` are the
dataset's (ids as :func:`openbench.load_dataset` numbers them). PyG's ``TransE`` (``p_norm`` 1 or
2), ``DistMult``, ``ComplEx`` and ``RotatE`` become the engine's embedding scorer over the model's
own tables, rebuilt in float64 so that each score is the model's ``forward``:

==========  ====================================================================================
TransE      ``-‖normalize(h) + r - normalize(t)‖_p``: the entity rows normalised (``p_norm``) as
            ``forward`` normalises them, once; scorer ``TransE-L1``/``TransE-L2``
DistMult    ``Σ h ∘ r ∘ t``: the tables as they are
ComplEx     ``Re Σ h ∘ r ∘ conj(t)``: ``[node_emb | node_emb_im]``, ``[rel_emb | rel_emb_im]``
RotatE      ``margin - ‖h ∘ r - t‖₂`` with ``r = cos θ + i sin θ``: ``[node_emb | node_emb_im]``,
            ``[cos rel_emb | sin rel_emb]``; the constant margin moves no rank and is left out
==========  ====================================================================================

so exact ranks, chunking, typed candidates, shards and every protocol apply. Any other subclass
(or one of these whose ``forward`` a subclass replaced, or TransE with another ``p_norm``) is
scored through its own ``forward`` in blocks: fast ranks, said in the record.

``compat=True`` (``evaluate --pyg-compat``) adds PyG's own ``KGEModel.test()`` numbers to the
record (``compat.pyg``): tail queries only, unfiltered, the answer's position in
``argsort(descending=True)`` of its scores (ties in whatever order the sort returns), its 0-based
mean rank, MRR ``1 / (rank + 1)`` and hits@k; computed as ``test()`` computes them, query by query.

:func:`save_pyg` writes a model folder ``evaluate --model-dir`` reads with torch's weights-only
loader (no pickle): ``model.pt`` (the ``state_dict``) and ``openbench-pyg.json``::

    {"format": "openbench-pyg", "class": "TransE", "num_nodes": 14541, "num_relations": 237,
     "hidden_channels": 50, "p_norm": 1.0, "margin": 1.0, "pyg_version": "2.8.1"}

(``class`` one of the four above; ``p_norm`` for TransE, ``margin`` where the class has one). A
folder written without openbench works too: ``torch.save(model.state_dict(), "model.pt")`` beside
that JSON. Reading the folder needs no PyG installed.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from openbench.errors import InputError, UsageError
from openbench.models.base import TRIPLE_BATCH, RowScorer
from openbench.models.finite import module_tables
from openbench.models.scorers import state_dict_sha256

__all__ = ["PYG_FILE", "STATE_FILE", "PYG_FORMAT", "KNOWN_CLASSES", "from_pyg", "save_pyg", "is_pyg_folder",
           "pyg_folder", "pyg_test_numbers", "PyGForwardScorer"]

logger = logging.getLogger(__name__)

PYG_FILE, STATE_FILE, PYG_FORMAT = "openbench-pyg.json", "model.pt", "openbench-pyg"
KNOWN_CLASSES = ("TransE", "DistMult", "ComplEx", "RotatE")
# each known class's state_dict keys
_KEYS = {"TransE": ("node_emb.weight", "rel_emb.weight"), "DistMult": ("node_emb.weight", "rel_emb.weight"),
         "ComplEx": ("node_emb.weight", "node_emb_im.weight", "rel_emb.weight", "rel_emb_im.weight"),
         "RotatE": ("node_emb.weight", "node_emb_im.weight", "rel_emb.weight")}
COMPAT_PROTOCOL = ("PyG's KGEModel.test(): tail queries only, unfiltered, the answer's position in argsort(descending) "
                   "of its scores (ties in the sort's order), mean rank 0-based, MRR 1/(rank + 1)")


def _pyg_version() -> Optional[str]:
    try:
        import torch_geometric
    except ImportError:
        return None
    return str(torch_geometric.__version__)


def _hyperparameters(model) -> Dict[str, Any]:
    """The constructor arguments a KGEModel keeps as attributes."""
    found: Dict[str, Any] = {"num_nodes": int(model.num_nodes), "num_relations": int(model.num_relations),
                             "hidden_channels": int(model.hidden_channels)}
    for name in ("p_norm", "margin"):
        value = getattr(model, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found[name] = float(value)
    return found


def _check_counts(num_nodes: int, num_relations: int, dataset, where: Optional[str] = None) -> None:
    if num_nodes != dataset.num_entities or num_relations != dataset.num_relations:
        raise InputError(f"the PyG model has num_nodes {num_nodes} and num_relations {num_relations}; the dataset "
                         f"{dataset.num_entities} entities and {dataset.num_relations} relations (ids as "
                         "openbench.load_dataset numbers them: train the model on the split's id tensors)", where)


def _tables(kind: str, state: Dict[str, torch.Tensor], params: Dict[str, Any]
            ) -> Optional[Tuple[str, np.ndarray, np.ndarray]]:
    """(the engine's scorer name, entity table, relation table) in float64 for a known class, or
    None where the class's formula is not one of the engine's (TransE with p_norm not 1 or 2)."""
    missing = [key for key in _KEYS[kind] if key not in state]
    if missing:
        raise InputError(f"a PyG {kind} state lacks {', '.join(missing)}")

    def table(key: str) -> torch.Tensor:
        return state[key].detach().cpu().to(torch.float64)

    if kind == "DistMult":
        return "DistMult", table("node_emb.weight").numpy(), table("rel_emb.weight").numpy()
    if kind == "TransE":
        p = params.get("p_norm", 1.0)
        if p not in (1.0, 2.0):
            return None
        nodes = torch.nn.functional.normalize(table("node_emb.weight"), p=p, dim=-1)  # forward normalises h and t
        return f"TransE-L{int(p)}", nodes.numpy(), table("rel_emb.weight").numpy()
    halves = torch.cat([table("node_emb.weight"), table("node_emb_im.weight")], dim=1).numpy()
    if kind == "ComplEx":
        return "ComplEx", halves, torch.cat([table("rel_emb.weight"), table("rel_emb_im.weight")], dim=1).numpy()
    theta = table("rel_emb.weight")
    return "RotatE", halves, torch.cat([torch.cos(theta), torch.sin(theta)], dim=1).numpy()


def _embedding_scorer(kind: str, state: Dict[str, torch.Tensor], params: Dict[str, Any], dataset):
    """The engine's scorer of a known class's state, or None (see :func:`_tables`)."""
    from openbench.models.scorers import build_scorer

    built = _tables(kind, state, params)
    if built is None:
        return None
    name, entities, relations = built
    scorer = build_scorer(name, entities, relations, dataset.num_entities, dataset.num_relations)
    return scorer


def _described(scorer, kind: str, params: Dict[str, Any], version: Optional[str], sha: str, how: str):
    described = {"pyg_class": kind, "pyg_version": version, "scored": how,
                 **{f"pyg_{name}": value for name, value in params.items()}}
    if hasattr(scorer, "described"):
        return scorer.described(described, sha)
    scorer.params.update(described)
    scorer.sha256 = sha
    return scorer


def from_pyg(model, dataset, compat: bool = False):
    """The scorer of a PyG ``KGEModel`` over ``dataset`` (see the module docstring); ``compat``:
    the record also carries PyG's own ``test()`` numbers. A model whose counts are not the
    dataset's is one error naming both."""
    try:
        from torch_geometric.nn import kge
    except ImportError as error:  # pragma: no cover - torch-geometric is a test dependency
        raise UsageError("from_pyg needs PyTorch Geometric: pip install torch-geometric") from error
    if not isinstance(model, kge.KGEModel):
        raise UsageError(f"from_pyg takes a torch_geometric.nn.kge.KGEModel, not {type(model).__name__}")
    _check_counts(int(model.num_nodes), int(model.num_relations), dataset)
    kind = type(model).__name__
    params = _hyperparameters(model)
    state = {name: value.detach() for name, value in model.state_dict().items()}
    sha = state_dict_sha256(state)
    scorer = None
    if kind in KNOWN_CLASSES and type(model) is getattr(kge, kind):
        scorer = _embedding_scorer(kind, state, params, dataset)
    how = "the engine's embedding scorer on the model's tables (float64)" if scorer is not None else \
        "the model's own forward, in blocks (fast ranks)"
    if scorer is None:
        scorer = PyGForwardScorer(model, dataset.num_entities, kind)
    scorer = _described(scorer, kind, params, _pyg_version(), sha, how)
    scorer.pyg_compat = _CompatSource(model=model) if compat else None
    return scorer


class _CompatSource:
    """What PyG's ``test()`` scores: the model's forward (in memory), or a known class's formula
    from its state (a folder read without PyG)."""

    def __init__(self, model=None, kind: Optional[str] = None, state: Optional[Dict[str, torch.Tensor]] = None,
                 params: Optional[Dict[str, Any]] = None):
        self.model, self.kind, self.state, self.params = model, kind, state, params or {}

    def forward(self, heads: torch.Tensor, relations: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        if self.model is not None:
            return self.model(heads, relations, tails)
        return _forward_of_state(self.kind or "", self.state or {}, self.params, heads, relations, tails)


def _forward_of_state(kind: str, state: Dict[str, torch.Tensor], params: Dict[str, Any], heads: torch.Tensor,
                      relations: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
    """The ``forward`` of PyG's four classes, written out in its own operations and order, over a
    saved state (what ``test()`` would compute with the model rebuilt)."""
    functional = torch.nn.functional
    node, rel = state["node_emb.weight"], state["rel_emb.weight"]
    if kind == "TransE":
        p = params.get("p_norm", 1.0)
        head = functional.normalize(node[heads], p=p, dim=-1)
        tail = functional.normalize(node[tails], p=p, dim=-1)
        return -((head + rel[relations]) - tail).norm(p=p, dim=-1)
    if kind == "DistMult":
        return (node[heads] * rel[relations] * node[tails]).sum(dim=-1)
    node_im = state["node_emb_im.weight"]
    if kind == "ComplEx":
        rel_im = state["rel_emb_im.weight"]

        def dot(a, b, c):
            return (a * b * c).sum(dim=-1)

        return (dot(node[heads], rel[relations], node[tails]) + dot(node_im[heads], rel[relations], node_im[tails])
                + dot(node[heads], rel_im[relations], node_im[tails])
                - dot(node_im[heads], rel_im[relations], node[tails]))
    theta = rel[relations]
    rel_re, rel_im = torch.cos(theta), torch.sin(theta)
    re_score = (rel_re * node[heads] - rel_im * node_im[heads]) - node[tails]
    im_score = (rel_re * node_im[heads] + rel_im * node[heads]) - node_im[tails]
    score = torch.linalg.vector_norm(torch.stack([re_score, im_score], dim=2), dim=(1, 2))
    return params.get("margin", 1.0) - score


class PyGForwardScorer(RowScorer):
    """A KGEModel scored through its own ``forward``: each query's row built from blocks of
    candidate ids (``forward(h.expand, r.expand, candidates)``), fast ranks only."""

    kind = "pyg-forward"
    transductive = True  # one learnt row per entity id
    BLOCK = 1 << 16  # (query, candidate) pairs per forward call

    def __init__(self, model, num_entities: int, name: str):
        super().__init__(num_entities)
        self.model = model.eval()
        self.name = name
        self.params: Dict[str, Any] = {}
        self.sha256: Optional[str] = None

    def description(self) -> dict:
        return {"name": self.name, "kind": self.kind, "params": dict(self.params), "source_sha256": self.sha256}

    def stored_tables(self) -> list:
        """The model's floating parameters (every value must be finite: :mod:`openbench.models.finite`)."""
        return module_tables(self.model, "PyG model")

    @torch.no_grad()
    def score_rows(self, batch: torch.Tensor, side: str) -> torch.Tensor:
        """(B, E) float64 scores of every candidate of the ``side`` queries of ``batch`` (B, 3)."""
        rows = []
        entities = torch.arange(self.num_entities)
        per_call = max(1, self.BLOCK // max(1, self.num_entities))
        batch = batch.cpu()
        for start in range(0, batch.shape[0], per_call):
            part = batch[start:start + per_call]
            count = part.shape[0]
            candidates = entities.repeat(count)
            relations = part[:, 1].repeat_interleave(self.num_entities)
            if side == "tail":
                scores = self.model(part[:, 0].repeat_interleave(self.num_entities), relations, candidates)
            else:
                scores = self.model(candidates, relations, part[:, 2].repeat_interleave(self.num_entities))
            rows.append(scores.reshape(count, self.num_entities).double())
        return torch.cat(rows) if rows else torch.zeros((0, self.num_entities), dtype=torch.float64)

    @torch.no_grad()
    def score_triples(self, triples: torch.Tensor) -> torch.Tensor:
        """(T,) float64 scores of (T, 3) triples through ``forward``."""
        out = [self.model(part[:, 0], part[:, 1], part[:, 2]).double() for part in triples.cpu().split(TRIPLE_BATCH)]
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


@torch.no_grad()
def pyg_test_numbers(source, triples: torch.Tensor, num_entities: int, hits_at: Sequence[int],
                     batch_size: int = 20000) -> dict:
    """PyG's ``KGEModel.test()`` on ``triples`` (T, 3): per query, the scores of (h, r, e) for
    every entity e in chunks of ``batch_size``, the answer's position in ``argsort(descending=True)``
    (0-based), then the mean rank, MRR 1/(rank + 1) and hits@k (rank < k); ``source`` answers
    ``forward(heads, relations, tails)``."""
    ranks: List[int] = []
    candidates = torch.arange(num_entities)
    for head, relation, tail in triples.cpu().tolist():
        pieces = [source.forward(torch.full_like(chunk, head), torch.full_like(chunk, relation), chunk)
                  for chunk in candidates.split(batch_size)]
        order = torch.cat(pieces).argsort(descending=True)
        ranks.append(int((order == tail).nonzero().view(-1)))
    values = torch.tensor(ranks, dtype=torch.float)
    count = len(ranks)
    return {"protocol": COMPAT_PROTOCOL, "queries": count, "batch_size": int(batch_size),
            "mean_rank": float(values.mean()) if count else None,
            "mrr": float((1 / (values + 1)).mean()) if count else None,
            **{f"hits@{k}": (sum(rank < k for rank in ranks) / count if count else None) for k in hits_at}}


# -- a saved model ------------------------------------------------------------------------------

def save_pyg(model, folder) -> Path:
    """Write ``model`` (one of :data:`KNOWN_CLASSES`) to ``folder``: ``model.pt`` (its state dict,
    for torch's weights-only loader) and ``openbench-pyg.json`` (see the module docstring). The
    folder is written atomically and replaces only a folder openbench wrote."""
    from openbench._io import replace_folder

    kind = type(model).__name__
    if kind not in KNOWN_CLASSES:
        raise UsageError(f"save_pyg writes PyG's {', '.join(KNOWN_CLASSES)}; a {kind} is evaluated from Python "
                         "(openbench.from_pyg(model, dataset))")
    description = {"format": PYG_FORMAT, "class": kind, **_hyperparameters(model), "pyg_version": _pyg_version()}
    state = {name: value.detach().cpu() for name, value in model.state_dict().items()}

    def fill(staging: Path) -> None:
        torch.save(state, staging / STATE_FILE)
        (staging / PYG_FILE).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")

    replace_folder(Path(folder), fill, kind="PyG model")
    return Path(folder)


def is_pyg_folder(folder: Path) -> bool:
    return (Path(folder) / PYG_FILE).is_file()


def _read_description(folder: Path) -> Dict[str, Any]:
    from openbench._io import read_json

    path = folder / PYG_FILE
    description = read_json(path, "PyG model description")
    if not isinstance(description, dict) or description.get("class") not in KNOWN_CLASSES:
        raise InputError(f"expected an object whose class is one of {', '.join(KNOWN_CLASSES)} (a custom KGEModel "
                         "is evaluated from Python: openbench.from_pyg(model, dataset))", path)
    for key in ("num_nodes", "num_relations", "hidden_channels"):
        value = description.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{key} = {value!r}: expected a positive integer", path)
    for key in ("p_norm", "margin"):
        value = description.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InputError(f"{key} = {value!r}: expected a number", path)
    return description


def _read_state(folder: Path, description: Dict[str, Any]) -> Dict[str, torch.Tensor]:
    """The state dict, weights only (a pickle's code is never run), each table's shape checked."""
    path = folder / STATE_FILE
    if not path.is_file():
        raise InputError(f"{STATE_FILE} is missing: torch.save(model.state_dict(), '{STATE_FILE}') writes it", path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises several kinds for a damaged or foreign file
        raise InputError(f"not a state dict torch's weights-only loader reads ({str(error).splitlines()[0][:200]})",
                         path) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise InputError("expected a state dict: names of tensors", path)
    kind = description["class"]
    rows = {"node": description["num_nodes"], "rel": description["num_relations"]}
    for key in _KEYS[kind]:
        tensor = state.get(key)
        expected = (rows[key.split("_", 1)[0]], description["hidden_channels"])
        if tensor is None or tuple(tensor.shape) != expected or not tensor.is_floating_point():
            found = None if tensor is None else tuple(tensor.shape)
            raise InputError(f"{key}: expected a float table of shape {expected}, found {found}", path)
        if not torch.isfinite(tensor).all():
            raise InputError(f"{key} holds NaN or infinite values", path)
    return state


def pyg_folder(folder, dataset, compat: bool = False):
    """The scorer of a saved PyG model folder over ``dataset`` (see the module docstring)."""
    folder = Path(folder)
    description = _read_description(folder)
    _check_counts(description["num_nodes"], description["num_relations"], dataset, str(folder / PYG_FILE))
    state = _read_state(folder, description)
    kind = description["class"]
    params = {key: description[key] for key in ("num_nodes", "num_relations", "hidden_channels", "p_norm", "margin")
              if description.get(key) is not None}
    if kind == "TransE":
        params.setdefault("p_norm", 1.0)
    scorer = _embedding_scorer(kind, state, params, dataset)
    if scorer is None:
        raise InputError(f"TransE with p_norm {params.get('p_norm')}: the engine scores p = 1 and 2; evaluate the "
                         "model from Python (openbench.from_pyg(model, dataset))", folder / PYG_FILE)
    scorer = _described(scorer, kind, params, description.get("pyg_version"), state_dict_sha256(state),
                        "the engine's embedding scorer on the model's tables (float64)")
    scorer.pyg_compat = _CompatSource(kind=kind, state=state, params=params) if compat else None
    return scorer
