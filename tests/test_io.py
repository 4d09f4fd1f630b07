"""SequentialWriter: the same bytes as a plain write, with O_DIRECT, without it, and when refused."""
import errno
import os

import numpy as np
import pytest
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
