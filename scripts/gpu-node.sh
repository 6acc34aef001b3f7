#!/usr/bin/env bash
# One call on an offline GPU node (README: "Measure on an offline GPU node"), so that every call of a short
# GPU lease is one line and none forgets a step:
#
#   bash scripts/gpu-node.sh check                  carried wheels in, the smoke check, and the GPU tests of the
#                                                   timing (tests/test_gpu_timing.py, under 30 s; LSTMSTUDY_CHECK_TESTS
#                                                   =all: every test marked gpu, =0: none), stopped after
#                                                   $LSTMSTUDY_CHECK_S (default 180 s)
#   bash scripts/gpu-node.sh measure SECONDS [ARGS]  `lstmstudy measure --device cuda --plan lease` until the
#                                                   deadline: the five judged claims on the grids their verdicts read,
#                                                   then every default grid (lstmstudy.claims.LEASE_ORDER, GPU_ORDER);
#                                                   ARGS are passed on (`--claims 06 01` replaces the plan); the next
#                                                   call resumes
#   bash scripts/gpu-node.sh check measure SECONDS [ARGS]   both in one call; measuring is not started where the
#                                                   GPU is not ready (the smoke check failed) or the check overran
#
# The device tool kills a command after its limit: set $LSTMSTUDY_CALL_LIMIT to it (default 600 s), counted from
# this script's start. The deadline is shortened to end 15 s before `lstmstudy measure` is stopped, $PACK_S seconds
# before that limit (SIGTERM, then SIGKILL 5 s later), so that the results are always packed; a group stopped
# there is measured again by the next call, one hung in native code (deaf to SIGTERM) is stored as an error.
#
# Before either, it builds claim 4's C++ loop harness (`python -m lstmstudy.native build`, in $LSTMSTUDY_NATIVE_BUILD,
# default beside $LSTMSTUDY_RESULTS; $LSTMSTUDY_BUILD_S bounds it, default 180 s); a CPU rehearsal skips it.
#
# Needs LSTMSTUDY_GIT_COMMIT (the copy has no .git). The result sets are named after the GPUs' own UUIDs, which NVML
# reads (`hardware.host_tag`), so two nodes never share one; LSTMSTUDY_HOST names the host only where NVML cannot.
# LSTMSTUDY_DEVICE (default cuda) names the device to check and measure: `cpu` rehearses a call here.
# Results are written outside the checkout, to $LSTMSTUDY_RESULTS (a folder named results; default
# /tmp/lstmstudy-node/results, filled from the checkout's results/ by the first call), so that a second call on the
# same node resumes from the first's rows without their coming back here first: the device tool lays the checkout
# anew for every call. Where $OUT is set (the device tool's folder that comes back), the result files this call
# wrote are packed into $OUT/results.tgz (unpack it over the checkout: each file is whole, the rows it had from the
# checkout included), the native logs copied to $OUT/logs and the whole console kept in $OUT/console.log (the
# device tool returns only its end), after every call, failed or not.
set -uo pipefail
cd "$(dirname "$0")/.."

LIMIT=${LSTMSTUDY_CALL_LIMIT:-600}
PACK_S=20  # packing takes a few seconds; the rest is margin
if [ -n "${OUT:-}" ]; then
    exec > >(tee -a "$OUT/console.log") 2> >(tee -a "$OUT/console.log" >&2)
fi

: "${LSTMSTUDY_GIT_COMMIT:?set LSTMSTUDY_GIT_COMMIT to the commit this copy holds, with +dirty if it has changes}"
PY=${PYTHON:-python3}
DEVICE=${LSTMSTUDY_DEVICE:-cuda}
SITE=${LSTMSTUDY_SITE:-/tmp/lstmstudy-site}
RESULTS=${LSTMSTUDY_RESULTS:-/tmp/lstmstudy-node/results}
if [ "$(basename "$RESULTS")" != results ]; then  # packed as results/..., to be unpacked over the checkout's
    echo "LSTMSTUDY_RESULTS must name a folder called results, not $RESULTS" >&2
    exit 2
fi
if [ ! -d "$RESULTS" ] && [ -d results ]; then  # the first call on this node: start from the checkout's sets
    mkdir -p "$(dirname "$RESULTS")" && cp -rp results "$RESULTS"
fi
export LSTMSTUDY_RESULTS=$RESULTS
STAMP=$(mktemp)  # what this call wrote is newer (the copy above keeps the checkout's times)

pack() {
    if [ -n "${OUT:-}" ] && [ -d "$RESULTS" ]; then
        (cd "$(dirname "$RESULTS")" && find "$(basename "$RESULTS")" -type f -newer "$STAMP" \
            \( -name "*.csv" -o -name "*.json" -o -name ".*.rows" \)) > "$STAMP.list"
        if [ -s "$STAMP.list" ]; then
            tar czf "$OUT/results.tgz" -C "$(dirname "$RESULTS")" -T "$STAMP.list"
            echo "packed $(wc -l < "$STAMP.list") result files this call wrote into $OUT/results.tgz"
        fi
        if [ -d _build/logs ]; then cp -r _build/logs "$OUT/logs"; fi
    fi
    rm -f "$STAMP" "$STAMP.list"
    if [ -n "${OUT:-}" ]; then  # let the console's copies finish before the command ends
        exec >&- 2>&-
        wait
    fi
}
trap pack EXIT

usage="usage: bash scripts/gpu-node.sh check | measure SECONDS [lstmstudy measure arguments] | check measure SECONDS"
case "${1:-}" in
    check | measure) ;;
    *) echo "$usage" >&2; exit 2 ;;
esac

