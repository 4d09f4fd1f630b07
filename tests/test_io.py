"""SequentialWriter: the same bytes as a plain write, with O_DIRECT, without it, and when refused."""
import errno
import os

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from openbench._io import outputs as _io

BLOCK = 2 * _io.ALIGNMENT


def _pieces(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for size in sizes]


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 3 * BLOCK), max_size=6))
def test_any_sequence_of_pieces_is_written_as_is(tmp_path_factory, sizes):
    path = tmp_path_factory.mktemp("seq") / "out.bin"
    pieces = _pieces(sizes)
    with _io.SequentialWriter(path, block=BLOCK) as writer:
        for piece in pieces:
            writer.write(memoryview(piece))
    assert path.read_bytes() == b"".join(pieces)


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT on this platform")
def test_full_blocks_go_direct_and_the_tail_buffered(tmp_path, monkeypatch):
    modes = []
    real_write = os.write

    def recording_write(fd, data):
        import fcntl
        modes.append((bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT), len(data)))
        return real_write(fd, data)

    monkeypatch.setattr(_io.os, "write", recording_write)
    pieces = _pieces([BLOCK + 100, BLOCK - 50])
    with _io.SequentialWriter(tmp_path / "out.bin", block=BLOCK) as writer:
        for piece in pieces:
            writer.write(piece)
    assert (tmp_path / "out.bin").read_bytes() == b"".join(pieces)
    if modes[0][0]:  # the filesystem under tmp_path takes O_DIRECT
        assert modes == [(True, BLOCK), (True, BLOCK), (False, 50)]
    else:
        assert all(not direct for direct, _ in modes)


def test_a_filesystem_refusing_direct_writes_gets_buffered_ones(tmp_path, monkeypatch):
    real_write = os.write
    refused = []

    def refusing_write(fd, data):
        import fcntl
        if hasattr(os, "O_DIRECT") and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            refused.append(len(data))
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(_io.os, "write", refusing_write)
    pieces = _pieces([3 * BLOCK + 7])
    with _io.SequentialWriter(tmp_path / "out.bin", block=BLOCK) as writer:
        writer.write(pieces[0])
    assert (tmp_path / "out.bin").read_bytes() == pieces[0]
    assert len(refused) <= 1  # tried once at most, then buffered


def test_other_write_errors_propagate_and_close_the_file(tmp_path, monkeypatch):
    def failing_write(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_io.os, "write", failing_write)
    writer = _io.SequentialWriter(tmp_path / "out.bin", block=BLOCK)
    with pytest.raises(OSError, match="No space"):
        with writer:
            writer.write(b"x" * 10)
    assert writer._fd == -1


def test_block_size_must_be_aligned(tmp_path):
    with pytest.raises(ValueError, match="multiple of 4096"):
        _io.SequentialWriter(tmp_path / "x", block=1000)


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT on this platform")
def test_a_short_direct_write_finishes_buffered(tmp_path, monkeypatch):
    import fcntl
    real_write = os.write
    calls = []

    def short_direct_write(fd, data):
        direct = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)
        calls.append(direct)
        return real_write(fd, memoryview(data)[:_io.ALIGNMENT] if direct else data)

    monkeypatch.setattr(_io.os, "write", short_direct_write)
    pieces = _pieces([3 * BLOCK + 11])
    with _io.SequentialWriter(tmp_path / "out.bin", block=BLOCK) as writer:
        writer.write(pieces[0])
    assert (tmp_path / "out.bin").read_bytes() == pieces[0]
    if calls[0]:  # the filesystem took O_DIRECT: one short direct write, all the rest buffered
        assert calls.count(True) == 1


# ------------------------------------------------------------------------------------------
# the reading layer under hostile input (issue 37): CR-only endings, bombs, over-long lines


def _gzip_stream(path, pieces, level=9) -> None:
    import zlib

    packer = zlib.compressobj(level, zlib.DEFLATED, 31)
    with open(path, "wb") as handle:
        for piece in pieces:
            handle.write(packer.compress(piece))
        handle.write(packer.flush())


