"""The C kernel's fused chunk count (``openbench_count_chunk``, :class:`ChunkTally`) against the
block-by-block reference ``count_block``: the same counts per chunk and the same window columns
recorded, with answers and known answers on chunk edges, rows whose record of window columns
overflows, NaN scores, every scan (AVX-512, AVX2 and portable), both directions, float32 and float64;
and its one pass over a table (``table_summary``) against the passes it replaces."""
import numpy as np
import pytest
import torch

from openbench.evaluation.counting import kernels
from openbench.evaluation.counting.counts import count_block
from openbench.evaluation.counting.kernels import ChunkTally, NonFiniteRows, chunk_scan

pytestmark = pytest.mark.skipif(kernels.COUNTING_LIBRARY.get() is None, reason="the C kernel is not built")


@pytest.fixture(params=["avx512", "avx2", "portable"])
def scan(request):
    """Each scan the kernel has (a vector scan only where the CPU has it)."""
    before = chunk_scan()
    chosen = chunk_scan(request.param)
    if chosen != request.param:
        chunk_scan(before)
        pytest.skip(f"this CPU has no {request.param} scan")
    yield chosen
    chunk_scan(before)


def _known(rows: int, entities: int, generator: torch.Generator, true_ids: torch.Tensor):
    """(filter rows, filter cols) sorted by row: a few known answers per row, chunk edges included."""
    pairs = []
    for row in range(rows):
        chosen = {0, entities - 1, 9, 10, 19, 20} | set(torch.randint(0, entities, (4,), generator=generator).tolist())
        chosen.discard(int(true_ids[row]))
        pairs += [(row, col) for col in sorted(chosen)]
    tensor = torch.tensor(pairs, dtype=torch.long)
    return tensor[:, 0].contiguous(), tensor[:, 1].contiguous()


def _csr(filter_rows: torch.Tensor, filter_cols: torch.Tensor, rows: int):
    offsets = torch.zeros(rows + 1, dtype=torch.long)
    torch.cumsum(torch.bincount(filter_rows, minlength=rows), 0, out=offsets[1:])
    return offsets, filter_cols


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lower_is_better", [False, True])
@pytest.mark.parametrize("window", [False, True])
def test_chunk_counts_equal_count_block_chunk_by_chunk(scan, dtype, lower_is_better, window):
    """Per chunk of 10 columns (the true answer and known answers on its first and last ones,
    scores on a coarse grid so that ties and window hits are common, widths not a multiple of
    16): the fused counts summed over the chunks equal count_block's, and the columns recorded
    inside the windows are every one count_block's positions name, in column order."""
    generator = torch.Generator().manual_seed(3)
    rows, entities, width = 37, 53, 10
    scores = (torch.randint(-6, 7, (rows, entities), generator=generator) / 4).to(dtype)
    true_ids = torch.randint(0, entities, (rows,), generator=generator)
    true_ids[:4] = torch.tensor([0, 9, 10, entities - 1])
    true_scores = scores.gather(1, true_ids[:, None]).squeeze(1)
    filter_rows, filter_cols = _known(rows, entities, generator, true_ids)
    lows, highs = (true_scores - 0.25, true_scores + 0.25) if window else (true_scores, true_scores)
    capacity = 64 if window else 0
    tally = ChunkTally(true_ids, true_scores, _csr(filter_rows, filter_cols, rows), lows, highs, lower_is_better,
                       window, capacity, True, dtype)
    greater, inside = torch.zeros(rows, dtype=torch.long), torch.zeros(rows, dtype=torch.long)
    recorded = [[] for _ in range(rows)]
    for start in range(0, entities, width):
        block = scores[:, start:start + width]
        positions = torch.full((rows, 64), -1, dtype=torch.long) if window else None
        counts = count_block(block.clone(), start, true_ids, true_scores, filter_rows, filter_cols, lower_is_better,
                             True, (lows, highs) if window else None, positions)
        greater += counts[0]
        inside += counts[1]
        if positions is not None:
            for row in range(rows):
                recorded[row] += [start + int(c) for c in positions[row] if c >= 0]
        tally.add(block.clone(), start)
    assert torch.equal(tally.greater, greater) and torch.equal(tally.inside, inside)
    assert int(tally.differs.sum()) == 0
    if window:
        assert torch.equal(tally.fill, torch.tensor([len(r) for r in recorded]))
        for row in range(rows):
            assert tally.positions[row, :len(recorded[row])].tolist() == recorded[row], row


