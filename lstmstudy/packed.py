"""One measured hardware set in one file, for a reader to send and the book to take in: `lstmstudy pack` and
`lstmstudy unpack`.

A packed set is a `.tar.gz` of every `<claim>/<hardware_id>.csv` of one hardware id and the fingerprints beside
them (`<claim>/<hardware_id>.json`), with a `manifest.json`: the lstmstudy and commit that packed it, the set's
fingerprints, and each claim's row count. A pack comes from a stranger ("add your GPU"), so `unpack` treats it as
untrusted: it streams each member a chunk at a time into a staging folder within the caps below (checked from the tar
headers, and the uncompressed bytes counted as they are read), takes plain files named as the set's own files only,
and checks every CSV (`results.read_rows`) against its row count, its fingerprints and the manifest's set. Only then
does it write into the results root: a refused pack writes nothing (`PackRefused`, one line naming the member). A
set already stored under the same id is kept unless the packed one holds all its rows and fingerprints (the same
set, measured further), or the caller asks to replace it.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import IO

from lstmstudy import __version__, results
from lstmstudy.errors import PackRefused, ResultsCorrupt, StudyError
from lstmstudy.hardware import git_state

MANIFEST = "manifest.json"
#: what a manifest says it is, so that another tar.gz is refused by name
FORMAT = "lstmstudy result set 1"
#: what a hardware id and a claim folder may be named: one plain path component
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: what every member but the manifest may be named: no absolute path, no `..`, nothing but a set's files; stricter
#: than tarfile's `data` filter, which lets links and any name inside the destination through
MEMBER_NAME = re.compile(rf"{PLAIN_NAME.pattern}/{PLAIN_NAME.pattern}\.(csv|json)")
#: what `unpack` did with each file
UNCHANGED, ADDED, EXTENDED, REPLACED = "unchanged", "added", "extended", "replaced"

# The caps on a pack. A whole set is under 2 MB today (its largest CSV 0.56 MB, a fingerprint file 7 KB, 11 claims),
# so they leave room for sets many times larger, and they keep `unpack` far under 200 MB for any archive:
# `results.read_rows` holds about 7 times a CSV's bytes plus about 2 KB a row however short its line, and `json`
# up to 20 times a file's bytes.
#: members in one pack: a manifest and two files a claim
MAX_MEMBERS = 64
#: bytes of one CSV
MAX_CSV_BYTES = 8 * 2**20
#: lines of one CSV (its rows and header)
MAX_CSV_LINES = 10_000
#: bytes of the manifest or of one fingerprint file (about 1.6 KB a fingerprint)
MAX_JSON_BYTES = 256 * 2**10
#: bytes of the whole uncompressed tar stream, headers included
MAX_TOTAL_BYTES = 32 * 2**20
#: bytes of an extended tar header (a long name, pax records), which tarfile reads whole: a few hundred in a real pack
MAX_HEADER_BYTES = 64 * 2**10
#: how much of a member is read at once while it is staged
CHUNK = 64 * 2**10


def default_output(hardware_id: str) -> Path:
    """Where `pack` writes when not told: the current folder, named after the set."""
    return Path(f"{hardware_id}.lstmstudy.tar.gz")


def stored_ids(root: Path | None = None) -> list[str]:
    """The hardware ids with rows stored under `root` (the results root), for an error that names them."""
    return sorted({path.stem for path in Path(root or results.default_root()).glob("*/*.csv")})


def pack(hardware_id: str, root: Path | None = None, output: Path | None = None) -> tuple[Path, dict]:
    """Write every claim's rows and fingerprints of `hardware_id` under `root` into one `.tar.gz`; return its path
    and manifest. A corrupt set is refused (`ResultsCorrupt`) rather than sent on."""
    root = Path(root or results.default_root())
    csvs = sorted(root.glob(f"*/{hardware_id}.csv")) if PLAIN_NAME.fullmatch(hardware_id) else []
    if not csvs:
        known = ", ".join(stored_ids(root)) or "none"
        raise StudyError(f"no result set {hardware_id!r} in {root} (stored there: {known}); "
                         f"`lstmstudy env` prints this machine's id")
    members, fingerprints, claims = {}, {}, {}
    for csv in csvs:
        claims[csv.parent.name] = len(results.read_rows(csv))
        members[f"{csv.parent.name}/{csv.name}"] = csv.read_bytes()
        if (stored := csv.with_suffix(".json")).exists():
            fingerprints |= {fp["id"]: fp for fp in results.fingerprints(csv.parent.name, root).get(hardware_id, [])}
            members[f"{csv.parent.name}/{stored.name}"] = stored.read_bytes()
    commit, dirty = git_state()
    manifest = {"format": FORMAT, "hardware_id": hardware_id, "lstmstudy": __version__, "git_commit": commit,
                "git_dirty": dirty, "claims": claims, "fingerprints": list(fingerprints.values())}
    output = Path(output or default_output(hardware_id))
    output.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(output, "w:gz") as archive:
        for name, data in {MANIFEST: (json.dumps(manifest, indent=2) + "\n").encode(), **members}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return output, manifest


class _Capped(gzip.GzipFile):
    """A pack's uncompressed tar stream, refused once more than `MAX_TOTAL_BYTES` have come out of it: the bytes are
    counted as they are read, whatever the headers or the gzip trailer say (extended headers count in no member)."""

    def read(self, size: int = -1) -> bytes:
        data = super().read(size)
        if self.tell() > MAX_TOTAL_BYTES:
            raise PackRefused(f"expands past {MAX_TOTAL_BYTES} bytes uncompressed, the cap of a pack")
        return data


class _Header(tarfile.TarInfo):
    """A tar header, refused before tarfile reads what follows it where that would cost memory: an extended header
    over `MAX_HEADER_BYTES` (tarfile reads one whole) or an old GNU sparse map (read block by block, without end)."""

    @classmethod
    def frombuf(cls, buf: bytes, encoding: str, errors: str) -> _Header:
        header = super().frombuf(buf, encoding, errors)
        if header.type == tarfile.GNUTYPE_SPARSE:
            raise PackRefused(f"{header.name} is a sparse file, not a plain file")
        if not header.isreg() and header.size > MAX_HEADER_BYTES:
            raise PackRefused(f"{header.name} is a tar header of {header.size} bytes, over the cap of "
                              f"{MAX_HEADER_BYTES}")
        return header


def _stage(file: Path, staging: Path) -> set[str]:
    """Copy every member of a pack under `staging` a chunk at a time, within the caps; return their names."""
    names: set[str] = set()
    try:
        with _Capped(file) as stream, tarfile.open(fileobj=stream, mode="r:", tarinfo=_Header) as archive:
            for member in archive:
                _check_member(member, len(names) + 1)
                _copy(archive.extractfile(member), staging / member.name, member.name)
                names.add(member.name)
    except PackRefused as exc:
        raise PackRefused(f"{file}: {exc}") from None
    except (tarfile.TarError, EOFError, OSError, zlib.error, RecursionError) as exc:  # deep nesting: RecursionError
        raise PackRefused(f"{file}: not a packed result set ({exc})") from None
    return names


def _check_member(member: tarfile.TarInfo, number: int) -> None:
    """Refuse a member from its header, before a byte of it is read: past the member cap, not a plain file, named
    outside a set's files (`MEMBER_NAME`), or larger than a file of its kind or the pack may be."""
    name, end = member.name, member.offset_data + member.size
    cap = MAX_CSV_BYTES if name.endswith(".csv") else MAX_JSON_BYTES
    if number > MAX_MEMBERS:
        raise PackRefused(f"{name} is member {number}, over the cap of {MAX_MEMBERS} members")
    if member.issym() or member.islnk():
        raise PackRefused(f"{name} is a link to {member.linkname}, not a plain file")
    if not member.isreg() or member.issparse():
        raise PackRefused(f"{name} is not a plain file (a folder, a device or a sparse file)")
    if name != MANIFEST and not MEMBER_NAME.fullmatch(name):
        raise PackRefused(f"{name} is not a file of any set ({MANIFEST}, <claim>/<hardware_id>.csv or .json)")
    if member.size > cap:
        raise PackRefused(f"{name} is {member.size} bytes, over the cap of {cap}")
    if end > MAX_TOTAL_BYTES:
        raise PackRefused(f"{name} ends {end} bytes into the pack, past the cap of {MAX_TOTAL_BYTES} uncompressed")


