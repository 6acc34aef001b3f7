"""`lstmstudy pack` and `lstmstudy unpack`: a reader's set travels in one file, is checked whole before anything is
written, and never overwrites a different set stored under its id unless told. A pack is a stranger's file: each kind
of tampering is refused in one line naming the member, and leaves the results root as it was."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from lstmstudy import cli, packed, results
from lstmstudy.errors import PackRefused, ResultsCorrupt

SET = "cpu-reader-f6m1-2t"
OTHER = "cpu-other-f6m2-2t"
CLAIMS = ("cudnn_fallback", "bucketing")
CSV, FINGERPRINT = f"bucketing/{SET}.csv", f"bucketing/{SET}.json"
MiB = 2**20


def store(root: Path, batches: range, cpu: str = "a reader's CPU", hardware_id: str = SET) -> None:
    """A small set under `root`: one ok row per batch size in each claim, naming its fingerprint, and the fingerprint."""
    fingerprint = {"hardware_id": hardware_id, "device_kind": "cpu", "cpu_model": cpu}
    for claim in CLAIMS:
        results.append(claim, hardware_id, [{"claim": claim, "kernel": "torch.fused", "hardware_id": hardware_id,
                                             "batch": batch, "median_s": 0.001 * batch, "status": "ok",
                                             "fingerprint_id": results.fingerprint_id(fingerprint)}
                                            for batch in batches], root)
        results.record_fingerprint(claim, fingerprint, root)


def members(file: Path) -> dict[str, bytes]:
    with tarfile.open(file) as archive:
        return {info.name: archive.extractfile(info).read() for info in archive.getmembers()}


def rewrite(file: Path, changed: dict[str, bytes] | None = None, drop: tuple[str, ...] = (),
            extra: tuple[tarfile.TarInfo, ...] = (), pax: dict[str, str] | None = None) -> None:
    """`file` with some members' contents changed or dropped and raw headers added (links, devices, a name twice),
    as a corrupted download or a hand edit would leave it; `pax` records go with its first member."""
    found = {name: data for name, data in (members(file) | (changed or {})).items() if name not in drop}
    with tarfile.open(file, "w:gz", format=tarfile.PAX_FORMAT) as archive:
        for number, (name, data) in enumerate(found.items()):
            info = tarfile.TarInfo(name)
            info.size, info.pax_headers = len(data), (pax or {}) if number == 0 else {}
            archive.addfile(info, io.BytesIO(data))
        for info in extra:
            archive.addfile(info, io.BytesIO(bytes(info.size)) if info.isreg() else None)


def header(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size, link
    return info


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for a folder): what a refused pack must leave as it was."""
    return {str(path.relative_to(root)): None if path.is_dir() else path.read_bytes() for path in root.rglob("*")}


@pytest.fixture
def sent(tmp_path) -> Path:
    """A reader's set, packed by the command line from the reader's results folder."""
    store(tmp_path / "reader", range(1, 4))
    file = tmp_path / "sent.tar.gz"
    assert cli.main(["pack", SET, "--results", str(tmp_path / "reader"), "-o", str(file)]) == 0
    return file


@pytest.fixture
def book(tmp_path) -> Path:
    """The book's results root, holding another reader's set."""
    store(tmp_path / "book", range(1, 3), cpu="another CPU", hardware_id=OTHER)
    return tmp_path / "book"


def refusal(file: Path, book: Path, capsys) -> str:
    """The one line `lstmstudy unpack` refuses `file` with; the results root is left byte for byte as it was."""
    before = snapshot(book)
    assert cli.main(["unpack", str(file), "--results", str(book)]) == 2
    out, error = capsys.readouterr()
    assert not out and len(error.splitlines()) == 1, error
    assert snapshot(book) == before
    return error


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
    assert "holds a different set" in (line := refusal(sent, book, capsys)) and "--replace" in line
    assert set(packed.unpack(sent, book, replace=True).values()) == {packed.REPLACED}
    assert len(results.read_rows(results.set_path("cudnn_fallback", SET, book))) == 3


def known_id(file: Path) -> bytes:
    """The id of the fingerprint the rows of `CSV` name."""
    return json.loads(members(file)[FINGERPRINT])["fingerprints"][0]["id"].encode()


def test_rows_stored_before_fingerprint_ids_are_taken(sent, book):
    """An older set's rows name no fingerprint; its fingerprint file still describes the set."""
    rewrite(sent, {CSV: members(sent)[CSV].replace(known_id(sent), b"")})
    assert set(packed.unpack(sent, book).values()) == {packed.ADDED}


