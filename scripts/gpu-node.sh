#!/usr/bin/env bash
# One call on an offline GPU node (README: "Measure on an offline GPU node"), so that every call of a short
# GPU lease is one line and none forgets a step:
#
#   bash scripts/gpu-node.sh check                  carried wheels in, smoke check, then the tests marked gpu
#   bash scripts/gpu-node.sh measure SECONDS [ARGS]  `lstmstudy measure --device cuda` of every claim, the most
#                                                   telling first (the GPU issue's order), until the deadline
#                                                   (ARGS are passed on and win); the next call resumes
#
# Needs LSTMSTUDY_HOST (a stable name: the node may be renamed at boot) and LSTMSTUDY_GIT_COMMIT (the copy has
# no .git). Where $OUT is set (the device tool's folder that comes back), the result files this call wrote
# ($LSTMSTUDY_RESULTS, else results/) are packed into $OUT/results.tgz (unpack it over the checkout: each file is
# whole) and the native logs copied to $OUT/logs, after every call, failed or not.
set -uo pipefail
cd "$(dirname "$0")/.."

: "${LSTMSTUDY_HOST:?set LSTMSTUDY_HOST to a stable name for this node}"
: "${LSTMSTUDY_GIT_COMMIT:?set LSTMSTUDY_GIT_COMMIT to the commit this copy holds, with +dirty if it has changes}"
PY=${PYTHON:-python3}
SITE=${LSTMSTUDY_SITE:-/tmp/lstmstudy-site}
RESULTS=${LSTMSTUDY_RESULTS:-results}
STAMP=$(mktemp)  # what this call wrote is newer

pack() {
    if [ -n "${OUT:-}" ] && [ -d "$RESULTS" ]; then
        (cd "$(dirname "$RESULTS")" && find "$(basename "$RESULTS")" -type f -newer "$STAMP" \( -name "*.csv" -o -name "*.json" \)) > "$STAMP.list"
        if [ -s "$STAMP.list" ]; then
            tar czf "$OUT/results.tgz" -C "$(dirname "$RESULTS")" -T "$STAMP.list"
            echo "packed $(wc -l < "$STAMP.list") result files this call wrote into $OUT/results.tgz"
        fi
        if [ -d _build/logs ]; then cp -r _build/logs "$OUT/logs"; fi
    fi
    rm -f "$STAMP" "$STAMP.list"
}
trap pack EXIT

if compgen -G "wheelhouse/*.whl" >/dev/null; then
    "$PY" -m pip install --quiet --upgrade --no-index --no-deps --target "$SITE" wheelhouse/*.whl || exit 1
fi
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}" KERAS_BACKEND=torch
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

case "${1:-}" in
    check)
        "$PY" -m lstmstudy.cli env --device cuda --check
        checked=$?
        if "$PY" -c "import pytest, hypothesis" 2>/dev/null; then
            # one module that fails to collect must not keep the others from running
            "$PY" -m pytest -q -m gpu -p no:cacheprovider --continue-on-collection-errors
            tested=$?
        else
            echo "pytest or hypothesis cannot be imported here: the tests marked gpu were not run" >&2
            tested=1
        fi
        exit $((checked || tested))
        ;;
    measure)
        seconds=${2:?measure needs a deadline in seconds, e.g. 480}
        shift 2
        # the deadline stops it between groups and interrupts a group still running (a call's first group
        # gets the whole deadline, and at least 120 s, from its own start); this is the backstop, so that the
        # results are packed before the device tool kills the whole command
        whole=${seconds%.*}
        timeout --kill-after=10 "$(( (whole > 120 ? whole : 120) + 60 ))" \
            "$PY" -m lstmstudy.cli measure --device cuda --claims 06 01 03 04 02 05 07 kernels \
            --deadline "$seconds" "$@"
        ;;
    *)
        echo "usage: bash scripts/gpu-node.sh check | measure SECONDS [lstmstudy measure arguments]" >&2
        exit 2
        ;;
esac
