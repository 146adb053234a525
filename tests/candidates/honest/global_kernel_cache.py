# Honest idiom: a module-level cache of prepared kernels keyed by (device, dtype, shape), typed
# with Dict/Tuple/Callable annotations and filled through a `global` counter.
# For tests/tasks/cpu/3_Softmax.py.
from typing import Callable, Dict, Tuple

import torch
import torch.nn as nn

Key = Tuple[str, torch.dtype, int]
_KERNELS: Dict[Key, Callable[[torch.Tensor], torch.Tensor]] = {}
_BUILT: int = 0


def _make_kernel(cols: int) -> Callable[[torch.Tensor], torch.Tensor]:
    def kernel(x: torch.Tensor) -> torch.Tensor:
        shifted = x - x.max(dim=-1, keepdim=True).values
        e = torch.exp(shifted)
        return e * e.sum(dim=-1, keepdim=True).reciprocal()

    return kernel


def get_kernel(x: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    global _BUILT
    key: Key = (x.device.type, x.dtype, x.shape[-1])
    if key not in _KERNELS:
        _KERNELS[key] = _make_kernel(x.shape[-1])
        _BUILT += 1
    return _KERNELS[key]


class ModelNew(nn.Module):
    def forward(self, x):
        return get_kernel(x)(x)
