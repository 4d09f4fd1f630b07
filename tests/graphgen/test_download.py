"""Downloads against a local HTTP server serving real fixture files."""
import hashlib

import pytest

from graphgen.download import DownloadError, Remote, fetch
from tests.helpers import fixture
from tests.http_server import FileServer


@pytest.fixture()
def obo_bytes():
    return fixture("sources", "hpo", "hp.obo").read_bytes()


def _remote(server, path, **kwargs):
    return Remote(source="HPO", url=server.base_url + path, filename=path.strip("/"), **kwargs)


def test_download_then_reuse_without_network(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        remote = _remote(server, "/hp.obo", sha256=hashlib.sha256(obo_bytes).hexdigest())
        path = fetch(remote, tmp_path, progress=False)
        assert path.read_bytes() == obo_bytes
        assert fetch(remote, tmp_path, progress=False) == path
        assert len(server.requests) == 1
    assert not list(tmp_path.glob("*.part"))


def test_dropped_connection_is_resumed_with_a_range_request(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        server.drop_after["/hp.obo"] = (1000, 2)
        path = fetch(_remote(server, "/hp.obo"), tmp_path, backoff=0.01, progress=False)
        assert path.read_bytes() == obo_bytes
        assert [r for _, r in server.requests] == [None, "bytes=1000-", "bytes=2000-"]
    assert (tmp_path / "hp.obo.sha256").read_text().strip() == hashlib.sha256(obo_bytes).hexdigest()


def test_server_ignoring_ranges_restarts_cleanly(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        server.drop_after["/hp.obo"] = (500, 1)
        server.ignore_range = True
        assert fetch(_remote(server, "/hp.obo"), tmp_path, backoff=0.01, progress=False).read_bytes() == obo_bytes


def test_wrong_checksum_is_refused_and_nothing_kept(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        remote = _remote(server, "/hp.obo", sha256="0" * 64)
        with pytest.raises(DownloadError) as info:
            fetch(remote, tmp_path, progress=False)
    message = str(info.value)
    assert message.startswith("HPO: ") and remote.url in message and "expected " + "0" * 64 in message
    assert not any(tmp_path.iterdir())


def test_missing_file_fails_at_once_naming_the_url(tmp_path):
    with FileServer({}) as server:
        remote = _remote(server, "/nothing.obo")
        with pytest.raises(DownloadError, match=r"HPO: http://127\.0\.0\.1:\d+/nothing\.obo answered HTTP 404"):
            fetch(remote, tmp_path, progress=False)
        assert len(server.requests) == 1


def test_persistent_failure_gives_up_after_the_retries(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        server.drop_after["/hp.obo"] = (10, 99)
        with pytest.raises(DownloadError, match="failed after 3 attempts: connection closed after"):
            fetch(_remote(server, "/hp.obo"), tmp_path, retries=2, backoff=0.01, progress=False)
        assert len(server.requests) == 3


def test_a_cached_file_that_changed_is_noticed(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        remote = _remote(server, "/hp.obo")
        path = fetch(remote, tmp_path, progress=False)
        path.write_bytes(obo_bytes[:-10])
        with pytest.raises(DownloadError, match="delete it to download .* again"):
            fetch(remote, tmp_path, progress=False)


def test_a_partial_file_the_server_cannot_resume_is_restarted(tmp_path, obo_bytes):
    (tmp_path / "hp.obo.part").write_bytes(b"x" * (len(obo_bytes) + 10))  # longer than the file: 416
    with FileServer({"/hp.obo": obo_bytes}) as server:
        path = fetch(_remote(server, "/hp.obo"), tmp_path, backoff=0.01, progress=False)
        assert [r for _, r in server.requests] == [f"bytes={len(obo_bytes) + 10}-", None]
    assert path.read_bytes() == obo_bytes


def test_a_git_blob_id_is_checked_as_git_computes_it(tmp_path, obo_bytes):
    """GitHub publishes a file's blob id: sha1 of b"blob <size>\\0" + content (what git hash-object prints)."""
    blob_id = hashlib.sha1(b"blob %d\0" % len(obo_bytes) + obo_bytes).hexdigest()
    with FileServer({"/hp.obo": obo_bytes}) as server:
        assert fetch(_remote(server, "/hp.obo", git_sha1=blob_id), tmp_path / "a", progress=False).is_file()
        plain_sha1 = hashlib.sha1(obo_bytes).hexdigest()  # the content's sha1 is not the blob id
        with pytest.raises(DownloadError, match="git blob id .* expected " + plain_sha1):
            fetch(_remote(server, "/hp.obo", git_sha1=plain_sha1), tmp_path / "b", progress=False)
    assert not any((tmp_path / "b").iterdir())
