# Honest idiom: a C++ operator registered with TORCH_LIBRARY (a schema that marks the state it
# writes, `Tensor(a!)`), built by load_inline with is_python_module=False and called through
# torch.ops. For tests/tasks/cpu/7_RunningMean.py (stateful: the re-check is skipped, with a note).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <torch/library.h>

// Moves the running average towards this batch's mean, then centres and scales the batch.
torch::Tensor ema_center(torch::Tensor avg, torch::Tensor x, torch::Tensor gain,
                         double momentum) {
  avg.mul_(1.0 - momentum).add_(x.mean(0), momentum);
  return (x - avg) * gain;
}

TORCH_LIBRARY(honest_ops, m) {
  m.def("ema_center(Tensor(a!) avg, Tensor x, Tensor gain, float momentum) -> Tensor",
        &ema_center);
}
"""

load_inline(name="honest_ops", cpp_sources=[_SOURCE], is_python_module=False,
            extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, features, momentum):
        super().__init__()
        self.momentum = momentum
        self.gain = nn.Parameter(torch.rand(features) + 0.5)
        self.register_buffer("avg", torch.zeros(features))

    def forward(self, x):
        return torch.ops.honest_ops.ema_center(self.avg, x, self.gain, self.momentum)
