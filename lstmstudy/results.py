"""The results store: one tidy CSV per claim and hardware set, with the fingerprint beside it.

Layout: `results/<claim>/<hardware_id>.csv` (one row per configuration measured, raw samples included)
and `results/<claim>/<hardware_id>.json` (the fingerprints that produced those rows).

Every append takes a file lock, checks the existing file, writes the old rows plus the new ones to a
temporary file and renames it over the old one: a run killed mid-write leaves the previous file
intact, two processes appending at once lose nothing, and a file that does not parse is reported by
path and line and never overwritten.

While a group of points is measured, its rows as they would read if it never finished wait in a hidden
`.<hardware_id>.running-<pid>.rows` file, locked by the measuring process (`running`). A process killed
inside a group (a hang in native code, a command's time limit) leaves them, and the next sweep of that set
stores them as error rows (`store_cut_off`), so that it goes past the group instead of hanging on it again.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np
import pandas as pd
from filelock import FileLock

from lstmstudy import stats
from lstmstudy.errors import ResultsCorrupt
from lstmstudy.observe import HOST_BOUND
from lstmstudy.paths import study_root

COLUMNS: tuple[str, ...] = (
    "claim", "kernel", "framework", "backend", "device", "device_kind", "hardware_id", "precision", "phase",
    "batch", "timesteps", "features", "hidden", "layers", "bidirectional", "config",
    "threads", "n_samples", "median_s", "p25_s", "p75_s", "ci_low_s", "ci_high_s", "samples_s",
    "round_sizes", "round_seed", "noisy",
    "flops", "achieved_flops", "energy_j", "observed_kernel", "observed_detail", "predicted_kernel", "compute_dtype",
    "status", "error", "versions", "fingerprint_id", "load_1m", "cpu_mhz", "thread_settings", "created_at", "process",
    "timer", "device_s", "kernels_per_call", "gpu_state",
)
#: what a row says of how it was timed: the clock (`timing.Measurement.timer`), the GPU's own time and kernels per
#: call (`observe.device_time`), and the GPU's clocks, temperature, power and slowdowns at its group's start and end
TIMING_COLUMNS = ("timer", "device_s", "kernels_per_call", "gpu_state")
#: Columns added since the first schema. A file without them still reads (they read as empty: one round,
#: no provenance) and is rewritten in the current schema by the next `append`.
ADDED_COLUMNS: tuple[str, ...] = ("round_sizes", "round_seed", "noisy", "fingerprint_id", "load_1m", "cpu_mhz",
                                  "thread_settings", "process", *TIMING_COLUMNS)
FIRST_COLUMNS = tuple(c for c in COLUMNS if c not in ADDED_COLUMNS)
#: every header a set may have been written with: the first schema, the one before `process`, the one before the
#: timing columns, this one
SCHEMAS = (FIRST_COLUMNS, tuple(c for c in COLUMNS if c != "process" and c not in TIMING_COLUMNS),
           tuple(c for c in COLUMNS if c not in TIMING_COLUMNS), COLUMNS)
#: The columns that identify one configuration within a hardware set (what a resumed sweep skips).
KEY_COLUMNS: tuple[str, ...] = (
    "kernel", "backend", "precision", "phase", "batch", "timesteps", "features", "hidden", "layers", "bidirectional",
    "config",
)
INT_COLUMNS = ("batch", "timesteps", "features", "hidden", "layers", "threads", "n_samples", "round_seed", "process")
FLOAT_COLUMNS = ("median_s", "p25_s", "p75_s", "ci_low_s", "ci_high_s", "flops", "achieved_flops", "energy_j",
                 "load_1m", "cpu_mhz", "device_s", "kernels_per_call")
JSON_LIST_COLUMNS = ("samples_s", "round_sizes")
STATUSES = ("ok", "error", "skipped")

#: raw samples make long fields: the csv module's default 128 KiB limit is lifted while a set is read (`_long_fields`)
FIELD_LIMIT = 2**31 - 1


def default_root() -> Path:
    """`$LSTMSTUDY_RESULTS`, else `results/` of the study's root (`paths.study_root`: `$LSTMSTUDY_ROOT`, the checkout
    the package runs from, or the current folder)."""
    if env := os.environ.get("LSTMSTUDY_RESULTS"):
        return Path(env)
    return study_root() / "results"


#: an exception quoted at the end of a row's reason ('... (RuntimeError: could not create ...)'): the stored row
#: keeps it
QUOTED_EXCEPTION = re.compile(r"\s*\(\w*(Error|Exception)\b.*\)\s*$")


def without_exception(reason: str) -> str:
    """A row's reason for not running as a page shows it: its words, less the exception it quotes (kept in the
    stored row and its CSV, never shown to a reader)."""
    return QUOTED_EXCEPTION.sub("", reason)


def set_path(claim: str, hardware_id: str, root: Path | None = None) -> Path:
    return Path(root or default_root()) / claim / f"{hardware_id}.csv"


def config_text(config: Mapping) -> str:
    """Canonical JSON of a configuration's extra parameters, so equal configs compare equal as text."""
    return json.dumps(dict(config), sort_keys=True, separators=(",", ":"))


