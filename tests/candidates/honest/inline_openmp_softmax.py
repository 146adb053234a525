# Honest idiom: a hand-written C++ row softmax over raw pointers, parallel with OpenMP
# (extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"]). For tests/tasks/cpu/3_Softmax.py.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <limits>

torch::Tensor softmax_rows(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu(), "softmax_rows: a CPU kernel");
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "softmax_rows: 2-D float32 input");
  auto in = x.contiguous();
  auto out = torch::empty_like(in);
  const int64_t rows = in.size(0);
  const int64_t cols = in.size(1);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = src + r * cols;
    float* o = dst + r * cols;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c)
      m = std::max(m, a[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      o[c] = std::exp(a[c] - m);
      sum += o[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c)
      o[c] *= inv;
  }
  return out;
}
"""

softmax_ext = load_inline(
    name="honest_softmax_omp",
    cpp_sources=cpp_source,
    functions=["softmax_rows"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        # A CPU kernel: on a GPU the rows make the round trip through host memory.
        return softmax_ext.softmax_rows(x.cpu()).to(x.device)