def _copy(source: IO[bytes], target: Path, name: str) -> None:
    """Stream one member to `target`, counting a CSV's lines against `MAX_CSV_LINES`; a name twice is refused."""
    target.parent.mkdir(exist_ok=True)
    lines = 0
    try:
        with target.open("xb") as out:
            while chunk := source.read(CHUNK):
                lines += chunk.count(b"\n")
                if name.endswith(".csv") and lines > MAX_CSV_LINES:
                    raise PackRefused(f"{name} has over {MAX_CSV_LINES} lines, the cap of a set's rows")
                out.write(chunk)
    except FileExistsError:
        raise PackRefused(f"{name} is in the pack twice") from None


def read_manifest(file: Path, staging: Path) -> dict:
    """The manifest of a staged pack, checked: its format, a plain hardware id and plain claim names."""
    try:
        manifest = json.loads((staging / MANIFEST).read_bytes())
        claims = manifest["claims"]
        plain = all(PLAIN_NAME.fullmatch(name) for name in [manifest["hardware_id"], *claims])
        counts = all(isinstance(rows, int) and rows >= 0 for rows in claims.values())
    except (FileNotFoundError, KeyError, TypeError, AttributeError, RecursionError, json.JSONDecodeError,
            UnicodeDecodeError) as exc:
        raise PackRefused(f"{file}: no readable {MANIFEST} ({exc!r}): not a packed result set") from None
    if manifest.get("format") != FORMAT or not plain or not counts:
        raise PackRefused(f"{file}: {MANIFEST} is not that of a packed result set ({FORMAT})")
    return manifest


