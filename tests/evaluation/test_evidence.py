"""A ranks file is evidence (issue 49): every row consistent, its provenance the record's, every
metric of the record recomputed from it; sizes read from the footer before a row is read. The
forgeries are the ones a stranger tried: the significance attack, swapped sides, constant rows,
another dataset's ranks, ranks of ±1e-308, a rank of 0, a protocol that is a string, and a
Parquet file that declares 150 million rows in a few kilobytes."""
import json
import re

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

import openbench
from openbench._io.parquet import read_footer
from openbench.cli import main
from openbench.datasets.loader import load_dataset
from openbench.errors import InputError
from openbench.evaluation.statistics import evidence
from openbench.evaluation.statistics.evidence import (EvidenceError, check_against_record, check_rows, queries_digest,
                                           read_ranks)
from openbench.evaluation.statistics.ranks_table import RANKS_METADATA_KEY, ranks_provenance, write_ranks
from openbench.leaderboard import open_leaderboard
from openbench.leaderboard.uncertainty import ALPHA, PERMUTATIONS, holm
from openbench.evaluation.statistics.compare import sign_flip_p_value, paired_queries
from openbench.evaluation.statistics.ranks_table import query_values
from tests.bases import lifted_scorer
from tests.helpers import random_labelled_graph, snapshot, write_samples


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """A good model and a significantly worse one on one split, their records and ranks files."""
    root = tmp_path_factory.mktemp("evidence")
    folder = write_samples(root / "split", random_labelled_graph(61, 80, 3, {"train": 600, "valid": 20, "test": 120}))
    dataset = load_dataset(folder)
    out = {"root": root, "dataset": dataset}
    for name, model in {"good": lifted_scorer(dataset, 0.6, 1), "weak": lifted_scorer(dataset, 0.45, 3)}.items():
        record = openbench.evaluate(dataset, model, bootstrap=200)
        (root / f"{name}.json").write_text(json.dumps(record.to_dict()))
        write_ranks(root / f"{name}.parquet", record.ranks, record.to_dict())
        out[name] = record
    return out


def _forge(path, frame, provenance):
    """A ranks file of ``frame`` whose metadata says ``provenance``, as a forger would write it."""
    frame.write_parquet(path, metadata={RANKS_METADATA_KEY: json.dumps(provenance)})
    return path


def _honest_provenance(record, frame):
    """The provenance a forger copies from the record, its digest recomputed for the rows."""
    provenance = ranks_provenance(record)
    provenance.update(queries=frame.height, queries_sha256=queries_digest(frame))
    return provenance


def _submit(db, record_path, ranks_path, name="x"):
    return CliRunner().invoke(main, ["leaderboard", "submit", str(record_path), "--name", name, "--ranks",
                                     str(ranks_path), "--db", str(db)])


def _p_vs_best(best, other):
    left, right = paired_queries(other, best, "both", "row", "best")
    differences = query_values(left, "mrr") - query_values(right, "mrr")
    return sign_flip_p_value(differences, PERMUTATIONS, np.random.default_rng(0))


