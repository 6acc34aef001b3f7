"""`lstmstudy env | measure | reproduce | book | explain | published`: the study's command line.

`measure` only measures: it imports no papermill, Jupyter, IPython or TensorFlow, so it runs on a GPU node
that has PyTorch and little else. `reproduce` measures through the notebooks and renders them; `book`
only renders. `explain` says which recurrent layers of a saved Keras model would miss cuDNN on a GPU, and
what claim 1 measured that to cost. `published` derives the tables of what others published (`lstmstudy.published`)
from their raw copies again. User mistakes (an unknown claim, `--device cuda` without a GPU, a
corrupt results file, a file that is not a Keras model) end with one line on stderr and exit status 2,
never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from lstmstudy import __version__, backends
from lstmstudy.errors import StudyError
from lstmstudy.toc import CLAIM_NOTEBOOKS, CLAIMS_TABLE, missing_pages

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
BOOK = ROOT / "book"
EXECUTED = BOOK / "claims"
#: pages rendered after the claims: notebooks/<name>.ipynb -> book/<name>.ipynb; what others published on GPUs,
#: then the ledger and the conclusions from every stored result set
SUMMARY_PAGES = ("published", "ledger", "conclusions")
#: pages that show a helper at work on the blog post's model, rendered after the summaries; they run the model,
#: so they need the measuring stack even where the claims are only rendered (`--no-measure`)
GUIDE_PAGES = ("check_your_model",)
#: what notebook kernels write to their stderr outside the pages (native library logs)
LOGS = ROOT / "_build" / "logs"


def claim_notebooks(folder: Path = NOTEBOOKS) -> dict[str, Path]:
    """Claim notebooks by stem (`01_cudnn_fallback`), in order."""
    return {path.stem: path for path in sorted(folder.glob(CLAIM_NOTEBOOKS))}


def summary_notebooks(folder: Path = NOTEBOOKS) -> dict[str, Path]:
    """The ledger, conclusions and guide sources found in `folder`, in the order they are rendered."""
    return {name: folder / f"{name}.ipynb" for name in SUMMARY_PAGES + GUIDE_PAGES
            if (folder / f"{name}.ipynb").exists()}


def select_claims(requested: list[str] | None, available: dict[str, Path]) -> dict[str, Path]:
    """Match `--claims` by number (`01`), name (`cudnn_fallback`) or stem; unknown ones are an error."""
    if not requested or requested == ["all"]:
        return available
    chosen = {}
    for want in requested:
        matches = [stem for stem in available if want in (stem, stem[:2], stem[3:])]
        if not matches:
            known = ", ".join(available) or "none yet"
            raise StudyError(f"unknown claim {want!r}; known claims: {known}")
        chosen.update({stem: available[stem] for stem in matches})
    return dict(sorted(chosen.items()))


def cmd_env(args: argparse.Namespace) -> int:
    from lstmstudy import hardware

    if args.check:
        from lstmstudy import check

        return check.run(args.device)
    fp = hardware.fingerprint(hardware.resolve_device(args.device))
    if args.json:
        print(json.dumps(fp.as_dict(), indent=2))
    else:
        for key, value in fp.as_dict().items():
            print(f"{key:>15}: {value}")
    return 0


def cmd_measure(args: argparse.Namespace) -> int:
    from lstmstudy import hardware
    from lstmstudy.backends import chosen_note
    from lstmstudy.claims import lease_plan, lookup
    from lstmstudy.sweep import Deadline
    from lstmstudy.terminal import native_stderr_to

    if args.deadline is not None and not args.deadline > 0:
        raise StudyError(f"--deadline must be a positive number of seconds, got {args.deadline:g}")
    if args.plan and args.claims:
        raise StudyError("--plan lease chooses the claims itself: give --plan or --claims, not both")
    steps = lease_plan() if args.plan else [(claim, "all") for claim in lookup(args.claims)]
    if args.plan or args.plan_only:  # the kind named, so that a plan is listed where that device is not
        kind = args.device.split(":")[0] if args.device != "auto" else hardware.resolve_device("auto").type
        if args.plan and kind != "cuda":
            raise StudyError(f"--plan lease cuts the GPU grids to what their verdicts read; on {kind!r} measure the "
                             f"default grids (leave --plan out)")
        if args.plan_only:
            print(plan_text(steps, kind))
            return 0
    device = str(hardware.resolve_device(args.device))  # fail before anything else if the device is not here
    if note := chosen_note():
        print(f"note: {note}")
    if device.startswith("cuda") and not os.environ.get("LSTMSTUDY_HOST"):
        print(f"note: this GPU's result set is named after this host ({hardware.fingerprint(device).hardware_id}); "
              f"where the hostname changes between runs (a rented VM), set LSTMSTUDY_HOST so they resume one set")
    deadline = Deadline.after(args.deadline)
    left = 0
    log = LOGS / "measure.log"
    print(f"native library logs (TensorFlow, the profiler) go to {log}")
    with native_stderr_to(log):
        for claim, select in steps:
            for report in claim.run(device, quick=args.quick, root=args.results_dir, select=select,
                                    retry_errors=args.retry_errors, rerun=args.rerun, deadline=deadline,
                                    progress=not args.no_progress):
                print(report, flush=True)
                left += report.left
    print(f"{left} point(s) left for the next call: run the same command again to resume" if left
          else "nothing left to measure for these claims on this device")
    return 0


def plan_text(steps: list, kind: str) -> str:
    """A measuring plan as lines: each step's new points and planned seconds, running totals, and (for the lease)
    the fixed costs of one call beside the judged claims it measures first."""
    from lstmstudy.claims import LEASE_CALL_S, LEASE_FIXED_S, planned

    lines = [f"plan on {kind} (planned from each claim's seconds per point, not measured):"]
    lease = [step for step in steps if step[1] == "lease"]
    total = sum(LEASE_FIXED_S.values()) if lease else 0.0
    if lease:
        lines += [f"  {what:<44} {seconds:5.0f} s" for what, seconds in LEASE_FIXED_S.items()]
    for index, (claim, select, points, seconds) in enumerate(planned(steps, kind)):
        total += seconds
        if points:
            lines.append(f"  {claim.stem:<27} {select:<5} {points:4d} points {seconds:5.0f} s  "
                         f"(by then {total:5.0f} s)")
        if index + 1 == len(lease):
            lines.append(f"  the {len(lease)} judged claims of the lease, fixed costs included: {total:.0f} s, "
                         f"{total / LEASE_CALL_S:.0%} of one {LEASE_CALL_S} s call")
    return "\n".join(lines)


def execute(source: Path, target: Path, parameters: dict, *, measuring: bool, progress: bool = False) -> None:
    """Execute a notebook into `target` with papermill, one clear line if a cell fails. Without `measuring`, its
    kernel has the measuring stack blocked (`houses.block_measuring`): a page that reaches for torch, TensorFlow,
    Keras or NVML while rendering stored results fails, instead of quietly needing them."""
    import papermill

    from lstmstudy.houses import KERNEL_ARGUMENTS
    from lstmstudy.terminal import bar_options, native_stderr_to

    try:
        # the notebook kernels' native stderr (TensorFlow's C++ start-up logs) goes to a log, not the terminal
        with native_stderr_to(LOGS / f"{source.stem}.log"):
            papermill.execute_notebook(str(source), str(target), kernel_name="python3", cwd=str(ROOT),
                                       progress_bar=progress and bar_options(), parameters=parameters,
                                       extra_arguments=[] if measuring else KERNEL_ARGUMENTS)
    except papermill.PapermillExecutionError as exc:
        raise StudyError(f"{source.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue} "
                         f"(the executed copy with the traceback is {target})") from None
    _hide_plumbing(target)


#: cells a reader does not need in view: the parameters, and the ones papermill injects
PLUMBING = ("parameters", "injected-parameters")


def _hide_plumbing(page: Path) -> None:
    """Fold the parameter cells of an executed page behind a toggle (myst-nb's `hide-cell` tag)."""
    import nbformat

    nb = nbformat.read(page, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if set(tags) & set(PLUMBING) and "hide-cell" not in tags:
            tags.append("hide-cell")
    nbformat.write(nb, page)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from lstmstudy import hardware, ledger
    from lstmstudy.backends import chosen_note, importable

    if not args.no_measure:
        hardware.resolve_device(args.device)  # fail before running anything if the device is not here
    notebooks = select_claims(args.claims, claim_notebooks(args.notebooks))
    if not notebooks:
        print(f"no claim notebooks in {args.notebooks} yet; nothing to reproduce")
        return 0
    if note := chosen_note():
        print(f"note: {note}")
    args.out.mkdir(parents=True, exist_ok=True)
    for stem, source in notebooks.items():
        target = args.out / source.name
        doing = "rendering the stored results" if args.no_measure else f"measuring on {args.device}"
        print(f"{stem}: {doing}{' (quick grid)' if args.quick and not args.no_measure else ''} -> {target}")
        execute(source, target, {"device": args.device, "measure": not args.no_measure, "quick": args.quick},
                measuring=not args.no_measure, progress=not args.no_progress)
    pages_out = args.pages_out or (BOOK if args.out == EXECUTED else args.out)  # --out alone: all go there
    pages_out.mkdir(parents=True, exist_ok=True)
    (pages_out / CLAIMS_TABLE).write_text(ledger.claims_table())
    print(f"the landing page's table of claims -> {pages_out / CLAIMS_TABLE}")
    # the ledger, the conclusions and the guide pages read every stored result set: rendered after any claim
    for name, source in summary_notebooks(args.notebooks).items():
        target = pages_out / source.name
        if name in GUIDE_PAGES and not (importable("keras") and importable("torch")):
            print(f"{name}: left as rendered: the page runs the fallback watch on a Keras model, which needs Keras and "
                  f"torch, and one of them is not installed here")
            continue
        print(f"{name}: rendering from every stored result set -> {target}")
        # a guide page runs a helper on a real model: the measuring house's, however it is reproduced
        execute(source, target, {}, measuring=name in GUIDE_PAGES, progress=not args.no_progress)
    return 0


#: what `lstmstudy explain` exits with: a gate a CI step can read
EXPLAIN_FUSED, EXPLAIN_FALLS_BACK, EXPLAIN_UNREADABLE = 0, 1, 2
#: the saved models a folder given to `lstmstudy explain` holds
MODEL_SUFFIXES = (".keras", ".h5")


def explain_targets(paths: list[Path]) -> list[Path]:
    """The files to explain: each file as given (read or refused by `explain_saved_model`), each folder's saved
    models (`MODEL_SUFFIXES`) at any depth, in name order."""
    out = []
    for path in paths:
        found = sorted(p for p in path.rglob("*") if p.suffix in MODEL_SUFFIXES) if path.is_dir() else [path]
        out += found or [path]  # a folder without models is named as such by explain_saved_model
    return out


def cmd_explain(args: argparse.Namespace) -> int:
    """Each model's recurrent layers; exit 0 when every one gets the fused kernel, 1 when any falls back, 2 when a
    file cannot be read (each such file says why in one line on stderr, and the others are still explained)."""
    if args.tables == bool(args.paths):
        raise StudyError("give either saved models' PATHs or --tables")
    if args.tables:
        from lstmstudy.explained import write

        for path, changed in write(root=args.results_dir).items():
            print(f"{'wrote' if changed else 'unchanged:'} {path}")
        return 0
    from lstmstudy.errors import NoRecurrentLayers
    from lstmstudy.watch import explain_saved_model

    status, answers = EXPLAIN_FUSED, []
    for path in explain_targets(args.paths):
        answer: dict = {"model": str(path), "explained_for": "a CUDA GPU with cuDNN"}
        try:
            findings = explain_saved_model(path, results_root=args.results_dir)
        except NoRecurrentLayers as exc:
            findings, answer["note"] = [], str(exc)
        except StudyError as exc:
            print(f"lstmstudy: error: {exc}", file=sys.stderr)
            status = EXPLAIN_UNREADABLE
            answers.append({**answer, "error": str(exc)})
            continue
        if any(not finding.fused for finding in findings) and status == EXPLAIN_FUSED:
            status = EXPLAIN_FALLS_BACK
        answers.append({**answer, "layers": [finding.as_dict() for finding in findings]})
        if not args.json:
            print(answer.get("note") or f"{path}: {len(findings)} recurrent layer(s), as they would run on a CUDA "
                                        f"GPU with cuDNN")
            for finding in findings:
                print(finding)
    if args.json and answers:
        print(json.dumps(answers[0] if len(answers) == 1 else answers, indent=2))
    return status


def cmd_published(args: argparse.Namespace) -> int:
    from lstmstudy import published

    if not args.check:
        for path in published.write():
            print(f"wrote {path}")
        return 0
    stale = published.stale()
    for name in stale:
        print(f"lstmstudy/sources/{name} differs from what the raw files derive: run `lstmstudy published`")
    return 1 if stale else 0


def cmd_book(args: argparse.Namespace) -> int:
    if missing := missing_pages():
        raise StudyError(f"{len(missing)} page(s) of the book are not rendered yet ({', '.join(missing)}): "
                         f"run `lstmstudy reproduce` first, or `make book`")
    builder = Path(sys.executable).parent / "jupyter-book"
    command = [str(builder if builder.exists() else "jupyter-book"), "build", str(ROOT), "--keep-going"]
    if not args.no_strict:
        command.append("--warningiserror")
    if args.path_output:
        command += ["--path-output", str(args.path_output)]
    return subprocess.run(command, check=False).returncode


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="lstmstudy", description=__doc__.splitlines()[0])
    main.add_argument("--version", action="version", version=f"lstmstudy {__version__}")
    sub = main.add_subparsers(dest="command", required=True)

    env = sub.add_parser("env", help="print this machine's hardware fingerprint and result-set id")
    env.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    env.add_argument("--json", action="store_true", help="print JSON")
    env.add_argument("--check", action="store_true",
                     help="smoke check before a sweep: kernels and dtypes really run, TF32, NVML, Keras backend; "
                          "shows what would spoil some rows, and exits 1 only if cuDNN (oneDNN) is unusable")
    env.set_defaults(func=cmd_env)

    mea = sub.add_parser("measure", help="measure claims' default grids for a device into results/ (no notebooks)")
    mea.add_argument("--claims", nargs="+", metavar="CLAIM",
                     help="claims by number, name or stem, 'kernels' for the kernel benchmark, measured in the "
                          "order given; 'gpu-order' for every one in a GPU node's order (default: all)")
    mea.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    mea.add_argument("--plan", choices=["lease"],
                     help="'lease': the five judged claims on the grids their verdicts read (a 15-minute GPU lease), "
                          "then every default grid in a GPU node's order, compiles last")
    mea.add_argument("--plan-only", action="store_true", help="print what would be measured and its planned time")
    mea.add_argument("--quick", action="store_true", help="shrink every grid (a smoke run)")
    mea.add_argument("--deadline", type=float, metavar="SECONDS",
                     help="stop cleanly between points after this many seconds; the next call resumes")
    mea.add_argument("--retry-errors", action="store_true", help="measure again points stored as errors")
    mea.add_argument("--rerun", action="store_true",
                     help="measure every point again, stored or not (the pages read the newest rows): for a set "
                          "stored at another speed")
    mea.add_argument("--results-dir", type=Path, help="results root (default: $LSTMSTUDY_RESULTS or results/)")
    mea.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    mea.set_defaults(func=cmd_measure)

    rep = sub.add_parser("reproduce", help="run the claim notebooks with papermill (measure, then render into "
                                           "book/), then render the ledger and the conclusions")
    rep.add_argument("--claims", nargs="+", metavar="CLAIM", help="claims by number or name (default: all)")
    rep.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    rep.add_argument("--quick", action="store_true", help="shrink every grid (a smoke run)")
    rep.add_argument("--no-measure", action="store_true", help="only render from stored results")
    rep.add_argument("--no-progress", action="store_true", help="hide papermill's progress bar")
    rep.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help=argparse.SUPPRESS)
    rep.add_argument("--out", type=Path, default=EXECUTED,
                     help="where executed notebooks go (default: book/claims, and the ledger, the conclusions and "
                          "the guide into book/)")
    # where the ledger, the conclusions and the guide go: book/, or --out where that is given
    rep.add_argument("--pages-out", type=Path, default=None, help=argparse.SUPPRESS)
    rep.set_defaults(func=cmd_reproduce)

    exp = sub.add_parser("explain", help="say which recurrent layers of a saved Keras model (.keras) would miss "
                                         "cuDNN on a GPU, why, the fix, and the slowdown claim 1 measured")
    exp.add_argument("paths", type=Path, nargs="*", metavar="PATH",
                     help="models saved with model.save('....keras') (or .h5), or folders of them; exit status 0 when "
                          "every recurrent layer gets cuDNN's fused kernel, 1 when any falls back, 2 when a file "
                          "cannot be read")
    exp.add_argument("--tables", action="store_true",
                     help="instead of a model: explain the settings the pages of claims 1 and 5 show and store them in "
                          "the checkout's results/explained/, where the pages read them (or under --results-dir)")
    exp.add_argument("--json", action="store_true", help="print JSON")
    exp.add_argument("--results-dir", type=Path, help="results root (default: $LSTMSTUDY_RESULTS or results/)")
    exp.set_defaults(func=cmd_explain)

    pub = sub.add_parser("published", help="derive the tables of LSTM measurements others published, with their "
                                           "provenance, from the raw copies in lstmstudy/sources/raw")
    pub.add_argument("--check", action="store_true", help="write nothing; exit 1 if a stored table differs")
    pub.set_defaults(func=cmd_published)

    book = sub.add_parser("book", help="build the HTML book into _build/html")
    book.add_argument("--no-strict", action="store_true", help="do not treat Sphinx warnings as errors")
    book.add_argument("--path-output", type=Path, help="build somewhere other than the repository root")
    book.set_defaults(func=cmd_book)
    return main


def main(argv: list[str] | None = None) -> int:
    backends.study_process()  # before any command imports TensorFlow or Keras; the notebooks' kernels inherit it
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except StudyError as exc:
        print(f"lstmstudy: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # every finished row is stored already: a sweep appends group by group
        print("lstmstudy: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
