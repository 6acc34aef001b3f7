"""The C++ harness behind claim 4's loop baseline (`cudnn.loop`): DeepBench's method on cuDNN 9.

DeepBench (`rnn_bench.cu`) times cuDNN's LSTM forward from C++: descriptors, weights and buffers set up once, then
100 calls of the forward queued between two `cudaDeviceSynchronize`, the time divided by 100. Its calls
(`cudnnRNNForwardInference`, `cudnnGetRNNParamsSize`) are gone in cuDNN 9, so `cudnn_loop/lstm_loop.cpp` makes the
same loop with cuDNN 9's: `cudnnSetRNNDescriptor_v8`, `cudnnRNNDataDescriptor_t`, `cudnnGetRNNWeightSpaceSize`,
`cudnnGetRNNTempSpaceSizes`, and `cudnnRNNForward` with `CUDNN_FWD_MODE_INFERENCE`, fp32 with `CUDNN_FMA_MATH` (no
TF32). No CUDA graph, no `nn.Module`, no framework between the loop and cuDNN.

It is built on the GPU node at the call's start (`scripts/gpu-node.sh`: `python -m lstmstudy.native build`), with
CMake (or nvcc alone where CMake is missing) against the cuDNN 9 headers and library of pip's `nvidia-cudnn-cu13`,
the cuDNN torch itself loads; the built library is kept under `$LSTMSTUDY_NATIVE_BUILD` (default
`~/.cache/lstmstudy/native`), in a folder named after the sources' hash, so an edit rebuilds it and a second call on
the same node finds it built. `Harness` loads it with ctypes: its forward calls run in this process, on the default
stream, so the study's timers (CUDA events, `torch.cuda.synchronize`) and its profiler see them as they see torch's.
`lstm_loop_bench`, built beside it, runs the same loop on its own and prints DeepBench-style samples as JSON
(`python -m lstmstudy.native bench HIDDEN BATCH TIMESTEPS`).

Where the harness cannot be built or loaded (no GPU, no cuDNN headers, no compiler), every step says why in one line
(`HarnessUnavailable`); the loop baseline then runs ATen's cuDNN op from Python instead and its rows say so
(`lstmstudy.kernels.loop_baseline`).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import numpy as np

from lstmstudy.errors import StudyError

SOURCES = Path(__file__).resolve().with_name("cudnn_loop")
SOURCE_FILES = ("lstm_loop.h", "lstm_loop.cpp", "bench_main.cpp", "CMakeLists.txt")
LIBRARY = "liblstm_loop.so"
BENCH = "lstm_loop_bench"
#: where built harnesses are kept (one folder per version of the sources)
BUILD_ENV = "LSTMSTUDY_NATIVE_BUILD"
#: a cuDNN 9 folder (include/cudnn.h, lib/libcudnn.so.9) to build against instead of pip's nvidia-cudnn-cu13
CUDNN_ENV = "LSTMSTUDY_CUDNN_ROOT"
#: the most seconds a build may take (one small C++ file: seconds, CMake's configure included)
BUILD_TIMEOUT_S = 240


class HarnessUnavailable(StudyError):
    """The cuDNN loop harness cannot be built, loaded or started here; the message says why, in one line."""


def _one_line(text: str, limit: int = 300) -> str:
    """The line of a tool's output that says what went wrong (its first error line, else its last line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return ((errors or lines or ["no output"])[0])[:limit]


def cudnn_root() -> Path:
    """The cuDNN 9 folder to build against: `$LSTMSTUDY_CUDNN_ROOT`, else pip's `nvidia-cudnn-cu13` (the package
    torch's wheels depend on), with its headers and library checked."""
    if override := os.environ.get(CUDNN_ENV):
        root = Path(override)
    else:
        try:
            spec = importlib.util.find_spec("nvidia.cudnn")
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec else []
        if spec and spec.origin and not locations:
            locations = [str(Path(spec.origin).parent)]
        if not locations:
            raise HarnessUnavailable("no cuDNN to build the loop harness against: pip's nvidia-cudnn-cu13 is not "
                                     f"installed here (or set {CUDNN_ENV} to a cuDNN 9 folder)")
        root = Path(locations[0])
    if not (root / "include" / "cudnn.h").is_file():
        raise HarnessUnavailable(f"no cuDNN headers in {root}/include (cudnn.h): the loop harness cannot be built")
    if not any(any((root / lib).glob("libcudnn.so*")) for lib in ("lib", "lib64")):
        raise HarnessUnavailable(f"no cuDNN library in {root}/lib (libcudnn.so.9): the loop harness cannot be built")
    return root