if compgen -G "wheelhouse/*.whl" >/dev/null; then
    "$PY" -m pip install --quiet --upgrade --no-index --no-deps --no-compile --target "$SITE" wheelhouse/*.whl \
        || exit 1
fi
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}" KERAS_BACKEND="${KERAS_BACKEND:-torch}"  # KERAS_BACKEND=jax: the jax rows
# else every Keras point would be stored as an error row, or run a Keras whose torch backend skips cuDNN; the
# import's own error is named (a wheel for another Python, a missing dependency), not only the wheelhouse
problem=$("$PY" -c "
try:
    import keras
except Exception as exc:
    last = (str(exc).strip().splitlines() or [''])[-1]
    print(f'keras cannot be imported ({type(exc).__name__}: {last})')
else:
    if tuple(int(p) for p in keras.__version__.split('.')[:3] if p.isdigit()) < (3, 15, 1):
        print(f'keras {keras.__version__} is older than 3.15.1')
" 2>/dev/null | tail -n 1)
if [ -n "$problem" ]; then
    echo "$problem: run 'make wheelhouse' where there is network and carry wheelhouse/" >&2
    exit 1
fi

# claim 4's loop baseline: cuDNN's forward called from C++ in DeepBench's loop (lstmstudy/native), built here at the
# call's start against pip's nvidia-cudnn-cu13 (CMake and nvcc 13), kept in $LSTMSTUDY_NATIVE_BUILD so that a later
# call on this node finds it built. A failed build costs no call: the loop baseline then runs ATen's cuDNN op from
# Python, and its rows say so. A CPU rehearsal has no cuDNN to build against: oneDNN's op runs the same loop there
export LSTMSTUDY_NATIVE_BUILD=${LSTMSTUDY_NATIVE_BUILD:-$(dirname "$RESULTS")/native}
build_loop_harness() {
    case " $* " in *" --plan-only "*) return 0 ;; esac  # nothing is measured
    case "$DEVICE" in
        cuda*)  # a failure says why in one line (stderr) and goes on
            timeout --kill-after=5 "${LSTMSTUDY_BUILD_S:-180}" "$PY" -m lstmstudy.native build
            built=$?
            if [ "$built" = 124 ] || [ "$built" = 137 ]; then
                echo "cudnn.loop: building the harness took over ${LSTMSTUDY_BUILD_S:-180} s: the loop baseline" \
                     "runs ATen's cuDNN op" >&2
            fi ;;
        *) echo "cudnn.loop: no GPU in this rehearsal (LSTMSTUDY_DEVICE=$DEVICE): the C++ harness is not built;" \
                "claim 4's loop baseline runs oneDNN's op in the same queued loop" ;;
    esac
}
build_loop_harness "$@"

check() {
    timeout --kill-after=10 "${LSTMSTUDY_CHECK_S:-180}" bash -c '
        "$0" -m lstmstudy.cli env --device "$1" --check
        checked=$?
        case "${LSTMSTUDY_CHECK_TESTS:-timing}" in
            0) tests=() ;;  # the smoke check above already ran every kernel that measuring needs
            # every test marked gpu; one module that fails to collect must not keep the others from running
            all | 1) tests=(-m gpu --continue-on-collection-errors) ;;  # 1: what it meant before the default
            *) tests=(tests/test_gpu_timing.py) ;;  # what the rows rest on: IEEE fp32, device time, the clocks
        esac
        if [ "${#tests[@]}" = 0 ]; then
            tested=0
        elif "$0" -c "import pytest, hypothesis" 2>/dev/null; then
            "$0" -m pytest -q -p no:cacheprovider "${tests[@]}"
            tested=$?
        else
            echo "pytest or hypothesis cannot be imported here: the GPU tests were not run" >&2
            tested=1
        fi
        exit $(( checked ? 3 : tested ))' "$PY" "$DEVICE"
}

measure() {
    seconds=${1:?measure needs a deadline in seconds, e.g. 480}
    shift
    left=$(( LIMIT - SECONDS - PACK_S ))
    if [ "$left" -lt 20 ]; then
        echo "measure: only ${left} s of this ${LIMIT} s call left: not started" >&2
        return 1
    fi
    if [ "${seconds%.*}" -gt $(( left - 15 )) ]; then
        seconds=$(( left - 15 ))
        echo "measure: the deadline is shortened to ${seconds} s: this ${LIMIT} s call has ${left} s left for it"
    fi
    # the deadline stops it between groups and interrupts a group still running (a call's first group gets the
    # whole deadline, and at least 120 s, from its own start); the backstop stops it before the call's limit
    # the lease plan is a GPU plan (lstmstudy refuses it elsewhere): a CPU rehearsal measures the default grids
    plan=()
    case "$DEVICE" in cuda*) plan=(--plan lease) ;; esac
    case " $* " in *" --claims "* | *" --claims="*) plan=() ;; esac  # claims named here replace the plan
    timeout --kill-after=5 "$left" \
        "$PY" -m lstmstudy.cli measure --device "$DEVICE" "${plan[@]}" --deadline "$seconds" "$@"
}

case "$1" in
    check)
        check
        status=$?
        if [ "${2:-}" = measure ]; then
            shift 2
            if [ "$status" = 124 ] || [ "$status" = 137 ]; then
                echo "check: stopped after ${LSTMSTUDY_CHECK_S:-180} s (LSTMSTUDY_CHECK_S): measure not started" >&2
                exit 1
            elif [ "$status" = 3 ]; then
                echo "check: the GPU is not ready to measure (see above): measure not started" >&2
                exit 1
            fi
            measure "$@"
            measured=$?
            exit $(( measured ? measured : status ))  # a backstop's 124 or 137 stays visible
        fi
        exit $status
        ;;
    measure)
        shift
        measure "$@"
        ;;
esac
