"""Claim 7's page: the cost model's figures are marked as modelled, both data parallel exchanges are shown,
the prose's reading of the model holds at the page's sizes, and the seed's "DP does not scale well" is never
quoted without its footnote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from lstmstudy import data
from lstmstudy.claims import parallel_training as claim
from lstmstudy.parallel import cost

ROOT = Path(__file__).resolve().parents[1]
SENTENCE, FOOTNOTE = "DP does not scale well on multi-GPU", "Experiment with no computation and only communication"


@pytest.fixture(scope="module")
def predicted() -> pd.DataFrame:
    sizes = claim.CLAIM.parameters("cuda")
    return cost.table(claim.cost_model(sizes, claim.model_timesteps(sizes)), sizes["micro_batches"])


def test_every_figure_of_the_model_is_marked_modelled(predicted):
    assert all(panel.startswith("modelled: ") for panel in predicted.panel)
    assert cost.modelled(3.456, "x") == "3.46x (modelled)"
    assert cost.modelled(65.79, "ms") == "65.8 ms (modelled)" and cost.modelled(0.097, "%") == "10% (modelled)"
    store = cost.assumptions().set_index("what").loc["parameter store (data parallel)"]
    assert store.source.startswith("assumption:") and "Centralized Parameter Storage" in store.source


def test_the_page_shows_both_exchanges_and_its_reading_of_them_holds(predicted):
    """What cell 6 says of the model, at the page's default sizes."""
    at = predicted.set_index(["panel", "scheme", "devices"])
    slides, node = predicted.panel.unique()[:2]
    assert {cost.RING, cost.STORE, "pipeline"} <= set(predicted.scheme)
    # the store's link carries N times a ring's bytes; alone, either exchange takes longer with more GPUs
    assert at.MB_per_step[slides, cost.STORE, 4] == pytest.approx(4 * at.MB_per_step[slides, cost.RING, 4])
    for scheme in (cost.RING, cost.STORE):
        assert at.comm_ms[slides, scheme, 4] > at.comm_ms[slides, scheme, 2]
    # in the slides' setting the model favours data parallelism with either exchange
    assert min(at.speedup[slides, cost.RING, 4], at.speedup[slides, cost.STORE, 4]) > at.speedup[slides, "pipeline", 4]
    assert at.speedup[node, "pipeline", 4] < 1  # on an H100 the micro-batches multiply the cell latency
    # split over 4 GPUs, arithmetic dominates a GTX 750's step, the fixed cost of the cell updates an H100's
    sizes = claim.CLAIM.parameters("cuda")
    model = claim.cost_model(sizes, int(data.corpus(sizes["corpus"]).max()))
    for device, arithmetic_dominates in ((cost.GTX750, True), (cost.H100, False)):
        latency = model.layers * model.timesteps * device.cell_latency_s
        assert (model.train_flops / 4 / device.achieved_flops > latency) == arithmetic_dominates


def test_ddp_is_compared_with_the_ring_never_the_store(predicted):
    node = predicted.panel.unique()[1]
    measured = pd.DataFrame({"hardware_id": "cuda-test", "scheme": ["one device", claim.DDP, "pipeline", "pipeline"],
                             "devices": [1, 4, 4, 4], "plan": [claim.NO_BUCKETING] * 3 + [claim.BUCKETED],
                             "speedup": [1.0, 1.8, 0.9, 1.5]})
    table = claim.model_beside_measured(predicted, measured, node).set_index("scheme")
    at = predicted.set_index(["panel", "scheme", "devices"]).speedup
    assert len(table) == 3  # bucketed rows are not compared
    assert table.loc[claim.DDP, "modelled speedup"] == pytest.approx(at[node, cost.RING, 4])
    assert table.loc["pipeline", "modelled speedup"] == pytest.approx(at[node, "pipeline", 4])


def _texts() -> dict[str, str]:
    cells = json.loads((ROOT / "notebooks" / "07_parallel_training.ipynb").read_text())["cells"]
    return {"notebook": "\n".join("".join(c["source"]) for c in cells),
            "intro.md": (ROOT / "book" / "intro.md").read_text(), "says": claim.CLAIM.says,
            "SEED_FIGURE": claim.SEED_FIGURE}


@pytest.mark.parametrize("where", ["notebook", "intro.md", "says", "SEED_FIGURE"])
def test_the_sentence_is_never_quoted_without_its_footnote(where):
    text = re.sub(r"\s+", " ", re.sub(r"\n>", "\n", _texts()[where]))  # a blockquote's lines joined
    for found in re.finditer(re.escape(SENTENCE), text):
        assert FOOTNOTE in text[found.end():found.end() + 200], f"{where}: {text[found.start():found.end() + 200]}"