def source_hash() -> str:
    """A digest of the harness's sources: a changed source builds a new harness."""
    digest = hashlib.sha256()
    for name in SOURCE_FILES:
        digest.update(name.encode() + b"\0" + (SOURCES / name).read_bytes())
    return digest.hexdigest()[:16]


def build_dir() -> Path:
    """The folder of this version of the harness."""
    base = Path(os.environ.get(BUILD_ENV) or Path.home() / ".cache" / "lstmstudy" / "native")
    return base / f"cudnn-loop-{source_hash()}"


def _run(command: list[str], what: str, cwd: Path | None = None) -> None:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise HarnessUnavailable(f"building the loop harness: {what} took over {BUILD_TIMEOUT_S} s") from None
    except OSError as exc:
        raise HarnessUnavailable(f"building the loop harness: {what} could not start ({exc})") from None
    if done.returncode != 0:
        raise HarnessUnavailable(f"building the loop harness: {what} failed ({_one_line(done.stdout + done.stderr)})")


#: left in a build folder while a build runs and after one fails, with why: a measuring process does not try again
#: (a build killed at its time limit would otherwise be retried inside a timed group); `build(retry=True)` does
NOT_BUILT = "NOT_BUILT"


def build(*, rebuild: bool = False, retry: bool = False) -> Path:
    """Build the harness (once per version of its sources) and return its shared library; `HarnessUnavailable`,
    one line, where it cannot be built: no cuDNN headers, no CMake nor nvcc, a compiler error, or an earlier build
    of these sources that failed or never finished (unless `retry`)."""
    out = build_dir()
    library, marker = out / LIBRARY, out / NOT_BUILT
    if library.is_file() and not rebuild and not marker.exists():
        return library
    if marker.exists() and not (retry or rebuild):
        raise HarnessUnavailable(marker.read_text().strip() or "an earlier build of the loop harness failed")
    root = cudnn_root()
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text("an earlier build of the loop harness never finished (killed at its time limit?)\n")
    try:
        _compile(out, library, root)
    except HarnessUnavailable as exc:
        marker.write_text(f"{exc}\n")
        raise
    marker.unlink()
    return library


def _compile(out: Path, library: Path, root: Path) -> None:
    if cmake := shutil.which("cmake"):
        work = out / "cmake"
        _run([cmake, "-S", str(SOURCES), "-B", str(work), f"-DCUDNN_ROOT={root}", "-DCMAKE_BUILD_TYPE=Release",
              f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out}", f"-DCMAKE_RUNTIME_OUTPUT_DIRECTORY={out}"], "cmake's configure")
        _run([cmake, "--build", str(work), "--parallel"], "cmake's build")
    elif nvcc := shutil.which("nvcc"):
        lib = next(d for d in (root / "lib", root / "lib64") if any(d.glob("libcudnn.so*")))
        linked = out / "libcudnn.so"  # pip's wheel has libcudnn.so.9 alone: -lcudnn needs the plain name
        if not linked.exists():
            linked.symlink_to(sorted(lib.glob("libcudnn.so*"))[0])
        common = ["-O2", "-std=c++17", "--cudart", "shared", f"-I{SOURCES}", f"-I{root / 'include'}", f"-L{out}",
                  "-Xlinker", f"-rpath,{lib}", "-Xlinker", f"-rpath,{out}"]
        _run([nvcc, *common, "-shared", "-Xcompiler", "-fPIC", str(SOURCES / "lstm_loop.cpp"), "-lcudnn",
              "-o", str(library)], "nvcc (library)")
        _run([nvcc, *common, str(SOURCES / "bench_main.cpp"), "-llstm_loop", "-o", str(out / BENCH)], "nvcc (bench)")
    else:
        raise HarnessUnavailable("building the loop harness needs CMake or nvcc (CUDA 13's), and neither is on PATH")
    if not library.is_file():
        raise HarnessUnavailable(f"building the loop harness left no {LIBRARY} in {out}")


_SIGNATURES = {
    "lstm_loop_error": (ctypes.c_char_p, []),
    "lstm_loop_cudnn_version": (ctypes.c_size_t, []),
    "lstm_loop_create": (ctypes.c_void_p, [ctypes.c_int] * 6),
    "lstm_loop_destroy": (None, [ctypes.c_void_p]),
    "lstm_loop_set_weights": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                             ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64]),
    "lstm_loop_set_input": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]),
    "lstm_loop_forward": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]),
    "lstm_loop_sync": (ctypes.c_int, [ctypes.c_void_p]),
    "lstm_loop_output_count": (ctypes.c_int64, [ctypes.c_void_p]),
    "lstm_loop_output": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]),
}


