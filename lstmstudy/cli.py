"""`lstmstudy env | measure | pack | unpack | reproduce | book | explain | published`: the study's command line.

`measure` only measures: it imports no papermill, Jupyter, IPython or TensorFlow, so it runs on a GPU node that has
PyTorch and little else. `pack` puts one measured hardware set into one file for a reader to send, and `unpack`
checks such a file and stores it for the pages to render (`lstmstudy.packed`). `reproduce` measures through the
notebooks and renders them; `book` only renders. `explain` says which recurrent layers of a saved Keras model would
miss cuDNN on a GPU, and what claim 1 measured that to cost. `published` derives the tables of what others published
(`lstmstudy.published`) from their raw copies again. User mistakes (an unknown claim, `--device cuda` without a GPU,
a corrupt results file, a file that is not a Keras model, no notebooks where the study's root should be, an optional
dependency this installation lacks, named with the extra that brings it) end with one line on stderr and exit status
2, never a traceback; notes go to stderr too, so stdout carries only the answer. The study's root is
`paths.study_root`: `--root`, `$LSTMSTUDY_ROOT`, the checkout, or the current folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path
from typing import NamedTuple

from lstmstudy import __version__, backends
from lstmstudy.errors import MissingDependency, StudyError, extra_for, missing_dependency
from lstmstudy.paths import ROOT_VARIABLE, logs_folder, outside_the_study, study_root
from lstmstudy.toc import CLAIM_NOTEBOOKS, CLAIMS_TABLE, GLOSSARY, LANDING_TEXTS, missing_pages

#: pages rendered after the claims: notebooks/<name>.ipynb -> book/<name>.ipynb; what others published on GPUs,
#: then the ledger and the conclusions from every stored result set
SUMMARY_PAGES = ("published", "ledger", "conclusions")
#: pages that show a helper at work on the blog post's model, rendered after the summaries; they run the model,
#: so they need the measuring stack even where the claims are only rendered (`--no-measure`)
GUIDE_PAGES = ("check_your_model",)


def claim_notebooks(folder: Path | None = None) -> dict[str, Path]:
    """Claim notebooks by stem (`01_cudnn_fallback`), in order, from `folder` (the study root's notebooks/)."""
    return {path.stem: path for path in sorted((folder or study_root() / "notebooks").glob(CLAIM_NOTEBOOKS))}


def summary_notebooks(folder: Path) -> dict[str, Path]:
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
    from lstmstudy import hardware, results
    from lstmstudy.backends import chosen_note
    from lstmstudy.claims import LEASE_PROCESSES, lease_plan, lookup
    from lstmstudy.sweep import Deadline
    from lstmstudy.terminal import native_stderr_to

    if args.processes is not None and args.processes < 1:
        raise StudyError(f"--processes must be at least 1, got {args.processes}")
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
            print(plan_text(steps, kind, quick=args.quick))
            return 0
    device = str(hardware.resolve_device(args.device))  # fail before anything else if the device is not here
    if note := chosen_note():
        print(f"note: {note}", file=sys.stderr)
    if device.startswith("cuda") and not os.environ.get("LSTMSTUDY_HOST") and not hardware.gpu_uuids():
        print(f"note: NVML cannot read this GPU's UUID, so its result set is named after this host "
              f"({hardware.fingerprint(device).hardware_id}); where the hostname changes between runs (a rented VM), "
              f"install nvidia-ml-py or set LSTMSTUDY_HOST so they resume one set", file=sys.stderr)
    deadline = Deadline.after(args.deadline)
    processes = LEASE_PROCESSES if args.plan and args.processes is None else args.processes
    left = 0
    log = logs_folder(args.results_dir or results.default_root()) / "measure.log"
    print(f"note: native library logs (TensorFlow, the profiler) go to {log}", file=sys.stderr)
    with native_stderr_to(log):
        for claim, select in steps:
            for report in claim.run(device, quick=args.quick, root=args.results_dir, select=select,
                                    retry_errors=args.retry_errors, rerun=args.rerun, deadline=deadline,
                                    progress=not args.no_progress, processes=processes):
                print(report, flush=True)
                left += report.left
    print(f"{left} point(s) left for the next call: run the same command again to resume" if left
          else "nothing left to measure for these claims on this device")
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    from lstmstudy import packed

    path, manifest = packed.pack(args.hardware_id, root=args.results_dir, output=args.output)
    rows = ", ".join(f"{claim} {count}" for claim, count in manifest["claims"].items())
    print(f"packed {manifest['hardware_id']} (rows: {rows}) -> {path}")
    return 0


def cmd_unpack(args: argparse.Namespace) -> int:
    from lstmstudy import packed

    for path, what in packed.unpack(args.file, root=args.results_dir, replace=args.replace).items():
        print(f"{what}: {path}")
    print("render the pages from it: lstmstudy reproduce --no-measure", file=sys.stderr)
    return 0


def plan_text(steps: list, kind: str, *, quick: bool = False) -> str:
    """A measuring plan as lines: each step's new points and planned seconds, running totals, and (for the lease)
    the fixed costs of one call beside the judged claims it measures first; `quick`: the shrunken grids."""
    from lstmstudy.claims import LEASE_CALL_S, LEASE_FIXED_S, planned

    grids = " (quick grids: each point planned at a full point's seconds, an upper bound)" if quick else ""
    lines = [f"plan on {kind}{grids} (planned from each claim's seconds per point, not measured):"]
    lease = [step for step in steps if step[1] == "lease"]
    total = sum(LEASE_FIXED_S.values()) if lease else 0.0
    if lease:
        lines += [f"  {what:<44} {seconds:5.0f} s" for what, seconds in LEASE_FIXED_S.items()]
    for index, (claim, select, points, seconds) in enumerate(planned(steps, kind, quick=quick)):
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

    from lstmstudy import results
    from lstmstudy.houses import KERNEL_ARGUMENTS
    from lstmstudy.terminal import bar_options, native_stderr_to

    log = logs_folder(results.default_root()) / f"{source.stem}.log"
    try:
        # the notebook kernels' native stderr (TensorFlow's C++ start-up logs) goes to a log, not the terminal
        with native_stderr_to(log):
            papermill.execute_notebook(str(source), str(target), kernel_name="python3", cwd=str(study_root()),
                                       progress_bar=progress and bar_options(), parameters=parameters,
                                       extra_arguments=[] if measuring else KERNEL_ARGUMENTS)
    except papermill.PapermillExecutionError as exc:
        raise StudyError(f"{source.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue} "
                         f"(the executed copy with the traceback is {target})") from None
    finally:  # what a failed page measured before it failed reaches the terminal and the log all the same
        if target.exists():
            _tidy(target, log)


#: cells a reader does not need in view: the parameters, and the ones papermill injects
PLUMBING = ("parameters", "injected-parameters")
#: the tag of a page's measuring cell: what it prints (the sweep's lines) belongs to the terminal and the log
MEASURE_TAG = "measure"


def _tidy(page: Path, log: Path) -> None:
    """Fold the parameter cells of an executed page behind a toggle (myst-nb's `hide-cell` tag), and take what its
    measuring cells printed out of the page: each line is printed here, in the terminal, and appended to `log`."""
    import nbformat

    nb = nbformat.read(page, as_version=4)
    lines = []
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if set(tags) & set(PLUMBING) and "hide-cell" not in tags:
            tags.append("hide-cell")
        if MEASURE_TAG in tags and cell.cell_type == "code":
            lines += ["".join(o.get("text", "")) for o in cell.outputs if o.get("output_type") == "stream"]
            cell.outputs = [o for o in cell.outputs if o.get("output_type") == "error"]
    nbformat.write(nb, page)
    if text := "".join(lines):
        text += "" if text.endswith("\n") else "\n"
        print(text, end="")
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as out:
            out.write(text)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from lstmstudy import hardware, ledger, rules
    from lstmstudy.backends import chosen_note, importable

    if not args.no_measure:
        hardware.resolve_device(args.device)  # fail before running anything if the device is not here
    folder = args.notebooks or study_root() / "notebooks"
    if not (available := claim_notebooks(folder)):
        raise outside_the_study(f"no claim notebooks in {folder}")
    notebooks = select_claims(args.claims, available)
    if note := chosen_note():
        print(f"note: {note}", file=sys.stderr)
    book = study_root() / "book"
    out = args.out or book / "claims"
    out.mkdir(parents=True, exist_ok=True)
    for stem, source in notebooks.items():
        target = out / source.name
        doing = "rendering the stored results" if args.no_measure else f"measuring on {args.device}"
        print(f"{stem}: {doing}{' (quick grid)' if args.quick and not args.no_measure else ''} -> {target}")
        execute(source, target, {"device": args.device, "measure": not args.no_measure, "quick": args.quick},
                measuring=not args.no_measure, progress=not args.no_progress)
    pages_out = args.pages_out or args.out or book  # --out alone: all go there
    pages_out.mkdir(parents=True, exist_ok=True)
    (pages_out / CLAIMS_TABLE).write_text(ledger.claims_table())
    print(f"the landing page's table of claims -> {pages_out / CLAIMS_TABLE}")
    (pages_out / GLOSSARY).write_text(rules.glossary())
    print(f"the landing page's glossary of outcome words -> {pages_out / GLOSSARY}")
    # the ledger, the conclusions and the guide pages read every stored result set: rendered after any claim
    for name, source in summary_notebooks(folder).items():
        target = pages_out / source.name
        if name in GUIDE_PAGES and not (importable("keras") and importable("torch")):
            print(f"{name}: left as rendered: the page runs the fallback watch on a Keras model, which needs Keras and "
                  f"torch, and one of them is not installed here")
            continue
        print(f"{name}: rendering from every stored result set -> {target}")
        # a guide page runs a helper on a real model: the measuring house's, however it is reproduced
        execute(source, target, {}, measuring=name in GUIDE_PAGES, progress=not args.no_progress)
        if name == "conclusions":
            for key, text in glued_markdown(target, LANDING_TEXTS).items():
                (pages_out / LANDING_TEXTS[key]).write_text(LANDING_HEADER + text + "\n")
                print(f"the landing page's {key.removeprefix('landing_')} -> {pages_out / LANDING_TEXTS[key]}")
    return 0


#: the first line of a file `reproduce` writes for the landing page from the conclusions' glue
LANDING_HEADER = "% written by `lstmstudy reproduce` from what book/conclusions.ipynb glued: edit lstmstudy.ledger\n"


def glued_markdown(page: Path, names: Collection[str]) -> dict[str, str]:
    """The Markdown an executed page glued under each of `names` (myst-nb keeps it in the cell's outputs): the
    landing page includes it from a file, since myst-nb pastes Markdown only within the page that glued it."""
    import nbformat

    found = {}
    for cell in nbformat.read(page, as_version=4).cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            markdown = output.get("data", {}).get("application/papermill.record/text/markdown")
            if name in names and markdown is not None:
                found[name] = markdown
    return found


#: what `lstmstudy explain` exits with: a gate a CI step can read
EXPLAIN_FUSED, EXPLAIN_FALLS_BACK, EXPLAIN_UNREADABLE = 0, 1, 2
#: the saved models a folder given to `lstmstudy explain` holds (.hdf5: what Keras 2's ModelCheckpoint examples wrote)
MODEL_SUFFIXES = (".keras", ".h5", ".hdf5")
#: what Keras 3's `model.save_weights` writes: named like a model, holding none
WEIGHTS_SUFFIXES = (".weights.h5", ".weights.json")
#: why a file is skipped: its name says it holds weights, or, in a folder, it is no saved model
WEIGHTS_FILE = "weights only, no model: what model.save_weights writes"
NOT_A_MODEL = "not a saved .keras, .h5 or .hdf5 model"


#: what `lstmstudy explain --help` says beyond its options: the words of the answer, defined for a CI log's reader
EXPLAIN_HELP = """Say, for each recurrent layer of saved Keras models, which kernel Keras would run on a CUDA GPU with
cuDNN, every reason it is not cuDNN's fused kernel, the fix, and the cost. The saved config is read directly
(no TensorFlow, Keras or torch imported); the model is loaded through Keras only where the config cannot tell,
or with --custom-objects. The answer is for the Keras backend your Keras would use: KERAS_BACKEND, else the
"backend" of keras.json ($KERAS_HOME, else ~/.keras), else Keras's default, tensorflow; it names the backend and
what chose it, and a note says where another backend would differ. Weights files (*.weights.h5,
*.weights.json, an HDF5 file without a model) and, in folders, files that are not saved models are skipped with one
note. Exit status: 0 every layer gets cuDNN, 1 some layer falls back, 2 a file cannot be read or a custom class
cannot be told. A CI step: `lstmstudy explain models/`.

kernels (the "kernel" field of --json):
  cudnn           NVIDIA cuDNN's fused RNN kernel: the fast path
  framework-loop  Keras's generic kernel on TensorFlow or jax: a loop over time steps in the compiled graph
  unrolled        Keras's generic kernel unrolled (unroll=True): every time step's ops written into the graph
  python-op-loop  Keras's generic kernel on its torch backend: a Python loop over time steps, one op at a time
  aten-loop       PyTorch's own C++ loop over time steps (Keras on torch handed the layer to torch, which
                  declined cuDNN, e.g. for its dtype)
  (empty)         cannot tell: a custom class the saved config does not describe ("told": false)

--json prints one object, whatever the number of files:
  {"explained_for": "a CUDA GPU with cuDNN", "keras_backend": {"name": ..., "chosen_by": ...},
   "exit_status": 0|1|2,
   "models": [{"model": PATH, "how": ..., then "layers": [...] (each with "layer", "layer_type", "framework",
              "kernel", "fused", "told", "reasons", "notes", "cost"), or "error": ..., or "note": ...}],
   "skipped": [{"path": PATH, "why": ...}]}"""


class Targets(NamedTuple):
    """What `lstmstudy explain` was given: the files to explain, and the paths skipped with why."""

    models: list[Path]
    skipped: dict[Path, str]


def explain_targets(paths: list[Path]) -> Targets:
    """Each file as given (read or refused by `saved_config.explain_model`) unless it is a weights file; each
    folder's saved models (`MODEL_SUFFIXES`) at any depth, in name order, its weights files and other files
    skipped (hidden ones not even counted), and a folder holding no model skipped as such."""
    models: list[Path] = []
    skipped: dict[Path, str] = {}
    for path in paths:
        if not path.is_dir():
            if path.is_file() and path.name.endswith(WEIGHTS_SUFFIXES):  # a missing one is refused: a typo
                skipped[path] = WEIGHTS_FILE
            else:
                models.append(path)
            continue
        files = sorted(p for p in path.rglob("*") if p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(path).parts))
        found = [p for p in files if p.suffix in MODEL_SUFFIXES and not p.name.endswith(WEIGHTS_SUFFIXES)]
        models += found
        skipped.update({p: WEIGHTS_FILE if p.name.endswith(WEIGHTS_SUFFIXES) else NOT_A_MODEL
                        for p in files if p not in found})
        if not found:
            skipped[path] = "a folder holding no saved Keras model (.keras, .h5 or .hdf5)"
    return Targets(models, skipped)


