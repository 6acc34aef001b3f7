from __future__ import annotations

import re
import subprocess
from dataclasses import replace

import pytest
import torch

from lstmstudy import hardware
from lstmstudy.errors import DeviceUnavailable

NO_GPU = not torch.cuda.is_available()


def test_cpu_and_auto_resolve():
    assert hardware.resolve_device("cpu") == torch.device("cpu")
    assert hardware.resolve_device(" CPU ") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert hardware.resolve_device("auto").type == expected


@pytest.mark.skipif(not NO_GPU, reason="a GPU is present, so cuda resolves")
@pytest.mark.parametrize("request_", ["cuda", "cuda:0", "CUDA:1"])
def test_cuda_without_gpu_is_a_clear_error(request_):
    with pytest.raises(DeviceUnavailable, match=r"was asked for but .*--device cpu"):
        hardware.resolve_device(request_)


@pytest.mark.parametrize("bad", ["tpu", "cuda:x", "gpu", "", "cuda:-1"])
def test_unknown_device_names_the_choices(bad):
    with pytest.raises(DeviceUnavailable, match="unknown device"):
        hardware.resolve_device(bad)


def test_non_string_device_is_rejected():
    with pytest.raises(DeviceUnavailable, match="must be a string"):
        hardware.resolve_device(0)


@pytest.mark.gpu
def test_cuda_index_beyond_count():
    with pytest.raises(DeviceUnavailable, match="GPU"):
        hardware.resolve_device(f"cuda:{torch.cuda.device_count()}")


def test_fingerprint_of_this_cpu():
    fp = hardware.fingerprint("cpu")
    assert fp.device_kind == "cpu"
    assert fp.cpu_model and fp.physical_cores >= 1 and fp.ram_gb > 0
    assert fp.threads == torch.get_num_threads()
    assert fp.versions["torch"] == torch.__version__
    assert fp.gpu_name == "" and fp.cuda == ""
    assert re.fullmatch(r"cpu-[a-z0-9-]+-\d+t(-[a-z0-9-]+)?", fp.hardware_id)
    assert fp.as_dict()["hardware_id"] == fp.hardware_id
    assert hardware.fingerprint("cpu").hardware_id == fp.hardware_id  # stable


def test_hardware_id_names():
    base = replace(hardware.fingerprint("cpu"), environment={})  # as measured without an ISA cap
    xeon = replace(base, cpu_model="Intel(R) Xeon(R) Platinum 8480C CPU @ 2.00GHz", threads=2)
    assert hardware.hardware_id(xeon) == "cpu-xeon-platinum-8480c-2t"
    epyc = replace(base, cpu_model="AMD EPYC 7763 64-Core Processor", threads=16)
    assert hardware.hardware_id(epyc) == "cpu-epyc-7763-64-16t"
    h100 = replace(base, device_kind="cuda", gpu_name="NVIDIA H100 80GB HBM3", host="1a2b3c")
    assert hardware.hardware_id(h100) == "cuda-h100-80gb-hbm3-1a2b3c"  # one GPU model, two hosts: two sets
    generic = replace(base, cpu_model="Intel(R) Xeon(R) Processor", threads=2)
    assert re.fullmatch(r"cpu-xeon-f\d+m\d+-2t", hardware.hardware_id(generic))
    capped = replace(xeon, environment={"ONEDNN_MAX_CPU_ISA": "AVX2"})  # other kernels: a set of its own
    assert hardware.hardware_id(capped) == "cpu-xeon-platinum-8480c-2t-avx2"


@pytest.mark.gpu
def test_fingerprint_of_gpu():
    fp = hardware.fingerprint("cuda")
    assert fp.gpu_name and fp.cuda and fp.hardware_id.startswith("cuda-")