def test_the_significance_attack_is_refused(evaluated, tmp_path):
    """Two rank-1 queries of a significantly worse model replaced by ranks 0.001 and -1/998: the
    MRR, hits@k and query count the old check compared stay equal, and the sign-flip test's
    verdict flips to 'not worse than the best'. The forged file is refused naming the row; the
    honest one is stored and marked worse."""
    good, weak = evaluated["good"], evaluated["weak"]
    honest = weak.ranks
    first_ones = np.flatnonzero(honest["rank"].to_numpy() == 1.0)[:2]
    assert len(first_ones) == 2
    forged = honest.with_columns(pl.Series("rank", [0.001 if i == first_ones[0] else -1 / 998 if i == first_ones[1]
                                                    else value for i, value in enumerate(honest["rank"].to_list())]))
    for metric in ["mrr", "hits@1", "hits@3", "hits@10"]:  # what the old check compared: unchanged
        assert query_values(forged, metric).mean() == pytest.approx(query_values(honest, metric).mean(), abs=1e-9)
    p_honest = holm([_p_vs_best(good.ranks, honest)])[0]
    p_forged = holm([_p_vs_best(good.ranks, forged)])[0]
    assert p_honest < ALPHA <= p_forged  # the attack pays, where nothing checks the rows

    record = evaluated["root"] / "weak.json"
    path = _forge(tmp_path / "forged.parquet", forged, _honest_provenance(weak.to_dict(), forged))
    db = tmp_path / "board.sqlite"
    open_leaderboard(db).close()
    before = snapshot(db)
    done = _submit(db, record, path)
    assert done.exit_code == 1 and f"row {first_ones[0] + 1} (the " in done.output and "rank 0.001" in done.output
    assert snapshot(db) == before
    for name in ("good", "weak"):
        done = _submit(db, evaluated["root"] / f"{name}.json", evaluated["root"] / f"{name}.parquet", name)
        assert done.exit_code == 0, done.output
    shown = CliRunner().invoke(main, ["leaderboard", "show", "--db", str(db), "--format", "json"])
    rows = {row["name"]: row for row in json.loads(shown.output) if not row["published"]}
    # self-reported: their intervals, and no paired verdict (issue 63: only ranks the board computed)
    assert rows["good"]["not_worse_than_best"] is None and rows["weak"]["not_worse_than_best"] is None
    assert rows["good"]["interval"] is not None and rows["weak"]["interval"] is not None
    # the board's own ranks of the same two models are compared, and the weak one is marked worse
    from openbench.leaderboard.reproduce import reproduce

    board = open_leaderboard(tmp_path / "computed.sqlite")
    for name, model in (("good", lifted_scorer(evaluated["dataset"], 0.6, 1)),
                        ("weak", lifted_scorer(evaluated["dataset"], 0.45, 3))):
        again, certificate = reproduce(evaluated[name].to_dict(), model, evaluated["dataset"])
        board.submit(again.to_dict(), name=name, verified="reproduced", ranks=again.ranks, certificate=certificate)
    rows = {row["name"]: row for row in board.rows() if not row["published"]}
    board.close()
    assert rows["good"]["not_worse_than_best"] is True and rows["weak"]["not_worse_than_best"] is False
    assert rows["weak"]["p_vs_best"] == pytest.approx(p_honest)


def _swapped_sides(frame):
    """Each triple's head counts given to its tail query and back, the query keys untouched."""
    head, tail = frame.filter(pl.col("side") == "head"), frame.filter(pl.col("side") == "tail")
    counts = ["n_greater", "n_equal", "n_candidates", "rank"]
    return pl.concat([head.with_columns(tail.select(counts)), tail.with_columns(head.select(counts))])


@pytest.mark.parametrize("forgery, message", [
    (_swapped_sides, r"metrics\.head\.\w+\.\S+: the ranks give"),
    (lambda frame: frame.with_columns(pl.lit(0, pl.Int64).alias("n_greater"), pl.lit(1, pl.Int64).alias("n_equal"),
                                      pl.lit(1, pl.Int64).alias("n_candidates"), pl.lit(1.0).alias("rank")),
     r"metrics\.both\.\w+\.\S+: the ranks give"),
    (lambda frame: frame.with_columns(pl.when(pl.int_range(pl.len()) == 3).then(pl.col("n_candidates") + 1)
                                      .otherwise(pl.col("n_candidates")).alias("n_candidates")),
     r"metrics\.both\.\w+\.[az]\S+: the ranks give"),
])
def test_ranks_that_do_not_give_the_records_metrics_are_refused(evaluated, tmp_path, forgery, message):
    weak = evaluated["weak"]
    forged = forgery(weak.ranks)
    path = _forge(tmp_path / "forged.parquet", forged, _honest_provenance(weak.to_dict(), forged))
    frame, provenance = read_ranks(path)  # rows and provenance alone are consistent
    with pytest.raises(EvidenceError, match=message):
        check_against_record(weak.to_dict(), frame, provenance, path)


def test_another_datasets_ranks_are_refused(evaluated, tmp_path):
    weak = evaluated["weak"].to_dict()
    renamed = evaluated["weak"].ranks.with_columns(pl.col("head") + "x", pl.col("tail") + "x")
    provenance = _honest_provenance(weak, renamed)
    provenance["dataset_fingerprint"] = "f" * 64
    path = _forge(tmp_path / "other.parquet", renamed, provenance)
    frame, provenance = read_ranks(path)
    with pytest.raises(EvidenceError, match="the ranks are of dataset ffffffffffff…"):
        check_against_record(weak, frame, provenance, path)
    provenance["dataset_fingerprint"] = weak["dataset"]["fingerprint"]
    with pytest.raises(EvidenceError, match="diagnostics.queries_sha256 differs"):
        check_against_record(weak, frame, provenance, path)
    changed = dict(provenance, protocol=dict(weak["protocol"], filter_sets=["train"]))
    changed["queries_sha256"] = weak["diagnostics"]["queries_sha256"]
    with pytest.raises(EvidenceError, match=r"protocol\.filter_sets"):
        check_against_record(weak, evaluated["weak"].ranks, changed, path)


