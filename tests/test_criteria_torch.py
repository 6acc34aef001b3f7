"""`explain_cudnn` on PyTorch modules: its kernel must be what `lstmstudy.observe` sees in the profiler's
record, one vocabulary, so the prediction and the observation compare as they are. Kept apart from the Keras spy
(tests/test_criteria.py, Keras on TensorFlow only), so that these run everywhere, a GPU node without TensorFlow
included.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from lstmstudy.kernels.criteria import explain_cudnn
from lstmstudy.observe import observe


def observed_kernel(lstm: nn.LSTM, x: torch.Tensor) -> str:
    return observe([lambda: lstm(x)], x.data.device if isinstance(x, nn.utils.rnn.PackedSequence) else x.device).kernel


@pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN")  # torch.backends.mkldnn.flags() says so
@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")  # as the explainer says
@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]), proj_size=st.sampled_from([0, 2]),
       onednn=st.booleans(), grad=st.booleans(), bidirectional=st.booleans(), packed=st.sampled_from(
           [None, "same lengths", "different lengths"]))
@pytest.mark.isa
def test_torch_cpu_kernel_agrees_with_the_profiler(dtype, proj_size, onednn, grad, bidirectional, packed):
    lstm = nn.LSTM(3, 4, proj_size=proj_size, bidirectional=bidirectional, batch_first=True).to(dtype)
    x = torch.randn(2, 5, 3, dtype=dtype)
    if packed is not None:
        lengths = torch.tensor([5, 5] if packed == "same lengths" else [5, 3])
        x = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
    with torch.backends.mkldnn.flags(enabled=onednn), torch.set_grad_enabled(grad):
        explanation = explain_cudnn(lstm, inputs=x)[0]
        observed = observed_kernel(lstm, x)
    assert explanation.kernel == observed, str(explanation)
    assert not explanation.fused_eligible and "no_gpu" in explanation.codes


def test_torch_explains_the_gpu_for_a_cpu_machine_too():
    assert explain_cudnn(nn.LSTM(3, 4, proj_size=2), device="cuda").fused_eligible  # cuDNN has projections
    assert explain_cudnn(nn.GRU(3, 4), device="cuda")[0].kernel == "cudnn"
    assert explain_cudnn(nn.LSTM(3, 4).double(), device="cuda").fused_eligible
    with torch.backends.cudnn.flags(enabled=False):
        explanation = explain_cudnn(nn.LSTM(3, 4), device="cuda")[0]
    assert explanation.codes == ("cudnn_disabled",) and explanation.kernel == "aten-loop"
    gru = explain_cudnn(nn.GRU(3, 4))[0]
    assert gru.kernel == "aten-loop" and gru.notes[0].code == "onednn_mode"


def test_nested_torch_modules_are_found_with_what_they_receive():
    model = nn.Sequential(nn.Linear(3, 3), nn.LSTM(3, 4, batch_first=True))
    report = explain_cudnn(model, inputs=torch.randn(2, 5, 3, dtype=torch.float32))
    assert [e.layer for e in report] == ["1"] and report[0].kernel == "onednn"


def test_rejects_what_it_cannot_explain():
    with pytest.raises(ValueError, match="device"):
        explain_cudnn(nn.LSTM(3, 4), device="tpu")
    with pytest.raises(ValueError, match="no recurrent layer"):
        explain_cudnn(nn.Linear(3, 4))
    with pytest.raises(TypeError):
        explain_cudnn("lstm")


@pytest.mark.gpu
def test_torch_gpu_kernel_agrees_with_the_profiler():
    lstm = nn.LSTM(3, 4, batch_first=True).cuda()
    x = torch.randn(2, 5, 3, device="cuda")
    assert explain_cudnn(lstm, inputs=x)[0].kernel == observed_kernel(lstm, x)
