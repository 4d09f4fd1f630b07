"""The dataset registry against a local HTTP server serving archives laid out like Zenodo's."""
import dataclasses
import hashlib
import io
import json
import logging
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from openbench._io.download import DownloadError
from openbench.datasets import published as registry
from openbench.cli import main
from openbench.compat import DataLoader, Evaluator
from openbench.datasets.published import MARKER, DatasetError, get
from openbench.datasets.loader import load_dataset, write_id_layout
from openbench.models.scorers import build_scorer
from openbench.errors import InputError
from tests.helpers import zip_bytes as _zip
from tests.helpers import integer_embeddings, known_answers, random_labelled_graph, snapshot, write_samples
from tests.http_server import FileServer
from tests.bases import evaluated


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    """HQ_DIR.zip (HQ_DIR/graph_files, HQ_DIR/train_test_data) and KGID_HQ_DIR.zip, as on Zenodo."""
    work = tmp_path_factory.mktemp("archives")
    splits = random_labelled_graph(9, 40, 4, {"train": 300, "valid": 20, "test": 30})
    samples = write_samples(work / "samples", splits, negatives=True)
    members = {f"HQ_DIR/train_test_data/{p.name}": p.read_bytes() for p in sorted(samples.iterdir())}
    members["HQ_DIR/graph_files/edges.csv"] = (samples / "train_sample.csv").read_bytes()
    kgid = write_id_layout(load_dataset(samples), work / "kgid")
    kgid_members = {f"KGID_HQ_DIR/{p.name}": p.read_bytes() for p in sorted(kgid.iterdir())}
    return {"/HQ_DIR.zip": _zip(members), "/KGID_HQ_DIR.zip": _zip(kgid_members)}


@pytest.fixture()
def server(archives):
    with FileServer(dict(archives)) as running:
        yield running


def test_download_verify_unpack_and_reuse(tmp_path, server, caplog):
    with caplog.at_level(logging.WARNING):
        folder = get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)
    assert folder == tmp_path / "HQ_DIR" and (folder / "train_test_data" / "train_sample.csv").is_file()
    marker = json.loads((folder / MARKER).read_text())
    assert marker["archive_sha256"] == hashlib.sha256(server.files["/HQ_DIR.zip"]).hexdigest()
    assert "train_test_data/test_sample.csv" in marker["files"]
    assert "no published checksum" in caplog.text  # Zenodo's md5 is not in the registry: recorded instead
    pins = json.loads((tmp_path / registry.PINS).read_text())
    assert pins["HQ_DIR"] == marker["archive_sha256"]
    assert not list((tmp_path / ".downloads").glob("*"))  # the archive is not kept
    requests = len(server.requests)
    assert get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False) == folder
    assert len(server.requests) == requests  # the verified copy is reused, nothing fetched


def test_the_integer_id_archive_unpacks_to_the_id_layout(tmp_path, server):
    folder = get("kgid_hq_dir", tmp_path, mirror=server.base_url, progress=False)
    dataset = load_dataset(folder)
    assert dataset.layout == "ids" and dataset.registry["name"] == "KGID_HQ_DIR"


def test_a_published_checksum_that_does_not_match_discards_the_download(tmp_path, server, monkeypatch):
    entry = registry.REGISTRY["HQ_DIR"]
    monkeypatch.setitem(registry.REGISTRY, "HQ_DIR", dataclasses.replace(entry, md5="0" * 32))
    with pytest.raises(DownloadError, match="md5 .* expected 0000"):
        get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)
    assert not (tmp_path / "HQ_DIR").exists() and not list((tmp_path / ".downloads").glob("*"))
    right = hashlib.md5(server.files["/HQ_DIR.zip"]).hexdigest()
    monkeypatch.setitem(registry.REGISTRY, "HQ_DIR", dataclasses.replace(entry, md5=right,
                                                                         size=len(server.files["/HQ_DIR.zip"])))
    assert get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False).is_dir()


def test_an_interrupted_download_is_resumed(tmp_path, server):
    server.drop_after["/HQ_DIR.zip"] = (2000, 1)  # the first response breaks off after 2000 bytes
    folder = get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)
    ranges = [r for path, r in server.requests if path == "/HQ_DIR.zip"]
    assert ranges == [None, "bytes=2000-"]
    assert json.loads((folder / MARKER).read_text())["archive_sha256"] == hashlib.sha256(
        server.files["/HQ_DIR.zip"]).hexdigest()