def test_a_full_record_keeps_counting_and_the_first_columns(scan):
    """A row with more window columns than the record holds: fill counts them all, the record
    keeps the first ``capacity`` of them, and the counts are unchanged."""
    rows, entities = 3, 300
    scores = torch.zeros(rows, entities)
    scores[1, ::3] = 1.0
    true_ids = torch.tensor([1005, 1007, 1008])  # global ids: the chunk starts at 1000
    lows, highs = torch.full((rows,), -0.5), torch.full((rows,), 0.5)
    empty = (torch.zeros(rows + 1, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    tally = ChunkTally(true_ids, torch.zeros(rows), empty, lows, highs, False, True, 8, False, torch.float32)
    tally.add(scores.clone(), 1000)
    assert tally.fill.tolist() == [299, 199, 299]  # the true answer's column excluded
    assert tally.inside.tolist() == [299, 199, 299] and tally.greater.tolist() == [0, 100, 0]
    assert tally.positions[1].tolist() == [1001, 1002, 1004, 1005, 1008, 1010, 1011, 1013]


def test_a_nan_among_the_excluded_entries_is_found_with_a_window(scan):
    """Exact ranks overwrite the true and known answers with the worst value before the scan: a
    NaN there is still counted (count_block raises on it too)."""
    rows, entities = 4, 40
    scores = torch.randn(rows, entities, generator=torch.Generator().manual_seed(1))
    scores[2, 7] = float("nan")
    true_ids = torch.tensor([1, 2, 3, 4])
    filter_rows, filter_cols = torch.tensor([2]), torch.tensor([7])
    true_scores = scores.gather(1, true_ids[:, None]).squeeze(1)
    tally = ChunkTally(true_ids, true_scores, _csr(filter_rows, filter_cols, rows), true_scores - 0.1,
                       true_scores + 0.1, False, True, 16, True, torch.float32)
    tally.add(scores.clone(), 0)
    assert tally.first_nan_row() == 2
    with pytest.raises(NonFiniteRows) as error:
        count_block(scores.clone(), 0, true_ids, true_scores, filter_rows, filter_cols, False, True,
                    (true_scores - 0.1, true_scores + 0.1), torch.full((rows, 16), -1, dtype=torch.long))
    assert error.value.row == 2



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_pass_over_the_table_gives_its_norms_largest_value_and_grid(scan, dtype):
    """table_summary (one C pass, rows split over threads) equals the three passes it replaces:
    norm_bounds, the largest magnitude and fraction_bits (its float32 grid vectorised where the
    AVX-512 scan is chosen), on tables with subnormals, negative zeros, exact
    binary fractions, an infinity and a NaN (in the second half of the rows, another thread's)."""
    from openbench.evaluation.counting.exact_keys import norm_bounds
    from openbench.evaluation.counting.table_facts import fraction_bits, table_summary

    generator = torch.Generator().manual_seed(4)
    rows, width = 3000, 100  # 300,000 values: split over the threads
    grid = (torch.randint(-64, 65, (rows, width), generator=generator) / 8).to(dtype)
    tiny = torch.finfo(dtype).tiny
    variants = {"grid": grid, "fine": torch.randn(rows, width, generator=generator).to(dtype),
                "subnormal": grid * tiny / 4, "integers": grid * 2 ** 20, "negative zero": -grid * 0}
    infinite, missing = grid.clone(), grid.clone()
    infinite[2500, 3] = -float("inf")
    missing[2999, 99] = float("nan")
    variants.update(infinite=infinite, missing=missing)
    for name, table in variants.items():
        found = table_summary(table)
        two, one = norm_bounds(table)
        torch.testing.assert_close(found.norm2, two, rtol=0, atol=0, equal_nan=True, msg=name)
        torch.testing.assert_close(found.norm1, one, rtol=0, atol=0, equal_nan=True, msg=name)
        magnitudes = table.abs()
        expected = float("nan") if bool(torch.isnan(table).any()) else float(magnitudes.max())
        assert (np.isnan(found.largest) and np.isnan(expected)) or found.largest == expected, name
        assert found.bits == fraction_bits(table), name
    assert table_summary(grid).bits == 3 and table_summary(infinite).bits is None
    assert table_summary(missing).bits is None and np.isnan(table_summary(missing).largest)


def test_every_scan_gives_the_same_records(tmp_path):
    """Issue 67: the records are byte-identical whichever scan the CPU has: a tie-heavy exact
    ranking (DistMult, TransE-L1, RESCAL) and a repurposing record (the matrix pass and its
    float64 step), each evaluated under every scan this CPU can run, equal the portable scan's."""
    import json

    import openbench
    from openbench.datasets.loader import load_dataset
    from openbench.models.scorers import build_scorer
    from tests.bases import planted_graph, small_dataset, tie_heavy_scorer
    from tests.helpers import write_samples

    dataset = small_dataset(tmp_path / "ranking", 12)
    planted = load_dataset(write_samples(tmp_path / "repurposing", planted_graph(4), negatives=False))
    rng = np.random.default_rng(0)
    drugs = build_scorer("DistMult", rng.normal(size=(planted.num_entities, 20)).astype(np.float32),
                         rng.normal(size=(planted.num_relations, 20)).astype(np.float32), planted.num_entities,
                         planted.num_relations)

    def records():
        found = [openbench.evaluate(dataset, tie_heavy_scorer(dataset, model)).to_dict()
                 for model in ("DistMult", "TransE-L1", "RESCAL")]
        found.append(openbench.evaluate(planted, drugs, task="repurposing", relations=["indication"],
                                        negative_relations=["contraindication"], recall_at=[1, 10]).to_dict())
        for record in found:
            record.pop("timing")
        return json.dumps(found, sort_keys=True)

    before = chunk_scan()
    try:
        chunk_scan("portable")
        reference = records()
        ran = []
        for isa in ("avx2", "avx512"):
            if chunk_scan(isa) == isa:
                ran.append(isa)
                assert records() == reference, isa
    finally:
        chunk_scan(before)
    assert ran or before == "portable"


def test_the_matrix_pass_places_every_key_alike_under_every_scan():
    """The repurposing matrix pass's cells, computed by each scan's vector loop (AVX-512 masked,
    AVX2 eight lanes and a scalar rest): on keys at the cells' edges, beyond the grid, infinite,
    in rows wider than a span and not a multiple of any vector, the histograms, recorded keys and
    best positions equal the portable loop's; a NaN is reported at the same position."""
    import torch

    from openbench.errors import ScoreError
    from openbench.evaluation.counting import matrix

    library = matrix.passes._library()
    if library is None:
        pytest.skip("no compiled helper here")
    rng = np.random.default_rng(3)
    centres = np.sort(rng.normal(size=40))
    windows = matrix.windows._Windows(torch.from_numpy((centres - 1e-3).astype(np.float32)),
                              torch.from_numpy((centres + 1e-3).astype(np.float32)), False)
    count_pass = matrix.passes._BlockPass(windows, True, library)
    grid = count_pass.grid
    keys = rng.normal(size=(7, 301)).astype(np.float32)
    edges = np.float32(grid.base) + np.arange(-3, 40, dtype=np.float32) / np.float32(grid.scale)
    keys[1, :edges.size] = edges  # on and around the cells' edges
    keys[2, :centres.size] = centres.astype(np.float32)  # inside the windows
    keys[3, 5:9] = [np.inf, -np.inf, 3e38, -3e38]
    keys[4, -3:] = np.float32(grid.base)

    def run(values):
        found = count_pass(torch.from_numpy(values), 0.5)
        return [np.asarray(part).tolist() for part in found]

    def nan_message(values):
        with pytest.raises(ScoreError) as raised:
            count_pass(torch.from_numpy(values), 0.5)
        return str(raised.value)

    with_nan = keys.copy()
    with_nan[5, 290] = with_nan[6, 3] = np.nan
    before = chunk_scan()
    try:
        chunk_scan("portable")
        reference, reference_nan = run(keys), nan_message(with_nan)
        assert "row 5 of a block, column 290" in reference_nan
        for isa in ("avx2", "avx512"):
            if chunk_scan(isa) == isa:
                assert run(keys) == reference, isa
                assert nan_message(with_nan) == reference_nan, isa
    finally:
        chunk_scan(before)