def test_the_honest_ranks_pass_every_check(evaluated):
    for name in ("good", "weak"):
        record = evaluated[name]
        frame, provenance = read_ranks(evaluated["root"] / f"{name}.parquet")
        check_against_record(record.to_dict(), frame, provenance)
        assert provenance["queries_sha256"] == record.to_dict()["diagnostics"]["queries_sha256"]


# -- row by row: one case per rule, each failing if the rule is removed ------------------------

def _with(frame, row, **values):
    return frame.with_columns(pl.when(pl.int_range(pl.len()) == row).then(pl.lit(value)).otherwise(pl.col(name))
                              .cast(frame.schema[name]).alias(name) for name, value in values.items())


ROW_CASES = [
    ({"rank": 0.001}, "rank 0.001, but its counts give"),
    ({"rank": -1 / 998}, "rank -0.001002004008016032, but"),
    ({"rank": 1e-308}, "rank 1e-308"),
    ({"rank": 0.0}, "rank 0.0"),
    ({"rank": float("inf")}, "rank inf"),
    ({"rank": float("nan")}, "rank nan"),
    ({"n_greater": -3, "rank": -1.0}, "n_greater -3; a count is at least 0"),
    ({"n_equal": 0, "rank": 0.5}, "n_equal 0; the answer ties with itself"),
    ({"n_greater": 500, "rank": 501.0}, "exceed its"),
    ({"n_candidates": 0}, "n_candidates 0"),
    ({"side": "middle"}, "side 'middle'; expected head or tail"),
    ({"split": "valid"}, "rows of 2 splits"),
    ({"relation": None}, "relation is null"),
    ({"n_greater": None}, "null together"),
]


@pytest.mark.parametrize("change, message", ROW_CASES)
def test_every_row_rule_refuses_its_case(evaluated, change, message):
    frame = _with(evaluated["weak"].ranks, 5, **change)
    with pytest.raises(EvidenceError, match=re.escape(message)):
        check_rows(frame, "ranks.parquet")


def test_unlisted_answers_are_all_null_and_valid(evaluated):
    frame = _with(evaluated["weak"].ranks, 5, n_greater=None, n_equal=None, rank=None)
    check_rows(frame)


# -- compare: every door checks -----------------------------------------------------------------

def _compare(a, b):
    return CliRunner().invoke(main, ["compare", str(a), str(b), "--format", "json"])


@pytest.mark.parametrize("change", [{"rank": 0.0}, {"rank": 0.5}, {"rank": -0.01}, {"rank": 7.0}])
def test_compare_refuses_impossible_ranks(evaluated, tmp_path, change):
    weak = evaluated["weak"]
    forged = _with(weak.ranks, 0, **change)
    path = _forge(tmp_path / "forged.parquet", forged, _honest_provenance(weak.to_dict(), forged))
    done = _compare(path, evaluated["root"] / "good.parquet")
    assert done.exit_code == 1 and "row 1 (the head query of" in done.output, done.output
    assert "Infinity" not in done.output and "Traceback" not in done.output
    with pytest.raises(EvidenceError):
        openbench.compare(forged, evaluated["good"].ranks)


@pytest.mark.parametrize("protocol, message", [("full", "protocol is not a JSON object"),
                                               (None, "protocol is not a JSON object")])
def test_compare_refuses_a_malformed_provenance_in_one_line(evaluated, tmp_path, protocol, message):
    weak = evaluated["weak"]
    provenance = dict(_honest_provenance(weak.to_dict(), weak.ranks), protocol=protocol)
    path = _forge(tmp_path / "odd.parquet", weak.ranks, provenance)
    done = _compare(path, evaluated["root"] / "good.parquet")
    assert done.exit_code == 1 and message in done.output and "internal error" not in done.output
    assert len(done.output.strip().splitlines()) == 1


