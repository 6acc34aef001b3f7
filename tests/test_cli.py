from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from lstmstudy import cli, toc


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lstmstudy.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", [[], ["env"], ["reproduce"], ["book"]])
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


def test_reproduce_with_no_notebooks_says_so(tmp_path):
    out = run("reproduce", "--device", "cpu", "--notebooks", str(tmp_path))
    assert out.returncode == 0 and "no claim notebooks" in out.stdout


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


def test_missing_pages_are_named_before_the_book_is_built(tmp_path):
    import nbformat

    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                       "  - file: book/claims/01_demo\n  - file: book/ledger\n")
    assert toc.missing_pages(tmp_path) == ["book/claims/01_demo", "book/ledger"]
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "book" / "ledger.ipynb")
    assert toc.missing_pages(tmp_path) == ["book/claims/01_demo"]
