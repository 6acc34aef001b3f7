from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lstmstudy import cli, errors, paths, results, rules, toc


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lstmstudy.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", [[], ["env"], ["reproduce"], ["book"], ["explain"], ["pack"], ["unpack"]])
def test_help(command):
    out = run(*command, "--help")
    assert out.returncode == 0 and "usage: lstmstudy" in out.stdout


def test_env_prints_the_fingerprint():
    out = run("env", "--json", "--device", "cpu")
    assert out.returncode == 0
    fp = json.loads(out.stdout)
    assert fp["device_kind"] == "cpu" and fp["hardware_id"].startswith("cpu-")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
@pytest.mark.parametrize("command", [["env", "--device", "cuda"], ["reproduce", "--device", "cuda"]])
def test_gpu_asked_for_without_one_is_one_clear_line(command):
    out = run(*command)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr
    assert out.stderr.startswith("lstmstudy: error: device 'cuda' was asked for")


def test_unknown_claim_is_one_clear_line(tmp_path):
    import nbformat  # inside: the file collects on a GPU node without it

    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "01_demo.ipynb")
    out = run("reproduce", "--device", "cpu", "--notebooks", str(tmp_path), "--claims", "99")
    assert out.returncode == 2 and out.stderr.strip() == "lstmstudy: error: unknown claim '99'; known claims: 01_demo"


def test_reproduce_with_no_notebooks_is_one_clear_line(tmp_path):
    """From a wheel, in a folder that is not the study's: nothing to reproduce is an error, not a quiet success."""
    out = run("reproduce", "--device", "cpu", "--notebooks", str(tmp_path))
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr.startswith(f"lstmstudy: error: no claim notebooks in {tmp_path}: run this in a checkout")
    assert "--root" in out.stderr


def test_select_claims_by_number_name_or_stem(tmp_path):
    available = {"01_cudnn_fallback": tmp_path / "a", "02_cpu_vs_gpu_batch": tmp_path / "b"}
    assert list(cli.select_claims(["02"], available)) == ["02_cpu_vs_gpu_batch"]
    assert list(cli.select_claims(["cudnn_fallback", "02_cpu_vs_gpu_batch"], available)) == list(available)
    assert cli.select_claims(None, available) == available


