"""Every install line a reader copies (the README, the book's chapters, the notebooks, the pre-commit hook file)
installs lstmstudy from where it is: the checkout, or a wheel built there. lstmstudy is on no package index, and the
repository address the pages once gave does not exist: `pip install lstmstudy` fails, or installs another project's
package of that name.

The lines are checked as written (no bare name, no URL, only declared extras), then run as printed in a copy of the
checkout, offline and installing nothing: the printed `pip wheel` line builds the wheel (`--no-build-isolation`, so no
build backend is fetched), every line that installs lstmstudy from a path runs with `--dry-run --no-index --no-deps`,
a notebook's install cell as IPython runs it, and the README's CI step and local pre-commit hook with the `lstmstudy`
of this environment. tests/test_wheel.py installs the wheel for real, into a fresh venv."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
#: what a reader copies from: the rendered claim pages are the notebooks executed, checked through their sources
SOURCES = ["README.md", ".pre-commit-hooks.yaml", *sorted(
    str(path.relative_to(ROOT)) for path in [*(ROOT / "book").glob("*.md"), *(ROOT / "notebooks").glob("*.ipynb")])]
DECLARED = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])
BACKENDS = {"tensorflow", "torch", "jax"}
#: the one way a page may print a bare-name install: saying what it would do
WARNING = re.compile(r"`pip install lstmstudy` would fetch another\s+project's\s+package")
#: a pip command as a page prints it: in a shell line, an inline `code` span, a notebook's `%pip` magic
COMMAND = re.compile(r"[%!]?(?:python3? -m )?pip3? (?:install|wheel)\b[^`#\n;&|]*")
#: pip's options that take a value (`-e`'s value is a requirement)
TAKES_A_VALUE = {"-r", "--requirement", "-c", "--constraint", "-t", "--target", "-f", "--find-links", "-i",
                 "--index-url", "--extra-index-url", "--prefix", "--root", "--python", "--platform", "--python-version",
                 "--implementation", "--abi", "--only-binary", "--no-binary", "--src", "--report", "--upgrade-strategy",
                 "-C", "--config-settings", "-w", "--wheel-dir", "--progress-bar"}
#: copied into the checkout a test builds in, so that nothing is written into this one
BUILT_FROM = ("pyproject.toml", "README.md", "LICENSE", "lstmstudy")
#: pip as the lines below run it: building offline, installing nothing and fetching nothing, and reporting what it would
#: install, with the extras it was asked for and those the package provides
PIP = ('pip() { case "$1" in wheel) more=(--quiet --no-build-isolation);; '
       'install) more=(--dry-run --no-index --no-deps --no-build-isolation --report "$REPORT");; *) more=();; esac; '
       '"$PY" -m pip "$1" "${more[@]}" "${@:2}"; }\n')


def texts() -> list[tuple[str, str]]:
    """(file, text) of every source; a notebook's cells one by one."""
    found = []
    for name in SOURCES:
        text = (ROOT / name).read_text(encoding="utf-8")
        if name.endswith(".ipynb"):
            found += [(name, "".join(cell["source"])) for cell in json.loads(text)["cells"]]
        else:
            found.append((name, text))
    return found


def commands_in(text: str) -> list[str]:
    return [match.group(0).strip() for match in COMMAND.finditer(WARNING.sub("", text))]


def commands() -> list[tuple[str, str]]:
    """Each (file, command) that runs pip install or pip wheel, up to a comment, the end of its code span or line."""
    return [(name, command) for name, text in texts() for command in commands_in(text)]


def requirements(command: str) -> list[str]:
    """The requirements a pip command names, options and their values left out."""
    args = re.sub(r"^.*?pip3? (install|wheel)\b", "", command)
    try:
        tokens = shlex.split(args)
    except ValueError:  # a quote that the line break of a prose paragraph left open
        tokens = args.split()
    found, value = [], False
    for token in tokens:
        if value:
            value = False
        elif token in TAKES_A_VALUE:
            value = True
        elif not token.startswith("-"):
            found.append(token)
    return found


def by_name(requirement: str) -> bool:
    """`lstmstudy`, `lstmstudy[extras]`, `lstmstudy==1.0`, `lstmstudy @ URL`: from an index or an address."""
    return bool(re.fullmatch(r"lstmstudy\s*(\[[^\]]*\])?\s*((@|[<>=!~]=?).*)?", requirement, re.IGNORECASE))


def from_an_address(requirement: str) -> bool:
    lowered = requirement.lower()
    return "github.com/lstmstudy" in lowered or bool(re.match(r"(git|hg|svn|bzr)\+|https?://", lowered)
                                                     and "lstmstudy" in lowered)