def test_a_changed_archive_no_longer_matches_the_recorded_checksum(tmp_path, server, archives):
    folder = get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)
    (folder / MARKER).unlink()
    server.files["/HQ_DIR.zip"] = archives["/KGID_HQ_DIR.zip"]  # the provider now serves other bytes
    with pytest.raises(DatasetError, match="differs from the one recorded at the first verified download"):
        get("HQ_DIR", tmp_path, mirror=server.base_url, force=True, progress=False)


def test_a_corrupted_archive_fails_its_crc_and_leaves_nothing(tmp_path, server):
    data = bytearray(server.files["/HQ_DIR.zip"])
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as bundle:
        member = bundle.infolist()[0]
    data[member.header_offset + 30 + len(member.filename) + 5] ^= 0xFF  # a byte of the compressed data
    server.files["/HQ_DIR.zip"] = bytes(data)
    with pytest.raises(DatasetError, match="CRC|not a readable zip"):
        get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)
    assert not (tmp_path / "HQ_DIR").exists()
    # only an archive that passed every check is pinned
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


def test_partial_or_altered_copies_are_refused(tmp_path, server):
    partial = tmp_path / "HQ_DIR"
    (partial / "train_test_data").mkdir(parents=True)
    with pytest.raises(DatasetError, match="no verification record"):
        get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)
    folder = get("HQ_DIR", tmp_path, mirror=server.base_url, force=True, progress=False)
    with open(folder / "train_test_data" / "test_sample.csv", "a") as handle:
        handle.write("NCBIGENE:1\tREL_A\tNCBIGENE:2\t1\n")
    with pytest.raises(DatasetError, match="changed since verification .*test_sample.csv"):
        get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)


def test_unknown_names_list_the_registry():
    with pytest.raises(Exception, match="registered: HQ_DIR, HQ_UNDIR, ALL_DIR, ALL_UNDIR, KGID_HQ_DIR"):
        registry.lookup("HQ")


def test_datasets_list_prints_every_entry():
    done = CliRunner().invoke(main, ["datasets", "list", "--format", "json"])
    rows = json.loads(done.output)
    assert [row["name"] for row in rows] == ["HQ_DIR", "HQ_UNDIR", "ALL_DIR", "ALL_UNDIR", "KGID_HQ_DIR", "hetionet",
                                             "primekg", "drkg", "ogbl-biokg", "biokg", "pharmkg8k"]
    assert rows[0]["md5"] == "unknown" and rows[0]["counts"]["positives"]["test"] == 183_009
    assert rows[0]["protocol"]["filter_sets"] == ["train", "valid", "test"]
    assert "zenodo.org/record/3834052" in CliRunner().invoke(main, ["datasets", "list"]).output


def test_evaluate_by_name_records_the_registry_entry(tmp_path, server, monkeypatch):
    monkeypatch.setenv("OPENBENCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OPENBENCH_DATASET_MIRROR", server.base_url)
    done = CliRunner().invoke(main, ["datasets", "get", "HQ_DIR", "--no-progress"])
    assert done.exit_code == 0, done.output
    dataset = load_dataset("HQ_DIR")
    np.save(tmp_path / "ent.npy", integer_embeddings(0, dataset.num_entities, 4))
    np.save(tmp_path / "rel.npy", integer_embeddings(1, dataset.num_relations, 4))
    out = tmp_path / "result.json"
    done = CliRunner().invoke(main, ["evaluate", "--dataset", "HQ_DIR", "--entity-embeddings", str(tmp_path / "ent.npy"),
                                     "--relation-embeddings", str(tmp_path / "rel.npy"), "--model", "DistMult",
                                     "--no-progress", "--output", str(out)])
    assert done.exit_code == 0, done.output
    result = json.loads(out.read_text())
    assert result["dataset"]["registry"]["name"] == "HQ_DIR"
    assert result["dataset"]["registry"]["version"] == "Zenodo record 3834052"
    assert result["dataset"]["fingerprint"] == dataset.fingerprint