def test_rows_changed_after_writing_are_refused(evaluated, tmp_path):
    weak = evaluated["weak"]
    provenance = ranks_provenance(weak.to_dict())
    reordered = weak.ranks.reverse()
    path = _forge(tmp_path / "reordered.parquet", reordered, provenance)
    with pytest.raises(EvidenceError, match="do not hash to the metadata's queries_sha256"):
        read_ranks(path)
    older = dict(provenance, format="openbench-ranks-v1")
    with pytest.raises(EvidenceError, match="this openbench reads openbench-ranks-v2"):
        read_ranks(_forge(tmp_path / "old.parquet", weak.ranks, older))


# -- sizes from the footer --------------------------------------------------------------------------

def _zigzag_varint(value):
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        piece = value & 0x7F
        value >>= 7
        if value:
            out.append(piece | 0x80)
        else:
            out.append(piece)
            return bytes(out)


def _bomb(path, frame, provenance, declared):
    """A real ranks file whose footer then declares ``declared`` rows: the i64 num_rows fields
    (compact protocol: header 0x16, a zigzag varint) respliced, the footer length updated."""
    _forge(path, frame, provenance)
    raw = path.read_bytes()
    length = int.from_bytes(raw[-8:-4], "little")
    footer = raw[-8 - length:-8]
    needle = b"\x16" + _zigzag_varint(frame.height)
    assert footer.count(needle) >= 1
    patched = footer.replace(needle, b"\x16" + _zigzag_varint(declared))
    path.write_bytes(raw[:-8 - length] + patched + len(patched).to_bytes(4, "little") + b"PAR1")
    assert read_footer(path).rows == declared
    return path


def test_a_parquet_bomb_is_one_clear_line_before_anything_is_read(evaluated, tmp_path, monkeypatch):
    weak = evaluated["weak"]
    frame = weak.ranks.head(777)
    path = _bomb(tmp_path / "bomb.parquet", frame, _honest_provenance(weak.to_dict(), frame), 150_000_000)

    def never(*args, **kwargs):
        raise AssertionError("the rows were read")

    monkeypatch.setattr(pl, "read_parquet", never)
    with pytest.raises(EvidenceError, match="declares 150,000,000 rows, more than the 50,000,000"):
        read_ranks(path)
    done = _compare(path, evaluated["root"] / "good.parquet")
    assert done.exit_code == 1 and "declares 150,000,000 rows" in done.output
    done = _submit(tmp_path / "board.sqlite", evaluated["root"] / "weak.json", path)
    assert done.exit_code == 1 and "declares 150,000,000 rows" in done.output


def test_the_footer_reader_agrees_with_polars_and_refuses_what_is_not_parquet(tmp_path):
    frame = pl.DataFrame({"a": list(range(10_000)), "s": [f"label {i % 7}" for i in range(10_000)]})
    frame.write_parquet(tmp_path / "f.parquet", row_group_size=3000, metadata={"k": "v"})
    footer = read_footer(tmp_path / "f.parquet")
    assert footer.rows == 10_000 and footer.columns == ("a", "s") and footer.row_groups == 4
    assert footer.metadata["k"] == "v" and footer.decoded_bytes > 0
    raw = (tmp_path / "f.parquet").read_bytes()
    for name, content in {"empty": b"", "text": b"rank\n1\n", "truncated": raw[:-3],
                          "cut_footer": raw[:-60] + raw[-8:], "huge_length": raw[:-8] + b"\xff\xff\xff\x7fPAR1"}.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(InputError, match="not a readable Parquet file"):
            read_footer(tmp_path / name)


def test_a_submission_reads_no_more_rows_than_its_record_states(evaluated, tmp_path, monkeypatch):
    record = evaluated["weak"].to_dict()
    record["diagnostics"]["queries"] = 10
    (tmp_path / "record.json").write_text(json.dumps(record))
    monkeypatch.setattr(pl, "read_parquet", lambda *args, **kwargs: pytest.fail("the rows were read"))
    done = _submit(tmp_path / "board.sqlite", tmp_path / "record.json", evaluated["root"] / "weak.parquet")
    assert done.exit_code == 1 and "declares 240 rows, more than the 10 queries" in done.output, done.output


# -- any malformed footer: one line, never a panic (issue 63, item 2) -------------------------------

