# kiln timing benchmark load (bench/timing/README.md): a C++ load_inline build for
# ../tasks/4_ScaleShiftClampCPU.py, there to keep a compile worker busy while the measured
# candidates are timed. Its source differs from every other load file, so its build is its own
# cache entry. Composes ATen ops: addcmul, then clamp in place.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
torch::Tensor scale_shift_clamp(torch::Tensor x, torch::Tensor scale, torch::Tensor shift) {
  return at::addcmul(shift, x, scale).clamp_(-1.0, 1.0);
}
"""

_ext = load_inline(name="bench_timing_load_aten", cpp_sources=[CPP],
                   functions=["scale_shift_clamp"])


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(cols) + 0.5)
        self.shift = nn.Parameter(torch.randn(cols) * 0.2)

    def forward(self, x):
        with torch.no_grad():
            return _ext.scale_shift_clamp(x, self.scale, self.shift)
