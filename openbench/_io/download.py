"""Cached, resumable, checksummed, bounded downloads with a progress bar (graph sources and
published datasets both fetch through here).

A file is fetched into ``cache_dir/<filename>`` through ``<filename>.part``: a dropped connection
is resumed with an HTTP Range request (or restarted when the server ignores ranges), transient
failures are retried with exponential backoff, and the finished file is checked against the
pinned sha256 when the source has one. Without a pinned value the sha256 of the first complete
download is recorded beside the file (``<filename>.sha256``) and every later use is checked
against it, so a cache that changed underneath is noticed. Only the standard library is used.

A URL is shared text (a registry entry, a mirror), so it is treated as hostile:

* **Where it may connect.** Every connection, redirects included, is checked *after* it is made,
  on the address actually reached (no second DNS answer can slip past): link-local addresses
  (169.254.0.0/16, where cloud metadata services answer; fe80::/10) are never reached; loopback,
  private (RFC 1918, fc00::/7), shared (100.64.0.0/10), unspecified, multicast, reserved and every
  other address IANA's special-purpose registries do not mark globally reachable only when the user
  opts in with ``OPENBENCH_ALLOW_PRIVATE_NETWORK=1`` (a mirror on the lab's own network; the test
  suite's server on 127.0.0.1). An IPv6 address that embeds an IPv4 one (mapped, compatible, NAT64,
  6to4, Teredo) is judged by the embedded address as well. Redirects stay on http(s), at most :data:`MAX_REDIRECTS`.
* **How much it may write.** A stated size caps the bytes written (a Content-Length above it is
  refused before a byte is read; a stream that runs past it is cut and refused); without one,
  :data:`MAX_DOWNLOAD_BYTES`.
* **How long it may take.** Each file has an overall deadline, across reads and retries:
  :data:`DEADLINE_BASE_S` plus the expected bytes at :data:`MIN_RATE` bytes per second (a server
  trickling a byte every 20 s is cut when it passes); reads return what has arrived, so the
  deadline is checked between them.
"""
from __future__ import annotations

import hashlib
import http.client
import ipaddress
import logging
import os
import shutil
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from openbench.progress import progress as progress_bar

from openbench import __version__
from openbench._io import write_text_atomic
from openbench.errors import OpenbenchError

__all__ = ["CHUNK_BYTES", "RETRYABLE_STATUS", "ALLOW_PRIVATE_VARIABLE", "MAX_DOWNLOAD_BYTES", "MAX_REDIRECTS",
           "DEADLINE_BASE_S", "MIN_RATE", "DownloadError", "Remote", "sha256_of", "sidecar_path", "fetch", "take_local",
           "address_allowed", "embedded_ipv4", "NOT_GLOBALLY_REACHABLE"]

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
# 4xx answers other than these will not change by asking again
RETRYABLE_STATUS = {408, 425, 429}
ALLOW_PRIVATE_VARIABLE = "OPENBENCH_ALLOW_PRIVATE_NETWORK"  # "1": loopback and private addresses may be reached
MAX_DOWNLOAD_BYTES = 64 << 30  # a file without a stated size: no published biomedical KG comes near
MAX_REDIRECTS = 5
DEADLINE_BASE_S = 300.0  # per file, plus the expected bytes at MIN_RATE
MIN_RATE = 32 * 1024  # bytes per second: slower than this, a file is not worth waiting for
UNKNOWN_SIZE_DEADLINE_S = 6 * 3600.0


class DownloadError(OpenbenchError):
    """A download failed or produced the wrong bytes; the message names the source and URL."""


@dataclass(frozen=True)
class Remote:
    """One downloadable file of a source."""

    source: str
    url: str
    filename: str
    sha256: Optional[str] = None
    version: str = "unknown"
    md5: Optional[str] = None  # what Zenodo publishes
    size: Optional[int] = None  # bytes, where published
    git_sha1: Optional[str] = None  # the git blob id, where a file is only published in a git repository


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def sidecar_path(target: Path) -> Path:
    """Where :func:`fetch` records the sha256 of a downloaded file."""
    return target.with_name(target.name + ".sha256")


