"""posenc_book.adam.Adam: the update of torch.optim.Adam, bit for bit, without torch.optim.Optimizer."""

import pytest
import torch
from torch import nn

from posenc_book.adam import Adam


def _train(make_optimizer, steps=6, skip_bias_at=2):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
    optimizer = make_optimizer(model.parameters())
    x, y = torch.randn(11, 5), torch.randn(11, 3)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = 0.05 / (1 + step)  # the loops change lr between steps
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        if step == skip_bias_at:
            model[2].bias.grad = None  # a parameter without a gradient at one step is left alone
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("fused", [False, True])
def test_parameters_equal_torch_adam_bit_for_bit(fused):
    # Same process, same kernels, same operations in the same order: the parameters must be identical.
    ours = _train(lambda params: Adam(params, lr=0.05, fused=fused))
    theirs = _train(lambda params: torch.optim.Adam(params, lr=0.05, fused=fused))
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    # and training moved them: equal because both updated, not because neither did
    untrained = _train(lambda params: Adam(params, lr=0.05, fused=fused), steps=0)
    assert not any(torch.equal(a, b) for a, b in zip(ours, untrained, strict=True))


def test_zero_grad_sets_none():
    p = nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    Adam([p], lr=0.1).zero_grad()
    assert p.grad is None
