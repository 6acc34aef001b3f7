"""How long does `lstmstudy explain` take on a 10 MB saved model, as a CI step meets it? (A benchmark, not a test.)

The setup saves, with Keras, a model of about 10 MB (a 20,000-word embedding with mask_zero=True, a bidirectional
LSTM with recurrent dropout, an LSTM, a Dense): every layer kind the answer covers, one that falls back (so the
cost line is read from claim 1's results) and a mask. Then `python -m lstmstudy explain MODEL` runs in a fresh
process several times, and the median wall time is printed with the spread: that is what a CI step pays, the
interpreter's start included. Run: `.venv/bin/python benchmarks/explain_speed.py [--runs 7]`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def save_model(path: Path) -> Path:
    """A ~10 MB .keras model, saved in a child process so that this one never imports Keras."""
    code = f"""
from lstmstudy import backends
backends.study_process()
import keras
words = keras.Input((80,), dtype="int32")
x = keras.layers.Embedding(20_000, 120, mask_zero=True)(words)
x = keras.layers.Bidirectional(keras.layers.LSTM(64, return_sequences=True, recurrent_dropout=0.3))(x)
x = keras.layers.LSTM(64)(x)
keras.Model(words, keras.layers.Dense(1)(x)).save({str(path)!r})
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, timeout=600)
    return path


def time_explain(path: Path, runs: int) -> list[float]:
    """Wall seconds of `python -m lstmstudy explain PATH`, each in a fresh process (exit 1: a layer falls back)."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "lstmstudy", "explain", str(path)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        seconds.append(time.perf_counter() - start)
        if done.returncode not in (0, 1):
            raise SystemExit(f"lstmstudy explain failed ({done.returncode}): {done.stderr.strip()}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes to time (default: 7)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = save_model(Path(folder) / "model.keras")
        size = path.stat().st_size / 1e6
        seconds = time_explain(path, args.runs)
        answer = subprocess.run([sys.executable, "-m", "lstmstudy", "explain", str(path)], cwd=ROOT,
                                capture_output=True, text=True, timeout=120).stdout
    print(answer.rstrip())
    print(f"\nlstmstudy explain on a {size:.1f} MB .keras model, {args.runs} fresh processes: median "
          f"{statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f})")


if __name__ == "__main__":
    main()
