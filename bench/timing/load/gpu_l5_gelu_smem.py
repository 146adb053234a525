# kiln timing benchmark load (bench/timing/README.md): a CUDA load_inline build for
# ../tasks/2_BiasGeluTanh.py, there to keep compile workers busy (nvcc on torch's headers takes
# tens of seconds) and then a GPU lane. Its source differs from every other load file, so its
# build is its own cache entry. One block per row strip, the bias staged in shared memory.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor gelu_smem(torch::Tensor x, torch::Tensor bias);"

CUDA = r"""
#include <ATen/cuda/CUDAContext.h>

// One block per (row, strip of 1024 columns): the strip's bias is staged in shared memory
// before the block's threads read x.
__global__ void gelu_smem_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                 float* __restrict__ y, int64_t cols) {
  __shared__ float sb[1024];
  const int64_t c0 = blockIdx.x * 1024LL;
  const int64_t row = blockIdx.y;
  for (int k = threadIdx.x; k < 1024; k += blockDim.x)
    sb[k] = c0 + k < cols ? b[c0 + k] : 0.0f;
  __syncthreads();
  for (int k = threadIdx.x; k < 1024 && c0 + k < cols; k += blockDim.x) {
    const int64_t i = row * cols + c0 + k;
    const float v = x[i] + sb[k];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}

torch::Tensor gelu_smem(torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.dim() == 2,
              "x: 2-D float32 on a GPU");
  TORCH_CHECK(bias.numel() == x.size(1) && bias.scalar_type() == at::kFloat,
              "bias: one float32 per column");
  auto y = at::empty_like(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  if (x.numel() == 0) return y;
  TORCH_CHECK(rows <= 65535, "gelu_smem: at most 65535 rows");
  dim3 grid((unsigned)((cols + 1023) / 1024), (unsigned)rows);
  gelu_smem_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(name="bench_timing_load_gelu_smem", cpp_sources=[CPP],
                   cuda_sources=[CUDA], functions=["gelu_smem"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)

    def forward(self, x):
        with torch.no_grad():
            if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 2:
                return F.gelu(x + self.bias, approximate="tanh")
            return _ext.gelu_smem(x.contiguous(), self.bias.contiguous())
