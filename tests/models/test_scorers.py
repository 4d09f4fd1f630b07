"""Each built-in score function against a hand-written formula, per side; layouts; shape errors."""
from fractions import Fraction

import numpy as np
import pytest
import torch

from openbench.errors import InputError
from openbench.models.scorers import SCORERS, build_scorer, get_scorer_class

E, R, D = 7, 3, 4
BATCH = torch.tensor([[0, 1, 2], [3, 0, 3], [6, 2, 5]])


def _reference(name, ent, rel, h, r, t):
    """score(h, r, t) written out directly from the model's definition."""
    if name == "TransE-L1":
        return -np.abs(ent[h] + rel[r] - ent[t]).sum()
    if name == "TransE-L2":
        return -np.sqrt(((ent[h] + rel[r] - ent[t]) ** 2).sum())
    if name == "DistMult":
        return (ent[h] * rel[r] * ent[t]).sum()
    if name == "ComplEx":
        return np.real((ent[h] * rel[r] * np.conj(ent[t])).sum())
    if name == "RotatE":
        return -np.sqrt((np.abs(ent[h] * rel[r] - ent[t]) ** 2).sum())
    if name == "RotatE-DGLKE":  # the sum of the complex moduli
        return -np.abs(ent[h] * rel[r] - ent[t]).sum()
    if name == "RESCAL":
        return ent[h] @ rel[r] @ ent[t]
    if name == "SimplE":  # entities [head role | tail role], relations [r | r_inv]
        half = ent.shape[1] // 2
        return 0.5 * ((ent[h][:half] * rel[r][:half] * ent[t][half:]).sum()
                      + (ent[t][:half] * rel[r][half:] * ent[h][half:]).sum())
    raise AssertionError(name)


def _arrays(name, rng):
    if name in ("ComplEx", "RotatE", "RotatE-DGLKE"):
        ent = rng.normal(size=(E, D)) + 1j * rng.normal(size=(E, D))
        rel = rng.normal(size=(R, D)) + 1j * rng.normal(size=(R, D))
        if name.startswith("RotatE"):
            rel = np.exp(1j * rng.uniform(-np.pi, np.pi, size=(R, D)))
        return ent.astype(np.complex128), rel.astype(np.complex128)
    ent = rng.normal(size=(E, D))
    rel = rng.normal(size=(R, D, D)) if name == "RESCAL" else rng.normal(size=(R, D))
    return ent, rel


@pytest.mark.parametrize("name", list(SCORERS))
def test_scores_match_definition_on_both_sides(name):
    rng = np.random.default_rng(0)
    ent, rel = _arrays(name, rng)
    scorer = build_scorer(name, ent, rel, E, R)
    for side in ("head", "tail"):
        rows = scorer.score_all(BATCH, side).numpy()
        for i, (h, r, t) in enumerate(BATCH.tolist()):
            for candidate in range(E):
                triple = (candidate, r, t) if side == "head" else (h, r, candidate)
                assert rows[i, candidate] == pytest.approx(_reference(name, ent, rel, *triple), abs=1e-9), \
                    (side, i, candidate)


@pytest.mark.parametrize("name", list(SCORERS))
def test_chunks_equal_full_rows(name):
    ent, rel = _arrays(name, np.random.default_rng(1))
    scorer = build_scorer(name, ent, rel, E, R)
    for side in ("head", "tail"):
        queries = scorer.query_vectors(BATCH, side)
        full = scorer.score_chunk(queries, side, 0, E)
        parts = torch.cat([scorer.score_chunk(queries, side, s, min(s + 3, E)) for s in range(0, E, 3)], dim=1)
        torch.testing.assert_close(parts, full, rtol=0, atol=1e-12)


def test_complex_layouts_halves_and_interleaved():
    rng = np.random.default_rng(2)
    ent, rel = _arrays("ComplEx", rng)
    reference = build_scorer("ComplEx", ent, rel, E, R).score_all(BATCH, "tail")
    halves = build_scorer("ComplEx", np.concatenate([ent.real, ent.imag], 1), np.concatenate([rel.real, rel.imag], 1),
                          E, R, complex_layout="halves").score_all(BATCH, "tail")
    pairs = lambda z: np.stack([z.real, z.imag], axis=-1).reshape(z.shape[0], -1)  # noqa: E731
    interleaved = build_scorer("ComplEx", pairs(ent), pairs(rel), E, R,
                               complex_layout="interleaved").score_all(BATCH, "tail")
    torch.testing.assert_close(halves, reference)
    torch.testing.assert_close(interleaved, reference)
    wrong = build_scorer("ComplEx", pairs(ent), pairs(rel), E, R, complex_layout="halves").score_all(BATCH, "tail")
    assert not torch.allclose(wrong, reference)


