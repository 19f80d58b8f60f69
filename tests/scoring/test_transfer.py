"""Host-device copies on a machine without CUDA: plain copies, the same values back."""
from __future__ import annotations

import numpy as np
import torch

from scoring.transfer import to_device, to_host


def test_without_cuda_transfers_are_plain_copies():
    values = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert to_device(values, "cpu") is values
    back = to_host(values.requires_grad_(False) * 3)
    assert isinstance(back, np.ndarray) and np.array_equal(back, np.arange(6).reshape(2, 3) * 3)
