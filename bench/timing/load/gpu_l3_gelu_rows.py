# kiln timing benchmark load (bench/timing/README.md): a CUDA load_inline build for
# ../tasks/2_BiasGeluTanh.py, there to keep compile workers busy (nvcc on torch's headers takes
# tens of seconds) and then a GPU lane. Its source differs from every other load file, so its
# build is its own cache entry. Column strips by row groups, the bias held in a register.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor gelu_rows(torch::Tensor x, torch::Tensor bias);"

CUDA = r"""
#include <ATen/cuda/CUDAContext.h>

// blockIdx.x: a strip of columns, blockIdx.y: a group of rows; each thread keeps its column's
// bias in a register and walks down the rows of its group.
__global__ void gelu_rows_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                 float* __restrict__ y, int64_t rows, int64_t cols,
                                 int64_t rows_per_block) {
  const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const float bc = b[c];
  const int64_t r0 = blockIdx.y * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  for (int64_t r = r0; r < r1; ++r) {
    const float v = x[r * cols + c] + bc;
    const float u = 0.7978845608f * (v + 0.044715f * v * v * v);
    y[r * cols + c] = 0.5f * v * (1.0f + tanhf(u));
  }
}

torch::Tensor gelu_rows(torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.dim() == 2,
              "x: 2-D float32 on a GPU");
  TORCH_CHECK(bias.numel() == x.size(1) && bias.scalar_type() == at::kFloat,
              "bias: one float32 per column");
  auto y = at::empty_like(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  if (x.numel() == 0) return y;
  const int threads = 256;
  const int64_t rows_per_block = 16;
  dim3 grid((unsigned)((cols + threads - 1) / threads),
            (unsigned)((rows + rows_per_block - 1) / rows_per_block));
  gelu_rows_kernel<<<grid, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), rows, cols,
      rows_per_block);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(name="bench_timing_load_gelu_rows", cpp_sources=[CPP],
                   cuda_sources=[CUDA], functions=["gelu_rows"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)

    def forward(self, x):
        with torch.no_grad():
            if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 2:
                return F.gelu(x + self.bias, approximate="tanh")
            return _ext.gelu_rows(x.contiguous(), self.bias.contiguous())
