"""The host's RAPL reader (`lstmstudy.rapl`) against fake powercap trees: the packages summed, sub-domains and psys
left out, a wrapped counter unwrapped, and no reader, with one reason, where the tree is absent or unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest

from lstmstudy import rapl


def domain(root: Path, name: str, label: str, uj: int, max_uj: int = 262_143_328_850) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "name").write_text(label + "\n")
    (path / "energy_uj").write_text(f"{uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path


def tree(root: Path) -> Path:
    """Two packages, a package's core sub-domain and a psys domain, as a two-socket server with psys shows them."""
    domain(root, "intel-rapl:0", "package-0", 1_000_000)
    domain(root, "intel-rapl:1", "package-1", 5_000_000)
    domain(root, "intel-rapl:0:0", "core", 400_000)
    domain(root, "intel-rapl:2", "psys", 9_000_000)
    return root


def test_the_packages_are_read_and_summed_and_nothing_else(tmp_path):
    root = tree(tmp_path / "powercap")
    clock = iter([10.0, 12.0])
    host, why = rapl.open_host_energy(root, clock=lambda: next(clock))
    assert why == "" and host is not None
    assert host.source == "RAPL package-0 + package-1"
    start = host.read()
    (root / "intel-rapl:0" / "energy_uj").write_text("31000000\n")  # +30 J
    (root / "intel-rapl:1" / "energy_uj").write_text("15000000\n")  # +10 J
    (root / "intel-rapl:0:0" / "energy_uj").write_text("99000000\n")  # inside package-0: never added again
    (root / "intel-rapl:2" / "energy_uj").write_text("99000000\n")  # psys overlaps the packages
    end = host.read()
    assert start.uj == (1_000_000, 5_000_000) and end.t - start.t == pytest.approx(2.0)
    assert host.joules(start, end) == pytest.approx(40.0)


def test_a_counter_that_wrapped_is_unwrapped(tmp_path):
    root = tmp_path / "powercap"
    domain(root, "intel-rapl:0", "package-0", 9_000_000, max_uj=10_000_000)
    host, _ = rapl.open_host_energy(root)
    start = host.read()
    (root / "intel-rapl:0" / "energy_uj").write_text("2000000\n")  # 1 J to the wrap, then 2 J
    assert host.joules(start, host.read()) == pytest.approx(3.0)


def test_no_powercap_tree_gives_no_reader_and_one_reason(tmp_path):
    host, why = rapl.open_host_energy(tmp_path / "absent")
    assert host is None and why.startswith("host energy is not measured: this machine has no ")
    assert "RAPL" in why and why.count(":") == 1


def test_a_tree_without_a_package_gives_no_reader(tmp_path):
    root = tmp_path / "powercap"
    domain(root, "intel-rapl:0", "psys", 1)
    (root / "dtpm").mkdir()
    host, why = rapl.open_host_energy(root)
    assert host is None and "holds no RAPL package domain" in why


def test_an_unreadable_counter_gives_no_reader_and_says_why(tmp_path, monkeypatch):
    root = tree(tmp_path / "powercap")
    blocked = root / "intel-rapl:1" / "energy_uj"
    read_text = Path.read_text

    def refuse(self: Path, *args, **kwargs) -> str:  # as a user who is not root meets it since Linux 5.10
        if self == blocked:
            raise PermissionError(13, "Permission denied", str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", refuse)
    host, why = rapl.open_host_energy(root)
    assert host is None and "intel-rapl:1/energy_uj (permission denied: since Linux 5.10 only root may read it)" in why
    (root / "intel-rapl:0" / "max_energy_range_uj").write_text("not a number\n")
    host, why = rapl.open_host_energy(root)
    assert host is None and "intel-rapl:0" in why  # a package whose range cannot be read is no package to sum


def test_this_machine_either_reads_rapl_or_says_why_not():
    host, why = rapl.open_host_energy()
    assert (host is None) == bool(why)
    if host is not None:
        start = host.read()
        assert host.joules(start, host.read()) >= 0
