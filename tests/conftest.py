"""Shared test set-up: GPU tests skip with a visible reason where there is no GPU."""

from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    reason = pytest.mark.skip(reason="needs a CUDA GPU; none is visible to torch on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(reason)


@pytest.fixture
def results_root(tmp_path, monkeypatch):
    """A private results store, so no test writes into the repository's results/."""
    root = tmp_path / "results"
    monkeypatch.setenv("LSTMSTUDY_RESULTS", str(root))
    return root
