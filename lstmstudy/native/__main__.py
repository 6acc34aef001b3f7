"""`python -m lstmstudy.native build`: build the cuDNN loop harness (what scripts/gpu-node.sh runs at a call's start);
`python -m lstmstudy.native bench HIDDEN BATCH TIMESTEPS [CALLS] [ROUNDS]`: run its loop on its own (JSON).
Either says in one line why it cannot, with exit status 1."""

from __future__ import annotations

import sys

from lstmstudy import native

USAGE = "usage: python -m lstmstudy.native build [--rebuild] | bench HIDDEN BATCH TIMESTEPS [CALLS] [ROUNDS]"


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("build", "bench"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        if argv[0] == "build":
            library = native.build(rebuild="--rebuild" in argv[1:], retry=True)
            native.open_library(library)
            print(f"cudnn.loop: the C++ harness (cudnnRNNForward in DeepBench's loop) is built: {library}")
        else:
            print(native.bench(*(int(a) for a in argv[1:6])))
    except native.HarnessUnavailable as exc:
        print(f"cudnn.loop: {exc}; claim 4's loop baseline will run ATen's cuDNN op from Python instead",
              file=sys.stderr)
        return 1
    except (TypeError, ValueError):
        print(USAGE, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