def fetch(remote: Remote, cache_dir, *, retries: int = 4, backoff: float = 0.5, timeout: float = 60.0,
          progress: bool = True, deadline: Optional[float] = None) -> Path:
    """Return the path of ``remote`` in ``cache_dir``, downloading it first when it is not there (a
    ``file://`` URL: the local file, copied and checked as a download is: :func:`take_local`).

    :param timeout: seconds one read may wait; ``deadline``: seconds the whole file may take
        (default: the module docstring's rule)."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / remote.filename
    if target.exists():
        _verify_cached(remote, target)
        return target
    parts = urllib.parse.urlsplit(remote.url)
    if parts.scheme.lower() == "file":
        return take_local(remote, Path(urllib.request.url2pathname(parts.path)), cache_dir)
    partial = target.with_name(target.name + ".part")
    _check_url(remote)
    limit = _deadline_for(remote) if deadline is None else deadline
    ends = time.monotonic() + limit
    failure = None
    try:
        for attempt in range(retries + 1):
            try:
                _download_into(remote, partial, timeout, progress, ends)
                failure = None
                break
            except _Retryable as error:
                failure = error
                if attempt == retries:
                    break
                delay = min(backoff * 2 ** attempt, max(0.0, ends - time.monotonic()))
                logger.warning("%s: %s; retrying in %.1f s (attempt %d of %d)", remote.source, error, delay,
                               attempt + 2, retries + 1)
                time.sleep(delay)
    except _Overdue:
        partial.unlink(missing_ok=True)
        raise DownloadError(f"{remote.source}: {remote.url} took longer than its {limit:.0f} s deadline (its bytes "
                            f"at {MIN_RATE // 1024} KiB/s, plus {DEADLINE_BASE_S:.0f} s); nothing was kept") from None
    except DownloadError:
        partial.unlink(missing_ok=True)  # too large, refused address or redirect: nothing of it is kept
        raise
    if failure is not None:  # the partial file stays: a later run resumes it
        raise DownloadError(f"{remote.source}: downloading {remote.url} failed after {retries + 1} attempts: "
                            f"{failure}")
    digest = _keep_checked(remote, partial, target)
    if not remote.sha256 and not remote.md5 and not remote.git_sha1:
        logger.warning("%s: no published checksum for %s; recorded sha256 %s", remote.source, remote.url, digest)
    return target


def take_local(remote: Remote, source: Path, cache_dir) -> Path:
    """A copy of the user's local file ``source`` standing for ``remote`` in ``cache_dir``, checked
    exactly as a download is (published size, md5, sha256, git blob id); a mismatch discards the
    copy and names the file. The user's file itself is only read."""
    source = Path(source)
    if not source.is_file():
        raise DownloadError(f"{remote.source}: {source} is not a file")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / remote.filename
    partial = target.with_name(target.name + ".part")
    shutil.copyfile(source, partial)
    _keep_checked(remote, partial, target, what=str(source))
    return target


def _keep_checked(remote: Remote, partial: Path, target: Path, what: Optional[str] = None) -> str:
    """``partial`` (a download, or ``what``: the user's local copy) checked against everything the
    provider publishes (size, md5, git blob id, sha256), then kept as ``target`` with its sha256
    sidecar; a mismatch discards it. Returns its sha256."""
    problem = _published_mismatch(remote, partial)
    digest = sha256_of(partial) if problem is None else ""
    if problem is None and remote.sha256 and digest != remote.sha256:
        problem = f"sha256 {digest}, expected {remote.sha256}"
    if problem is not None:
        partial.unlink()
        if what is not None:
            raise DownloadError(f"{remote.source}: {what} has {problem} (the catalogue's); it is not the published "
                                "file")
        raise DownloadError(f"{remote.source}: {remote.url} has {problem}; the download was discarded")
    os.replace(partial, target)
    write_text_atomic(sidecar_path(target), digest + "\n")
    return digest


def _published_mismatch(remote: Remote, partial: Path) -> Optional[str]:
    """How ``partial`` differs from the size, md5 and git blob id the provider publishes, or None."""
    size = partial.stat().st_size
    problem = None
    if remote.size is not None and size != remote.size:
        problem = f"{size} bytes, expected {remote.size}"
    elif remote.md5:
        digest = _digest_of(partial, hashlib.md5(usedforsecurity=False))
        if digest != remote.md5:
            problem = f"md5 {digest}, expected {remote.md5}"
    if problem is None and remote.git_sha1:
        blob = hashlib.sha1(f"blob {size}\0".encode("ascii"), usedforsecurity=False)  # git's object id
        digest = _digest_of(partial, blob)
        if digest != remote.git_sha1:
            problem = f"git blob id {digest}, expected {remote.git_sha1}"
    return problem