def test_cr_only_line_endings_are_refused_crlf_accepted(tmp_path):
    from openbench._io.inputs import iter_raw_lines, read_table
    from openbench.errors import InputError

    rows = b"".join(f"NCBIGENE:{i}\tGENE_GENE\tNCBIGENE:{i + 1}\t700\tSTRING\n".encode() for i in range(464))
    (tmp_path / "lf.csv").write_bytes(rows)
    (tmp_path / "crlf.csv").write_bytes(rows.replace(b"\n", b"\r\n"))
    (tmp_path / "cr.csv").write_bytes(rows.replace(b"\n", b"\r"))
    gzip_path = tmp_path / "cr.csv.gz"
    _gzip_stream(gzip_path, [rows.replace(b"\n", b"\r")])
    expected = read_table(tmp_path / "lf.csv", None, header=False, width=5)
    assert read_table(tmp_path / "crlf.csv", None, header=False, width=5).equals(expected)
    assert [line for _, line in iter_raw_lines(tmp_path / "crlf.csv")][-1].endswith("STRING")
    for path in (tmp_path / "cr.csv", gzip_path):
        with pytest.raises(InputError, match=r"line 1: carriage returns without line feeds"):
            read_table(path, None, header=False, width=5)
        with pytest.raises(InputError, match=r"line 1: carriage returns without line feeds"):
            list(iter_raw_lines(path))


def test_a_cr_only_edges_file_fails_the_split_instead_of_becoming_one_edge(tmp_path):
    """Issue 37: every newline of edges.csv replaced by CR: split rand exited 0 with one positive."""
    from openbench.cli import main

    runner = CliRunner()
    assert runner.invoke(main, ["generate", "--sample", "--output", str(tmp_path / "g"), "--no-progress"]).exit_code == 0
    files = tmp_path / "g" / "graph_files"
    (files / "edges.csv").write_bytes((files / "edges.csv").read_bytes().replace(b"\n", b"\r"))
    done = runner.invoke(main, ["split", "rand", "--edges", str(files / "edges.csv"), "--tn-edges",
                                str(files / "TN_edges.csv"), "--nodes", str(files / "ALL_nodes.csv"), "--output",
                                str(tmp_path / "split")])
    assert done.exit_code == 1 and "edges.csv, line 1: carriage returns" in done.output, done.output
    assert not (tmp_path / "split").exists()