def other_row(file: Path) -> None:
    rewrite(file, {CSV: members(file)[CSV].replace(f",{SET},".encode(), f",{OTHER},".encode(), 1)})


def unknown_fingerprint(file: Path) -> None:
    rewrite(file, {CSV: members(file)[CSV].replace(known_id(file), b"0123456789ab", 1)})


def stranger_fingerprint(file: Path) -> None:
    rewrite(file, {FINGERPRINT: members(file)[FINGERPRINT].replace(SET.encode(), OTHER.encode())})


def manifest_claims(file: Path, **claims: int) -> None:
    manifest = json.loads(members(file)[packed.MANIFEST])
    rewrite(file, {packed.MANIFEST: json.dumps(manifest | {"claims": claims}).encode()})


# each kind of tampering: what is done to a packed set, and what the one line refusing it says
TAMPERING: dict[str, tuple[Callable[[Path], None], str]] = {
    "symbolic link": (lambda f: rewrite(f, extra=(header("bucketing/x.csv", tarfile.SYMTYPE, link="/etc/passwd"),)),
                      "bucketing/x.csv is a link to /etc/passwd, not a plain file"),
    "hard link": (lambda f: rewrite(f, extra=(header("bucketing/x.csv", tarfile.LNKTYPE, link=CSV),)),
                  f"bucketing/x.csv is a link to {CSV}, not a plain file"),
    "device": (lambda f: rewrite(f, extra=(header("bucketing/x.csv", tarfile.CHRTYPE),)),
               "bucketing/x.csv is not a plain file"),
    "sparse file": (lambda f: rewrite(f, extra=(header("bucketing/x.csv", tarfile.GNUTYPE_SPARSE),)),
                    "bucketing/x.csv is a sparse file"),
    "path up": (lambda f: rewrite(f, {f"../{SET}.csv": b""}), f"../{SET}.csv is not a file of any set"),
    "path through": (lambda f: rewrite(f, {f"bucketing/../../{SET}.csv": b""}), "is not a file of any set"),
    "absolute path": (lambda f: rewrite(f, {f"/tmp/{SET}.csv": b""}), f"/tmp/{SET}.csv is not a file of any set"),
    "a name twice": (lambda f: rewrite(f, extra=(header(CSV, size=10),)), f"{CSV} is in the pack twice"),
    "file of another set": (lambda f: rewrite(f, {f"bucketing/{OTHER}.csv": members(f)[CSV]}),
                            f"bucketing/{OTHER}.csv is not a file of set {SET}"),
    "row of another set": (other_row, f"{CSV} row 1 is of set '{OTHER}', not {SET}"),
    "fingerprint of another set": (stranger_fingerprint, f"is of set '{OTHER}', not {SET}"),
    "CSV missing": (lambda f: rewrite(f, drop=(CSV,)), f"{CSV} is listed in its {packed.MANIFEST} but missing"),
    "CSV without its fingerprint": (lambda f: rewrite(f, drop=(FINGERPRINT,)),
                                    f"{CSV} comes without its fingerprint ({FINGERPRINT})"),
    "unknown fingerprint": (unknown_fingerprint,
                            f"{CSV} row 1 names fingerprint '0123456789ab', which {FINGERPRINT} does not hold"),
    "CSV not in the manifest": (lambda f: manifest_claims(f, cudnn_fallback=3), f"{CSV} is not a file of set {SET}"),
    "corrupt header": (lambda f: rewrite(f, {CSV: b"claim,kernel\nbucketing,torch.fused\n"}),
                       f"{CSV}:1: header does not match"),
    "corrupt status": (lambda f: rewrite(f, {CSV: members(f)[CSV].replace(b",ok,", b",fine,")}),
                       f"{CSV}:2: status 'fine'"),
    "corrupt fingerprint file": (lambda f: rewrite(f, {FINGERPRINT: b"{not json"}), "not a fingerprint file"),
    "fingerprint nested deep": (lambda f: rewrite(f, {FINGERPRINT: b"[" * 100_000}), "nested too deeply"),
    "row count": (lambda f: manifest_claims(f, cudnn_fallback=9, bucketing=3), "says 9"),
    "no manifest": (lambda f: rewrite(f, drop=(packed.MANIFEST,)), f"no readable {packed.MANIFEST}"),
    "not a manifest": (lambda f: rewrite(f, {packed.MANIFEST: b"[]"}), "not a packed result set"),
    "not a tar.gz": (lambda f: f.write_bytes(b"PK\x03\x04 a zip"), "not a packed result set"),
}


