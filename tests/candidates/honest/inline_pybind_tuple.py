# Honest idiom: load_inline with its own PYBIND11_MODULE block (no `functions=`), returning a
# std::tuple that arrives as a Python tuple. For tests/tasks/cpu/6_MinMaxTuple.py.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <tuple>

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> linear_max_min(torch::Tensor x,
                                                                       torch::Tensor weight,
                                                                       torch::Tensor bias) {
  auto y = at::addmm(bias, x, weight.t());
  return std::make_tuple(y, at::amax(y, {1}), at::amin(y, {0}));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear_max_min", &linear_max_min, "y = x W^T + b with its row max and column min");
}
"""

module = load_inline(name="honest_linear_max_min", cpp_sources=_SOURCE, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y, row_max, col_min = module.linear_max_min(x, self.linear.weight, self.linear.bias)
        return y, row_max, col_min
