# kiln timing benchmark load (bench/timing/README.md): a CUDA load_inline build for
# ../tasks/2_BiasGeluTanh.py, there to keep compile workers busy (nvcc on torch's headers takes
# tens of seconds) and then a GPU lane. Its source differs from every other load file, so its
# build is its own cache entry. Four elements per thread, tanh from the fast exponential.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor gelu_expf(torch::Tensor x, torch::Tensor bias);"

CUDA = r"""
#include <ATen/cuda/CUDAContext.h>

// tanh(u) = 1 - 2 / (exp(2u) + 1) with the fast exponential; exp overflowing to inf gives 1.
__device__ __forceinline__ float gelu_tanh_fast(float v) {
  const float u = 0.7978845608f * (v + 0.044715f * v * v * v);
  return v * (1.0f - 1.0f / (__expf(2.0f * u) + 1.0f));
}

// Each thread handles four elements a block-width apart (coalesced), unrolled.
__global__ void gelu_expf_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                 float* __restrict__ y, int64_t n, int64_t cols) {
  const int64_t base = blockIdx.x * (int64_t)blockDim.x * 4 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t i = base + (int64_t)k * blockDim.x;
    if (i < n) y[i] = gelu_tanh_fast(x[i] + b[i % cols]);
  }
}

torch::Tensor gelu_expf(torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.dim() == 2,
              "x: 2-D float32 on a GPU");
  TORCH_CHECK(bias.numel() == x.size(1) && bias.scalar_type() == at::kFloat,
              "bias: one float32 per column");
  auto y = at::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  const int threads = 512;
  const int64_t per_block = threads * 4;
  gelu_expf_kernel<<<(unsigned)((n + per_block - 1) / per_block), threads, 0,
                     at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), n, x.size(1));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(name="bench_timing_load_gelu_expf", cpp_sources=[CPP],
                   cuda_sources=[CUDA], functions=["gelu_expf"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)

    def forward(self, x):
        with torch.no_grad():
            if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 2:
                return F.gelu(x + self.bias, approximate="tanh")
            return _ext.gelu_expf(x.contiguous(), self.bias.contiguous())