def _parameterised_notebook(path, body: str) -> None:
    import nbformat

    params = nbformat.v4.new_code_cell('device = "auto"\nmeasure = False\nquick = False')
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[params, nbformat.v4.new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_reproduce_runs_notebooks_with_the_parameters(tmp_path):
    import nbformat

    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    _parameterised_notebook(src / "01_demo.ipynb", "print(device, measure, quick)")
    done = run("reproduce", "--device", "cpu", "--quick", "--no-progress", "--notebooks", str(src), "--out", str(out))
    assert done.returncode == 0, done.stderr
    executed = nbformat.read(out / "01_demo.ipynb", as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "cpu True True\n"


def test_a_failing_notebook_is_one_clear_line(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _parameterised_notebook(src / "01_demo.ipynb", "raise ValueError('quick must be a bool')")
    done = run("reproduce", "--device", "cpu", "--no-progress", "--notebooks", str(src), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "01_demo.ipynb failed in cell" in done.stderr and "ValueError: quick must be a bool" in done.stderr


def test_reproduce_renders_the_ledger_and_conclusions_after_the_claims(tmp_path):
    import nbformat

    src, book = tmp_path / "src", tmp_path / "book"
    src.mkdir()
    _parameterised_notebook(src / "01_demo.ipynb", "print('claim')")
    for name in cli.SUMMARY_PAGES:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"print({name!r})")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, src / f"{name}.ipynb")
    done = run("reproduce", "--device", "cpu", "--no-progress", "--notebooks", str(src), "--out", str(book / "claims"),
               "--pages-out", str(book))
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("01_demo:") < done.stdout.index("ledger:") < done.stdout.index("conclusions:")
    for name in cli.SUMMARY_PAGES:
        executed = nbformat.read(book / f"{name}.ipynb", as_version=4)
        assert executed.cells[-1].outputs[0]["text"] == f"{name}\n"
    assert (book / "claims" / "01_demo.ipynb").exists()


def test_reproduce_no_measure_renders_where_the_measuring_stack_is_not_installed(tmp_path):
    """As on a laptop with pandas and Jupyter only: the claim and summary pages render in kernels that could not
    import torch if they tried, and the guide page, which runs a Keras model, is left as it is, in one line."""
    import nbformat

    src, book = tmp_path / "src", tmp_path / "book"
    src.mkdir()
    _parameterised_notebook(src / "01_demo.ipynb", "import importlib.util\nprint(importlib.util.find_spec('numpy'))")
    for name in (*cli.SUMMARY_PAGES, *cli.GUIDE_PAGES):
        _parameterised_notebook(src / f"{name}.ipynb", "import torch")
    code = ("from lstmstudy.houses import block_measuring\nblock_measuring()\nfrom lstmstudy import cli\n"
            f"raise SystemExit(cli.main(['reproduce', '--no-measure', '--no-progress', '--notebooks', {str(src)!r}, "
            f"'--out', {str(book / 'claims')!r}, '--pages-out', {str(book)!r}, '--claims', '01']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "published.ipynb failed in cell" in done.stderr and "torch belongs to the measuring house" in done.stderr
    assert (book / "claims" / "01_demo.ipynb").exists() and (book / "claims_table.md").exists()
    assert (book / "outcome_words.md").read_text() == rules.glossary()
    for name in (*cli.SUMMARY_PAGES, *cli.GUIDE_PAGES):
        _parameterised_notebook(src / f"{name}.ipynb", f"print({name!r})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "check_your_model: left as rendered" in done.stdout and not (book / "check_your_model.ipynb").exists()
    assert nbformat.read(book / "ledger.ipynb", as_version=4).cells[-1].outputs[0]["text"] == "ledger\n"


def test_missing_pages_are_named_before_the_book_is_built(tmp_path):
    import nbformat

    (tmp_path / "book" / "claims").mkdir(parents=True)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                       "  - glob: book/claims/*\n  - file: book/ledger\n")
    for name in ("notebooks/01_demo.ipynb", "notebooks/02_more.ipynb", "book/claims/02_more.ipynb"):
        nbformat.write(nbformat.v4.new_notebook(), tmp_path / name)
    # the glob takes the pages there; a claim notebook's page that is not there yet is named all the same
    assert toc.toc_files(tmp_path / "_toc.yml") == ["book/intro", "book/claims/02_more", "book/ledger"]
    assert toc.missing_pages(tmp_path) == ["book/ledger", "book/claims/01_demo", "book/claims_table.md",
                                           "book/outcome_words.md", "book/landing_answer.md",
                                           "book/landing_caption.md"]
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "book" / "ledger.ipynb")
    (tmp_path / "book" / "claims_table.md").write_text("| claim |\n")
    (tmp_path / "book" / "outcome_words.md").write_text("(outcome-words)=\n")
    for name in toc.LANDING_TEXTS.values():
        (tmp_path / "book" / name).write_text("written\n")
    assert toc.missing_pages(tmp_path) == ["book/claims/01_demo"]


# --- the study's root: --root or $LSTMSTUDY_ROOT, else the checkout the package runs from, else the current folder

def test_the_root_is_the_variable_else_the_checkout_else_the_current_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("LSTMSTUDY_ROOT", raising=False)
    monkeypatch.delenv("LSTMSTUDY_RESULTS", raising=False)
    assert paths.study_root() == paths.PACKAGE_PARENT and paths.is_checkout(paths.PACKAGE_PARENT)
    assert paths.logs_folder(tmp_path / "elsewhere") == paths.PACKAGE_PARENT / "_build" / "logs"  # git-ignored
    monkeypatch.setenv("LSTMSTUDY_ROOT", str(tmp_path))
    assert paths.study_root() == tmp_path and results.default_root() == tmp_path / "results"
    assert paths.logs_folder(tmp_path / "x") == tmp_path / "x" / "logs"  # beside the sets, not in site-packages
    monkeypatch.delenv("LSTMSTUDY_ROOT")
    monkeypatch.setattr(paths, "PACKAGE_PARENT", tmp_path / "site-packages")  # as from a wheel
    monkeypatch.chdir(tmp_path)
    assert paths.study_root() == tmp_path


def test_reproduce_and_book_run_in_the_root_they_are_given(tmp_path):
    """`--root` reaches the notebooks' kernels too: they run in the root and read its results/."""
    import nbformat

    (tmp_path / "notebooks").mkdir()
    _parameterised_notebook(tmp_path / "notebooks" / "01_demo.ipynb",
                            "import os\nfrom lstmstudy import results\nprint(os.getcwd(), results.default_root())")
    done = run("reproduce", "--root", str(tmp_path), "--no-measure", "--no-progress")
    assert done.returncode == 0, done.stderr
    executed = nbformat.read(tmp_path / "book" / "claims" / "01_demo.ipynb", as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == f"{tmp_path} {tmp_path / 'results'}\n"
    assert (tmp_path / "book" / "claims_table.md").exists()
    book = run("book", "--root", str(tmp_path))
    assert book.returncode == 2 and book.stderr == (f"lstmstudy: error: no book (_toc.yml) in {tmp_path}: run this in "
                                                    f"a checkout of the study, or name one with --root or "
                                                    f"$LSTMSTUDY_ROOT\n")


def test_a_missing_optional_dependency_is_named_with_its_extra(monkeypatch):
    assert errors.extra_for("torch") == "torch" and errors.extra_for("pynvml") == "nvml"
    assert errors.extra_for("papermill") == "book" and errors.extra_for("yaml") == ""  # the core has no extra
    assert errors.missing_dependency(ModuleNotFoundError(name="papermill")) is None  # installed here: not missing
    assert errors.missing_dependency(ModuleNotFoundError(name="no_such_module")) is None  # no extra: a traceback
    real = errors.metadata.version
    monkeypatch.setattr(errors.metadata, "version", lambda name: real("x" if name == "papermill" else name))
    missing = errors.missing_dependency(ModuleNotFoundError(name="papermill.iorw"))
    said = str(missing)
    assert said.startswith("this needs papermill, which is not installed here: pip install ") and "[book]" in said


@pytest.mark.parametrize(("recorded", "windows", "command"), [
    ('{"url": "file:///work/lstm%20study", "dir_info": {"editable": true}}', False,
     "pip install -e '/work/lstm study[book]'"),
    ('{"url": "file:///tmp/dist/lstmstudy-1.0-py3-none-any.whl", "archive_info": {}}', False,
     "pip install '/tmp/dist/lstmstudy-1.0-py3-none-any.whl[book]'"),
    (None, False,
     "pip install '<the lstmstudy wheel or checkout you installed>[book]' (lstmstudy is on no package index)"),
    # pip records C:\Users\a b\lstmstudy as file:///C:/Users/a%20b/lstmstudy; cmd.exe takes no single quotes
    ('{"url": "file:///C:/Users/a%20b/lstmstudy", "dir_info": {"editable": true}}', True,
     'pip install -e "C:\\Users\\a b\\lstmstudy[book]"'),
    ('{"url": "file://server/share/lstmstudy-1.0-py3-none-any.whl", "archive_info": {}}', True,
     'pip install "\\\\server\\share\\lstmstudy-1.0-py3-none-any.whl[book]"'),
    (None, True,
     'pip install "<the lstmstudy wheel or checkout you installed>[book]" (lstmstudy is on no package index)'),
])
def test_the_install_command_names_where_lstmstudy_came_from_never_an_index(monkeypatch, recorded, windows,
                                                                             command):
    """lstmstudy is on no index: `pip install lstmstudy[book]` would fetch another project's package of that name."""
    class Installed:
        def read_text(self, name):
            return recorded if name == "direct_url.json" else None

    monkeypatch.setattr(errors.metadata, "distributions", lambda name: [Installed()])
    assert errors.install_command("book", windows=windows) == command


# --- lstmstudy explain PATH ------------------------------------------------------------------------------------


def _saved_model(path, recurrent: bool):
    """A small Keras model saved to `path`: the blog post's two LSTMs (the first with a ReLU), or only a Dense."""
    import keras  # inside: saving needs the whole Keras stack

    body = ([keras.layers.LSTM(8, activation=keras.layers.ReLU(negative_slope=0.05), return_sequences=True,
                               name="lstm"), keras.layers.LSTM(4, name="lstm_1")] if recurrent else [])
    keras.Sequential([keras.Input((5, 3), batch_size=1), *body, keras.layers.Dense(2)]).save(path)
    return path


def _bad_inputs(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model\n")
    (tmp_path / "fake.keras").write_text("not a zip\n")
    return {
        "missing": (tmp_path / "nope.keras", "no such file: "),
        "a text file": (tmp_path / "notes.txt", "is not a Keras model Keras can load (File format not supported"),
        "a .keras that is not a zip": (tmp_path / "fake.keras", "is not a Keras model: a .keras file is a zip"),
    }


def _in_process(capfd, *args: str) -> subprocess.CompletedProcess:
    """`run`'s answer from `cli.main` in this process, for cases that need no process of their own (each new
    process spends seconds importing Keras and TensorFlow); file descriptors 1 and 2 are captured whole, from the
    call's start (what the test wrote before, TensorFlow's start-up lines among it, is not the call's)."""
    capfd.readouterr()
    code = cli.main(list(args))
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["lstmstudy", *args], code, out, err)


def test_explain_bad_inputs_are_one_clear_line_and_write_nothing(tmp_path, capfd):
    cases = _bad_inputs(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    for case, (path, message) in cases.items():
        args = ("explain", str(path), "--results-dir", str(tmp_path / "results"))
        # one case as a reader meets it, in a new process (Keras's import included); the rest in this one
        out = run(*args) if case == "a text file" else _in_process(capfd, *args)
        assert out.returncode == 2, (case, out.stderr)
        assert out.stderr.startswith("lstmstudy: error: ") and message in out.stderr, (case, out.stderr)
        assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr, (case, out.stderr)
        assert out.stdout == "", case
    assert sorted(tmp_path.rglob("*")) == before


def test_explain_prints_each_layer_and_the_cost(tmp_path, capfd):
    path = _saved_model(tmp_path / "blog.keras", recurrent=True)
    out = run("explain", str(path), "--results-dir", str(tmp_path / "results"))
    assert out.returncode == 1 and out.stderr == "", out.stderr  # a layer falls back: the gate says so
    # the Keras backend depends on the environment (tensorflow here; torch once a test has chosen it)
    assert re.search(r"LSTM layer 'lstm' \[keras/\w+\]: on a GPU this layer would not use cuDNN", out.stdout)
    assert "activation='tanh'" in out.stdout and "no measurement yet on a GPU" in out.stdout
    assert re.search(r"LSTM layer 'lstm_1' \[keras/\w+\]: cuDNN's fused kernel on a GPU", out.stdout)
    done = _in_process(capfd, "explain", str(path), "--json", "--results-dir", str(tmp_path / "results"))
    layers = json.loads(done.stdout)["models"][0]["layers"]
    assert [(layer["layer"], layer["fused"]) for layer in layers] == [("lstm", False), ("lstm_1", True)]
    assert layers[0]["reasons"][0]["code"] == "activation" and layers[0]["cost"]["ratio"] is None


def test_explain_is_a_gate_over_files_and_folders(tmp_path, capfd):
    """Exit 0 when every recurrent layer gets the fused kernel (a model without one has nothing to miss), 1 when
    any falls back, 2 when a file cannot be read, which says why in one line while the others are still
    explained; a folder stands for the saved models in it."""
    import keras

    models = tmp_path / "models"
    models.mkdir()
    keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4, name="fast")]).save(models / "a_fused.keras")
    _saved_model(models / "b_dense.keras", recurrent=False)
    results_dir = ("--results-dir", str(tmp_path / "results"))
    fused = _in_process(capfd, "explain", str(models), *results_dir)
    assert fused.returncode == 0 and fused.stderr == "", fused.stderr
    assert "a_fused.keras: 1 recurrent layer(s)" in fused.stdout
    assert "b_dense.keras has no recurrent layers" in fused.stdout
    _saved_model(tmp_path / "blog.keras", recurrent=True)
    assert _in_process(capfd, "explain", str(models), str(tmp_path / "blog.keras"), *results_dir).returncode == 1
    (models / "c_broken.keras").write_text("not a zip\n")
    done = _in_process(capfd, "explain", str(models), str(tmp_path / "blog.keras"), "--json", *results_dir)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "c_broken.keras is not a Keras model" in done.stderr
    answers = json.loads(done.stdout)["models"]
    assert [Path(a["model"]).name for a in answers] == ["a_fused.keras", "b_dense.keras", "c_broken.keras",
                                                          "blog.keras"]
    assert "error" in answers[2] and answers[1]["layers"] == [] and answers[3]["layers"][0]["fused"] is False


def test_explain_names_a_custom_class_keras_cannot_find(tmp_path, capfd):
    import keras

    class Gated(keras.layers.Layer):  # not registered: a loader elsewhere cannot find it
        def call(self, x):
            return x

    path = tmp_path / "custom.keras"
    keras.Sequential([keras.Input((5, 3)), Gated(), keras.layers.LSTM(4)]).save(path)
    done = _in_process(capfd, "explain", str(path), "--json", "--results-dir", str(tmp_path / "results"))
    # the file is read, not refused: the LSTM is told, the class it cannot see into is named, and the gate says 2
    assert done.returncode == 2 and done.stderr == "", done.stderr
    # the recurrent layers first, then what it cannot see into
    lstm, gated = json.loads(done.stdout)["models"][0]["layers"]
    assert (gated["layer_type"], gated["told"], lstm["layer_type"], lstm["fused"]) == ("Gated", False, "LSTM", True)
    assert gated["reasons"][0]["message"].startswith("unknown class Gated: a custom class")
    assert "--custom-objects MODULE" in gated["reasons"][0]["message"]
    # with the module that defines it, the model is loaded through Keras and every layer told
    module = tmp_path / "gated_module.py"
    module.write_text("import keras\n\n\n@keras.saving.register_keras_serializable(package='test')\n"
                      "class Gated(keras.layers.Layer):\n    def call(self, x):\n        return x\n")
    keras.Sequential([keras.Input((5, 3)), _registered_gated(module), keras.layers.LSTM(4)]).save(path)
    done = _in_process(capfd, "explain", str(path), "--json", "--custom-objects", str(module),
                       "--results-dir", str(tmp_path / "results"))
    answer = json.loads(done.stdout)["models"][0]
    assert done.returncode == 0, done.stderr
    assert answer["how"].startswith("loaded through Keras")
    assert [layer["layer_type"] for layer in answer["layers"]] == ["LSTM"]


def _registered_gated(module):
    """An instance of the registered Gated layer that `module` defines (imported as the command line imports it)."""
    import keras

    from lstmstudy.saved_config import import_custom_objects

    import_custom_objects(str(module))
    return keras.saving.get_registered_object("test>Gated")()


def test_explain_sees_a_mask_reach_a_layer_of_a_saved_model(tmp_path, capfd):
    """The masking guide's model, Embedding(mask_zero=True) -> LSTM: on the torch backend any mask means Keras's
    generic loop; on TensorFlow cuDNN runs it only right-padded, which the answer says. Keras's own propagation
    decides which layer the mask reaches (the Dense-fed LSTM gets none)."""
    import keras

    words = keras.Input((6,), dtype="int32")
    masked = keras.layers.LSTM(4, name="masked")(keras.layers.Embedding(50, 8, mask_zero=True, name="embedding")(words))
    numbers = keras.Input((6, 3))
    plain = keras.layers.LSTM(4, name="plain")(numbers)
    path = tmp_path / "masks.keras"
    keras.Model([words, numbers], keras.layers.Concatenate()([masked, plain])).save(path)
    done = _in_process(capfd, "explain", str(path), "--json", "--results-dir", str(tmp_path / "results"))
    layers = {layer["layer"]: layer for layer in json.loads(done.stdout)["models"][0]["layers"]}
    plain_codes = [n["code"] for n in layers["plain"]["notes"]] + [r["code"] for r in layers["plain"]["reasons"]]
    assert layers["plain"]["fused"] and "mask_right_padded_only" not in plain_codes
    if keras.backend.backend() == "torch":
        assert done.returncode == 1 and [r["code"] for r in layers["masked"]["reasons"]] == ["mask_torch_backend"]
    else:
        assert done.returncode == 0 and layers["masked"]["fused"]
        note = next(n for n in layers["masked"]["notes"] if n["code"] == "mask_right_padded_only")
        assert "Embedding 'embedding' makes a mask that reaches this layer" in note["message"]
        assert "padding='post'" in note["message"]


def test_the_command_line_runs_as_a_module_and_names_its_version():
    import lstmstudy

    done = subprocess.run([sys.executable, "-m", "lstmstudy", "--version"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == f"lstmstudy {lstmstudy.__version__}"


def test_ctrl_c_exits_130_in_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_env", interrupted)  # `parser()` binds each command's function when main runs
    assert cli.main(["env"]) == 130
    assert capsys.readouterr().err == "lstmstudy: interrupted; run the same command again to resume\n"


def test_a_closed_pipe_ends_any_command_quietly():
    """`lstmstudy measure --plan-only | head -1`: the reader has gone before anything is printed; no traceback and no
    "Exception ignored" at the interpreter's last flush, and the status a shell gives a writer SIGPIPE ended (141)."""
    child = subprocess.Popen([sys.executable, "-m", "lstmstudy", "measure", "--plan-only", "--device", "cuda",
                              "--claims", "01"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # as `head` does once it has what it wants
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=300) == 141 and stderr == "", stderr


def test_book_without_jupyter_book_names_its_extra(monkeypatch, capsys):
    monkeypatch.setattr(cli.shutil, "which", lambda name, path=None: None)
    monkeypatch.setattr(cli, "missing_pages", lambda root: [])
    assert cli.main(["book"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("lstmstudy: error: this needs jupyter-book, which is not installed here: pip install ")
    assert "[book]" in said and said.count("\n") == 1


def test_the_sweeps_lines_go_to_the_terminal_and_the_log_not_into_the_page(tmp_path, capsys):
    import nbformat

    nb = nbformat.v4.new_notebook()
    measuring = nbformat.v4.new_code_cell("if measure: ...", metadata={"tags": [cli.MEASURE_TAG]})
    failed = nbformat.v4.new_output("error", ename="StudyError", evalue="no GPU", traceback=[])
    measuring.outputs = [nbformat.v4.new_output("stream", name="stdout", text="measured torch.fused B=1 -> x.csv\n"),
                         failed]
    table = nbformat.v4.new_code_cell("data", outputs=[nbformat.v4.new_output("stream", name="stdout", text="kept\n")])
    nb.cells = [measuring, table]
    page, log = tmp_path / "page.ipynb", tmp_path / "logs" / "page.log"
    nbformat.write(nb, page)
    cli._tidy(page, log)
    cells = nbformat.read(page, as_version=4).cells
    assert cells[0].outputs == [failed] and cells[1].outputs[0]["text"] == "kept\n"  # a failure stays in view
    assert capsys.readouterr().out == "measured torch.fused B=1 -> x.csv\n"
    assert log.read_text() == "measured torch.fused B=1 -> x.csv\n"


def test_every_claim_page_tags_the_cell_that_measures():
    """`reproduce` takes what a page's measuring cell prints off the page (`cli.MEASURE_TAG`): every claim notebook's
    cell that runs the sweep carries the tag."""
    import nbformat

    for path in sorted((Path(__file__).resolve().parent.parent / "notebooks").glob(toc.CLAIM_NOTEBOOKS)):
        measuring = [c for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "code" and ".run(" in c.source and "if measure" in c.source]
        assert measuring, f"{path.name}: no cell measures"
        assert all(cli.MEASURE_TAG in c.metadata.get("tags", []) for c in measuring), path.name
