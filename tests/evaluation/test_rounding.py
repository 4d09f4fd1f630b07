"""The rounding facts every exact count rests on (openbench/evaluation/counting/rounding.py),
checked from their definitions: the grid criterion against float32 and float64 arithmetic on
integer and dyadic values, outward rounding against the values it brackets."""
import numpy as np
import pytest
import torch

from openbench.evaluation.counting.rounding import (BOUND_WIDENING, on_exact_grid, round_outwards, subnormal_slack,
                                                    subnormal_spacing, unit_roundoff, widened)


@pytest.mark.parametrize("dtype, significand", [(torch.float32, 24), (torch.float64, 53)])
def test_the_grid_criterion_keeps_three_bits_below_the_significand(dtype, significand):
    limit = 2.0 ** (significand - 3)
    assert on_exact_grid(limit / 2, 1, 0, dtype) and not on_exact_grid(limit, 1, 0, dtype)
    # a grid of 2^-f per factor: the key's terms are multiples of 2^-(degree f)
    assert on_exact_grid(limit / 2 ** 10, 3, 3, dtype) and not on_exact_grid(limit / 2 ** 9, 3, 3, dtype)
    sizes = np.array([limit / 4, limit, 2 * limit])
    assert on_exact_grid(sizes, 1, 0, dtype).tolist() == [True, False, False]


def test_the_grid_criterion_refuses_terms_below_the_subnormal_spacing():
    tiny = 2.0 ** -130  # keys of magnitude 2^-130 on a grid of 2^-148 span 2^18 grid steps: within 2^21
    assert on_exact_grid(tiny, 2, 74, torch.float32)  # terms of 2^-148: above float32's 2^-149
    assert not on_exact_grid(tiny, 2, 75, torch.float32)  # 2^-150: a product would underflow
    assert not on_exact_grid(np.full(3, tiny), 2, 75, torch.float32).any()


def test_what_the_criterion_accepts_float32_computes_exactly_and_what_it_refuses_it_may_not():
    rng = np.random.default_rng(0)
    width = 64
    for scale in (2 ** 6, 2 ** 8, 2 ** 9):  # |a·b| <= 64 · scale² : 2^18, 2^22, 2^24
        a = rng.integers(-scale, scale + 1, (200, width))
        b = rng.integers(-scale, scale + 1, (300, width))
        size = width * scale * scale
        exact = a @ b.T
        computed = (torch.from_numpy(a.astype(np.float32)) @ torch.from_numpy(b.astype(np.float32)).T).numpy()
        if on_exact_grid(size, 1, 0, torch.float32):
            assert np.array_equal(computed.astype(np.int64), exact), scale
    # at 2^24 and beyond float32 rounds odd integers: the criterion must have refused such a size
    assert not on_exact_grid(2.0 ** 24 + 1, 1, 0, torch.float32)
    assert float(np.float32(2 ** 24 + 1)) != 2 ** 24 + 1


def test_outward_rounding_brackets_the_values_and_widening_widens():
    rng = np.random.default_rng(1)
    values = rng.normal(size=1000) * 10.0 ** rng.integers(-30, 30, 1000)
    lows, highs = round_outwards(values, values, torch.float32)
    assert (lows.double().numpy() <= values).all() and (highs.double().numpy() >= values).all()
    assert (highs.double().numpy() - lows.double().numpy() >= 0).all()
    bounds = np.abs(values)
    assert (widened(bounds) > bounds).all() and BOUND_WIDENING > 1
    assert subnormal_slack(10, 2, torch.float32) == 4 * 20 * 2.0 ** -149 == 4 * 20 * subnormal_spacing(torch.float32)
    assert unit_roundoff(torch.complex64) == unit_roundoff(torch.float32) == 2.0 ** -24
