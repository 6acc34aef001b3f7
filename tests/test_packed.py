"""`lstmstudy pack` and `lstmstudy unpack`: a reader's set travels in one file, is checked whole before anything is
written, and never overwrites a different set stored under its id unless told."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from lstmstudy import cli, packed, results
from lstmstudy.errors import ResultsCorrupt, StudyError

SET = "cpu-reader-f6m1-2t"
CLAIMS = ("cudnn_fallback", "bucketing")


def store(root: Path, batches: range, cpu: str = "a reader's CPU") -> None:
    """A small set of `SET` under `root`: one ok row per batch size in each claim, and its fingerprint."""
    for claim in CLAIMS:
        results.append(claim, SET, [{"claim": claim, "kernel": "torch.fused", "hardware_id": SET, "batch": batch,
                                     "median_s": 0.001 * batch, "status": "ok"} for batch in batches], root)
        results.record_fingerprint(claim, {"hardware_id": SET, "device_kind": "cpu", "cpu_model": cpu}, root)


def members(file: Path) -> dict[str, bytes]:
    with tarfile.open(file) as archive:
        return {info.name: archive.extractfile(info).read() for info in archive.getmembers()}


def rewrite(file: Path, changed: dict[str, bytes]) -> None:
    """`file` with some members' contents changed, as a corrupted download or a hand edit would leave it."""
    found = members(file) | changed
    with tarfile.open(file, "w:gz") as archive:
        for name, data in found.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


@pytest.fixture
def sent(tmp_path) -> Path:
    """A reader's set, packed by the command line from the reader's results folder."""
    store(tmp_path / "reader", range(1, 4))
    file = tmp_path / "sent.tar.gz"
    assert cli.main(["pack", SET, "--results", str(tmp_path / "reader"), "-o", str(file)]) == 0
    return file


def test_a_packed_set_unpacks_into_the_same_rows_and_fingerprints(sent, tmp_path, capsys):
    manifest = json.loads(members(sent)[packed.MANIFEST])
    assert manifest["hardware_id"] == SET and manifest["claims"] == {"bucketing": 3, "cudnn_fallback": 3}
    assert [fp["cpu_model"] for fp in manifest["fingerprints"]] == ["a reader's CPU"]
    book = tmp_path / "book"
    assert cli.main(["unpack", str(sent), "--results", str(book)]) == 0
    assert "added:" in capsys.readouterr().out
    for claim in CLAIMS:
        assert results.read_rows(results.set_path(claim, SET, book)) == \
            results.read_rows(results.set_path(claim, SET, tmp_path / "reader"))
        assert results.fingerprints(claim, book) == results.fingerprints(claim, tmp_path / "reader")
    assert set(packed.unpack(sent, book).values()) == {packed.UNCHANGED}, "the same set again changes nothing"


def test_a_set_measured_further_extends_the_stored_one(sent, tmp_path):
    book = tmp_path / "book"
    packed.unpack(sent, book)
    store(tmp_path / "reader", range(4, 6))  # the reader measured more points of the same set
    further, _ = packed.pack(SET, tmp_path / "reader", tmp_path / "further.tar.gz")
    assert set(packed.unpack(further, book).values()) == {packed.EXTENDED}
    assert len(results.read_rows(results.set_path("bucketing", SET, book))) == 5


def test_a_different_set_of_the_same_id_is_kept_unless_replaced(sent, tmp_path, capsys):
    book = tmp_path / "book"
    store(book, range(7, 9), cpu="another CPU")
    before = {path: path.read_bytes() for path in book.rglob(f"{SET}.*")}
    assert cli.main(["unpack", str(sent), "--results", str(book)]) == 2
    error = capsys.readouterr().err
    assert "holds a different set" in error and "--replace" in error and len(error.splitlines()) == 1
    assert {path: path.read_bytes() for path in book.rglob(f"{SET}.*")} == before, "nothing stored is lost"
    assert set(packed.unpack(sent, book, replace=True).values()) == {packed.REPLACED}
    assert len(results.read_rows(results.set_path("cudnn_fallback", SET, book))) == 3


@pytest.mark.parametrize(("changed", "message"), [
    ({f"bucketing/{SET}.csv": b"claim,kernel\nbucketing,torch.fused\n"}, "header does not match"),
    ({f"cudnn_fallback/{SET}.json": b"{not json"}, "not a fingerprint file"),
    ({packed.MANIFEST: json.dumps({"format": packed.FORMAT, "hardware_id": SET,
                                   "claims": {"cudnn_fallback": 9, "bucketing": 3}}).encode()}, "says 9"),
    ({packed.MANIFEST: b"[]"}, "not a packed result set"),
    ({f"../{SET}.csv": b""}, "is not a file of set"),
])
def test_a_corrupt_member_is_refused_and_nothing_is_written(sent, tmp_path, changed, message):
    rewrite(sent, changed)
    book = tmp_path / "book"
    with pytest.raises(StudyError, match=message):
        packed.unpack(sent, book)
    assert not book.exists()


def test_a_corrupt_set_is_named_by_the_member_it_is_in(sent):
    rewrite(sent, {f"bucketing/{SET}.csv": members(sent)[f"bucketing/{SET}.csv"].replace(b",ok,", b",fine,")})
    with pytest.raises(ResultsCorrupt, match=rf"{sent}: bucketing/{SET}\.csv:2: status 'fine'"):
        packed.unpack(sent, sent.parent / "book")


def test_packing_an_unknown_set_names_the_stored_ones(tmp_path, capsys):
    store(tmp_path, range(1, 2))
    assert cli.main(["pack", "cpu-elsewhere-1t", "--results", str(tmp_path)]) == 2
    assert f"stored there: {SET}" in capsys.readouterr().err


def test_measure_takes_results_and_keeps_results_dir():
    for option in ("--results", "--results-dir"):
        assert cli.parser().parse_args(["measure", option, "/x"]).results_dir == Path("/x")
