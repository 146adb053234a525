# Honest idiom: torch.utils.cpp_extension.load of a source file written to a temporary folder
# first (the folder doubles as the build folder). For tests/tasks/cpu/4_LayerNorm.py.
import os
import tempfile

import torch
import torch.nn as nn
import torch.utils.cpp_extension

_SOURCE = r"""
#include <torch/extension.h>
#include <vector>

// LayerNorm over the last two dims with an elementwise affine.
torch::Tensor layer_norm_2d(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                            double eps) {
  const std::vector<int64_t> dims{-2, -1};
  auto mean = x.mean(dims, /*keepdim=*/true);
  auto centred = x - mean;
  auto var = (centred * centred).mean(dims, /*keepdim=*/true);
  return centred * at::rsqrt(var + eps) * weight + bias;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("layer_norm_2d", &layer_norm_2d, "layer norm over the last two dims");
}
"""

_workdir = tempfile.mkdtemp(prefix="honest_ln_")
_source_path = os.path.join(_workdir, "layer_norm_2d.cpp")
with open(_source_path, "w") as f:
    f.write(_SOURCE)

_ext = torch.utils.cpp_extension.load(
    name="honest_layer_norm_2d",
    sources=[_source_path],
    extra_cflags=["-O2"],
    build_directory=_workdir,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return _ext.layer_norm_2d(x, self.ln.weight, self.ln.bias, self.ln.eps)
