"""Which device a run uses, and the fingerprint that names its result set.

A result set is only comparable with another when we know what produced it, so every stored row
carries a short `hardware_id` and the full fingerprint is stored once beside the rows.

torch is imported inside the functions that ask it about the device: the rendering house (claims, notebooks,
the ledger) imports this module without the measuring stack, and only measuring resolves a device.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from lstmstudy.backends import ISA_CAPS, isa_cap, keras_backend
from lstmstudy.errors import DeviceUnavailable
from lstmstudy.paths import PACKAGE_PARENT, is_checkout
from lstmstudy.results import fingerprint_id

if TYPE_CHECKING:
    import torch

T = TypeVar("T")
DEVICE_REQUESTS = "'auto', 'cpu', 'cuda' or 'cuda:N'"


def resolve_device(request: str = "auto") -> torch.device:
    """Turn a device request into a real device, or say clearly why it cannot be had.

    `auto` picks the first GPU when there is one, else the CPU. `cuda` on a machine without a
    usable GPU raises `DeviceUnavailable` instead of silently measuring the CPU.
    """
    import torch

    if not isinstance(request, str):
        raise DeviceUnavailable(f"device must be a string ({DEVICE_REQUESTS}), got {request!r}")
    text = request.strip().lower()
    if text == "auto":
        return torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
    if text == "cpu":
        return torch.device("cpu")
    match = re.fullmatch(r"cuda(?::(\d+))?", text)
    if not match:
        raise DeviceUnavailable(f"unknown device {request!r}: expected {DEVICE_REQUESTS}")
    if not torch.cuda.is_available():
        reason = "this PyTorch build has no CUDA" if torch.version.cuda is None else "no GPU or driver is visible"
        raise DeviceUnavailable(
            f"device {request!r} was asked for but {reason}; use --device cpu, or run on a machine with a GPU"
        )
    index = int(match.group(1) or 0)
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceUnavailable(f"device {request!r} was asked for but only {count} GPU(s) are visible")
    return torch.device("cuda", index)


def _version(package: str) -> str:
    """Installed version of a distribution without importing it (TensorFlow takes seconds to import)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def cpu_info() -> dict[str, str]:
    """The first CPU's entries in /proc/cpuinfo; where there is none (macOS), the brand and numbers sysctl gives."""
    info: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return _sysctl_cpu()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key and key not in info:
            info[key] = value.strip()
    return info