def skipped_note(skipped: dict[Path, str]) -> str:
    """One line for everything skipped: each folder without a model and each weights file by name, others counted."""
    named = [f"{path} ({why})" for path, why in skipped.items() if why != NOT_A_MODEL]
    others = len(skipped) - len(named)
    if others:
        named.append(f"{others} other file(s) that are not saved models")
    return f"note: skipped {'; '.join(named)}"


def cmd_explain(args: argparse.Namespace) -> int:
    """Each model's recurrent layers; exit 0 when every one gets the fused kernel, 1 when any falls back, 2 when a
    file cannot be read (each such file says why in one line on stderr, and the others are still explained) or a
    custom class in it cannot be told. Every answer is computed before any is printed, so that a reader who closes
    the pipe early (`| head`) still gets the status the whole answer earned."""
    if args.tables == bool(args.paths):
        raise StudyError("give either saved models' PATHs or --tables")
    if args.tables:
        from lstmstudy.explained import write

        for path, changed in write(root=args.results_dir).items():
            print(f"{'wrote' if changed else 'unchanged:'} {path}")
        return 0
    from lstmstudy.errors import NoRecurrentLayers, WeightsOnly
    from lstmstudy.saved_config import checked_backend, explain_model

    backend = checked_backend()  # before any model is loaded: Keras, once imported, would answer for itself
    targets = explain_targets(args.paths)
    skipped = dict(targets.skipped)
    status, answers, lines, errors = EXPLAIN_FUSED, [], [], []
    for path in targets.models:
        answer: dict = {"model": str(path)}
        try:
            findings, answer["how"] = explain_model(path, results_root=args.results_dir, backend=backend,
                                                    custom_objects=tuple(args.custom_objects))
        except WeightsOnly as exc:
            skipped[path] = str(exc)
            continue
        except NoRecurrentLayers as exc:
            findings, answer["note"] = [], str(exc)
        except StudyError as exc:
            errors.append(f"lstmstudy: error: {exc}")
            status = EXPLAIN_UNREADABLE
            answers.append({**answer, "error": str(exc)})
            continue
        if any(not finding.told for finding in findings):
            status = EXPLAIN_UNREADABLE
        elif any(not finding.fused for finding in findings) and status == EXPLAIN_FUSED:
            status = EXPLAIN_FALLS_BACK
        answers.append({**answer, "layers": [finding.as_dict() for finding in findings]})
        untold = sum(not finding.told for finding in findings)
        unknown = f", {untold} class(es) it cannot see into" if untold else ""
        lines.append(answer.get("note") or f"{path}: {len(findings) - untold} recurrent layer(s){unknown}, as they "
                                           f"would run on a CUDA GPU with cuDNN on Keras's {backend.name} backend "
                                           f"({backend.chosen_by}), {answer['how']}")
        lines += map(str, findings)
    if args.json:
        lines = [json.dumps({"explained_for": "a CUDA GPU with cuDNN", "keras_backend": backend._asdict(),
                             "exit_status": status, "models": answers,
                             "skipped": [{"path": str(path), "why": why} for path, why in skipped.items()]},
                            indent=2)]
    for line in errors + ([skipped_note(skipped)] if skipped else []):
        print(line, file=sys.stderr)
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
    return status