def unpack(file: Path, root: Path | None = None, *, replace: bool = False) -> dict[Path, str]:
    """Store a packed set under `root` (the results root); return each file written or found the same, with what
    was done (`ADDED`, `EXTENDED`, `REPLACED`, `UNCHANGED`). Everything is staged and checked before anything is
    written: a tampered pack is `PackRefused`, a corrupt CSV `ResultsCorrupt`, each naming the member, and a
    different set stored under the same id is a `StudyError` unless `replace`."""
    file, root = Path(file), Path(root or results.default_root())
    plan: dict[Path, tuple[str, Path]] = {}
    with tempfile.TemporaryDirectory(prefix="lstmstudy-unpack-") as folder:
        staging = Path(folder)
        names = _stage(file, staging)
        manifest = read_manifest(file, staging)
        hardware_id, claims = manifest["hardware_id"], manifest["claims"]
        own = {f"{claim}/{hardware_id}{suffix}" for claim in claims for suffix in (".csv", ".json")}
        if strangers := names - own - {MANIFEST}:
            raise PackRefused(f"{file}: {sorted(strangers)[0]} is not a file of set {hardware_id}: not unpacked")
        for claim, count in claims.items():
            if (csv := f"{claim}/{hardware_id}.csv") not in names:
                raise ResultsCorrupt(f"{file}: {csv} is listed in its {MANIFEST} but missing")
            staged = staging / csv
            target, what = _planned(file, staging, root, claim, hardware_id, count, replace)
            plan |= {target: (what, staged), target.with_suffix(".json"): (what, staged.with_suffix(".json"))}
        for target, (what, staged) in plan.items():
            if what != UNCHANGED:
                target.parent.mkdir(parents=True, exist_ok=True)
                results.atomic_write(target, staged.read_text(encoding="utf-8"))
    return {target: what for target, (what, _) in plan.items()}