class MyEvaluator(Evaluator):
    """Written as OpenBioLink's README shows: score_batch returns head and tail score rows."""

    def __init__(self, dl, entity_embeddings, relation_embeddings):
        super().__init__(dl)
        self.entities, self.relations = entity_embeddings, relation_embeddings

    def score_batch(self, batch):
        heads, relations, tails = self.entities[batch[:, 0]], self.relations[batch[:, 1]], self.entities[batch[:, 2]]
        head_scores = (relations * tails) @ self.entities.T
        tail_scores = (heads * relations) @ self.entities.T
        return head_scores, tail_scores


def test_a_dataloader_based_evaluator_as_openbiolink_documents_it(tmp_path, server):
    dl = DataLoader(str(tmp_path), "HQ_DIR", mirror=server.base_url, progress=False)
    entities = torch.tensor(integer_embeddings(2, dl.num_entities, 3), dtype=torch.float32)
    relations = torch.tensor(integer_embeddings(3, dl.num_relations, 3), dtype=torch.float32)
    result = MyEvaluator(dl, entities, relations).evaluate(100)
    reference = evaluated(dl.dataset, build_scorer("DistMult", entities.numpy(), relations.numpy(),
                                                            dl.num_entities, dl.num_relations))
    assert result["metrics"] == reference["metrics"]
    assert result["mrr"] == reference["metrics"]["both"]["realistic"]["mrr"]
    assert set(result) >= {"hits@1", "hits@3", "hits@10", "mrr"}


def test_filter_scores_batches_and_kgid_export(tmp_path, server):
    dl = DataLoader(str(tmp_path / "root"), "HQ_DIR", mirror=server.base_url, progress=False)
    known = torch.cat([dl.training, dl.validation, dl.testing]).tolist()
    heads, tails = known_answers(known)
    count, batches = dl.get_test_batches(7)
    batches = list(batches)
    assert count == len(batches) == -(-dl.testing.shape[0] // 7) and torch.equal(torch.cat(batches), dl.testing)
    batch = dl.testing[:10]
    for column, answers in ((0, heads), (2, tails)):
        scores = dl.filter_scores(batch, torch.zeros(10, dl.num_entities), column)
        for i, (h, r, t) in enumerate(batch.tolist()):
            expected = (answers[(r, t)] if column == 0 else answers[(h, r)]) - {h if column == 0 else t}
            assert set(torch.isnan(scores[i]).nonzero().squeeze(1).tolist()) == expected
    with pytest.raises(Exception, match="filter_col must be 0"):
        dl.filter_scores(batch, torch.zeros(10, dl.num_entities), 1)
    dl.save_as_kgid(str(tmp_path / "kgid"))
    assert load_dataset(tmp_path / "kgid").fingerprint == dl.dataset.fingerprint
    done = CliRunner().invoke(main, ["export-kgid", "--dataset", str(tmp_path / "root" / "HQ_DIR"), "--output",
                                     str(tmp_path / "kgid2")])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "kgid2" / "entities.tsv").read_text() == (tmp_path / "kgid" / "entities.tsv").read_text()


def test_archives_that_escape_their_folder_or_hold_no_dataset_are_refused(tmp_path, server):
    server.files["/HQ_DIR.zip"] = _zip({"HQ_DIR/../../evil.txt": b"x", "HQ_DIR/train_test_data/x.csv": b"a"})
    with pytest.raises(DatasetError, match="would unpack outside"):
        get("HQ_DIR", tmp_path / "a", mirror=server.base_url, progress=False)
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "a" / "HQ_DIR").exists()
    server.files["/HQ_DIR.zip"] = _zip({"HQ_DIR/readme.txt": b"no splits here"})
    with pytest.raises(DatasetError, match="does not hold a 'samples' dataset"):
        get("HQ_DIR", tmp_path / "b", mirror=server.base_url, progress=False)
    assert not (tmp_path / "b" / "HQ_DIR").exists()