def _integer_fields(footer: bytes):
    """(field path, start, end) of every integer field of a compact-protocol footer, with the
    byte range of its zigzag varint: what a forger can set to any value."""
    from openbench._io import parquet

    class Walk(parquet._Reader):
        def __init__(self, data):
            super().__init__(data)
            self.path, self.found = [], []

        def struct(self, depth):
            fields, last = {}, 0
            while True:
                header = self.byte()
                kind = header & 0x0F
                if kind == parquet._STOP:
                    return fields
                last = last + (header >> 4) if header >> 4 else self.zigzag()
                self.path.append(last)
                start = self.at
                fields[last] = self.value(kind, depth)
                if kind in (parquet._I16, parquet._I32, parquet._I64):
                    self.found.append((tuple(self.path), start, self.at))
                self.path.pop()

        def value(self, kind, depth):
            if kind not in (parquet._LIST, parquet._SET):
                return super().value(kind, depth)
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            size = self.varint() if size == 15 else size
            out = []
            for position in range(size):
                self.path.append(position)
                out.append(self.value(element, depth + 1))
                self.path.pop()
            return out

    walk = Walk(footer)
    walk.struct(0)
    return walk.found


def _with_field(raw: bytes, start: int, end: int, value: int) -> bytes:
    length = int.from_bytes(raw[-8:-4], "little")
    footer = raw[-8 - length:-8]
    patched = footer[:start] + _zigzag_varint(value) + footer[end:]
    return raw[:-8 - length] + patched + len(patched).to_bytes(4, "little") + b"PAR1"


def test_no_footer_value_reaches_a_panic(evaluated, tmp_path):
    """Every integer of a real ranks file's footer (row counts, value counts, page offsets and
    sizes, statistics' counts) set to -1, 0, one off, or 2**40: reading the file either succeeds
    with the rows checked or ends in one InputError naming it; polars never panics (its panic
    message on stderr is the sign, caught in a subprocess of its own)."""
    import subprocess
    import sys

    weak = evaluated["weak"]
    frame = weak.ranks.head(300)
    honest = _forge(tmp_path / "honest.parquet", frame, _honest_provenance(weak.to_dict(), frame))
    # statistics too: a forger's writer may add them
    frame.write_parquet(tmp_path / "stats.parquet", statistics=True, row_group_size=128,
                        metadata={RANKS_METADATA_KEY: json.dumps(_honest_provenance(weak.to_dict(), frame))})
    variants = []
    for base in (honest, tmp_path / "stats.parquet"):
        raw = base.read_bytes()
        length = int.from_bytes(raw[-8:-4], "little")
        fields = _integer_fields(raw[-8 - length:-8])
        assert len(fields) > 20
        for path, start, end in fields:
            for value in (-1, 0, 1, 299, 301, 1 << 40):
                target = tmp_path / f"v{len(variants)}.parquet"
                target.write_bytes(_with_field(raw, start, end, value))
                variants.append(str(target))
    script = ("import sys\nfrom openbench.errors import InputError\n"
              "from openbench.evaluation.statistics.evidence import read_ranks\n"
              "for path in sys.argv[1:]:\n"
              "    try:\n        read_ranks(path)\n        print('read', path)\n"
              "    except InputError as error:\n"
              "        assert path in str(error) and '\\n' not in str(error), error\n        print('refused', path)\n")
    done = subprocess.run([sys.executable, "-c", script, *variants], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "panicked" not in done.stderr, done.stderr[-2000:]
    outcomes = done.stdout.split()
    assert outcomes.count("refused") > len(variants) // 3  # the checks do refuse, not only survive


def test_a_value_count_of_minus_one_is_one_line_in_compare_and_submit(evaluated, tmp_path):
    """The attack as reported: the first column's num_values set to -1."""
    weak = evaluated["weak"]
    path = tmp_path / "ranks.parquet"
    raw = (evaluated["root"] / "weak.parquet").read_bytes()
    length = int.from_bytes(raw[-8:-4], "little")
    first_values = [(start, end) for field, start, end in _integer_fields(raw[-8 - length:-8])
                    if field == (4, 0, 1, 0, 3, 5)]
    path.write_bytes(_with_field(raw, *first_values[0], -1))
    assert weak.ranks.height > 0
    for done in (_compare(path, evaluated["root"] / "good.parquet"),
                 _submit(tmp_path / "board.sqlite", evaluated["root"] / "weak.json", path)):
        assert done.exit_code == 1, done.output
        assert "num_values is not a count" in done.output and str(path) in done.output
        assert "Traceback" not in done.output and "panic" not in done.output.lower()
        assert len(done.output.strip().splitlines()) == 1