def row_key(row: Mapping) -> tuple[str, ...]:
    """The identity of a configuration, as text, whether the row came from a file or from a sweep (a column
    a row leaves out is stored empty, so it reads as '')."""
    return tuple(str(row.get(c, "")) for c in KEY_COLUMNS)


def _check_row(path: Path, line: int, row: Mapping[str, str]) -> None:
    if row["status"] not in STATUSES:
        raise ResultsCorrupt(f"{path}:{line}: status {row['status']!r} is not one of {STATUSES}")
    for column in INT_COLUMNS + FLOAT_COLUMNS:
        value = row[column]
        if value == "":
            continue
        try:
            int(value) if column in INT_COLUMNS else float(value)
        except ValueError:
            raise ResultsCorrupt(f"{path}:{line}: column {column!r} should be a number, got {value!r}") from None
    for column in JSON_LIST_COLUMNS:
        if not row[column]:
            continue
        try:
            values = json.loads(row[column])
        except json.JSONDecodeError as exc:
            raise ResultsCorrupt(f"{path}:{line}: {column} is not a JSON list ({exc.msg})") from None
        if not isinstance(values, list):
            raise ResultsCorrupt(f"{path}:{line}: {column} is not a JSON list")


def read_rows(path: Path) -> list[dict[str, str]]:
    """Every row of one result set, checked; `ResultsCorrupt` names the file and line of a bad one."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsCorrupt(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        return []
    with _long_fields():
        return _parse(path, text)


@contextmanager
def _long_fields() -> Iterator[None]:
    """The csv module's field limit lifted for one read (`FIELD_LIMIT`) and the caller's put back: the limit is
    the whole process's."""
    before = csv.field_size_limit(FIELD_LIMIT)
    try:
        yield
    finally:
        csv.field_size_limit(before)


