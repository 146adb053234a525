# kiln timing benchmark load (bench/timing/README.md): a C++ load_inline build for
# ../tasks/4_ScaleShiftClampCPU.py with its own source (its own build). Reads through
# TensorAccessors, so it takes strided input without a copy.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
torch::Tensor scale_shift_clamp_acc(torch::Tensor x, torch::Tensor scale, torch::Tensor shift) {
  if (x.scalar_type() != at::kFloat || x.dim() != 2 || x.size(1) != scale.numel()
      || scale.scalar_type() != at::kFloat || shift.scalar_type() != at::kFloat)
    return at::clamp(x * scale + shift, -1.0, 1.0);
  auto y = at::empty({x.size(0), x.size(1)}, x.options());
  auto in = x.accessor<float, 2>();
  auto s = scale.accessor<float, 1>();
  auto b = shift.accessor<float, 1>();
  auto out = y.accessor<float, 2>();
  for (int64_t r = 0; r < in.size(0); ++r)
    for (int64_t c = 0; c < in.size(1); ++c) {
      const float v = in[r][c] * s[c] + b[c];
      out[r][c] = v > 1.0f ? 1.0f : (v < -1.0f ? -1.0f : v);
    }
  return y;
}
"""

_ext = load_inline(name="bench_timing_load_accessor", cpp_sources=[CPP],
                   functions=["scale_shift_clamp_acc"])


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(cols) + 0.5)
        self.shift = nn.Parameter(torch.randn(cols) * 0.2)

    def forward(self, x):
        with torch.no_grad():
            return _ext.scale_shift_clamp_acc(x, self.scale, self.shift)