def test_force_keeps_the_verified_copy_until_the_new_one_is_verified(tmp_path, server):
    folder = get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)
    sample = folder / "train_test_data" / "test_sample.csv"
    sample.write_bytes(sample.read_bytes()[:-3] + b"XYZ")  # a same-size edit
    with pytest.raises(DatasetError, match="changed since verification .*test_sample.csv"):
        get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)
    broken = bytearray(server.files["/HQ_DIR.zip"])
    broken[len(broken) // 2] ^= 0xFF
    server.files["/HQ_DIR.zip"] = bytes(broken)
    before = snapshot(folder)
    with pytest.raises(DatasetError):
        get("HQ_DIR", tmp_path, mirror=server.base_url, force=True, progress=False)
    assert snapshot(folder) == before  # the old copy stays until a new one passes every check


def test_a_folder_openbench_did_not_verify_is_never_deleted(tmp_path, server):
    folder = tmp_path / "HQ_DIR"
    folder.mkdir()
    (folder / "my_notes.txt").write_text("mine")
    with pytest.raises(Exception, match="openbench did not write"):
        get("HQ_DIR", tmp_path, mirror=server.base_url, force=True, progress=False)
    assert (folder / "my_notes.txt").read_text() == "mine"


def test_bad_checksum_records_and_data_folders_are_clear_errors(tmp_path, server, monkeypatch):
    (tmp_path / registry.PINS).write_text("{not json")
    with pytest.raises(InputError, match=r"openbench-checksums\.json, line 1: not valid checksum record"):
        get("HQ_DIR", tmp_path, mirror=server.base_url, progress=False)
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    monkeypatch.delenv(registry.ROOT_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker))
    done = CliRunner().invoke(main, ["datasets", "get", "HQ_DIR", "--no-progress"])
    assert done.exit_code == 1 and "the datasets folder cannot be created" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    done = CliRunner().invoke(main, ["leaderboard", "token", "create", "--name", "lab"])
    assert done.exit_code == 1 and "cannot be opened or created" in done.stderr


# -- a lab's own registry ---------------------------------------------------------------------------


def _user_registry(tmp_path, server, archive_bytes, **changes):
    entry = {"name": "mylab-kg", "url": f"{server.base_url}/mylab-kg.zip", "layout": "samples",
             "sha256": hashlib.sha256(archive_bytes).hexdigest(), "size": len(archive_bytes),
             "license": "CC BY 4.0", "version": "2026-11", "description": "our lab's graph", **changes}
    path = tmp_path / "registry.json"
    path.write_text(json.dumps([entry]))
    return path


@pytest.fixture()
def lab_server(archives):
    """mylab-kg.zip: a split folder in the sample layout, as a lab would publish it."""
    bundle = zipfile.ZipFile(io.BytesIO(archives["/HQ_DIR.zip"]))
    members = {f"mylab-kg/{Path(name).name}": bundle.read(name) for name in bundle.namelist()
               if "/train_test_data/" in name}
    with FileServer({"/mylab-kg.zip": _zip(members)}) as running:
        yield running


