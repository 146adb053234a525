# kiln timing benchmark load (bench/timing/README.md): a CUDA load_inline build for
# ../tasks/2_BiasGeluTanh.py, there to keep compile workers busy (nvcc on torch's headers takes
# tens of seconds) and then a GPU lane. Its source differs from every other load file, so its
# build is its own cache entry. Four columns per thread through float4 loads and stores.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor gelu_float4(torch::Tensor x, torch::Tensor bias);"

CUDA = r"""
#include <ATen/cuda/CUDAContext.h>

__device__ __forceinline__ float gelu_tanh_f(float v) {
  return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

// Four columns per thread; cols is a multiple of 4, so a float4 never crosses a row.
__global__ void gelu_float4_kernel(const float4* __restrict__ x, const float* __restrict__ b,
                                   float4* __restrict__ y, int64_t n4, int64_t cols) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n4) return;
  const int64_t c = (i * 4) % cols;
  float4 v = x[i];
  v.x = gelu_tanh_f(v.x + b[c]);
  v.y = gelu_tanh_f(v.y + b[c + 1]);
  v.z = gelu_tanh_f(v.z + b[c + 2]);
  v.w = gelu_tanh_f(v.w + b[c + 3]);
  y[i] = v;
}

__global__ void gelu_scalar_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                   float* __restrict__ y, int64_t n, int64_t cols) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = gelu_tanh_f(x[i] + b[i % cols]);
}

torch::Tensor gelu_float4(torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.dim() == 2,
              "x: 2-D float32 on a GPU");
  TORCH_CHECK(bias.numel() == x.size(1) && bias.scalar_type() == at::kFloat,
              "bias: one float32 per column");
  auto y = at::empty_like(x);
  const int64_t n = x.numel(), cols = x.size(1);
  if (n == 0) return y;
  const int threads = 256;
  auto stream = at::cuda::getCurrentCUDAStream();
  // at::empty_like and contiguous inputs are 16-byte aligned at offset 0.
  if (cols % 4 == 0 && x.storage_offset() == 0) {
    const int64_t n4 = n / 4;
    gelu_float4_kernel<<<(unsigned)((n4 + threads - 1) / threads), threads, 0, stream>>>(
        reinterpret_cast<const float4*>(x.data_ptr<float>()), bias.data_ptr<float>(),
        reinterpret_cast<float4*>(y.data_ptr<float>()), n4, cols);
  } else {
    gelu_scalar_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
        x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), n, cols);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(name="bench_timing_load_gelu_float4", cpp_sources=[CPP],
                   cuda_sources=[CUDA], functions=["gelu_float4"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)

    def forward(self, x):
        with torch.no_grad():
            if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 2:
                return F.gelu(x + self.bias, approximate="tanh")
            return _ext.gelu_float4(x.contiguous(), self.bias.contiguous())