def quiet_stdout() -> None:
    """Point stdout at the null device once its reader has gone (`| head`), so that nothing more is written there
    and the interpreter's last flush cannot fail with a traceback (the `signal` module's documented recipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


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
    root = study_root()
    if not (root / "_toc.yml").exists():
        raise outside_the_study(f"no book (_toc.yml) in {root}")
    if missing := missing_pages(root):
        raise StudyError(f"{len(missing)} page(s) of the book are not rendered yet ({', '.join(missing)}): "
                         f"run `lstmstudy reproduce` first, or `make book`")
    # this interpreter's own, else one on PATH; none: the extra that brings it, in one line
    builder = shutil.which("jupyter-book", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                                 os.environ.get("PATH", "")]))
    if builder is None:
        raise MissingDependency("jupyter-book", extra_for("jupyter_book") or "book")
    command = [builder, "build", str(root), "--keep-going"]
    if not args.no_strict:
        command.append("--warningiserror")
    if args.path_output:
        command += ["--path-output", str(args.path_output)]
    return subprocess.run(command, check=False).returncode


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="lstmstudy", description=__doc__.splitlines()[0])
    main.add_argument("--version", action="version", version=f"lstmstudy {__version__}")
    sub = main.add_subparsers(dest="command", required=True)
    # the commands that read or write the study's folder
    rooted = argparse.ArgumentParser(add_help=False)
    rooted.add_argument("--root", type=Path,
                        help=f"the study's folder: notebooks/, book/, results/, _toc.yml (default: ${ROOT_VARIABLE}, "
                             f"else the checkout the package runs from, else the current folder)")
    # the commands that read or write result sets
    stored = argparse.ArgumentParser(add_help=False)
    stored.add_argument("--results", "--results-dir", dest="results_dir", type=Path, metavar="DIR",
                        help="results root (default: $LSTMSTUDY_RESULTS or results/)")

    env = sub.add_parser("env", help="print this machine's hardware fingerprint and result-set id")
    env.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    env.add_argument("--json", action="store_true", help="print JSON")
    env.add_argument("--check", action="store_true",
                     help="smoke check before a sweep: kernels and dtypes really run, TF32, NVML, Keras backend; "
                          "shows what would spoil some rows, and exits 1 only if cuDNN (oneDNN) is unusable")
    env.set_defaults(func=cmd_env)

    mea = sub.add_parser("measure", parents=[rooted, stored],
                         help="measure claims' default grids for a device into results/ (no notebooks)")
    mea.add_argument("--claims", nargs="+", metavar="CLAIM",
                     help="claims by number, name or stem, 'kernels' for the kernel benchmark, measured in the "
                          "order given; 'gpu-order' for every one in a GPU node's order (default: all)")
    mea.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    mea.add_argument("--plan", choices=["lease"],
                     help="'lease': the five judged claims on the grids their verdicts read (a 15-minute GPU lease), "
                          "then every default grid in a GPU node's order, compiles last")
    mea.add_argument("--plan-only", action="store_true",
                     help="print what would be measured (the quick grids with --quick) and its planned time")
    mea.add_argument("--quick", action="store_true", help="shrink every grid (a smoke run)")
    mea.add_argument("--deadline", type=float, metavar="SECONDS",
                     help="stop cleanly between points after this many seconds; the next call resumes")
    mea.add_argument("--retry-errors", action="store_true", help="measure again points stored as errors")
    mea.add_argument("--processes", type=int, metavar="N",
                     help="worker processes each point's rounds are spread over, one after another (default: the "
                          "claims' plan, 3; one with --plan lease, where a 15-minute lease cannot pay for more)")
    mea.add_argument("--rerun", action="store_true",
                     help="measure every point again, stored or not (the pages read the newest rows): for a set "
                          "stored at another speed")
    mea.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    mea.set_defaults(func=cmd_measure)

    pack = sub.add_parser("pack", parents=[stored],
                          help="pack one hardware set's rows and fingerprint into one file to send, with a manifest "
                               "(what `lstmstudy unpack` checks)")
    pack.add_argument("hardware_id", metavar="HARDWARE_ID", help="the set's id, as `lstmstudy env` prints it")
    pack.add_argument("-o", "--output", type=Path, metavar="FILE",
                      help="the file to write (default: HARDWARE_ID.lstmstudy.tar.gz here)")
    pack.set_defaults(func=cmd_pack)

    unpack = sub.add_parser("unpack", parents=[stored],
                            help="check a packed set and store it under results/, for `lstmstudy reproduce "
                                 "--no-measure` to render")
    unpack.add_argument("file", type=Path, metavar="FILE", help="a file `lstmstudy pack` wrote")
    unpack.add_argument("--replace", action="store_true",
                        help="overwrite a different set stored under the same id (its rows are lost)")
    unpack.set_defaults(func=cmd_unpack)

    rep = sub.add_parser("reproduce", parents=[rooted],
                         help="run the claim notebooks with papermill (measure, then render into book/), then render "
                              "the ledger and the conclusions")
    rep.add_argument("--claims", nargs="+", metavar="CLAIM", help="claims by number or name (default: all)")
    rep.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    rep.add_argument("--quick", action="store_true", help="shrink every grid (a smoke run)")
    rep.add_argument("--no-measure", action="store_true", help="only render from stored results")
    rep.add_argument("--no-progress", action="store_true", help="hide papermill's progress bar")
    rep.add_argument("--notebooks", type=Path, help=argparse.SUPPRESS)
    rep.add_argument("--out", type=Path,
                     help="where executed notebooks go (default: book/claims, and the ledger, the conclusions and "
                          "the guide into book/)")
    # where the ledger, the conclusions and the guide go: book/, or --out where that is given
    rep.add_argument("--pages-out", type=Path, default=None, help=argparse.SUPPRESS)
    rep.set_defaults(func=cmd_reproduce)

    exp = sub.add_parser("explain", help="say which recurrent layers of saved Keras models (.keras, .h5 or .hdf5 "
                                         "files, or folders of them) would miss cuDNN on a GPU on your Keras "
                                         "backend, why, the fix, and the slowdown claim 1 measured",
                         description=EXPLAIN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    exp.add_argument("paths", type=Path, nargs="*", metavar="PATH",
                     help="models saved with model.save('....keras') (or .h5, .hdf5), or folders of them (weights "
                          "files are skipped); exit status 0 when every recurrent layer gets cuDNN's fused kernel, 1 "
                          "when any falls back, 2 when a file cannot be read or a custom class in it cannot be told")
    exp.add_argument("--custom-objects", action="append", default=[], metavar="MODULE",
                     help="import MODULE (a module name or a .py file) that defines the model's custom classes, and "
                          "load the model through Keras (seconds: it imports Keras and its backend); may be repeated")
    exp.add_argument("--tables", action="store_true",
                     help="instead of a model: explain the settings the pages of claims 1 and 5 show and store them in "
                          "the checkout's results/explained/, where the pages read them (or under --results-dir)")
    exp.add_argument("--json", action="store_true", help="print one JSON object (its shape is above)")
    exp.add_argument("--results-dir", type=Path, help="results root (default: $LSTMSTUDY_RESULTS or results/)")
    exp.set_defaults(func=cmd_explain)

    pub = sub.add_parser("published", help="derive the tables of LSTM measurements others published, with their "
                                           "provenance, from the raw copies in lstmstudy/sources/raw")
    pub.add_argument("--check", action="store_true", help="write nothing; exit 1 if a stored table differs")
    pub.set_defaults(func=cmd_published)

    book = sub.add_parser("book", parents=[rooted], help="build the HTML book into _build/html")
    book.add_argument("--no-strict", action="store_true", help="do not treat Sphinx warnings as errors")
    book.add_argument("--path-output", type=Path, help="build somewhere other than the repository root")
    book.set_defaults(func=cmd_book)
    return main


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # before any command imports TensorFlow or Keras; the notebooks' kernels inherit it. `explain PATH` answers for
    # the backend the user's own Keras would use, so there the study chooses none
    backends.study_process(choose_backend=args.command != "explain" or args.tables)
    if getattr(args, "root", None):  # for this process and the notebooks' kernels it starts
        os.environ[ROOT_VARIABLE] = str(args.root.resolve())
    try:
        return args.func(args)
    except StudyError as exc:
        print(f"lstmstudy: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional dependency the command needs: named with its extra
        if (missing := missing_dependency(exc)) is None:
            raise
        print(f"lstmstudy: error: {missing}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader closed the pipe (`| head`): stop quietly, with the shell's status for it
        quiet_stdout()
        return 141
    except KeyboardInterrupt:  # every finished row is stored already: a sweep appends group by group
        print("lstmstudy: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