def _planned(file: Path, staging: Path, root: Path, claim: str, hardware_id: str, count: int,
             replace: bool) -> tuple[Path, str]:
    """Where one claim's staged set goes under `root` and what storing it there would do (`_compare`), once it is
    checked; its rows are let go on return, so that only one claim's rows are held at a time."""
    rows, ids = _checked_set(file, staging, claim, hardware_id)
    if len(rows) != count:
        raise ResultsCorrupt(f"{file}: {claim}/{hardware_id}.csv has {len(rows)} rows, its {MANIFEST} says {count}")
    target = results.set_path(claim, hardware_id, root)
    what = _compare(target, rows, ids, root, claim, hardware_id)
    if what == REPLACED and not replace:
        raise StudyError(f"{target} holds a different set of {hardware_id}: nothing was unpacked; keep it and "
                         f"unpack into another folder (--results), or replace it (--replace)")
    return target, what


def _checked_set(file: Path, staging: Path, claim: str, hardware_id: str) -> tuple[list[dict[str, str]], set[str]]:
    """The rows and fingerprint ids of one claim's staged files, read as the store reads them and checked as the
    set's own: a fingerprint beside the CSV, every fingerprint and row of `hardware_id` (else the book would show a
    set that does not exist), every row's `fingerprint_id` one of them. A row with none is taken: rows stored before
    rows named their fingerprint have none, and `results.load` reads them as of no known host."""
    csv, fingerprint = f"{claim}/{hardware_id}.csv", f"{claim}/{hardware_id}.json"
    try:
        rows = results.read_rows(staging / csv)
        fingerprints = results.fingerprints(claim, staging).get(hardware_id, [])
    except ResultsCorrupt as exc:  # named as a member of the file, not as the folder it was checked in
        raise ResultsCorrupt(str(exc).replace(f"{staging}{os.sep}", f"{file}: ")) from None
    except RecursionError:
        raise PackRefused(f"{file}: {fingerprint} is nested too deeply to be a fingerprint file") from None
    if not fingerprints:
        raise PackRefused(f"{file}: {csv} comes without its fingerprint ({fingerprint})")
    if stranger := next((fp for fp in fingerprints if fp.get("hardware_id") != hardware_id), None):
        raise PackRefused(f"{file}: {fingerprint}: fingerprint {stranger['id']} is of set "
                          f"{stranger.get('hardware_id')!r}, not {hardware_id}")
    ids = {fp["id"] for fp in fingerprints}
    for number, row in enumerate(rows, 1):
        if row["hardware_id"] != hardware_id:
            raise PackRefused(f"{file}: {csv} row {number} is of set {row['hardware_id']!r}, not {hardware_id}")
        if row["fingerprint_id"] and row["fingerprint_id"] not in ids:
            raise PackRefused(f"{file}: {csv} row {number} names fingerprint {row['fingerprint_id']!r}, which "
                              f"{fingerprint} does not hold")
    return rows, ids


def _compare(target: Path, rows: list[dict], ids: set[str], root: Path, claim: str, hardware_id: str) -> str:
    """What storing `rows` (with fingerprints `ids`) over the set at `target` would do: `ADDED` where there is none,
    `UNCHANGED` where it is the same, `EXTENDED` where the new rows and fingerprints include all of the stored ones
    (the same set, measured further), else `REPLACED`, which loses rows."""
    stored = results.read_rows(target)
    if not stored:
        return ADDED
    known = {fp["id"] for fp in results.fingerprints(claim, root).get(hardware_id, [])}
    if not known <= ids or rows[:len(stored)] != stored:
        return REPLACED
    return UNCHANGED if len(rows) == len(stored) and known == ids else EXTENDED