def test_the_host_tag_is_stable_and_can_be_named(monkeypatch):
    monkeypatch.delenv("LSTMSTUDY_HOST", raising=False)
    tag = hardware.host_tag()
    assert re.fullmatch(r"[0-9a-f]{6}", tag) and hardware.host_tag() == tag
    monkeypatch.setenv("LSTMSTUDY_HOST", "lent-h100")  # a rented VM whose hostname changes at every boot
    assert hardware.host_tag() != tag and re.fullmatch(r"[0-9a-f]{6}", hardware.host_tag())


def test_the_fingerprint_records_the_commit_and_whether_the_tree_was_dirty(monkeypatch):
    commit, dirty = hardware.git_state()
    assert re.fullmatch(r"[0-9a-f]{12}", commit) and isinstance(dirty, bool)
    fp = hardware.fingerprint("cpu")
    assert (fp.git_commit, fp.git_dirty) == (commit, dirty) and fp.keras_backend


def test_pages_and_results_written_while_measuring_leave_the_tree_clean(tmp_path):
    """papermill rewrites each page as its notebook measures, and the sweep appends results: `make book` from
    a clean checkout must not record a dirty tree. A change to anything else does."""
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    files = {"lstmstudy/timing.py": "x = 1\n", "book/claims/01.ipynb": "{}\n", "results/a/cpu.csv": "a\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert hardware.git_state(tmp_path)[1] is False
    (tmp_path / "book/claims/01.ipynb").write_text('{"cells": []}\n')
    (tmp_path / "results/a/cpu.csv").write_text("a\nb\n")
    assert hardware.git_state(tmp_path)[1] is False
    (tmp_path / "lstmstudy/timing.py").write_text("x = 2\n")
    assert hardware.git_state(tmp_path)[1] is True


@pytest.mark.parametrize(("value", "expected"), [("ff8185cc747b", ("ff8185cc747b", False)),
                                                 ("ff8185cc747b+dirty", ("ff8185cc747b", True)),
                                                 ("", ("", None))])
def test_a_copy_without_git_reads_the_commit_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setattr(hardware, "_git", lambda *args, **kwargs: None)  # no .git: a GPU node's copy of the tree
    monkeypatch.setenv("LSTMSTUDY_GIT_COMMIT", value)
    assert hardware.git_state() == expected



def test_an_uncapped_cpu_keeps_the_name_of_its_stored_sets():
    """The stored sets resume only while their machines keep their ids: the CPU identity adds nothing to an x86 name
    that names a model, and a generic one keeps its family and model numbers."""
    base = replace(hardware.fingerprint("cpu"), environment={}, threads=2)
    epyc = {"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17", "cache size": "512 KB", "flags_sha": "ab"}
    assert hardware.hardware_id(replace(base, cpu_model="AMD EPYC", cpu_identity=epyc)) == "cpu-epyc-f25m17-2t"
    xeon = {"vendor_id": "GenuineIntel", "cpu family": "6", "model": "207", "stepping": "2"}
    generic = replace(base, cpu_model="Intel(R) Xeon(R) Processor", cpu_identity=xeon)
    assert hardware.hardware_id(generic) == "cpu-xeon-f6m207-2t"
    assert hardware.hardware_id(replace(generic, cpu_identity={**xeon, "flags_sha": "cd"})) == "cpu-xeon-f6m207-2t"


def test_a_cap_on_either_kernel_library_is_a_set_of_its_own():
    xeon = replace(hardware.fingerprint("cpu"), cpu_model="Intel(R) Xeon(R) Platinum 8480C CPU @ 2.00GHz", threads=2)
    ids = {hardware.hardware_id(replace(xeon, environment=env)) for env in (
        {}, {"ONEDNN_MAX_CPU_ISA": "AVX2"}, {"DNNL_MAX_CPU_ISA": "AVX2"}, {"ATEN_CPU_CAPABILITY": "avx2"},
        {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"})}
    name = "cpu-xeon-platinum-8480c-2t"
    assert ids == {name, f"{name}-avx2", f"{name}-aten-avx2", f"{name}-avx2-aten-avx2"}


def test_the_fingerprint_records_the_caps_the_thread_pools_and_the_cpu_identity(monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    fp = hardware.fingerprint("cpu")
    assert fp.environment["ONEDNN_MAX_CPU_ISA"] == "AVX2" and fp.environment["OPENBLAS_NUM_THREADS"] == "1"
    assert fp.hardware_id.endswith("-avx2")
    assert fp.cpu_capability == torch.backends.cpu.get_cpu_capability()
    assert fp.thread_pools and all(isinstance(n, int) and n >= 1 for n in fp.thread_pools.values())
    assert fp.cpu_identity == hardware.cpu_identity(hardware.cpu_info()) and fp.cpu_identity
    assert fp.as_dict()["thread_pools"] == fp.thread_pools


def test_the_thread_pools_are_torch_s_own_and_threadpoolctl_s_where_it_is_installed(monkeypatch):
    import sys
    import types

    pools = [{"internal_api": "openblas", "prefix": "libscipy_openblas", "num_threads": 2, "user_api": "blas"},
             {"internal_api": "openmp", "prefix": "libgomp", "num_threads": 2, "user_api": "openmp"}]
    monkeypatch.setitem(sys.modules, "threadpoolctl", types.SimpleNamespace(threadpool_info=lambda: pools))
    found = hardware.thread_pools()
    assert found["openblas (libscipy_openblas)"] == 2 and found["openmp (libgomp)"] == 2
    assert found["openmp (torch)"] == torch.get_num_threads()  # linked into torch: threadpoolctl cannot see it
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # not installed: torch's own pools
    assert set(hardware.thread_pools()) == {name for name in found if name.endswith("(torch)")}


def test_the_cpu_identity_separates_cpus_of_one_name():
    sapphire = {"model name": "Intel(R) Xeon(R) Processor", "cpu family": "6", "model": "143", "flags": "fpu avx2"}
    fewer_flags = {**sapphire, "flags": "fpu"}  # a VM that hides some of its host's flags
    assert hardware.cpu_identity(sapphire) != hardware.cpu_identity(fewer_flags)
    assert hardware.cpu_identity(sapphire)["flags_sha"] == hardware.cpu_identity({**sapphire, "flags": "avx2 fpu"})[
        "flags_sha"]  # the order of the flags does not matter


def test_arm_cpus_and_macs_get_names_of_their_own(monkeypatch):
    """An Arm Linux /proc/cpuinfo names no model, and every Apple-silicon Mac's processor is 'arm': without the
    part number or the chip's name, every one of them would share one set."""
    base = replace(hardware.fingerprint("cpu"), environment={}, threads=4)
    graviton = {"CPU implementer": "0x41", "CPU part": "0xd0c", "Features": "fp asimd"}
    neoverse = replace(base, cpu_model="aarch64", cpu_identity=hardware.cpu_identity(graviton))
    assert hardware.hardware_id(neoverse) == "cpu-aarch64-i41pd0c-4t"
    v2 = replace(neoverse, cpu_identity=hardware.cpu_identity({**graviton, "CPU part": "0xd4f"}))
    assert hardware.hardware_id(v2) == "cpu-aarch64-i41pd4f-4t"

    sysctl = "machdep.cpu.brand_string: Apple M2 Pro\nhw.cpufamily: -634136515\nhw.perflevel0.physicalcpu: 8\n"
    monkeypatch.setattr(hardware.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, sysctl, ""))
    monkeypatch.setattr(hardware.Path, "read_text", lambda *a, **k: (_ for _ in ()).throw(OSError("no cpuinfo")))
    mac = hardware.cpu_info()
    assert hardware.cpu_model(mac) == "Apple M2 Pro"
    assert hardware.cpu_identity(mac) == {"cpufamily": "-634136515", "performance cores": "8"}
    assert hardware.hardware_id(replace(base, cpu_model=hardware.cpu_model(mac), threads=8)) == "cpu-apple-m2-pro-8t"
