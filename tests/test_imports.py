"""The package's import graph: the contract both houses share and the kernel table import without the measuring
stack, and no module imports itself back through others, at a module's top or lazily inside a function."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lstmstudy"
#: a child's first lines: importing any of the measuring stack fails there (`lstmstudy.houses`)
WITHOUT_MEASURING = """
from lstmstudy.houses import block_measuring, measuring_loaded

block_measuring()
"""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:`: annotations only, never run."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def import_graph() -> dict[str, set[str]]:
    """Each package module and the package modules it imports, at its top or inside a function."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skipped = type_checking_only(tree)
        targets = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert node.level == 0, f"{name} imports relatively; this graph reads absolute imports only"
                for alias in node.names:  # `from lstmstudy import sweep` imports a module, `from x import f` x
                    submodule = f"{node.module}.{alias.name}"
                    targets.add(submodule if submodule in paths else node.module)
        graph[name] = {target for target in targets if target in paths and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def run_child(code: str) -> None:
    """Run `code` in a fresh Python (imports blocked there stay blocked); it must exit cleanly."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_contract_imports_without_torch_tensorflow_keras_or_pynvml():
    run_child(WITHOUT_MEASURING + """
from lstmstudy.contract import PHASES, PRECISIONS, Point, PointResult, Prepared
from lstmstudy.shapes import LSTMShape

point = Point("torch.fused", LSTMShape(batch=1, timesteps=2, features=3, hidden=4), "bf16", "train")
assert point.key() and PHASES and PRECISIONS and PointResult and Prepared
assert not measuring_loaded()
""")


def test_the_kernel_table_reads_without_torch_tensorflow_keras_or_pynvml():
    """A claim page quotes the kernels' descriptions where none of the measuring stack is installed."""
    run_child(WITHOUT_MEASURING + """
from lstmstudy import kernels

names = kernels.names(workloads=True)
assert len(names) == len(kernels.KERNELS) and "torch.fused" in names
assert all(isinstance(kernels.spec(n).description, str) and kernels.spec(n).description for n in names)
assert not measuring_loaded()
""")


def test_without_keras_the_keras_rows_say_so_and_the_torch_rows_still_build():
    """Torch asks whether TensorFlow is installed (`find_spec`), so these two are hidden, not made to raise."""
    run_child("""
import sys

sys.modules.update(keras=None, tensorflow=None)
from lstmstudy import kernels
from lstmstudy.errors import Skip
from lstmstudy.shapes import LSTMShape

listed = kernels.available("cpu")
assert listed["keras.generic"] == "keras is not installed" and listed["torch.fused"] is None, listed
try:
    kernels.build("keras.relu", LSTMShape(batch=1, timesteps=2, features=3, hidden=4))
except Skip as skip:
    assert str(skip) == "keras.relu at fp32 on cpu: keras is not installed", skip
else:
    raise AssertionError("keras.relu built without keras")
kernels.build("torch.fused", LSTMShape(batch=1, timesteps=2, features=3, hidden=4)).step()
""")


def test_every_row_names_a_recipe_and_no_name_twice():
    from lstmstudy import kernels
    from lstmstudy.kernels.built import Recipe

    assert len(kernels.REGISTRY) == len(kernels.KERNELS)
    assert all(isinstance(kernels.resolve(k.recipe), Recipe) for k in kernels.KERNELS)


def test_no_module_imports_itself_back():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    """The check above can fail: a cycle of three is found, and a module outside it is not named. (That the graph
    holds imports made inside a function, `kernels.resolve` shows: its framework modules are among its edges.)"""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert "lstmstudy.kernels.torch_kernels" in import_graph()["lstmstudy.kernels"]


def test_blocking_the_measuring_stack_refuses_it_in_one_line_and_only_where_it_is_not_loaded():
    run_child("""
import pytest
from lstmstudy.houses import block_measuring, measuring_loaded

block_measuring()
block_measuring()  # twice is once
with pytest.raises(ModuleNotFoundError, match="torch belongs to the measuring house"):
    import torch.nn
import pandas  # the rendering house is untouched
assert not measuring_loaded()
""")
    run_child("""
import pytest, torch
from lstmstudy.houses import block_measuring

with pytest.raises(RuntimeError, match="the measuring stack is already imported .*torch"):
    block_measuring()
""")


#: the package's layers, top first; every module not named is in the last: measuring, and what both houses share
#: the command line (`lstmstudy`, `python -m lstmstudy`) and the helpers people import
COMMANDS = {"lstmstudy.cli", "lstmstudy.__main__", "lstmstudy.watch", "lstmstudy.check", "lstmstudy.findings",
            "lstmstudy.saved_config"}
PAGES = {"lstmstudy.ledger", "lstmstudy.notebook", "lstmstudy.plots", "lstmstudy.published_rules",
         "lstmstudy.explained", "lstmstudy.toc"}  # with every claim module: what the pages compute and judge


def layer(module: str) -> int:
    if module in COMMANDS:
        return 0
    return 1 if module in PAGES or module.startswith("lstmstudy.claims") else 2


def test_no_module_imports_one_above_it():
    """The claims and the pages sit above the measuring code, and the commands above both: measuring never reaches
    up for a claim's analysis, and a claim for a command."""
    graph = import_graph()
    upward = sorted(f"{source} -> {target}" for source, targets in graph.items() for target in targets
                    if layer(target) < layer(source))
    assert not upward, f"imports that reach a layer above: {upward}"
    assert all(module in graph for module in COMMANDS | PAGES), "a layer names a module that is gone"
