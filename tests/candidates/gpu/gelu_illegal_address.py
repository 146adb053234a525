# GPU only. Expected verdict: runtime_error (an illegal memory access). Its kernel writes far
# outside its output, which leaves the process's CUDA context broken for good (a sticky error):
# the evaluator must survive it, health-check the device and judge the next candidate normally.
# For tests/tasks/cpu/8_GeluTail.py.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>

__global__ void scribble(float* out, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  // 2^40 floats past the end: no allocation is there.
  if (i < n) out[i + (1L << 40)] = 0.0f;
}

torch::Tensor broken_tail(torch::Tensor y) {
  auto out = torch::empty_like(y);
  long n = y.numel();
  scribble<<<(n + 255) / 256, 256>>>(out.data_ptr<float>(), n);
  return out;
}
"""

CPP_SOURCE = "torch::Tensor broken_tail(torch::Tensor y);"

_ext = load_inline(name="kiln_illegal_address", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                   functions=["broken_tail"], extra_cuda_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        y = _ext.broken_tail(self.linear(x).contiguous())
        torch.cuda.synchronize()
        return y + x