def test_over_long_lines_and_inflation_are_bounded(tmp_path, monkeypatch):
    from openbench._io import inputs
    from openbench.errors import InputError

    monkeypatch.setattr(inputs, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(inputs, "MIN_INFLATE_BUDGET", 10_000)
    (tmp_path / "long.tsv").write_bytes(b"a\tb\n" + b"x" * 1001 + b"\n")
    with pytest.raises(InputError, match=r"long.tsv, line 2: a line longer than 1000 bytes"):
        list(inputs.iter_raw_lines(tmp_path / "long.tsv"))
    _gzip_stream(tmp_path / "long.tsv.gz", [b"a\tb\n", b"x" * 5000])
    with pytest.raises(InputError, match=r"line 2: a line longer than 1000 bytes"):
        inputs.read_table(tmp_path / "long.tsv.gz", None, header=False, width=2)
    _gzip_stream(tmp_path / "many.tsv.gz", [b"a\tb\n" * 20_000])  # 80 kB from a few hundred bytes
    with pytest.raises(InputError, match=r"many.tsv.gz: inflates to more than \d+ bytes \(100x its size\)"):
        inputs.read_table(tmp_path / "many.tsv.gz", None, header=False, width=2)
    with pytest.raises(InputError, match=r"inflates to more than"):
        inputs.read_text(tmp_path / "many.tsv.gz")
    monkeypatch.setenv("OPENBENCH_MAX_INFLATE_RATIO", "100000")  # a file the user trusts
    assert inputs.read_table(tmp_path / "many.tsv.gz", None, header=False, width=2).height == 20_000


@pytest.mark.slow
def test_a_megabyte_gzip_holding_a_gigabyte_line_costs_no_memory(tmp_path):
    """Issue 37: a 1.0 MB .gz holding one 1 GiB line as split rand --edges peaked at 5.4 GB and
    took 58 s before the error. The split runs in a child process whose peak RSS is read."""
    import subprocess
    import sys

    bomb = tmp_path / "edges.csv.gz"
    _gzip_stream(bomb, (b"X" * (1 << 20) for _ in range(1024)))
    assert bomb.stat().st_size < 2 << 20
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("NCBIGENE:1\tGENE\n")
    command = [sys.executable, "-m", "openbench", "split", "rand", "--edges", str(bomb), "--tn-edges", str(bomb),
               "--nodes", str(nodes), "--output", str(tmp_path / "split")]
    # a fresh parent whose only child is the command: RUSAGE_CHILDREN is then that command's peak
    measure = ("import resource, subprocess, sys, time; started = time.monotonic(); "
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "sys.stderr.write(done.stderr); "
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "
               "time.monotonic() - started)")
    done = subprocess.run([sys.executable, "-c", measure, *command], capture_output=True, text=True, timeout=300)
    status, peak_mb, seconds = done.stdout.split()
    status, peak_mb, seconds = int(status), float(peak_mb), float(seconds)
    assert status == 1 and "a line longer than" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and peak_mb < 1024 and seconds < 60, (peak_mb, seconds)


def _codecs():
    import zlib

    codecs = [zlib]
    try:
        from isal import isal_zlib
        codecs.append(isal_zlib)
    except ImportError:
        pass
    return codecs


@pytest.mark.parametrize("codec", _codecs(), ids=lambda codec: codec.__name__)
def test_gzip_members_padding_truncation_and_checksums_with_each_inflater(tmp_path, monkeypatch, codec):
    """ISA-L where installed, zlib elsewhere: the same bytes as Python's gzip module, the same refusals."""
    import gzip

    from openbench._io import inputs
    from openbench.errors import InputError

    monkeypatch.setattr(inputs, "_INFLATE", codec)
    members = gzip.compress(b"a\tb\n") + gzip.compress(b"c\td\n" * 300_000) + b"\x00" * 10 + gzip.compress(b"e\n")
    (tmp_path / "members.gz").write_bytes(members)
    assert inputs.read_bytes(tmp_path / "members.gz") == gzip.decompress(members)
    single = gzip.compress(b"c\td\n" * 300_000)
    cases = {"truncated": (single[:len(single) // 2], "ends early: the file is truncated"),
             "garbage": (gzip.compress(b"x\n") + b"garbage!", "start no other member"),
             "checksum": (single[:-8] + bytes([single[-8] ^ 1]) + single[-7:], "not a readable gzip file"),
             "foreign": (b"plain text, no gzip\n" * 5, "not a readable gzip file"), "empty": (b"", "empty gzip")}
    for name, (data, message) in cases.items():
        (tmp_path / f"{name}.gz").write_bytes(data)
        with pytest.raises(InputError, match=message):
            inputs.read_bytes(tmp_path / f"{name}.gz")


# ------------------------------------------------------------------------------------------
# the JSON nesting bound (issue 36's deep bodies; its own test since Python's RecursionError
# only stops documents deeper than the interpreter's recursion limit)


@pytest.mark.parametrize("opening, closing", [("[", "]"), ('{"a": ', "}")])
def test_json_nested_past_the_bound_is_refused_before_parsing_and_within_it_is_read(tmp_path, opening, closing):
    from openbench._io.inputs import parse_json, read_json
    from openbench.errors import InputError

    JSON_MAX_DEPTH = 200  # the stated bound (a record nests a few levels)
    within = opening * JSON_MAX_DEPTH + "1" + closing * JSON_MAX_DEPTH
    assert parse_json(within) is not None
    beyond = opening * (JSON_MAX_DEPTH + 1) + "1" + closing * (JSON_MAX_DEPTH + 1)
    with pytest.raises(InputError, match=f"nested deeper than {JSON_MAX_DEPTH} levels"):
        parse_json(beyond, None, "the result record")
    path = tmp_path / "deep.json"
    path.write_text(beyond)
    with pytest.raises(InputError, match=f"{path}: JSON nested deeper than"):
        read_json(path)
    flat = "[" + "[1], " * 5000 + "[1]]"  # many brackets, shallow: read
    assert len(parse_json(flat)) == 5001
