"""Downloads against a local HTTP server serving real fixture files."""
import hashlib

import pytest

from openbench._io.download import DownloadError, Remote, fetch
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


# -- issue 49: a URL is shared text; where it may connect, how much and how long ---------------

import time

from openbench._io import download
from openbench._io.download import ALLOW_PRIVATE_VARIABLE, address_allowed


@pytest.mark.parametrize("address, private_ok, allowed", [
    ("169.254.169.254", True, False), ("fe80::1", True, False), ("::ffff:169.254.169.254", True, False),
    ("127.0.0.1", False, False), ("127.0.0.1", True, True), ("10.1.2.3", False, False), ("192.168.0.7", True, True),
    ("172.16.5.4", False, False), ("fc00::5", False, False), ("0.0.0.0", False, False), ("::1", False, False),
    ("93.184.216.34", False, True), ("2606:2800:220:1:248:1893:25c8:1946", False, True)])
def test_which_addresses_a_download_may_reach(address, private_ok, allowed):
    assert address_allowed(address, private_ok) is allowed


def test_a_link_local_url_is_refused_at_once_even_with_the_switch(tmp_path, monkeypatch):
    monkeypatch.setenv(ALLOW_PRIVATE_VARIABLE, "1")
    started = time.monotonic()
    remote = Remote(source="evil", url="http://169.254.169.254/latest/meta-data/x", filename="x")
    with pytest.raises(DownloadError, match=r"169\.254\.169\.254, a link-local.*never reached"):
        fetch(remote, tmp_path, progress=False, backoff=0.01)
    assert time.monotonic() - started < 2 and not any(tmp_path.iterdir())


def test_loopback_is_refused_without_the_switch(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes}, allow_private=False) as server:
        with pytest.raises(DownloadError, match=rf"127\.0\.0\.1.*{ALLOW_PRIVATE_VARIABLE}=1"):
            fetch(_remote(server, "/hp.obo"), tmp_path, progress=False, backoff=0.01)
        assert server.requests == []  # refused before a request was sent
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("location, message", [("http://169.254.169.254/latest/meta-data/", "link-local"),
                                               ("file:///etc/passwd", r"only http\(s\) is followed")])
def test_a_redirect_is_checked_by_the_same_rules(tmp_path, obo_bytes, location, message):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        server.redirects["/hp.obo"] = location
        with pytest.raises(DownloadError, match=message):
            fetch(_remote(server, "/hp.obo"), tmp_path, progress=False, backoff=0.01)
    assert not any(tmp_path.iterdir())


def test_a_redirect_to_an_allowed_place_is_followed(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        server.redirects["/old.obo"] = server.base_url + "/hp.obo"
        remote = Remote(source="HPO", url=server.base_url + "/old.obo", filename="hp.obo")
        assert fetch(remote, tmp_path, progress=False).read_bytes() == obo_bytes


def test_a_stated_size_caps_an_endless_stream(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes[:171]}) as server:
        server.endless.add("/hp.obo")
        started = time.monotonic()
        with pytest.raises(DownloadError, match="sent more than the 171 bytes stated"):
            fetch(_remote(server, "/hp.obo", size=171), tmp_path, progress=False, backoff=0.01, deadline=2)
        assert time.monotonic() - started < 10
    assert not any(tmp_path.iterdir())


def test_a_content_length_above_the_stated_size_is_refused_before_reading(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        with pytest.raises(DownloadError, match=f"announces {len(obo_bytes)} bytes, more than the 100 stated"):
            fetch(_remote(server, "/hp.obo", size=100), tmp_path, progress=False, backoff=0.01)
    assert not any(tmp_path.iterdir())


def test_without_a_stated_size_the_absolute_cap_holds(tmp_path, obo_bytes, monkeypatch):
    monkeypatch.setattr(download, "MAX_DOWNLOAD_BYTES", 5 << 20)
    with FileServer({"/hp.obo": obo_bytes}) as server:
        server.endless.add("/hp.obo")
        with pytest.raises(DownloadError, match=f"sent more than the {5 << 20} bytes accepted"):
            fetch(_remote(server, "/hp.obo"), tmp_path, progress=False, backoff=0.01, deadline=2)
    assert not any(tmp_path.iterdir())


def test_a_trickling_server_meets_the_deadline(tmp_path, obo_bytes):
    with FileServer({"/hp.obo": obo_bytes[:400]}) as server:
        server.trickle["/hp.obo"] = 0.2
        started = time.monotonic()
        with pytest.raises(DownloadError, match="took longer than its 2 s deadline"):
            fetch(_remote(server, "/hp.obo"), tmp_path, progress=False, backoff=0.01, deadline=2.0)
        assert time.monotonic() - started < 6
    assert not any(tmp_path.iterdir())


def test_the_default_deadline_follows_the_stated_size():
    assert download._deadline_for(Remote("s", "http://x/y", "y", size=0)) == download.DEADLINE_BASE_S
    one_gb = Remote("s", "http://x/y", "y", size=1 << 30)
    assert download._deadline_for(one_gb) == download.DEADLINE_BASE_S + (1 << 30) / download.MIN_RATE


# -- issue 63: every special-purpose range, both families; embedded IPv4; every redirect ---------

import ipaddress

# IANA's IPv4 and IPv6 special-purpose address registries (iana-ipv4-special-registry,
# iana-ipv6-special-registry): the blocks whose "Globally Reachable" is False or N/A, written here
# from the registries, not from the code; 169.254.0.0/16 and fe80::/10 are link-local. The
# IPv4-mapped block ::ffff:0:0/96 is each IPv4 address itself, judged as that address below.
IANA_NOT_GLOBAL = ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
                   "192.0.0.0/29", "192.0.0.8/32", "192.0.0.170/32", "192.0.0.171/32", "192.0.2.0/24",
                   "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
                   "240.0.0.0/4", "255.255.255.255/32",
                   "::1/128", "::/128", "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64",
                   "2001:2::/48", "2001:10::/28", "2001:db8::/32", "3fff::/20", "5f00::/16", "fc00::/7",
                   "fe80::/10"]
