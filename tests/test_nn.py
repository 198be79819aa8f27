"""The PyTorch modules: what they add, along which axis, what they store, and when they refuse."""

import numpy as np
import pytest
import torch

from posenc import frequencies, sinusoidal
from posenc.nn import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


def torch_reference_table(n_positions, d_model):
    """The paper's formula written directly in torch, float64 throughout: an independent implementation."""
    positions = torch.arange(n_positions, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.empty(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(positions * omega)
    table[:, 1::2] = torch.cos(positions * omega)
    return table


@pytest.mark.parametrize("d_model", [2, 64, 512])
def test_numpy_and_torch_agree_to_float32_rounding(d_model):
    ours = torch.from_numpy(sinusoidal(3000, d_model)).double()
    torch.testing.assert_close(ours, torch_reference_table(3000, d_model), rtol=0, atol=2**-24)


def test_adds_one_vector_per_sequence_index_broadcast_over_the_batch():
    """The position axis is the sequence axis (1), not the batch axis (0)."""
    encoding = SinusoidalPositionalEncoding(16, max_len=32)
    x = torch.randn(3, 10, 16, generator=torch.Generator().manual_seed(0))
    added = encoding(x) - x
    expected = torch.from_numpy(sinusoidal(10, 16))
    for batch_index in range(3):
        torch.testing.assert_close(added[batch_index], expected, rtol=0, atol=1e-6)


def test_has_no_trainable_parameters_and_an_empty_state_dict():
    encoding = SinusoidalPositionalEncoding(8)
    assert list(encoding.parameters()) == []
    assert encoding.state_dict() == {}
    assert encoding.table.shape == (2048, 8)


def test_table_follows_the_module_to_another_device_and_dtype():
    encoding = SinusoidalPositionalEncoding(8, max_len=4)
    assert encoding.to("meta").table.device.type == "meta"
    encoding = SinusoidalPositionalEncoding(8, max_len=4).to(torch.float64)
    assert encoding.table.dtype == torch.float64
    assert encoding(torch.zeros(1, 3, 8, dtype=torch.float64)).dtype == torch.float64


def test_longer_input_extends_the_table_instead_of_failing():
    encoding = SinusoidalPositionalEncoding(8, max_len=4)
    out = encoding(torch.zeros(2, 11, 8))
    assert encoding.table.shape[0] >= 11
    torch.testing.assert_close(out[0], torch.from_numpy(sinusoidal(11, 8)), rtol=0, atol=0)


def test_a_table_grown_in_inference_mode_is_an_ordinary_buffer():
    """The buffer outlives the call: grown under torch.inference_mode() it must not be an inference tensor, which a
    later in-place update or a saved-for-backward use outside inference mode would refuse."""
    encoding = SinusoidalPositionalEncoding(8, max_len=4)
    with torch.inference_mode():
        encoding(torch.zeros(1, 10, 8))
    assert encoding.table.shape[0] >= 10 and not encoding.table.is_inference()
    x = torch.randn(1, 10, 8, requires_grad=True)
    (encoding(x) * encoding.table[:10]).sum().backward()
    torch.testing.assert_close(x.grad, encoding.table[:10].expand_as(x), rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["interleaved", "cos_first", "halves"])
def test_layout_and_base_reach_the_table(layout):
    encoding = SinusoidalPositionalEncoding(6, max_len=5, base=100.0, layout=layout)
    np.testing.assert_array_equal(encoding.table.numpy(), sinusoidal(5, 6, base=100.0, layout=layout))


def test_dropout_acts_in_training_only():
    encoding = SinusoidalPositionalEncoding(8, dropout=0.5)
    x = torch.ones(4, 16, 8)
    torch.manual_seed(0)
    assert (encoding.train()(x) == 0).any()
    torch.testing.assert_close(encoding.eval()(x), x + torch.from_numpy(sinusoidal(16, 8)))


def test_learned_embedding_adds_its_rows_and_learns():
    embedding = LearnedPositionalEmbedding(5, 3)
    x = torch.zeros(2, 4, 3)
    out = embedding(x)
    torch.testing.assert_close(out[1], embedding.weight[:4])
    out.sum().backward()
    assert embedding.weight.grad is not None
    assert torch.equal(embedding.weight.grad[4], torch.zeros(3)) and torch.equal(
        embedding.weight.grad[:4], torch.full((4, 3), 2.0)
    )


@pytest.mark.argument_check
def test_learned_embedding_refuses_a_longer_sequence_naming_max_len():
    embedding = LearnedPositionalEmbedding(4, 8)
    with pytest.raises(ValueError, match="max_len=4"):
        embedding(torch.zeros(1, 5, 8))


def test_module_frequencies_are_the_packages():
    encoding = SinusoidalPositionalEncoding(10, max_len=2)
    np.testing.assert_allclose(np.arcsin(encoding.table[1, 0::2].double().numpy()), frequencies(10), atol=1e-6)
