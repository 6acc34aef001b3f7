"""What ran a row and how the frameworks were clocked against DeepBench, read without the measuring stack.

Every stored row records the Keras backend its run had (`backend`: what `Point.key` stores and the run's fingerprint
records as `keras_backend`; '' for a torch row, and where a run recorded none) and the library versions of its run
(`versions`, a JSON object). `framework_words` names a row's framework from those two columns, the one wording every
claim gives: 'Keras 3.15 on its torch backend', 'PyTorch 2.11', and 'Keras 3.15 (backend not recorded)' where the
row records no backend (never assumed to be TensorFlow).

DeepBench's queue (`QUEUE_CALLS`, `QUEUE_S`, `QUEUE_FEWEST`) lives here too, with its words (`queue_words`): claim 4
states it in its rule and verdicts, which the pages read without torch, and `timing`'s clock (`timing.Queued`,
`timing.queue_length`) queues by it.

Torch-free and pandas-free: `timing` imports it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

#: DeepBench's queue: 100 forward calls between two syncs (`rnn_bench.cu`, `numRepeats = 100`)
QUEUE_CALLS = 100
#: where 100 calls of a step take longer than this, a sample queues as many as fit in it, never fewer than
#: `QUEUE_FEWEST`, so that at least one call is always queued behind another. Queuing hides the host's cost of a call
#: (h) behind the device's work on the one before: N calls of device time d >= h take about d + h / N each, so 10
#: calls of a 1 ms step leave 1% of a 100 us launch cost, and a long step's own launches keep the device busy
#: anyway. 10 ms keeps a sample shorter than a round's burst (`timing.Rounds.burst_s`), so every round still takes
#: several samples of each step
QUEUE_S = 0.01
QUEUE_FEWEST = 2


def queue_words() -> str:
    """How many calls a queued sample takes, in words: 'N = 100, fewer where 100 calls take over 10 ms, at least 2'."""
    return (f"N = {QUEUE_CALLS}, fewer where {QUEUE_CALLS} calls take over {QUEUE_S * 1e3:g} ms, at least "
            f"{QUEUE_FEWEST}")


#: a framework's name in words, and the library whose release its rows record
NAMES = {"keras": ("Keras", "keras"), "torch": ("PyTorch", "torch")}
#: what `framework_words` says of a Keras row that records no backend
NOT_RECORDED = "backend not recorded"


def release(versions: object, library: str) -> str:
    """'3.15' for `library` in one row's recorded versions (a JSON object, or a dict); '' where not recorded."""
    if isinstance(versions, str):
        try:
            versions = json.loads(versions) if versions else {}
        except ValueError:
            versions = {}
    found = str(versions.get(library, "")) if isinstance(versions, dict) else ""
    match = re.match(r"(\d+)\.(\d+)", found)
    return f"{match[1]}.{match[2]}" if match else ""


def _one_row(versions: object) -> bool:
    return versions is None or isinstance(versions, (str, dict, float))  # a float: a missing value (NaN)


def releases(versions: object, library: str) -> str:
    """Every release of `library` in one row's versions or in many rows' ('3.15', '3.15/3.16'); '' where none."""
    found = {release(versions, library)} if _one_row(versions) else {release(v, library) for v in versions}
    return "/".join(sorted(found - {""}))


def field_text(value: object) -> str:
    """A text field of a row as a string: '' where it is missing (None or NaN)."""
    return value if isinstance(value, str) else ""


def framework_of(kernel: str) -> str:
    """The framework of a kernel name ('keras.relu' -> 'keras'), or the framework itself ('keras' -> 'keras')."""
    return kernel.split(".", 1)[0]


def framework_words(framework: str, backend: object = "", versions: object = None) -> str:
    """What ran a row, in words, from its `backend` and `versions` columns: 'Keras 3.15 on its torch backend',
    'PyTorch 2.11'; 'Keras 3.15 (backend not recorded)' for a Keras row whose backend is empty or missing.

    `framework` is 'keras' or 'torch' (or a kernel name of one: 'keras.relu'); `versions` is one row's versions (JSON
    text or a dict) or many rows' (a sequence or a Series: every release they hold is named, '3.15/3.16'); a release
    not recorded is left out ('Keras on its jax backend'). Any other framework is returned as it is."""
    framework = framework_of(framework)
    if framework not in NAMES:
        return framework
    name, library = NAMES[framework]
    name = " ".join([name, releases(versions, library)]).strip()
    if framework != "keras":
        return name
    backend = field_text(backend)
    return f"{name} on its {backend} backend" if backend else f"{name} ({NOT_RECORDED})"


def row_words(row) -> str:
    """`framework_words` for one loaded row (a Series or a namedtuple of `results.load`): its framework from
    `framework`, else from its kernel's name."""
    framework = field_text(getattr(row, "framework", "")) or field_text(getattr(row, "kernel", ""))
    return framework_words(framework, getattr(row, "backend", ""), getattr(row, "versions", None))


def rows_words(rows, framework: str = "", backend: str = "") -> str:
    """`framework_words` for rows of one framework and Keras backend (a DataFrame), naming every release they hold;
    with no rows, for `framework` and `backend` alone."""
    if rows is None or len(rows) == 0:
        return framework_words(framework, backend)
    first = rows.iloc[0]
    versions: Iterable = rows["versions"] if "versions" in rows.columns else ()
    return framework_words(field_text(first.get("framework")) or field_text(first.get("kernel")), first.get("backend"),
                           versions)
