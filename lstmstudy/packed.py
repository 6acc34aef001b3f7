"""One measured hardware set in one file, for a reader to send and the book to take in: `lstmstudy pack` and
`lstmstudy unpack`.

A packed set is a `.tar.gz` of every `<claim>/<hardware_id>.csv` of one hardware id and the fingerprints beside
them (`<claim>/<hardware_id>.json`), with a `manifest.json`: the lstmstudy and commit that packed it, the set's
fingerprints, and each claim's row count. Unpacking checks all of it before it writes anything: the manifest, the
members' names (nothing outside the set's own files), every CSV (`results.read_rows`) against its row count, every
fingerprint file. A set already stored under the same id is kept unless the packed one holds all its rows and
fingerprints (the same set, measured further), or the caller asks to replace it.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import tempfile
from pathlib import Path

from lstmstudy import __version__, results
from lstmstudy.errors import ResultsCorrupt, StudyError
from lstmstudy.hardware import git_state

MANIFEST = "manifest.json"
#: what a manifest says it is, so that another tar.gz is refused by name
FORMAT = "lstmstudy result set 1"
#: what a hardware id and a claim folder may be named: one plain path component
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: what `unpack` did with each file
UNCHANGED, ADDED, EXTENDED, REPLACED = "unchanged", "added", "extended", "replaced"


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


def _members(file: Path) -> dict[str, bytes]:
    """Every member of a packed set by name; anything but plain files is refused."""
    try:
        with tarfile.open(file, "r:gz") as archive:
            found = {}
            for info in archive.getmembers():
                if not info.isfile():
                    raise StudyError(f"{file}: {info.name} is not a plain file: not a packed result set")
                found[info.name] = archive.extractfile(info).read()
            return found
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise StudyError(f"{file}: not a packed result set ({exc})") from None


def read_manifest(file: Path, members: dict[str, bytes]) -> dict:
    """The manifest of a packed set, checked: its format, a plain hardware id and plain claim names."""
    try:
        manifest = json.loads(members[MANIFEST])
        claims = manifest["claims"]
        plain = all(PLAIN_NAME.fullmatch(name) for name in [manifest["hardware_id"], *claims])
        counts = all(isinstance(rows, int) and rows >= 0 for rows in claims.values())
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise StudyError(f"{file}: no readable {MANIFEST} ({exc!r}): not a packed result set") from None
    if manifest.get("format") != FORMAT or not plain or not counts:
        raise StudyError(f"{file}: {MANIFEST} is not that of a packed result set ({FORMAT})")
    return manifest


def unpack(file: Path, root: Path | None = None, *, replace: bool = False) -> dict[Path, str]:
    """Store a packed set under `root` (the results root); return each file written or found the same, with what
    was done (`ADDED`, `EXTENDED`, `REPLACED`, `UNCHANGED`). Everything is checked before anything is written: a
    bad member is `ResultsCorrupt` naming it, and a different set stored under the same id is a `StudyError`
    unless `replace`."""
    file, root = Path(file), Path(root or results.default_root())
    members = _members(file)
    manifest = read_manifest(file, members)
    hardware_id, claims = manifest["hardware_id"], manifest["claims"]
    expected = {f"{claim}/{hardware_id}.csv" for claim in claims}
    if unknown := set(members) - expected - {MANIFEST} - {name[:-4] + ".json" for name in expected}:
        raise StudyError(f"{file}: {sorted(unknown)[0]} is not a file of set {hardware_id}: not unpacked")
    if missing := expected - set(members):
        raise ResultsCorrupt(f"{file}: {sorted(missing)[0]} is listed in its {MANIFEST} but missing")
    plan: dict[Path, tuple[str, bytes]] = {}
    with tempfile.TemporaryDirectory() as checked:  # each member read back as the store reads it
        for name, data in members.items():
            if name != MANIFEST:
                (Path(checked) / name).parent.mkdir(parents=True, exist_ok=True)
                (Path(checked) / name).write_bytes(data)
        for claim, count in claims.items():
            try:
                rows = results.read_rows(Path(checked) / claim / f"{hardware_id}.csv")
                ids = {fp["id"] for fp in results.fingerprints(claim, Path(checked)).get(hardware_id, [])}
            except ResultsCorrupt as exc:  # named as a member of the file, not as the folder it was checked in
                raise ResultsCorrupt(str(exc).replace(f"{checked}{os.sep}", f"{file}: ")) from None
            if len(rows) != count:
                raise ResultsCorrupt(f"{file}: {claim}/{hardware_id}.csv has {len(rows)} rows, its {MANIFEST} "
                                     f"says {count}")
            target = results.set_path(claim, hardware_id, root)
            what = _compare(target, rows, ids, root, claim, hardware_id)
            if what == REPLACED and not replace:
                raise StudyError(f"{target} holds a different set of {hardware_id}: nothing was unpacked; keep it and "
                                 f"unpack into another folder (--results), or replace it (--replace)")
            plan[target] = (what, members[f"{claim}/{hardware_id}.csv"])
            if (fingerprint := f"{claim}/{hardware_id}.json") in members:
                plan[target.with_suffix(".json")] = (what, members[fingerprint])
    for target, (what, data) in plan.items():
        if what != UNCHANGED:
            target.parent.mkdir(parents=True, exist_ok=True)
            results.atomic_write(target, data.decode("utf-8"))
    return {target: what for target, (what, _) in plan.items()}


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