LINK_LOCAL = [ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10")]


def _three(block):
    network = ipaddress.ip_network(block)
    return {network[0], network[network.num_addresses // 2], network[-1]}


@pytest.mark.parametrize("block", IANA_NOT_GLOBAL)
def test_every_address_iana_does_not_call_global_needs_the_switch(block):
    for address in _three(block):
        link_local = any(address.version == net.version and address in net for net in LINK_LOCAL)
        assert address_allowed(str(address), False) is False, address
        assert address_allowed(str(address), True) is (not link_local), address


def _embeddings(v4: str):
    """The IPv6 spellings of IPv4 address ``v4``: mapped, compatible, NAT64 (the well-known
    prefix and the local-use /48 at /96), 6to4, and Teredo with it as client and as server."""
    value = int(ipaddress.IPv4Address(v4))
    teredo_client = (0x2001 << 112) | (int(ipaddress.IPv4Address("192.0.2.45")) << 64) | (value ^ 0xFFFFFFFF)
    teredo_server = (0x2001 << 112) | (value << 64) | (int(ipaddress.IPv4Address("8.8.8.8")) ^ 0xFFFFFFFF)
    return {"mapped": f"::ffff:{v4}", "compatible": f"::{v4}", "nat64": f"64:ff9b::{v4}",
            "nat64-local": str(ipaddress.IPv6Address((0x0064FF9B0001 << 80) | value)),
            "6to4": str(ipaddress.IPv6Address((0x2002 << 112) | (value << 80) | 1)),
            "teredo-client": str(ipaddress.IPv6Address(teredo_client)),
            "teredo-server": str(ipaddress.IPv6Address(teredo_server))}


@pytest.mark.parametrize("v4", ["169.254.169.254", "169.254.0.1", "10.0.0.1", "127.0.0.1", "100.100.100.200",
                                "192.168.1.1", "0.0.0.1"])
def test_an_ipv6_address_is_judged_by_the_ipv4_address_it_embeds(v4):
    link_local = ipaddress.IPv4Address(v4).is_link_local
    for form, address in _embeddings(v4).items():
        assert address_allowed(address, False) is False, (form, address)
        if link_local:
            assert address_allowed(address, True) is False, (form, address)


def test_an_embedded_global_address_is_still_reachable():
    assert address_allowed("8.8.8.8", False) and address_allowed("2606:4700::1111", False)
    for form in ("mapped", "nat64", "6to4"):
        assert address_allowed(_embeddings("8.8.8.8")[form], False), form


def test_the_reported_ipv6_spellings_are_refused_before_a_connection(tmp_path, monkeypatch):
    monkeypatch.setenv(ALLOW_PRIVATE_VARIABLE, "1")
    connected = []
    monkeypatch.setattr(download.socket, "create_connection", lambda *a, **k: connected.append(a) or 1 / 0)
    for host in ("[::a9fe:a9fe]", "[::169.254.169.254]", "[64:ff9b::a9fe:a9fe]", "[2002:a9fe:a9fe::1]"):
        remote = Remote(source="evil", url=f"http://{host}/latest/meta-data/x", filename="x")
        with pytest.raises(DownloadError, match="link-local"):
            fetch(remote, tmp_path, progress=False, backoff=0.01, retries=0)
    assert connected == [] and not any(tmp_path.iterdir())


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("location", ["ftp://example.org/hp.obo", "file:///etc/passwd", "gopher://example.org/",
                                      "data:text/plain,hp", "FTP://example.org/x", "jar:http://x/y!/z"])
def test_every_redirect_status_to_every_other_scheme_is_refused(tmp_path, obo_bytes, status, location):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        server.redirects["/hp.obo"] = (status, location)
        with pytest.raises(DownloadError, match=r"only http\(s\) is followed"):
            fetch(_remote(server, "/hp.obo"), tmp_path, progress=False, backoff=0.01, retries=0)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_every_redirect_status_to_a_link_local_address_is_refused(tmp_path, obo_bytes, status):
    with FileServer({"/hp.obo": obo_bytes}) as server:
        server.redirects["/hp.obo"] = (status, "http://[::ffff:169.254.169.254]/latest/")
        with pytest.raises(DownloadError, match="link-local"):
            fetch(_remote(server, "/hp.obo"), tmp_path, progress=False, backoff=0.01, retries=0)
