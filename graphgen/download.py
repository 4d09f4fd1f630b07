"""Cached, resumable, checksummed downloads with a progress bar.

A file is fetched into ``cache_dir/<filename>`` through ``<filename>.part``: a dropped connection
is resumed with an HTTP Range request (or restarted when the server ignores ranges), transient
failures are retried with exponential backoff, and the finished file is checked against the
pinned sha256 when the source has one. Without a pinned value the sha256 of the first complete
download is recorded beside the file (``<filename>.sha256``) and every later use is checked
against it, so a cache that changed underneath is noticed. Only the standard library is used.
"""
from __future__ import annotations

import hashlib
import http.client
import logging
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from openbench.progress import progress as progress_bar

from openbench import __version__
from openbench._io import write_text_atomic
from openbench.errors import OpenbenchError

__all__ = ["CHUNK_BYTES", "RETRYABLE_STATUS", "DownloadError", "Remote", "sha256_of", "sidecar_path", "fetch"]

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
# 4xx answers other than these will not change by asking again
RETRYABLE_STATUS = {408, 425, 429}


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
          progress: bool = True) -> Path:
    """Return the path of ``remote`` in ``cache_dir``, downloading it first when it is not there."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / remote.filename
    if target.exists():
        _verify_cached(remote, target)
        return target
    partial = target.with_name(target.name + ".part")
    for attempt in range(retries + 1):
        try:
            _download_into(remote, partial, timeout, progress)
            break
        except _Retryable as error:
            if attempt == retries:
                raise DownloadError(f"{remote.source}: downloading {remote.url} failed after {retries + 1} "
                                    f"attempts: {error}") from None
            delay = backoff * 2 ** attempt
            logger.warning("%s: %s; retrying in %.1f s (attempt %d of %d)", remote.source, error, delay,
                           attempt + 2, retries + 1)
            time.sleep(delay)
    _check_published(remote, partial)
    digest = sha256_of(partial)
    if remote.sha256 and digest != remote.sha256:
        partial.unlink()
        raise DownloadError(f"{remote.source}: {remote.url} has sha256 {digest}, expected {remote.sha256}; "
                            f"the download was discarded")
    os.replace(partial, target)
    write_text_atomic(sidecar_path(target), digest + "\n")
    if not remote.sha256 and not remote.md5 and not remote.git_sha1:
        logger.warning("%s: no published checksum for %s; recorded sha256 %s", remote.source, remote.url, digest)
    return target


def _check_published(remote: Remote, partial: Path) -> None:
    """Size, md5 and git blob id where the provider publishes them; a mismatch discards the download."""
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
    if problem:
        partial.unlink()
        raise DownloadError(f"{remote.source}: {remote.url} has {problem}; the download was discarded")


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


def _download_into(remote: Remote, partial: Path, timeout: float, progress: bool) -> None:
    """Stream ``remote.url`` into ``partial``, resuming from its current size when possible."""
    offset = partial.stat().st_size if partial.exists() else 0
    headers = {"User-Agent": f"openbench/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(remote.url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if offset and response.status != 206:  # the server ignored the range: start again
                offset = 0
            length = response.headers.get("Content-Length")
            total = offset + int(length) if length is not None else None
            with open(partial, "ab" if offset else "wb") as handle, progress_bar(
                    total=total, initial=offset, unit="B", unit_scale=True, desc=remote.filename,
                    enabled=progress) as bar:
                for block in iter(lambda: response.read(CHUNK_BYTES), b""):
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
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as error:
        raise _Retryable(str(getattr(error, "reason", error)) or type(error).__name__) from None
