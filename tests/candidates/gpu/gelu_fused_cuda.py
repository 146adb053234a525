# GPU only. Expected verdict: correct. The elementwise tail of tests/tasks/cpu/8_GeluTail.py
# (bias, exact GELU, scale, clamp, residual) fused into one CUDA kernel built with load_inline;
# a second evaluation of it must load the extension from kiln's build cache.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>

__global__ void gelu_tail(const float* y, const float* bias, const float* x, float* out,
                          long n, long features, float scale, float lo, float hi) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = y[i] + bias[i % features];
  v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  v = fminf(fmaxf(v * scale, lo), hi);
  out[i] = v + x[i];
}

torch::Tensor fused_tail(torch::Tensor y, torch::Tensor bias, torch::Tensor x, double scale,
                         double lo, double hi) {
  auto out = torch::empty_like(y);
  long n = y.numel();
  gelu_tail<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), bias.data_ptr<float>(),
                                      x.data_ptr<float>(), out.data_ptr<float>(), n,
                                      bias.numel(), (float)scale, (float)lo, (float)hi);
  return out;
}
"""

CPP_SOURCE = ("torch::Tensor fused_tail(torch::Tensor y, torch::Tensor bias, torch::Tensor x, "
              "double scale, double lo, double hi);")

_ext = load_inline(name="kiln_gelu_tail", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                   functions=["fused_tail"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = self.linear(x).contiguous()
        return _ext.fused_tail(y, self.bias.contiguous(), x.contiguous(), self.scale_factor,
                               self.clamp_min, self.clamp_max)
