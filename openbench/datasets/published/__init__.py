"""Published datasets: the catalogue, user registries, fetching and a reader per native format.

The modules, one idea each: :mod:`.catalogue` (the built-in entries), :mod:`.registries` (a lab's
own registry files, name lookup), :mod:`.fetch` (download, verify, unpack or convert, swap into
place), :mod:`.names` (what a dataset argument names) and :mod:`.native` (the readers). In short:

One table (:data:`REGISTRY`) names each published dataset with its URL, version, published
checksum and size where the provider gives them ("unknown" otherwise), the counts known from the
OpenBioLink README, a license note and the standard protocol the leaderboard compares against.

:func:`get` downloads an archive (resumable, retried, with a progress bar; through
:func:`openbench._io.download.fetch`), checks its size and md5 where published, checks the zip's own
CRCs, unpacks it beside the final folder and renames it into place only when everything passed,
writing a ``.openbench-verified.json`` marker (archive sha256, file sizes). Without a published
checksum the archive's sha256 is recorded on first use (``openbench-checksums.json`` in the
root) with a warning, and later downloads must match it. A folder without a valid marker (a
partial or altered copy) is refused. A second call reuses the verified copy.

The published biomedical KGs (Hetionet, PrimeKG, DRKG, ogbl-biokg, BioKG, PharmKG-8k) come in their
own formats and often as several files: an entry lists its files (:class:`RemoteFile`, each with
the checksum its publisher states: sha256, md5, size or a git blob id), and :func:`get` fetches
and verifies each, unpacks them into ``native/``, converts them once with the format's reader
(:mod:`.native`) into ``graph/`` (what ``split rand --dataset NAME`` splits)
and, where the publisher has an official split, keeps it for ``evaluate --dataset NAME``; the
counts the publisher states are checked against what was read. Any failure keeps nothing.
"""
from openbench.datasets.published.catalogue import (NATIVE_DATASETS, OBL2020_LICENSE, OBL2020_PROTOCOL,
                                                    OBL2021_PROTOCOL, REGISTRY, DatasetError, RegisteredDataset,
                                                    RemoteFile)
from openbench.datasets.published.fetch import MARKER, MIRROR_VARIABLE, PINS, ROOT_VARIABLE, data_root, get, read_marker
from openbench.datasets.published.names import graph_folder, registry_of, resolve, split_info_of
from openbench.datasets.published.registries import (FORMATS, REGISTRY_VARIABLE, lookup, read_registry_file,
                                                     registered, registry, registry_table, use_registry_files)

__all__ = ["MARKER", "PINS", "ROOT_VARIABLE", "MIRROR_VARIABLE", "OBL2020_PROTOCOL", "OBL2021_PROTOCOL",
           "OBL2020_LICENSE", "RegisteredDataset", "REGISTRY", "DatasetError", "registry_table", "lookup",
           "data_root", "read_marker", "get", "registry_of", "resolve", "REGISTRY_VARIABLE", "read_registry_file",
           "use_registry_files", "registry", "RemoteFile", "NATIVE_DATASETS", "graph_folder", "FORMATS", "registered",
           "split_info_of"]