@pytest.mark.parametrize("kind", TAMPERING)
def test_a_tampered_pack_is_refused_in_one_line_and_writes_nothing(kind, sent, book, capsys):
    tamper, message = TAMPERING[kind]
    tamper(sent)
    assert f"{sent}: " in (line := refusal(sent, book, capsys)) and message in line


def test_refusals_are_typed(sent, book):
    """A corrupt CSV is the store's `ResultsCorrupt`; a pack that lies about its set is `PackRefused`."""
    original = sent.read_bytes()
    rewrite(sent, {CSV: members(sent)[CSV].replace(b",ok,", b",fine,")})
    with pytest.raises(ResultsCorrupt, match=rf"{sent}: bucketing/{SET}\.csv:2: status 'fine'"):
        packed.unpack(sent, book)
    sent.write_bytes(original)
    other_row(sent)
    with pytest.raises(PackRefused, match=f"{sent}: {CSV} row 1"):
        packed.unpack(sent, book)


def test_caps_are_checked_from_the_headers(sent, book, capsys, monkeypatch):
    size = len(members(sent)[CSV])
    monkeypatch.setattr(packed, "MAX_CSV_BYTES", size - 1)
    assert f"is {size} bytes, over the cap of {size - 1}" in refusal(sent, book, capsys)
    monkeypatch.undo()
    monkeypatch.setattr(packed, "MAX_MEMBERS", 3)
    assert "is member 4, over the cap of 3 members" in refusal(sent, book, capsys)
    monkeypatch.undo()
    with tarfile.open(sent) as archive:
        end = max(info.offset_data + info.size for info in archive.getmembers())
    monkeypatch.setattr(packed, "MAX_TOTAL_BYTES", end - 1)
    assert f"ends {end} bytes into the pack, past the cap of {end - 1} uncompressed" in refusal(sent, book, capsys)


def test_a_csv_s_lines_are_counted_as_it_streams(sent, book, capsys, monkeypatch):
    """A row costs the store about 2 KB however short its line: a CSV's lines are capped too."""
    monkeypatch.setattr(packed, "MAX_CSV_LINES", 3)  # a header and three rows are four
    assert "has over 3 lines, the cap of a set's rows" in refusal(sent, book, capsys)


def test_bytes_no_member_declares_are_counted_as_they_stream(sent, book, capsys, monkeypatch):
    """Extended headers (pax records) count in no member's size: the stream's own bytes are counted."""
    rewrite(sent, pax={"comment": "x" * 20_000})
    monkeypatch.setattr(packed, "MAX_TOTAL_BYTES", 16_000)
    assert "expands past 16000 bytes uncompressed, the cap of a pack" in refusal(sent, book, capsys)
    monkeypatch.setattr(packed, "MAX_TOTAL_BYTES", 10 * MiB)
    monkeypatch.setattr(packed, "MAX_HEADER_BYTES", 10_000)
    assert "is a tar header of" in (line := refusal(sent, book, capsys)) and "over the cap of 10000" in line


def bomb(file: Path, head: tarfile.TarInfo, zeros: int) -> Path:
    """A gzip file of one tar header and `zeros` MiB of zeros after it, each MiB its own gzip member (a reader reads
    them as one stream): a few hundred KB that expand as far as asked, written without ever holding them."""
    mib = gzip.compress(bytes(MiB))
    with file.open("wb") as out:
        out.write(gzip.compress(head.tobuf(tarfile.USTAR_FORMAT)))
        for _ in range(zeros):
            out.write(mib)
    return file


@pytest.mark.parametrize("head", [header(CSV, size=300 * MiB), header("././@PaxHeader", tarfile.XHDTYPE, 300 * MiB)],
                         ids=["member", "extended header"])
def test_refusing_a_bomb_takes_little_memory(head, tmp_path, book):
    file, before = bomb(tmp_path / "bomb.tar.gz", head, 300), snapshot(book)
    assert file.stat().st_size < MiB
    tracemalloc.start()
    try:
        with pytest.raises(PackRefused, match=rf"{head.name} is .*{300 * MiB} bytes, over the cap"):
            packed.unpack(file, book)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * MiB, f"refusing a 300 MiB bomb took {peak / MiB:.1f} MiB"
    assert snapshot(book) == before


def test_packing_an_unknown_set_names_the_stored_ones(tmp_path, capsys):
    store(tmp_path, range(1, 2))
    assert cli.main(["pack", "cpu-elsewhere-1t", "--results", str(tmp_path)]) == 2
    assert f"stored there: {SET}" in capsys.readouterr().err


def test_measure_takes_results_and_keeps_results_dir():
    for option in ("--results", "--results-dir"):
        assert cli.parser().parse_args(["measure", option, "/x"]).results_dir == Path("/x")
