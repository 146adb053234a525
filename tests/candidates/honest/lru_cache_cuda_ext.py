# Honest idiom: the CUDA extension compiled on first use behind functools.lru_cache (a getter
# that builds once per process), so importing the file builds nothing.
# For bench/tasks/1_BiasGeluScale.py (CUDA only). Same extension as inline_cuda_tmp_dir.py.
import functools

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor bias_gelu_scale(torch::Tensor x, torch::Tensor bias, double scale);"

_CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <algorithm>

// y = gelu(x + bias[i % cols]) * scale with the exact (erf) GELU, four floats per thread.
__global__ void bias_gelu_scale_kernel(const float4* __restrict__ x, const float* __restrict__ bias,
                                       float4* __restrict__ y, long long n4, long long cols,
                                       float scale) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += stride) {
    float4 v = x[i];
    const long long c = (i * 4) % cols;
    float* lanes = reinterpret_cast<float*>(&v);
    for (int k = 0; k < 4; ++k) {
      const float t = lanes[k] + bias[c + k];
      lanes[k] = 0.5f * t * (1.0f + erff(t * 0.70710678118654752f)) * scale;
    }
    y[i] = v;
  }
}

torch::Tensor bias_gelu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "bias_gelu_scale: float32 CUDA");
  TORCH_CHECK(bias.dim() == 1 && x.size(-1) == bias.size(0) && bias.size(0) % 4 == 0,
              "bias_gelu_scale: bias must match the last dim, a multiple of 4");
  auto xc = x.contiguous();
  auto bc = bias.contiguous();
  auto y = torch::empty_like(xc);
  TORCH_CHECK(reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) % 16 == 0,
              "bias_gelu_scale: x must be 16-byte aligned for float4 loads");
  const long long n4 = xc.numel() / 4;
  if (n4 == 0)
    return y;
  const int threads = 256;
  const long long blocks = std::min<long long>((n4 + threads - 1) / threads, 65535LL * 8);
  bias_gelu_scale_kernel<<<static_cast<unsigned>(blocks), threads, 0,
                           c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const float4*>(xc.data_ptr<float>()), bc.data_ptr<float>(),
      reinterpret_cast<float4*>(y.data_ptr<float>()), n4, bc.numel(), static_cast<float>(scale));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""


@functools.lru_cache(maxsize=1)
def get_extension():
    return load_inline(name="honest_bias_gelu_scale", cpp_sources=_CPP, cuda_sources=_CUDA,
                       functions=["bias_gelu_scale"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, cols, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)
        self.scale = scale

    def forward(self, x):
        return get_extension().bias_gelu_scale(x, self.bias, self.scale)