def from_a_path(requirement: str) -> tuple[str, set[str]] | None:
    """(what, extras) where the requirement is lstmstudy's wheel or checkout: `dist/lstmstudy-*.whl`, `{wheel}`,
    `$(echo dist/lstmstudy-*.whl)`, `.`, each with its extras; else None."""
    match = re.fullmatch(r"(.+?)(?:\[([\w,\s-]*)\])?", requirement)
    what, extras = match[1], match[2]
    if re.search(r"lstmstudy-[^\s/]*\.whl|\{wheel\}", what) or what in (".", "./"):
        return what, {extra.strip() for extra in (extras or "").split(",") if extra.strip()}
    return None


def problems(command: str) -> list[str]:
    """What stops a printed command from working on a fresh machine, or installs another project's package."""
    found = []
    for requirement in requirements(command):
        if by_name(requirement) or from_an_address(requirement):
            found.append(f"{requirement!r}: lstmstudy is on no package index and at no such address")
        path = from_a_path(requirement)
        if path and not path[1] <= DECLARED:
            found.append(f"{requirement!r}: extras {sorted(path[1] - DECLARED)} are not declared in pyproject.toml")
    return found


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def ci_snippets() -> tuple[list[dict], dict]:
    """The README's CI steps and its `.pre-commit-config.yaml`, as YAML reads them."""
    blocks = re.findall(r"```yaml\n(.*?)```", section((ROOT / "README.md").read_text(), "Check your models in CI"),
                        re.DOTALL)
    assert len(blocks) == 2, blocks
    return yaml.safe_load(blocks[0]), yaml.safe_load(blocks[1])


def hook_problems(config: dict) -> list[str]:
    """What stops a `.pre-commit-config.yaml` from running lstmstudy explain on a fresh clone, with a backend chosen."""
    found = []
    for repo in config["repos"]:
        if repo["repo"] != "local":  # lstmstudy's repository address does not exist; a mirror's is the reader's own
            found.append(f"repo {repo['repo']!r}: only a local hook works as printed")
        for hook in repo["hooks"]:
            if hook.get("language") != "system" or "entry" not in hook:
                found.append(f"{hook['id']}: a local hook runs the lstmstudy installed beside pre-commit (system)")
                continue
            entry = shlex.split(hook["entry"])
            if entry[:1] != ["env"] or not re.fullmatch(rf"KERAS_BACKEND=({'|'.join(BACKENDS)})", entry[1]):
                found.append(f"{hook['entry']!r}: sets no Keras backend")
            if entry[-2:] != ["lstmstudy", "explain"]:
                found.append(f"{hook['entry']!r}: runs no lstmstudy explain")
    return found


def test_the_sources_hold_install_lines():
    files = {name for name, _ in commands()}
    assert {"README.md", "book/add_your_gpu.md", "notebooks/01_cudnn_fallback.ipynb"} <= files


def test_the_pages_say_where_to_install_from():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in (section(readme, "The helpers in your own notebook"), section(readme, "Check your models in CI"),
                 (ROOT / "book/add_your_gpu.md").read_text(encoding="utf-8")):
        assert re.search(r"on no\s+package\s+index", text)


@pytest.mark.parametrize(("name", "command"), commands())
def test_no_line_installs_lstmstudy_from_an_index_or_a_missing_address(name, command):
    assert not [problem for problem in problems(command) if "not declared" not in problem], (name, command)


@pytest.mark.parametrize(("name", "command"), commands())
def test_every_extra_a_line_names_is_declared(name, command):
    assert not [problem for problem in problems(command) if "not declared" in problem], (name, command)


def test_the_old_lines_are_caught():
    """The lines the pages held before, and the likes of them: each fails the checks above."""
    missing = "git+https://github.com/lstmstudy/lstmstudy"
    old = ['pip install "lstmstudy[torch,keras,nvml]"',
           f'# or from the repository: pip install "lstmstudy[torch,keras,nvml] @ {missing}"',
           f'    pip install "lstmstudy @ {missing}" h5py', f"pip install {missing}",
           '    %pip install --quiet "lstmstudy[torch,keras,nvml,book]"',
           "you lack names it (`pip install 'lstmstudy[book]'`). `study` is everything",
           "pip install lstmstudy", "pip3 install -U lstmstudy==0.1.0", "!pip install git+https://x.org/lstmstudy",
           'pip install "$(echo dist/lstmstudy-*.whl)[keras,gpu]"', 'pip install -e ".[study,docs]"']
    for line in old:
        (command,) = commands_in(line)
        assert problems(command), line
    assert hook_problems({"repos": [{"repo": "https://github.com/lstmstudy/lstmstudy", "rev": "main",
                                     "hooks": [{"id": "lstmstudy-explain"}]}]})
    assert hook_problems({"repos": [{"repo": "local", "hooks": [
        {"id": "lstmstudy-explain", "entry": "lstmstudy explain", "language": "system"}]}]})  # no backend chosen