def _digest_of(path: Path, digest) -> str:
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify_cached(remote: Remote, target: Path) -> None:
    sidecar = sidecar_path(target)
    expected = remote.sha256 or (sidecar.read_text().strip() if sidecar.exists() else None)
    digest = sha256_of(target)
    if expected and digest != expected:
        raise DownloadError(f"{remote.source}: the cached {target} has sha256 {digest}, expected {expected}; "
                            f"delete it to download {remote.url} again")
    if not sidecar.exists():
        write_text_atomic(sidecar, digest + "\n")


class _Retryable(Exception):
    pass


def _private_allowed() -> bool:
    return os.environ.get(ALLOW_PRIVATE_VARIABLE, "").strip() == "1"


# IANA's special-purpose address registries (iana-ipv4-special-registry and
# iana-ipv6-special-registry, as of 2026): the blocks marked "Globally Reachable: False", and
# the older blocks whose entries say N/A. ``ipaddress.is_global`` follows them too, but each Python
# release knows the registry as of its own date (3fff::/20 and 5f00::/16 came later): a connection
# is judged by both, and an address either calls non-global is not global. (::ffff:0:0/96, the
# IPv4-mapped block, is judged as the IPv4 address each of its addresses is.)
NOT_GLOBALLY_REACHABLE = tuple(ipaddress.ip_network(block) for block in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
    "::/128", "::1/128", "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64", "2001::/23",
    "2001:2::/48", "2001:10::/28", "2001:db8::/32", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10"))
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _rfc6052(value: int, prefix: int) -> ipaddress.IPv4Address:
    """The IPv4 address RFC 6052 embeds after a ``prefix``-bit NAT64 prefix (bits 64-71, the "u"
    octet, skipped) in the 128-bit ``value``."""
    bits = [(value >> (127 - position)) & 1 for position in range(128)]
    taken = [bit for position, bit in enumerate(bits[prefix:], prefix) if position < 64 or position > 71][:32]
    return ipaddress.IPv4Address(int("".join(map(str, taken)), 2))


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list:
    """The IPv4 addresses ``ip`` embeds, each of which a translator or tunnel may reach on its
    behalf: IPv4-mapped and IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96; 64:ff9b:1::/48 under
    each prefix length RFC 6052 allows within it), 6to4 (2002::/16) and Teredo (2001::/32: its
    server and its de-obfuscated client)."""
    found = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    value = int(ip)
    if ip in _IPV4_COMPATIBLE and value > 1:
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if ip in _NAT64_WELL_KNOWN:
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if ip in _NAT64_LOCAL:
        found.extend(_rfc6052(value, prefix) for prefix in (48, 56, 64, 96))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def _globally_reachable(ip) -> bool:
    return ip.is_global and not ip.is_multicast and not any(ip.version == block.version and ip in block
                                                            for block in NOT_GLOBALLY_REACHABLE)


def address_allowed(address: str, allow_private: Optional[bool] = None) -> bool:
    """Whether a connection may reach ``address`` (an IP literal): never link-local; loopback,
    private and every other address IANA does not mark globally reachable only with
    ``allow_private`` (default: the :data:`ALLOW_PRIVATE_VARIABLE` switch). An IPv6 address that
    embeds IPv4 ones (:func:`embedded_ipv4`) is judged by each of them as well (an IPv4-mapped one
    by its IPv4 address alone: it is that address)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    judged = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        judged = ([] if ip.ipv4_mapped is not None else [ip]) + embedded_ipv4(ip)
    if any(one.is_link_local for one in judged):
        return False
    if all(_globally_reachable(one) for one in judged):
        return True
    return _private_allowed() if allow_private is None else allow_private


def _refused(host: str, address: str) -> DownloadError:
    return DownloadError(f"{host} resolves to {address}, a link-local, loopback or private address: refused (set "
                         f"{ALLOW_PRIVATE_VARIABLE}=1 to reach a mirror on your own network; link-local addresses are "
                         "never reached)")


def _check_host(host: str, port: int) -> None:
    """Before connecting: every address ``host`` resolves to must be allowed."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return  # the connection itself reports the failure (and is retried)
    for *_, sockaddr in found:
        if not address_allowed(str(sockaddr[0])):
            raise _refused(host, str(sockaddr[0]))


def _check_peer(sock: socket.socket, host: str) -> None:
    """After connecting, on the address reached (a second DNS answer cannot differ from the first
    one unnoticed)."""
    address = str(sock.getpeername()[0])
    if not address_allowed(address):
        sock.close()
        raise _refused(host, address)


class _CheckedHTTPConnection(http.client.HTTPConnection):
    def connect(self) -> None:
        _check_host(self.host, self.port)
        super().connect()
        _check_peer(self.sock, self.host)


class _CheckedHTTPSConnection(http.client.HTTPSConnection):
    def connect(self) -> None:
        # connect the TCP socket, check its peer, then wrap it in TLS as the parent does
        _check_host(self.host, self.port)
        http.client.HTTPConnection.connect(self)
        _check_peer(self.sock, self.host)
        server_hostname = getattr(self, "_tunnel_host", None) or self.host
        self.sock = self._context.wrap_socket(self.sock, server_hostname=server_hostname)  # type: ignore[attr-defined]


class _CheckedHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(_CheckedHTTPConnection, req)


class _CheckedHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        return self.do_open(_CheckedHTTPSConnection, req, context=self._context)  # type: ignore[attr-defined]


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects on http(s) only, at most :data:`MAX_REDIRECTS`; where they lead is checked again
    by the connection classes above."""

    max_redirections = MAX_REDIRECTS

    def http_error_302(self, req, fp, code, msg, headers):
        location = headers.get("location") or headers.get("uri") or ""
        newurl = urllib.parse.urljoin(req.full_url, location)
        if urllib.parse.urlsplit(newurl).scheme.lower() not in ("http", "https"):
            raise DownloadError(f"{req.full_url} redirects to {newurl[:200]!r}: only http(s) is followed")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


_OPENER = urllib.request.build_opener(_CheckedHTTPHandler, _CheckedHTTPSHandler, _CheckedRedirects)


def _check_url(remote: Remote) -> None:
    parts = urllib.parse.urlsplit(remote.url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise DownloadError(f"{remote.source}: {remote.url[:200]!r} is not an http(s) URL")


def _deadline_for(remote: Remote) -> float:
    """Seconds the whole file may take (every read and retry): the base plus its bytes at MIN_RATE."""
    if remote.size is None:
        return UNKNOWN_SIZE_DEADLINE_S
    return DEADLINE_BASE_S + remote.size / MIN_RATE


def _download_into(remote: Remote, partial: Path, timeout: float, progress: bool, deadline: float) -> None:
    """Stream ``remote.url`` into ``partial``, resuming from its current size when possible;
    never past the stated size (or :data:`MAX_DOWNLOAD_BYTES`) nor past ``deadline``
    (``time.monotonic()`` seconds)."""
    offset = partial.stat().st_size if partial.exists() else 0
    cap = remote.size if remote.size is not None else MAX_DOWNLOAD_BYTES
    headers = {"User-Agent": f"openbench/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(remote.url, headers=headers)
    left = deadline - time.monotonic()
    if left <= 0:
        raise _Overdue()
    try:
        with _OPENER.open(request, timeout=min(timeout, left)) as response:
            if offset and response.status != 206:  # the server ignored the range: start again
                offset = 0
            length = response.headers.get("Content-Length")
            total = offset + int(length) if length is not None and length.isdigit() else None
            if total is not None and total > cap:
                raise DownloadError(f"{remote.source}: {remote.url} announces {total} bytes, more than the "
                                    f"{cap} {'stated' if remote.size is not None else 'accepted'}; nothing was kept")
            with open(partial, "ab" if offset else "wb") as handle, progress_bar(
                    total=total, initial=offset, unit="B", unit_scale=True, desc=remote.filename,
                    enabled=progress) as bar:
                written = offset
                while True:
                    if time.monotonic() > deadline:
                        raise _Overdue()
                    block = response.read1(CHUNK_BYTES)
                    if not block:
                        break
                    written += len(block)
                    if written > cap:
                        raise DownloadError(f"{remote.source}: {remote.url} sent more than the {cap} bytes "
                                            f"{'stated' if remote.size is not None else 'accepted'}; nothing was kept")
                    handle.write(block)
                    bar.update(len(block))
        received = partial.stat().st_size
        if total is not None and received < total:
            raise _Retryable(f"connection closed after {received} of {total} bytes")
    except urllib.error.HTTPError as error:
        if error.code == 416 and offset:  # the partial file is no prefix the server knows: start again
            partial.unlink()
            raise _Retryable("the server refused to resume; starting again") from None
        if 400 <= error.code < 500 and error.code not in RETRYABLE_STATUS:
            raise DownloadError(f"{remote.source}: {remote.url} answered HTTP {error.code} {error.reason}") from None
        raise _Retryable(f"HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, DownloadError):
            raise error.reason from None
        raise _Retryable(str(getattr(error, "reason", error)) or type(error).__name__) from None
    except (http.client.HTTPException, ConnectionError, TimeoutError) as error:
        raise _Retryable(str(error) or type(error).__name__) from None


class _Overdue(Exception):
    pass
