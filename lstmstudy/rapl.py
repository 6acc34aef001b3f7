"""The host's CPU energy from RAPL (Running Average Power Limit), read through Linux's powercap sysfs tree, beside
the GPU's NVML counter in claim 6's energy windows (`lstmstudy.protocols.energy_windows`).

Each CPU package is a top-level domain, `/sys/class/powercap/intel-rapl:N` (AMD's RAPL uses the same names), with
a `name` ("package-0"), a cumulative `energy_uj` counter in microjoules and `max_energy_range_uj`, where the counter
wraps to 0. The host's energy is the sum over its packages (sub-domains such as `intel-rapl:0:0`, the cores, are
inside their package and not added again; a `psys` domain, the whole platform on some laptops, overlaps them and is
left out). It is the CPU packages only: not the host's memory, disks, fans or power supply.

Where the tree is absent (most virtual machines), holds no package domain, or cannot be read (since Linux 5.10
`energy_uj` is readable by root only), `open_host_energy` returns no reader and one sentence saying why; the
caller stores that sentence instead of a number. Torch-free and stdlib-only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")
#: a top-level RAPL domain: intel-rapl:0, intel-rapl:1 (a sub-domain is intel-rapl:0:0)
_TOP_LEVEL = re.compile(r"^intel-rapl:\d+$")


@dataclass(frozen=True)
class Domain:
    """One RAPL package domain: its name, its `energy_uj` file, and where that counter wraps."""

    name: str
    energy_file: Path
    max_range_uj: int


@dataclass(frozen=True)
class HostReading:
    """Every package's counter (microjoules) at one instant of the host's clock."""

    t: float
    uj: tuple[int, ...]


class HostEnergy:
    """Reads the host's package counters; `joules(a, b)` is the energy between two readings, wraps included."""

    def __init__(self, domains: list[Domain], clock: Callable[[], float] = time.perf_counter) -> None:
        self.domains = domains
        self._clock = clock

    @property
    def source(self) -> str:
        """What the energy covers, in words: 'RAPL package-0 + package-1'."""
        return "RAPL " + " + ".join(d.name for d in self.domains)

    def read(self) -> HostReading:
        """The counters now (an `OSError` if a file stopped being readable)."""
        uj = tuple(int(d.energy_file.read_text().strip()) for d in self.domains)
        return HostReading(self._clock(), uj)

    def joules(self, start: HostReading, end: HostReading) -> float:
        """Energy of every package between two readings; a counter that wrapped once in between is unwrapped
        (RAPL's counters wrap after tens of minutes at most, far longer than a window)."""
        total = 0
        for domain, a, b in zip(self.domains, start.uj, end.uj):
            total += b - a if b >= a else b + domain.max_range_uj - a
        return total / 1e6


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def open_host_energy(root: Path = POWERCAP, clock: Callable[[], float] = time.perf_counter
                     ) -> tuple[HostEnergy | None, str]:
    """A reader of the host's RAPL package counters under `root`, and '' ; or None and one sentence saying why
    host energy cannot be measured here."""
    if not root.is_dir():
        return None, (f"host energy is not measured: this machine has no {root} (no RAPL powercap driver, as in most "
                      "virtual machines)")
    domains, unreadable = [], []
    for path in sorted(p for p in root.iterdir() if _TOP_LEVEL.match(p.name)):
        try:
            name = (path / "name").read_text().strip()
        except OSError as err:
            unreadable.append(f"{path.name}/name ({err.strerror or err})")
            continue
        if not name.startswith("package"):  # psys overlaps the packages; other names are not a CPU package
            continue
        try:
            _read_int(path / "energy_uj")
            domains.append(Domain(name, path / "energy_uj", _read_int(path / "max_energy_range_uj")))
        except PermissionError:
            unreadable.append(f"{path.name}/energy_uj (permission denied: since Linux 5.10 only root may read it)")
        except (OSError, ValueError) as err:
            unreadable.append(f"{path.name} ({getattr(err, 'strerror', None) or err})")
    if unreadable:
        return None, f"host energy is not measured: RAPL is not readable here: {'; '.join(unreadable)}"
    if not domains:
        return None, f"host energy is not measured: {root} holds no RAPL package domain (intel-rapl:N)"
    return HostEnergy(domains, clock), ""
