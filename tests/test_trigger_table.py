"""The triggers' one table (`cudnn_rules.TRIGGER_TABLE`): claim 1, the kernels and the cost line read it, and every
published figure it quotes is the one its source printed."""

from __future__ import annotations

import re

from lstmstudy import published, published_rules
from lstmstudy.claims import cudnn_fallback
from lstmstudy.cudnn_rules import (BY_CODE, BY_KERNEL, GENERIC_PUBLISHED, MASK_TORCH_BACKEND, TRIGGER_TABLE,
                                   KerasRecurrent, Reason, keras_config_reasons, keras_layer_type_reason)
from lstmstudy.findings import Finding, measured_cost
from lstmstudy.kernels import REGISTRY


def test_claim_1_and_the_kernels_read_their_triggers_from_the_table():
    assert set(cudnn_fallback.TRIGGERS) == set(BY_KERNEL)
    for kernel, (baseline, setting) in cudnn_fallback.TRIGGERS.items():
        assert REGISTRY[baseline].fused_on and setting == BY_KERNEL[kernel].setting
        if kernel.startswith("keras."):  # the Keras kernel sets exactly the table's argument (and a seed)
            assert BY_KERNEL[kernel].option.items() <= REGISTRY[kernel].options.items()
            assert set(REGISTRY[kernel].options) - set(BY_KERNEL[kernel].option) <= {"seed"}


def test_each_code_and_kernel_is_one_row_and_each_explained_code_has_a_fix():
    codes = [row.code for row in TRIGGER_TABLE if row.code]
    kernels = [row.kernel for row in TRIGGER_TABLE if row.kernel]
    assert len(codes) == len(set(codes)) and len(kernels) == len(set(kernels))
    assert all(BY_CODE[code].fix for code in codes)
    assert all(row.setting for row in TRIGGER_TABLE)


def test_every_setting_the_explainer_blames_has_a_row():
    everything = KerasRecurrent("GRU", "GRUCell", use_cudnn=False, recurrent_dropout=0.1, activation="'relu'",
                                recurrent_activation="'hard_sigmoid'", unroll=True, use_bias=False, reset_after=False)
    codes = {r.code for r in keras_config_reasons(everything, "tensorflow")}
    codes |= {MASK_TORCH_BACKEND.code, keras_layer_type_reason("RNN", "LSTMCell").code}
    assert len(codes) == 9 and codes <= set(BY_CODE)


def test_the_published_figures_are_their_sources_own():
    cited = published.cited()
    printed = {key: [f["printed"] for f in cited[key]["figures"]] for key in ("tf-38236", "keras-8135")}
    assert "~25 times longer" in printed["tf-38236"] and "~25x" in BY_CODE["recurrent_dropout"].published
    assert "factor of 7.8" in printed["keras-8135"] and "7.8x, keras-team/keras issue 8135" in GENERIC_PUBLISHED
    quote = re.search(r'"([^"]+)", Chollet', BY_CODE["recurrent_dropout"].published)[1]
    assert f'"{quote}" (Chollet' in cudnn_fallback.SEED_FIGURE
    assert f"{cudnn_fallback.QA_FIGURE:g}x, the Q&A" in GENERIC_PUBLISHED
    assert f"{published_rules.woolf_fallback().iloc[0].slowdown:.2f}x, Max Woolf's" in GENERIC_PUBLISHED


def test_the_cost_line_quotes_the_triggers_published_figures_where_nothing_is_measured(tmp_path):
    cost = str(measured_cost(["recurrent_dropout"], root=tmp_path))
    assert "claim 1 has no cuda-* result set" in cost
    assert cost.endswith("published figures for this trigger: " + BY_CODE["recurrent_dropout"].published)
    untimed = str(measured_cost(["reset_after"], root=tmp_path))
    assert "claim 1 has not timed this trigger" in untimed and untimed.endswith(GENERIC_PUBLISHED)
    reasons = (Reason("reset_after", "reset_after=False"), Reason("no_gpu", "no GPU", device=True))
    assert Finding("gru", "GRU", "keras/tensorflow", "framework-loop", reasons).fixes == (
        BY_CODE["reset_after"].fix, BY_CODE["no_gpu"].fix)