def test_the_ci_step_and_the_hook_choose_a_keras_backend():
    steps, config = ci_snippets()
    (step,) = [step for step in steps if "lstmstudy explain" in step.get("run", "")]
    assert step["env"]["KERAS_BACKEND"] in BACKENDS
    assert not hook_problems(config)
    hook = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))[0]
    assert hook["entry"] == "lstmstudy explain" and hook["language"] == "python"  # a mirror's clone installs itself


# --- the lines run as printed --------------------------------------------------------------------------------------

def _run(script: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    (cwd / ".report.json").unlink(missing_ok=True)
    return subprocess.run(["bash", "-eo", "pipefail", "-c", PIP + script], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env or _environment(cwd))


def _environment(checkout: Path) -> dict[str, str]:
    """This environment's Python and `lstmstudy` first on PATH; pip's own configuration (find-links, an index) and
    the reader's Keras backend and keras.json left out."""
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "PIP_FIND_LINKS", "PIP_INDEX_URL")}
    return env | {"PY": sys.executable, "REPORT": str(checkout / ".report.json"), "PIP_CONFIG_FILE": os.devnull,
                  "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                  "KERAS_HOME": str(checkout / ".keras"), "PATH": f"{checkout / '.bin'}{os.pathsep}{env['PATH']}"}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A copy of the checkout where each printed `pip wheel` line has built the wheel into dist/; the wheel copied
    into tools/ (the CI step's) and beside the pages (a hosted notebook's upload), and an `lstmstudy` command."""
    folder = tmp_path_factory.mktemp("install-lines") / "checkout"
    folder.mkdir()
    for name in BUILT_FROM:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, folder / name)
    (folder / ".bin").mkdir()
    (folder / ".bin" / "lstmstudy").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lstmstudy "$@"\n')
    (folder / ".bin" / "lstmstudy").chmod(0o755)
    builds = {command for _, text in texts() for line in text.splitlines() if line.strip().startswith("pip wheel")
              for command in commands_in(line)}  # a code block's lines (a prose span may break across lines)
    assert builds == {"pip wheel --no-deps -w dist ."}, builds
    for command in builds:
        done = _run(command, folder)
        assert done.returncode == 0, (command, done.stderr[-3000:])
    (wheel,) = (folder / "dist").glob("lstmstudy-*.whl")
    (folder / "tools").mkdir()
    shutil.copy(wheel, folder / "tools")
    shutil.copy(wheel, folder)
    return folder


def _accepted(done: subprocess.CompletedProcess, command: str, checkout: Path) -> None:
    """pip would install lstmstudy, with every extra the command asks for (pip only warns of an unknown one)."""
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-3000:])
    report = json.loads((checkout / ".report.json").read_text())
    items = [item for item in report["install"] if item["metadata"]["name"] == "lstmstudy"]
    assert len(items) == 1, (command, "pip would not install lstmstudy from it", done.stdout[-2000:])
    (item,) = items
    asked = set(item.get("requested_extras", []))
    assert asked <= set(item["metadata"].get("provides_extra", [])), (command, asked)
    assert "does not provide the extra" not in done.stdout + done.stderr, (command, done.stderr[-2000:])


def test_the_shell_lines_install_the_wheel_or_the_checkout(checkout):
    """Each shell line (a code block's, a prose span's) that installs lstmstudy from a path, run in the checkout."""
    lines = {command for _, command in commands() if not command.startswith(("%", "!")) and "install" in command
             and any(from_a_path(requirement) for requirement in requirements(command))}
    assert {'pip install "$(echo dist/lstmstudy-*.whl)[keras]"', "pip install tools/lstmstudy-*.whl h5py",
            "pip install -e ."} <= lines, lines
    if "h5py" in " ".join(lines) and importlib.util.find_spec("h5py") is None:
        pytest.skip("the CI step's line installs h5py beside the wheel: here there is none to resolve it offline")
    for command in sorted(lines):
        _accepted(_run(command, checkout), command, checkout)


def _ipython_magics(source: str, cwd: Path) -> list[tuple[str, str]]:
    """The (magic, line) each line magic and `!` command of a cell runs where lstmstudy cannot be imported (a hosted
    notebook), each line expanded as IPython expands it; the cell runs in `cwd`."""
    import builtins

    from IPython.core.inputtransformer2 import TransformerManager
    from IPython.utils.text import DollarFormatter

    ran: list[tuple[str, str]] = []

    class Shell:
        def run_line_magic(self, name: str, line: str, _stack_depth: int = 1) -> None:
            ran.append((name, DollarFormatter().vformat(line, args=[], kwargs=namespace)))

        def system(self, command: str) -> None:
            ran.append(("!", command))

    def refusing(name, *args, **kwargs):
        if name.split(".")[0] == "lstmstudy":
            raise ImportError(f"No module named {name!r}")
        return builtins.__import__(name, *args, **kwargs)

    namespace = {"__builtins__": {**vars(builtins), "__import__": refusing}, "get_ipython": Shell}
    before = os.getcwd()
    os.chdir(cwd)
    try:
        exec(TransformerManager().transform_cell(source), namespace)
    finally:
        os.chdir(before)
    return ran


def test_the_notebook_cells_install_the_uploaded_wheel(checkout):
    """Each notebook cell with `%pip` and the hosted notebook's lines of "Add your GPU", run as IPython runs them
    (`%pip LINE` is `python -m pip LINE` in a shell) beside the uploaded wheel."""
    pytest.importorskip("IPython")
    hosted = re.search(r"```text\n(import glob.*?)```", (ROOT / "book/add_your_gpu.md").read_text(), re.DOTALL)[1]
    cells = [hosted, *(text for name, text in texts() if name.endswith(".ipynb") and "%pip" in text)]
    assert len(cells) >= 8, cells
    lines = set()
    for cell in cells:
        pips = [line for magic, line in _ipython_magics(cell, checkout) if magic == "pip"]
        assert len(pips) == 1 and "lstmstudy-" in pips[0], (cell, pips)
        lines.add(f"pip {pips[0]}")
    for command in sorted(lines):
        _accepted(_run(command, checkout), command, checkout)


def _fast_model(path: Path) -> Path:
    """A .keras file as Keras saves one, its config only: an LSTM that gets cuDNN on every backend."""
    path.parent.mkdir(parents=True, exist_ok=True)
    layers = [{"module": "keras.layers", "class_name": "InputLayer",
               "config": {"name": "in", "batch_shape": [None, 5, 3]}},
              {"module": "keras.layers", "class_name": "LSTM", "config": {"name": "lstm", "units": 4}}]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps({"module": "keras", "class_name": "Sequential",
                                                   "config": {"name": "fast", "layers": layers}}))
    return path


def test_the_ci_step_runs_as_printed(checkout):
    """The README's CI step: its `run` lines, in bash as GitHub Actions runs them, with its `env`."""
    if importlib.util.find_spec("h5py") is None:
        pytest.skip("the CI step's line installs h5py beside the wheel: here there is none to resolve it offline")
    _fast_model(checkout / "models" / "fast.keras")
    (step,) = [step for step in ci_snippets()[0] if "lstmstudy explain" in step.get("run", "")]
    done = _run(step["run"], checkout, _environment(checkout) | step["env"])
    backend = step["env"]["KERAS_BACKEND"]
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    installed = [item["metadata"]["name"] for item in json.loads((checkout / ".report.json").read_text())["install"]]
    assert installed == ["lstmstudy"]  # and h5py, the one installed here
    assert f"on Keras's {backend} backend (KERAS_BACKEND={backend})" in done.stdout, done.stdout[-2000:]


def test_the_pre_commit_hook_runs_as_printed(checkout):
    """The README's local hook as pre-commit runs it: its entry with the staged files its `files` and `exclude` pick
    appended; with each backend its comment offers; and without the `env` prefix, as the README says, for the backend
    of the environment pre-commit passes through, else of keras.json."""
    (hook,) = ci_snippets()[1]["repos"][0]["hooks"]
    files, exclude = re.compile(hook["files"]), re.compile(hook.get("exclude", "$^"))
    staged = ["models/fast.keras", "models/fast.weights.h5", "notes.md"]
    picked = [name for name in staged if files.search(name) and not exclude.search(name)]
    assert picked == ["models/fast.keras"]
    _fast_model(checkout / picked[0])
    printed = shlex.split(hook["entry"])
    (checkout / ".keras").mkdir(exist_ok=True)
    (checkout / ".keras" / "keras.json").write_text(json.dumps({"backend": "torch"}))
    runs = [(printed, {}, printed[1].split("=")[1], "KERAS_BACKEND"),
            *(([printed[0], f"KERAS_BACKEND={backend}", *printed[2:]], {}, backend, "KERAS_BACKEND")
              for backend in sorted(BACKENDS)),
            (printed[2:], {"KERAS_BACKEND": "jax"}, "jax", "KERAS_BACKEND"),
            (printed[2:], {}, "torch", "keras.json")]
    for entry, env, backend, chosen_by in runs:
        done = subprocess.run([*entry, *picked], cwd=checkout, env=_environment(checkout) | env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, (entry, env, done.stdout[-2000:], done.stderr[-2000:])
        said = re.search(r"on Keras's (\w+) backend \(([^)]*)\)", done.stdout)
        assert said and said[1] == backend and chosen_by in said[2], (entry, env, done.stdout[-2000:])