def _sysctl_cpu() -> dict[str, str]:
    """macOS's answer for /proc/cpuinfo: every Apple-silicon Mac's `platform.processor()` is 'arm', which would
    name one result set for an M1 and an M4 Max alike; sysctl names the chip."""
    keys = {"machdep.cpu.brand_string": "model name", "machdep.cpu.family": "cpu family",
            "machdep.cpu.model": "model", "hw.cpufamily": "cpufamily", "hw.l2cachesize": "cache size",
            "hw.perflevel0.physicalcpu": "performance cores"}
    try:
        out = subprocess.run(["sysctl", *keys], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    info = {keys[key]: value.strip() for key, _, value in (line.partition(":") for line in out.splitlines())
            if key in keys and value.strip()}
    info.setdefault("model name", platform.processor() or platform.machine())
    return info


def _lscpu_model() -> str:
    """lscpu's model name: an Arm CPU's /proc/cpuinfo has none (lscpu names its core from the part number)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return next((line.partition(":")[2].strip() for line in out.splitlines() if line.startswith("Model name:")), "")


def cpu_model(cpu: dict[str, str]) -> str:
    """The CPU's name: /proc/cpuinfo's or sysctl's, else lscpu's, else the architecture."""
    return cpu.get("model name") or _lscpu_model() or platform.processor() or platform.machine()


#: the entries of /proc/cpuinfo (or sysctl) that tell two CPUs of one name apart: the x86 family, model and
#: stepping, the Arm implementer and part, the cache; with a hash of every flag (a VM can hide some of the host's)
IDENTITY_KEYS = ("vendor_id", "cpu family", "model", "stepping", "cache size", "CPU implementer", "CPU variant",
                 "CPU part", "CPU revision", "cpufamily", "performance cores")


def cpu_identity(cpu: dict[str, str]) -> dict[str, str]:
    """What separates this CPU from others of its name (`IDENTITY_KEYS`, and `flags_sha`: a hash of all its
    flags or Arm features), stored in the fingerprint; two sets of one `hardware_id` that differ here are two
    machines."""
    identity = {key: cpu[key] for key in IDENTITY_KEYS if cpu.get(key)}
    if flags := cpu.get("flags") or cpu.get("Features"):
        identity["flags_sha"] = hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:12]
    return identity


def _physical_cores() -> int:
    try:
        out = subprocess.run(["lscpu", "-p=Core,Socket"], capture_output=True, text=True, check=True).stdout
        cores = {line for line in out.splitlines() if line and not line.startswith("#")}
        return len(cores) or os.cpu_count() or 1
    except (OSError, subprocess.CalledProcessError):
        return os.cpu_count() or 1


def _ram_gb() -> float:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return round(pages / 2**30, 1)
    except (ValueError, OSError):
        return 0.0


#: what the study writes into its own checkout while it measures: the rendered pages (papermill rewrites a page
#: as its notebook runs) and the result sets. Changes there do not make the measuring code differ from its commit.
WRITTEN_WHILE_MEASURING = ("book", "results")


def _git(*args: str, root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state(root: Path | None = None) -> tuple[str, bool | None]:
    """The commit of the checkout the package runs from (or `root`) and whether it has uncommitted changes to tracked
    files, outside what the study writes while it measures (`WRITTEN_WHILE_MEASURING`: else every `make book` would
    record a dirty tree).

    A copy without `.git` (a GPU node, an unpacked archive) reads `$LSTMSTUDY_GIT_COMMIT` instead:
    `<commit>` or `<commit>+dirty`; so does a wheel, whose site-packages may lie in a reader's own repository.
    Unknown: ("", None).
    """
    root = root or (PACKAGE_PARENT if is_checkout(PACKAGE_PARENT) else None)
    commit = _git("rev-parse", "--short=12", "HEAD", root=root) if root else None
    if commit is not None:
        excluded = [f":(exclude){path}" for path in WRITTEN_WHILE_MEASURING]
        return commit, bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", *excluded, root=root))
    if env := os.environ.get("LSTMSTUDY_GIT_COMMIT", "").strip():
        commit, _, flag = env.partition("+")
        return commit, flag == "dirty"
    return "", None


def host_tag() -> str:
    """A short, stable tag for this machine, part of a GPU set's `hardware_id` and what pairs a GPU set with its host's
    CPU set: where NVML sees GPUs, a hash of their UUIDs (the GPUs' own identity: two nodes never share a set, whatever
    their hostnames, and a renamed node keeps its own); else `$LSTMSTUDY_HOST`, else the hostname."""
    uuids = gpu_uuids()
    name = "gpus:" + ",".join(sorted(uuids)) if uuids else os.environ.get("LSTMSTUDY_HOST") or platform.node()
    return hashlib.sha256((name or "unknown").encode()).hexdigest()[:6]


def gpu_uuids() -> list[str]:
    """The UUIDs of this machine's GPUs (`nvml.gpu_uuids`); none where NVML is missing or sees no GPU."""
    return _nvml(lambda nvml: nvml.gpu_uuids(), [])


def _nvml(read: Callable[[ModuleType], T], missing: T) -> T:
    """`read(lstmstudy.nvml)`, or `missing` where NVML is not installed or cannot answer (no driver, no GPU)."""
    try:
        from lstmstudy import nvml
    except ImportError:  # nvidia-ml-py not installed
        return missing
    try:
        return read(nvml)
    except nvml.NvmlError:
        return missing


def gpu_state(device: torch.device) -> dict[str, object]:
    """The GPU's clocks, temperature, power and slowdowns now (`nvml.gpu_state`), which each group of rows stores at
    its start and end; empty on a CPU or where NVML cannot say."""
    if device.type != "cuda":
        return {}
    return _nvml(lambda nvml: nvml.gpu_state(nvml.device_index(device)), {})


def runtime() -> str:
    """What the machine runs in, where it says: `systemd-detect-virt`'s answer (kvm, docker, ...), else a guess from
    the kernel: gVisor reports a kernel 4.4.0 of its own, a Firecracker guest's release names it (`-fc-`). A node
    lent in either runtime has other launch costs, so the fingerprint keeps it; '' where nothing says."""
    release, version = platform.release(), _read("/proc/version")
    if "-fc-" in release:
        return "firecracker"
    if release == "4.4.0" and "#1 SMP Sun Jan 10 15:06:54 PST 2016" in version:
        return "gvisor"
    try:
        out = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return "" if out in ("", "none") else out


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _gpu_facts(device: torch.device) -> dict:
    """NVML's view of the GPU (driver, clocks, power limit, persistence); empty where NVML is missing."""
    return _nvml(lambda nvml: nvml.device_facts(nvml.device_index(device)), {})


@dataclass(frozen=True)
class Fingerprint:
    """Everything that changes an LSTM timing: processor, threads, GPU stack and library versions."""

    device_kind: str  # "cpu" or "cuda"
    cpu_model: str
    cpu_flags: list[str]  # the ISA extensions that matter here (avx512, amx, bf16, fp16)
    physical_cores: int
    threads: int  # intra-op threads torch uses for this run
    ram_gb: float
    gpu_name: str = ""
    gpu_memory_gb: float = 0.0
    gpu_count: int = 0
    compute_capability: str = ""
    driver: str = ""
    cuda: str = ""
    cudnn: str = ""
    sm_clock_mhz: int | None = None  # when the fingerprint was taken (idle clocks are low)
    sm_clock_max_mhz: int | None = None
    power_limit_w: float | None = None
    persistence_mode: bool | None = None
    energy_counter: bool | None = None
    host: str = ""  # `host_tag()`: part of a GPU set's hardware_id; pairs a GPU set with its host's CPU set
    onednn: bool = False
    keras_backend: str = ""
    python: str = ""
    platform: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    git_commit: str = ""
    git_dirty: bool | None = None
    #: the environment variables that change what runs (`ENVIRONMENT`), as set for this run
    environment: dict[str, str] = field(default_factory=dict)
    #: what tells this CPU from others of its name (`cpu_identity`)
    cpu_identity: dict[str, str] = field(default_factory=dict)
    #: the vector instructions torch's own CPU kernels dispatch to ("AVX512", "AVX2"; `ATEN_CPU_CAPABILITY` caps it)
    cpu_capability: str = ""
    #: threads of each native thread pool in the process (`thread_pools`): OpenMP, MKL, OpenBLAS, ...
    thread_pools: dict[str, int] = field(default_factory=dict)
    #: this run's speed (`calibrate`), where a sweep measured it: one cloud VM id can run 2-3x slower on another day
    calibration_s: float | None = None
    #: this GPU run's speed at launching work (`calibrate_host`), which most GPU rows' times are made of
    host_calibration_s: float | None = None
    #: what the machine runs in (`runtime`): a VM's, a sandbox's or a container's launch costs differ
    runtime: str = ""
    #: ends the `hardware_id` of a run that measures into a set of its own beside an older one of the same id
    #: (`sweep.own_set`); '' for every other run
    set_suffix: str = ""

    @property
    def hardware_id(self) -> str:
        return hardware_id(self)

    @property
    def id(self) -> str:
        """A short hash of the whole fingerprint: each stored row names the fingerprint that produced it."""
        return fingerprint_id(asdict(self))

    def as_dict(self) -> dict:
        return {"hardware_id": self.hardware_id, "id": self.id, **asdict(self)}


#: the environment variable that caps the instruction set of torch's own CPU kernels, as `ISA_CAPS` caps oneDNN's
ATEN_CAP = "ATEN_CPU_CAPABILITY"
#: environment variables that change threads, kernels or devices
ENVIRONMENT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
               "TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "KERAS_BACKEND",
               "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "LSTMSTUDY_HOST", *ISA_CAPS, ATEN_CAP,
               # what overrides the IEEE fp32 the sweep holds (TF32 forced on in cuBLAS or every NVIDIA library),
               # and what serialises or changes launches
               "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "NVIDIA_TF32_OVERRIDE", "TORCH_CUDNN_V8_API_DISABLED",
               "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "PYTORCH_CUDA_ALLOC_CONF", "XLA_FLAGS")


def thread_pools() -> dict[str, int]:
    """Threads of each native pool in this process: torch's own OpenMP and MKL (linked into torch, where threadpoolctl
    cannot see them) and, where threadpoolctl is installed, every BLAS and OpenMP runtime loaded (numpy's OpenBLAS,
    TensorFlow's). Two runs with other pools run at other speeds though torch's thread count is the same."""
    import torch

    found = re.findall(r"(\w+)_get_max_threads\(\) : (\d+)", torch.__config__.parallel_info())
    pools = {f"{'openmp' if name == 'omp' else name} (torch)": int(threads) for name, threads in found}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # the [torch] extra brings it; a GPU node's own torch may come without it
        return pools
    return pools | {f"{pool['internal_api']} ({pool['prefix']})": int(pool["num_threads"])
                    for pool in threadpool_info()}


def conditions() -> dict[str, object]:
    """What the machine was doing just before a measurement: stored with each row.

    The 1-minute load average (a neighbour's load on a shared machine), the current CPU clock where the
    kernel exposes it, and the thread settings of torch and (when it is loaded) TensorFlow.
    """
    import torch

    threads = {"torch_intra": torch.get_num_threads(), "torch_interop": torch.get_num_interop_threads()}
    if tf := sys.modules.get("tensorflow"):  # None where an import of it failed
        threads.update(tf_intra=tf.config.threading.get_intra_op_parallelism_threads(),  # 0: TF's default
                       tf_inter=tf.config.threading.get_inter_op_parallelism_threads())
    return {"load_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None, "cpu_mhz": _cpu_mhz(),
            "thread_settings": threads}


def _cpu_mhz() -> float | None:
    """The mean current clock of the CPUs, from cpufreq or /proc/cpuinfo; None where neither says."""
    paths = sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq"))
    try:
        if paths:
            return round(sum(int(p.read_text()) for p in paths) / len(paths) / 1000, 1)
        mhz = [float(line.split(":")[1]) for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("cpu MHz")]
        return round(sum(mhz) / len(mhz), 1) if mhz else None
    except (OSError, ValueError):
        return None


#: the calibration's square fp32 GEMM per device kind: about a millisecond on one CPU core or a GPU
CALIBRATION_SIZE = {"cpu": 256, "cuda": 4096}
#: two runs of one set whose calibrations differ by more than this factor ran at different speeds: a ratio of their
#: rows would carry that difference. The fastest of many tries on one thread keeps a loaded 2-core machine well
#: inside it; the same VM id on two days differed by 2.2x.
SPEED_TOLERANCE = 1.75


def calibrate(device: torch.device, tries: int = 30) -> float:
    """Seconds of one fixed fp32 GEMM on `device` (`CALIBRATION_SIZE`), the fastest of `tries` (the sweep holds IEEE
    fp32 around it, as around its rows): on a CPU on one thread (a neighbour takes threads, rarely a whole core), on
    a GPU timed with CUDA events after a sync."""
    import torch

    n = CALIBRATION_SIZE[device.type]
    a = torch.randn(n, n, device=device)
    best = float("inf")
    if device.type == "cuda":
        torch.mm(a, a)
        for _ in range(tries):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.mm(a, a)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        return best
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.mm(a, a)
        for _ in range(tries):
            start = time.perf_counter()
            torch.mm(a, a)
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return best


#: the host calibration's fixed launch-bound step: this many one-element additions, each its own kernel launch on a
#: GPU (a dispatch through torch on a CPU), then one sync
HOST_CALIBRATION_OPS = 200


def calibrate_host(device: torch.device, tries: int = 30) -> float:
    """Seconds per launch of a fixed launch-bound step on `device` (`HOST_CALIBRATION_OPS` tiny additions, one sync),
    the fastest of `tries` on the host clock: the host's speed at dispatching work, which most GPU rows' times hold
    and a GEMM's does not (a node with a slower host CPU or sandbox launches slower at the same GPU speed). The sweep
    takes it on a GPU only: on a CPU the GEMM's speed is the host's, and a dispatch's time varies more than the guard
    allows between processes of a loaded 2-core machine."""
    import torch

    x = torch.zeros(1, device=device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    best = float("inf")
    for _ in range(tries + 1):  # the first warms the launch path up
        sync()
        start = time.perf_counter()
        for _ in range(HOST_CALIBRATION_OPS):
            x.add_(1)
        sync()
        best = min(best, (time.perf_counter() - start) / HOST_CALIBRATION_OPS)
    return best


def speed_ratio(a: float, b: float) -> float:
    """How many times faster the faster of two calibrations is (1.0: the same speed)."""
    return max(a, b) / min(a, b)


INTERESTING_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "avx512_vnni")
LIBRARIES = ("torch", "tensorflow", "keras", "jax", "numpy", "nvidia-ml-py")


def fingerprint(device: torch.device | str = "cpu") -> Fingerprint:
    """Collect the fingerprint of this machine as used for `device` (`auto`/`cpu`/`cuda[:N]`)."""
    import torch

    dev = device if isinstance(device, torch.device) else resolve_device(device)
    cpu = cpu_info()
    flags = sorted(set(cpu.get("flags", "").split()) & set(INTERESTING_FLAGS))
    gpu: dict = {}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        gpu = dict(
            gpu_name=props.name,
            gpu_memory_gb=round(props.total_memory / 2**30, 1),
            gpu_count=torch.cuda.device_count(),
            compute_capability=f"{props.major}.{props.minor}",
            cuda=torch.version.cuda or "",
            cudnn=str(torch.backends.cudnn.version() or ""),
            **_gpu_facts(dev),
        )
    commit, dirty = git_state()
    return Fingerprint(
        device_kind=dev.type,
        cpu_model=cpu_model(cpu),
        cpu_flags=flags,
        physical_cores=_physical_cores(),
        threads=torch.get_num_threads(),
        ram_gb=_ram_gb(),
        onednn=bool(torch.backends.mkldnn.is_available()),
        python=platform.python_version(),
        platform=platform.platform(),
        keras_backend=keras_backend(),
        # torch's own version string names its build (2.11.0+cu130), which its distribution's version does not
        versions={**{name: v for name in LIBRARIES if (v := _version(name))}, "torch": torch.__version__},
        git_commit=commit,
        git_dirty=dirty,
        host=host_tag(),
        runtime=runtime(),
        environment={name: os.environ[name] for name in ENVIRONMENT if name in os.environ},
        cpu_identity=cpu_identity(cpu),
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        thread_pools=thread_pools(),
        **gpu,
    )


#: what `cpu_model` falls back to where nothing names the CPU: names no model, so the signature is added
ARCHITECTURES = ("aarch64", "arm64", "x86-64", "i386", "i686")
_NOISE = re.compile(r"\(r\)|\(tm\)|\bcpu\b|\bprocessor\b|@.*$|\bintel\b|\bamd\b|\bnvidia\b|\bgeforce\b|\bcore\b")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", _NOISE.sub(" ", text.lower())).strip("-")


def _cpu_signature(identity: dict[str, str]) -> str:
    """Numbers that tell apart CPUs whose name is generic ("Xeon Processor", an Arm core's "aarch64"): the x86
    family and model, else the Arm implementer and part, else a hash of the whole identity."""
    if "cpu family" in identity or not identity:
        return f"f{identity.get('cpu family', '0')}m{identity.get('model', '0')}"
    if "CPU part" in identity:
        return _slug(f"i{identity.get('CPU implementer', '')}p{identity['CPU part']}".replace("0x", ""))
    return hashlib.sha256(repr(sorted(identity.items())).encode()).hexdigest()[:6]


def hardware_id(fp: Fingerprint) -> str:
    """A short, stable, filename-safe name for a result set, e.g. `cuda-h100-80gb-hbm3-1a2b3c` (GPU model and
    host tag) or `cpu-xeon-f6m143-2t` (CPU model and threads); a CPU measured with oneDNN capped (`ISA_CAPS`) is
    a set of its own, `cpu-xeon-f6m143-2t-avx2`, and one with torch's kernels capped (`ATEN_CAP`) too,
    `cpu-xeon-f6m143-2t-aten-avx2`: they run other kernels than the same CPU uncapped. A run beside an older set
    of its id ends in its `set_suffix` (`sweep.own_set`)."""
    own = f"-{fp.set_suffix}" if fp.set_suffix else ""
    if fp.device_kind == "cuda":
        return (f"cuda-{_slug(fp.gpu_name)}-{fp.host}" if fp.host else f"cuda-{_slug(fp.gpu_name)}") + own
    name = _slug(fp.cpu_model) or "unknown"
    if not re.search(r"\d", name) or name in ARCHITECTURES:
        name = f"{name}-{_cpu_signature(fp.cpu_identity)}"
    cap = isa_cap(fp.environment).partition("=")[2]
    aten = fp.environment.get(ATEN_CAP, "")
    return (f"cpu-{name}-{fp.threads}t" + (f"-{_slug(cap)}" if cap else "")
            + (f"-aten-{_slug(aten)}" if aten else "") + own)