def _parse(path: Path, text: str) -> list[dict[str, str]]:
    """The checked rows of a set's text (`read_rows`)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = tuple(next(reader))
        if header not in SCHEMAS:
            missing = [c for c in COLUMNS if c not in header]
            extra = [c for c in header if c not in COLUMNS]
            raise ResultsCorrupt(f"{path}:1: header does not match the results schema "
                                 f"(missing {missing or 'none'}, unexpected {extra or 'none'})")
        rows = []
        for fields in reader:
            line = reader.line_num
            if not fields:
                continue
            if len(fields) != len(header):
                raise ResultsCorrupt(f"{path}:{line}: expected {len(header)} fields, found {len(fields)}")
            row = {column: "" for column in ADDED_COLUMNS} | dict(zip(header, fields))
            _check_row(path, line, row)
            rows.append(row)
    except csv.Error as exc:
        raise ResultsCorrupt(f"{path}:{reader.line_num}: {exc}") from None
    return rows


def _format(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to a temporary file, then rename it over `path`. The temporary file is opened as 0666 less the
    umask, the mode any new file gets (`mkstemp`'s 0600 would survive the rename)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _lock(path: Path) -> FileLock:
    """The lock of one results file: a hidden `.<name>.lock` beside it (git-ignored). It stays after release:
    unlinking a lock file another process may be waiting on would let two writers in at once."""
    return FileLock(path.with_name(f".{path.name}.lock"), timeout=120)


def append(claim: str, hardware_id: str, rows: Iterable[Mapping], root: Path | None = None) -> Path:
    """Append `rows` (mappings over COLUMNS) to a result set atomically; return the file's path."""
    path = set_path(claim, hardware_id, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = list(rows)
    for row in new:
        if unknown := set(row) - set(COLUMNS):
            raise ValueError(f"unknown result columns: {sorted(unknown)}")
    with _lock(path):
        old = read_rows(path)  # refuses to touch a file it cannot parse; reads an older schema too
        buffer = io.StringIO(newline="")
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in [*old, *new]:
            writer.writerow([_format(row.get(c)) for c in COLUMNS])
        atomic_write(path, buffer.getvalue())
    return path


def fingerprint_id(fields: Mapping) -> str:
    """The id of a fingerprint's fields (its `hardware_id` and `id` entries left out, so they can be stored)."""
    body = {k: v for k, v in fields.items() if k not in ("hardware_id", "id")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]


def record_fingerprint(claim: str, fingerprint: Mapping, root: Path | None = None) -> Path:
    """Keep every distinct fingerprint seen for a hardware set in `<hardware_id>.json` beside its rows,
    each with its `id` (`fingerprint_id`), which the rows it produced carry as `fingerprint_id`."""
    hardware_id = fingerprint["hardware_id"]
    entry = {**fingerprint, "id": fingerprint_id(dict(fingerprint))}
    path = set_path(claim, hardware_id, root).with_suffix(".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock(path):
        known = _read_fingerprints(path) if path.exists() else []
        if entry["id"] not in {old["id"] for old in known}:
            known.append(entry)
            atomic_write(path, json.dumps({"hardware_id": hardware_id, "fingerprints": known}, indent=2) + "\n")
    return path


def fingerprints(claim: str, root: Path | None = None) -> dict[str, list[dict]]:
    """The stored fingerprints of every hardware set of a claim, by hardware_id, each with its `id`."""
    folder = Path(root or default_root()) / claim
    return {path.stem: _read_fingerprints(path) for path in sorted(folder.glob("*.json"))}


def _read_fingerprints(path: Path) -> list[dict]:
    """The fingerprints of one `<hardware_id>.json`, each with its `id` (computed for entries stored before
    ids); `ResultsCorrupt` names a file that is not a fingerprint file."""
    try:
        known = json.loads(path.read_text(encoding="utf-8"))["fingerprints"]
        return [{**fp, "id": fingerprint_id(fp)} for fp in known]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ResultsCorrupt(f"{path}: not a fingerprint file ({exc})") from None


@contextmanager
def running(claim: str, hardware_id: str, rows: Iterable[Mapping], root: Path | None = None) -> Iterator[None]:
    """While the block runs: `rows` (a group's error rows, saying it was cut off) in a hidden file beside the
    set, locked by this process. Leaving the block, by return or by exception, takes them back; a process
    killed inside it leaves them for `store_cut_off` (the kernel drops its lock when it dies). Where there is
    no `fcntl` (Windows) nothing is kept."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    path = set_path(claim, hardware_id, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    marker = path.with_name(f".{hardware_id}.running-{os.getpid()}.rows")
    tmp = marker.with_name(f"{marker.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # before the rename: no reader ever sees it unlocked while we live
        os.write(fd, json.dumps([dict(row) for row in rows]).encode())
        os.fsync(fd)
        os.replace(tmp, marker)
        yield
    finally:
        tmp.unlink(missing_ok=True)
        marker.unlink(missing_ok=True)
        os.close(fd)


def store_cut_off(claim: str, hardware_id: str, root: Path | None = None) -> int:
    """Store the rows `running` left for groups whose process died inside them, except those of a configuration
    stored since (a marker may be copied back with the results it was left beside); return how many."""
    try:
        import fcntl
    except ImportError:
        return 0
    stored, path = 0, set_path(claim, hardware_id, root)
    for marker in sorted(path.parent.glob(f".{hardware_id}.running-*.rows")):
        try:
            fd = os.open(marker, os.O_RDONLY)
        except FileNotFoundError:  # its process finished meanwhile
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its process is alive, still measuring that group
                continue
            try:
                if os.stat(marker).st_ino != os.fstat(fd).st_ino:  # taken back meanwhile, the name used again
                    continue
            except FileNotFoundError:
                continue
            try:
                with os.fdopen(os.dup(fd), encoding="utf-8") as handle:
                    rows = json.loads(handle.read())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ResultsCorrupt(f"{marker}: not the rows of a cut-off group ({exc})") from None
            known = {row_key(row) for row in read_rows(path)}
            new = [row for row in rows if row_key(row) not in known]
            if new:
                append(claim, hardware_id, new, root)
                stored += len(new)
            with suppress(FileNotFoundError):
                if os.stat(marker).st_ino == os.fstat(fd).st_ino:  # not a later group's marker under the same name
                    marker.unlink()
        finally:
            os.close(fd)
    return stored


DONE_STATUSES = ("ok", "skipped")


def stored_keys(claim: str, hardware_id: str, root: Path | None = None,
                process: int = 0) -> tuple[set[tuple[str, ...]], set[tuple[str, ...]]]:
    """The configurations of a hardware set that are done for worker `process` (stored `ok` by it, or `skipped`
    by any: a resumed sweep skips them) and those it stored as an `error` (measured again only when asked to),
    from one read. A worker other than 0 counts only its rows stored after worker 0's newest row of the
    configuration (`load` joins only those: a `--rerun` starts again), and leaves alone a configuration whose
    newest row of worker 0 is an error."""
    rows = read_rows(set_path(claim, hardware_id, root))
    newest_first: dict[tuple[str, ...], Mapping[str, str]] = {}  # by `created_at`, as `_join_processes` orders
    for row in rows:
        if _process(row) == 0 and row["created_at"] >= newest_first.get(row_key(row), {}).get("created_at", ""):
            newest_first[row_key(row)] = row
    current = [_process(row) == process
               and (process == 0 or row["created_at"] > newest_first.get(row_key(row), {}).get("created_at", ""))
               for row in rows]
    done = {row_key(row) for row, mine in zip(rows, current)
            if row["status"] == "skipped" or (row["status"] == "ok" and mine)}
    failed = {row_key(row) for row, mine in zip(rows, current) if row["status"] == "error" and mine}
    if process:
        failed |= {key for key, row in newest_first.items() if row["status"] == "error"}
    return done, failed - done


def _process(row: Mapping[str, str]) -> int:
    """Which worker process stored a row (`sweep.run`; empty in a set stored before workers: 0)."""
    return int(row.get("process") or 0)


def load(claim: str, root: Path | None = None, *, latest: bool = True, sets: str = "*",
         kernels: Collection[str] | None = None) -> pd.DataFrame:
    """One DataFrame over every hardware set stored for `claim` (or those whose id matches the glob `sets`, and only
    the rows of `kernels` where given: a row is joined with its own configuration's rows only, so it is the same).

    With `latest`, a configuration measured more than once on the same hardware (a `--rerun`) keeps
    only its newest row; the older rows stay in the file. A configuration timed by several worker processes
    (`sweep`) is one row: its newest row of process 0 with the rounds each later process timed after it
    (`_join_processes`). `samples` holds the raw samples as a list, `process_rounds` how many rounds each process
    timed (empty for one process), `host` the host tag of the fingerprint that produced the row ('' where unknown).
    Three flags are formed on reading, never trusted from the file: `noisy` (`_noisy`), `host_bound` (`_host_bound`)
    and `throttled` (`_throttled`: the GPU was slowed during its group; None where no GPU state was read).
    """
    folder = Path(root or default_root()) / claim
    rows = [row for path in sorted(folder.glob(f"{sets}.csv")) for row in read_rows(path)
            if kernels is None or row["kernel"] in kernels]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    if frame.empty:
        return frame.assign(samples=pd.Series(dtype=object), process_rounds=pd.Series(dtype=object))
    for column in INT_COLUMNS:
        frame[column] = pd.to_numeric(frame[column]).astype("Int64")
    for column in FLOAT_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["bidirectional"] = frame["bidirectional"].map({"True": True, "False": False})
    frame["samples"] = [json.loads(s) if s else [] for s in frame["samples_s"]]
    frame["round_sizes"] = [json.loads(s) if s else [] for s in frame["round_sizes"]]
    frame["gpu_state"] = [json.loads(s) if s else {} for s in frame["gpu_state"]]
    frame["throttled"] = [_throttled(state) if state else None for state in frame["gpu_state"]]
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    hosts = {fp["id"]: fp.get("host", "") for known in fingerprints(claim, root).values() for fp in known}
    frame["host"] = frame["fingerprint_id"].map(lambda i: hosts.get(i, ""))  # "" for rows stored before ids
    frame["process"] = frame["process"].fillna(0)
    frame["process_rounds"] = [[] for _ in range(len(frame))]
    if latest:
        frame = _join_processes(frame.sort_values("created_at", kind="stable"))
    return frame.assign(noisy=_noisy(frame), host_bound=_host_bound(frame)).reset_index(drop=True)


#: a group's GPU state's running counts of time its clocks were held down (`nvml.VIOLATIONS`)
VIOLATION_COUNTS = ("power_violation_ns", "thermal_violation_ns")


def _throttled(state: Mapping) -> bool:
    """Whether a group's GPU was slowed: a slowdown (`nvml.SLOWDOWNS`) named at its start or end, or time held down
    that its running counts gained between them (the ends are idle, when no cap holds)."""
    start, end = state.get("start") or {}, state.get("end") or {}
    named = any(moment.get("slowdowns") for moment in (start, end))
    gained = any(isinstance(start.get(c), int) and isinstance(end.get(c), int) and end[c] > start[c]
                 for c in VIOLATION_COUNTS)
    return named or gained


def _noisy(frame: pd.DataFrame) -> pd.Series:
    """Whether each timed row is noisy under the current rule (`stats.NOISE_BOUND`), from its re-run interval (a
    joined row's formed again): never the flag its file stored, which an older rule may have set. None where a row
    has no interval."""
    half = (frame["ci_high_s"] - frame["ci_low_s"]) / 2 / frame["median_s"]
    return half.gt(stats.NOISE_BOUND).astype(object).where(half.notna() & frame["median_s"].gt(0), None)


def _host_bound(frame: pd.DataFrame) -> pd.Series:
    """Whether each GPU row's time per call exceeds the GPU's own work in it (`device_s`) by more than
    `observe.HOST_BOUND`: the host's launches, not the GPU, set its time. None where no device time was measured."""
    measured = frame["device_s"].gt(0) & frame["median_s"].notna()
    return frame["median_s"].gt(HOST_BOUND * frame["device_s"]).astype(object).where(measured, None)


def _join_processes(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and hardware set: the newest row of worker process 0 (or, where it has none, the
    newest of any), joined with the newest `ok` row each other process stored after it (a `--rerun` starts again
    at process 0, so the rows of an earlier run are left out). `frame` is sorted by `created_at`."""
    keys = ["hardware_id", *KEY_COLUMNS]
    several = frame.groupby(keys, sort=False, dropna=False).process.transform("max") > 0
    single = frame[~several].drop_duplicates(keys, keep="last")
    if not several.any():
        return single
    rows = []
    for _, group in frame[several].groupby(keys, sort=False, dropna=False):
        firsts = group[group.process == 0]
        base = (firsts if len(firsts) else group).iloc[-1]
        later = group[(group.process != 0) & (group.created_at > base.created_at) & (group.status == "ok")]
        parts = [base, *later.drop_duplicates("process", keep="last").sort_values("process").itertuples(index=False)]
        if base.status != "ok" or len(parts) == 1:
            rows.append(base)
            continue
        joined = base.copy()
        sizes = [list(part.round_sizes) or [len(part.samples)] for part in parts]  # one burst: one round
        joined["samples"] = [s for part in parts for s in part.samples]
        joined["round_sizes"] = [n for each in sizes for n in each]
        joined["process_rounds"] = [len(each) for each in sizes]
        joined["round_seed"] = ",".join(str(part.round_seed) for part in parts)
        joined["n_samples"] = len(joined["samples"])
        joined["throttled"] = any(part.throttled is True for part in parts) or base.throttled
        joined["created_at"] = max(part.created_at for part in parts)
        joined["median_s"], joined["ci_low_s"], joined["ci_high_s"] = stats.row_median(joined)
        joined["p25_s"], joined["p75_s"] = np.percentile(joined["samples"], [25, 75])
        rows.append(joined)
    joined = pd.DataFrame(rows, columns=frame.columns).astype({c: frame[c].dtype for c in frame.columns
                                                              if c not in ("round_seed", "throttled")})
    return pd.concat([single.astype({"round_seed": object}), joined]).sort_values("created_at", kind="stable")
