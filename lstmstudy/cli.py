"""`lstmstudy env | reproduce | book`: the study's command line.

User mistakes (an unknown claim, `--device cuda` without a GPU, a corrupt results file) end with one
line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from lstmstudy import hardware
from lstmstudy.errors import StudyError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
BOOK = ROOT / "book"
EXECUTED = BOOK / "claims"
#: pages rendered from every stored result set after the claims: notebooks/<name>.ipynb -> book/<name>.ipynb
SUMMARY_PAGES = ("ledger", "conclusions")


def claim_notebooks(folder: Path = NOTEBOOKS) -> dict[str, Path]:
    """Claim notebooks by stem (`01_cudnn_fallback`), in order."""
    return {path.stem: path for path in sorted(folder.glob("[0-9][0-9]_*.ipynb"))}


def summary_notebooks(folder: Path = NOTEBOOKS) -> dict[str, Path]:
    """The ledger and conclusions sources found in `folder`, in the order they are rendered."""
    return {name: folder / f"{name}.ipynb" for name in SUMMARY_PAGES if (folder / f"{name}.ipynb").exists()}


def select_claims(requested: list[str] | None, available: dict[str, Path]) -> dict[str, Path]:
    """Match `--claims` by number (`01`), name (`cudnn_fallback`) or stem; unknown ones are an error."""
    if not requested:
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
    fp = hardware.fingerprint(hardware.resolve_device(args.device))
    if args.json:
        print(json.dumps(fp.as_dict(), indent=2))
    else:
        for key, value in fp.as_dict().items():
            print(f"{key:>15}: {value}")
    return 0


def _execute(source: Path, target: Path, parameters: dict, progress: bool) -> None:
    import papermill

    try:
        papermill.execute_notebook(str(source), str(target), kernel_name="python3", cwd=str(ROOT),
                                   progress_bar=progress, parameters=parameters)
    except papermill.PapermillExecutionError as exc:
        raise StudyError(f"{source.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue} "
                         f"(the executed copy with the traceback is {target})") from None


def cmd_reproduce(args: argparse.Namespace) -> int:
    hardware.resolve_device(args.device)  # fail before running anything if the device is not here
    notebooks = select_claims(args.claims, claim_notebooks(args.notebooks))
    if not notebooks:
        print(f"no claim notebooks in {args.notebooks} yet; nothing to reproduce")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for stem, source in notebooks.items():
        target = args.out / source.name
        print(f"{stem}: measuring on {args.device}{' (quick grid)' if args.quick else ''} -> {target}")
        _execute(source, target, {"device": args.device, "measure": not args.no_measure, "quick": args.quick},
                 progress=not args.no_progress)
    # the ledger and the conclusions read every stored result set, so they are rendered after any claim
    for name, source in summary_notebooks(args.notebooks).items():
        args.pages_out.mkdir(parents=True, exist_ok=True)
        target = args.pages_out / source.name
        print(f"{name}: rendering from every stored result set -> {target}")
        _execute(source, target, {}, progress=not args.no_progress)
    return 0


def missing_pages(root: Path = ROOT) -> list[str]:
    """The pages of the table of contents that do not exist yet (executed pages before `reproduce`)."""
    from lstmstudy.ledger import toc_files

    return [name for name in toc_files(root / "_toc.yml")
            if not any((root / f"{name}{suffix}").exists() for suffix in (".md", ".ipynb"))]


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
    sub = main.add_subparsers(dest="command", required=True)

    env = sub.add_parser("env", help="print this machine's hardware fingerprint and result-set id")
    env.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    env.add_argument("--json", action="store_true", help="print JSON")
    env.set_defaults(func=cmd_env)

    rep = sub.add_parser("reproduce", help="run the claim notebooks with papermill (measure, then render into "
                                           "book/), then render the ledger and the conclusions")
    rep.add_argument("--claims", nargs="+", metavar="CLAIM", help="claims by number or name (default: all)")
    rep.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    rep.add_argument("--quick", action="store_true", help="shrink every grid (a smoke run)")
    rep.add_argument("--no-measure", action="store_true", help="only render from stored results")
    rep.add_argument("--no-progress", action="store_true", help="hide papermill's progress bar")
    rep.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help=argparse.SUPPRESS)
    rep.add_argument("--out", type=Path, default=EXECUTED, help="where executed notebooks go (default: book/claims)")
    rep.add_argument("--pages-out", type=Path, default=BOOK, help=argparse.SUPPRESS)  # the ledger and conclusions
    rep.set_defaults(func=cmd_reproduce)

    book = sub.add_parser("book", help="build the HTML book into _build/html")
    book.add_argument("--no-strict", action="store_true", help="do not treat Sphinx warnings as errors")
    book.add_argument("--path-output", type=Path, help="build somewhere other than the repository root")
    book.set_defaults(func=cmd_book)
    return main


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except StudyError as exc:
        print(f"lstmstudy: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