def open_library(path: Path) -> ctypes.CDLL:
    """The harness at `path`, its functions typed; `HarnessUnavailable`, one line, where it cannot be loaded (no
    cuDNN or CUDA runtime to link it with, another machine's build)."""
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise HarnessUnavailable(f"the loop harness cannot be loaded ({_one_line(str(exc))})") from None
    for name, (result, arguments) in _SIGNATURES.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise HarnessUnavailable(f"the loop harness at {path} has no {name}: a build of other sources") from None
        function.restype, function.argtypes = result, arguments
    return lib


@cache
def load() -> ctypes.CDLL:
    """The harness, built if it is not yet (once per process: a failure is remembered, not retried each point)."""
    return open_library(build())


def cudnn_version() -> int:
    return int(load().lstm_loop_cudnn_version())


class Harness:
    """One LSTM in the harness, on the current CUDA device: weights and input loaded once, then `repeat(n)` queues
    n forward calls from C++ (DeepBench's loop) and `__call__` one; neither syncs. `output()` syncs and returns the
    output, batch-first (batch, timesteps, hidden x directions)."""

    def __init__(self, lib: ctypes.CDLL, *, input_size: int, hidden: int, layers: int, bidirectional: bool,
                 batch: int, timesteps: int) -> None:
        self._lib = lib
        self.shape = (batch, timesteps, hidden * (2 if bidirectional else 1))
        self.directions = 2 if bidirectional else 1
        self._handle = lib.lstm_loop_create(input_size, hidden, layers, int(bidirectional), batch, timesteps)
        if not self._handle:
            raise HarnessUnavailable(f"the loop harness could not start: {self._error()}")

    def _error(self) -> str:
        return _one_line((self._lib.lstm_loop_error() or b"").decode(errors="replace"))

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"cudnn.loop harness, {what}: {self._error()}")

    def load_weights(self, layers: list[list[dict[str, np.ndarray]]]) -> None:
        """PyTorch's canonical weights (`LSTMWeights.layers`): gate k's rows of w_ih and b_ih go to cuDNN's linear
        layer k, those of w_hh and b_hh to k + 4 (cuDNN's and PyTorch's gate order agree: i, f, g, o)."""
        for layer, directions in enumerate(layers):
            for direction, tensors in enumerate(directions):
                pseudo = layer * self.directions + direction
                for first, (matrix, bias) in ((0, ("w_ih", "b_ih")), (4, ("w_hh", "b_hh"))):
                    for gate, (rows, part) in enumerate(zip(np.split(np.asarray(tensors[matrix], np.float32), 4),
                                                            np.split(np.asarray(tensors[bias], np.float32), 4))):
                        rows, part = np.ascontiguousarray(rows), np.ascontiguousarray(part)
                        self._check(self._lib.lstm_loop_set_weights(self._handle, pseudo, first + gate,
                                                                    rows.ctypes.data, rows.size, part.ctypes.data,
                                                                    part.size), "weights")

    def load_input(self, x: np.ndarray) -> None:
        x = np.ascontiguousarray(x, dtype=np.float32)
        self._check(self._lib.lstm_loop_set_input(self._handle, x.ctypes.data, x.size), "input")

    def repeat(self, calls: int) -> None:
        self._check(self._lib.lstm_loop_forward(self._handle, calls), "forward")

    def __call__(self) -> None:
        self.repeat(1)

    def output(self) -> np.ndarray:
        out = np.empty(self.shape, dtype=np.float32)
        self._check(self._lib.lstm_loop_output(self._handle, out.ctypes.data, out.size), "output")
        return out

    def close(self) -> None:
        if self._handle:
            self._lib.lstm_loop_destroy(self._handle)
            self._handle = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone
            pass


def bench(hidden: int, batch: int, timesteps: int, calls: int = 100, rounds: int = 10) -> str:
    """Run `lstm_loop_bench` on its own (DeepBench's loop, no Python between the calls): its JSON line."""
    program = build().parent / BENCH
    if not program.is_file():
        raise HarnessUnavailable(f"no {BENCH} beside the harness in {program.parent}")
    done = subprocess.run([str(program), str(hidden), str(batch), str(timesteps), str(calls), str(rounds)],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise HarnessUnavailable(f"{BENCH} failed ({_one_line(done.stderr + done.stdout)})")
    return done.stdout.strip()