def test_a_registry_of_your_own_is_fetched_verified_and_evaluated_by_name(tmp_path, lab_server, monkeypatch):
    archive = lab_server.files["/mylab-kg.zip"]
    registry_file = _user_registry(tmp_path, lab_server, archive)
    root = tmp_path / "data"
    listed = CliRunner().invoke(main, ["datasets", "--registry", str(registry_file), "list", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    row = [row for row in json.loads(listed.output) if row["name"] == "mylab-kg"][0]
    assert row["sha256"] == hashlib.sha256(archive).hexdigest() and row["source"] == str(registry_file)
    fetched = CliRunner().invoke(main, ["datasets", "--registry", str(registry_file), "get", "mylab-kg", "--root",
                                        str(root), "--no-progress"])
    assert fetched.exit_code == 0, fetched.output
    assert Path(fetched.output.strip()) == root / "mylab-kg"
    monkeypatch.setenv("OPENBENCH_REGISTRY", str(registry_file))
    monkeypatch.setenv("OPENBENCH_DATA_DIR", str(root))
    done = CliRunner().invoke(main, ["evaluate", "--dataset", "mylab-kg", "--model", "popularity", "--no-progress",
                                     "--output", str(tmp_path / "record.json")])
    assert done.exit_code == 0, done.output
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["dataset"]["registry"] == {"name": "mylab-kg", "version": "2026-11",
                                             "archive_sha256": hashlib.sha256(archive).hexdigest()}
    assert not list((root).glob("openbench-checksums.json"))  # a stated checksum needs no pin


def test_an_archive_whose_bytes_differ_from_the_stated_checksum_is_refused_and_nothing_kept(tmp_path, lab_server):
    registry_file = _user_registry(tmp_path, lab_server, b"other bytes", size=len(lab_server.files["/mylab-kg.zip"]))
    root = tmp_path / "data"
    done = CliRunner().invoke(main, ["datasets", "--registry", str(registry_file), "get", "mylab-kg", "--root",
                                     str(root), "--no-progress"])
    assert done.exit_code == 1 and "sha256" in done.output, done.output
    assert not (root / "mylab-kg").exists()
    assert [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")] == []


@pytest.mark.parametrize("change, expected", [
    ({"name": "../escape"}, "the name must be"), ({"sha256": "abc"}, "sha256 must be"),
    ({"layout": "tsv"}, "format 'tsv'"), ({"url": "file:///etc/passwd"}, "http(s) URL"),
    ({"name": "HQ_DIR"}, "is taken"), ({"size": -1}, "size must be"), ({"extra_field": 1}, "unknown field"),
    ({"size": "big"}, "size must be an integer"),
    ({"url": "https://example.org/data/.."}, "the url must end in the archive's name"),
    ({"url": "https://example.org/data/."}, "the url must end in the archive's name"),
    ({"url": "https://example.org/data/"}, "the url must end in the archive's name")])
def test_registry_file_mistakes_are_one_line_naming_the_entry(tmp_path, change, expected):
    path = tmp_path / "registry.json"
    entry = {"name": "mine", "url": "https://example.org/mine.zip", "sha256": "0" * 64, "layout": "samples",
             "license": "CC0", **change}
    path.write_text(json.dumps([entry]))
    done = CliRunner().invoke(main, ["datasets", "--registry", str(path), "list"])
    assert done.exit_code == 1 and expected in done.output and str(path) in done.output and "entry 1" in done.output, \
        done.output
    for content, message in (("{}", "JSON list"), ("not json", "not valid"), ("[{\"name\": \"x\"}]", "lacks")):
        path.write_text(content)
        done = CliRunner().invoke(main, ["datasets", "--registry", str(path), "list"])
        assert done.exit_code == 1 and message in done.output, done.output


def test_a_name_registered_by_two_registry_files_is_refused(tmp_path, monkeypatch):
    import os

    entry = {"name": "mine", "url": "https://example.org/mine.zip", "sha256": "0" * 64, "layout": "samples",
             "license": "CC0"}
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps([entry]))
    second.write_text(json.dumps([dict(entry, name="MINE")]))
    monkeypatch.setenv("OPENBENCH_REGISTRY", os.pathsep.join([str(first), str(second)]))
    with pytest.raises(InputError, match="registered twice"):
        registry.registry()
    monkeypatch.setenv("OPENBENCH_REGISTRY", str(first))
    assert registry.lookup("mine").source == str(first)


def test_free_text_fields_reach_the_terminal_with_control_characters_made_visible(tmp_path):
    """Issue 49: a CR/LF in version drew a fake row in datasets list; ESC and BEL reached the terminal."""
    path = tmp_path / "registry.json"
    entry = {"name": "mine", "url": "https://example.org/mine.zip", "sha256": "0" * 64, "layout": "samples",
             "license": "CC0\u202e", "family": "lab\x1b[2J\x07", "description": "x\x00y",
             "version": "1\r\nHQ_DIR       OpenBioLink      samples    spoofed"}
    path.write_text(json.dumps([entry]))
    table = CliRunner().invoke(main, ["datasets", "--registry", str(path), "list"])
    assert table.exit_code == 0, table.output
    assert not any(ord(c) < 32 and c != "\n" or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in table.output)
    assert len(table.output.strip().splitlines()) == len(registry.REGISTRY) + 2  # header, built-ins, ours: one line
    assert [line for line in table.output.splitlines() if "spoofed" in line][0].startswith("mine ")
    listed = CliRunner().invoke(main, ["datasets", "--registry", str(path), "list", "--format", "json"])
    row = [row for row in json.loads(listed.output) if row["name"] == "mine"][0]
    # made visible, not dropped (issue 63): a reader sees that the field holds such characters
    assert row["family"] == "lab\\x1b[2J\\x07" and row["description"] == "x\\x00y" and row["license"] == "CC0\\u202e"
    assert "\r" not in row["version"] and "\n" not in row["version"]