def test_rescal_accepts_flat_matrices():
    ent, rel = _arrays("RESCAL", np.random.default_rng(3))
    flat = build_scorer("RESCAL", ent, rel.reshape(R, D * D), E, R).score_all(BATCH, "head")
    torch.testing.assert_close(flat, build_scorer("RESCAL", ent, rel, E, R).score_all(BATCH, "head"))


def test_unknown_model_lists_the_valid_names():
    with pytest.raises(InputError, match="unknown model 'TransQ'; valid models: TransE-L1, TransE-L2, DistMult"):
        get_scorer_class("TransQ")
    assert get_scorer_class("distmult").name == "DistMult"


def test_shape_errors_name_file_and_expectation():
    ent, rel = np.zeros((E, D)), np.zeros((R, D))
    with pytest.raises(InputError, match=r"ent\.npy: expected 8 rows, one per entity"):
        build_scorer("DistMult", ent, rel, E + 1, R, entity_path="ent.npy")
    with pytest.raises(InputError, match=r"rel\.npy: expected 4 rows, one per relation"):
        build_scorer("DistMult", ent, rel, E, R + 1, relation_path="rel.npy")
    with pytest.raises(InputError, match=r"expected relation shape \(3, 4\)"):
        build_scorer("DistMult", ent, np.zeros((R, D + 1)), E, R)
    with pytest.raises(InputError, match="RESCAL relations must be"):
        build_scorer("RESCAL", ent, np.zeros((R, 5)), E, R)
    with pytest.raises(InputError, match="needs an even width"):
        build_scorer("ComplEx", np.zeros((E, 3)), np.zeros((R, 3)), E, R)
    with pytest.raises(InputError, match="expected a real-valued array"):
        build_scorer("DistMult", ent.astype(complex), rel, E, R)
    with pytest.raises(InputError, match="unit modulus"):
        build_scorer("RotatE", ent + 0j, 2 * np.ones((R, D)) + 0j, E, R)


def test_array_loading_errors(tmp_path):
    from openbench._io import load_npy as load_array

    with pytest.raises(InputError, match=r"missing\.npy: file does not exist"):
        load_array(tmp_path / "missing.npy")
    np.save(tmp_path / "words.npy", np.array(["a", "b"]))
    with pytest.raises(InputError, match=r"words\.npy: expected a numeric array, found dtype <U1"):
        build_scorer("DistMult", load_array(tmp_path / "words.npy"), np.zeros((R, D)), 2, R,
                     entity_path=tmp_path / "words.npy")
    with pytest.raises(InputError, match="unknown complex layout 'pairs'"):
        build_scorer("ComplEx", np.zeros((E, 4)), np.zeros((R, 4)), E, R, complex_layout="pairs")
    with pytest.raises(InputError, match=r"expected a 2-d array \(entities, dimension\)"):
        build_scorer("DistMult", np.zeros((E, 2, 2)), np.zeros((R, 4)), E, R)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("way", ["squared_norms", "_squared_norms_numpy", "_squared_norms_torch"])
def test_squared_norms_sum_in_float64_round_once_and_leave_their_input_alone(dtype, way):
    """squared_norms (numpy on the CPU, torch elsewhere: both ways here): each row's Σ v² summed in
    float64 and rounded once to the rows' dtype (the bound exact ranks' L2 windows rely on), over
    chunks smaller than the table; the table itself unchanged (torch squares its float64 chunks in
    place: they must be copies)."""
    from openbench.models import scorers

    rng = np.random.default_rng(3)
    table = torch.from_numpy(rng.normal(size=(1000, 150)) * 10.0 ** rng.uniform(-3, 3, (1000, 150))).to(dtype)
    kept = table.clone()
    squared = getattr(scorers, way)(table)
    assert torch.equal(table, kept)
    exact = [sum(Fraction(value) ** 2 for value in row) for row in table.double().tolist()]
    assert squared.dtype == dtype
    # the documented bound: u of the dtype (the one rounding) plus float64's γ_d (the sum), relative to ‖v‖²
    u, width = (2.0 ** -53 if dtype == torch.float64 else 2.0 ** -24), table.shape[1]
    allowed = u + width * 2.0 ** -53 / (1 - width * 2.0 ** -53)
    errors = [abs(Fraction(value) - truth) / truth for value, truth in zip(squared.double().tolist(), exact)]
    assert max(errors) <= allowed
    assert 1000 * 150 > scorers.SQUARED_NORM_CHUNK  # several chunks
