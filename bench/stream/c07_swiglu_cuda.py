# kiln bench candidate for ../tasks/5_GatedMLP.py: the three GEMMs stay in cuBLAS; the
# silu(gate) * up step is one load_inline CUDA kernel instead of two eager kernels.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CPP_SRC = 'at::Tensor silu_mul(at::Tensor gate, at::Tensor up);'

_CUDA_SRC = r'''
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

// y = silu(gate) * up, elementwise, grid-stride.
__global__ void silu_mul_kernel(const float* __restrict__ g, const float* __restrict__ u,
                                float* __restrict__ y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (; i < n; i += stride) {
    const float a = g[i];
    y[i] = a / (1.0f + expf(-a)) * u[i];
  }
}

at::Tensor silu_mul(at::Tensor gate, at::Tensor up) {
  TORCH_CHECK(gate.is_cuda() && up.is_cuda(), "silu_mul: CUDA tensors expected");
  TORCH_CHECK(gate.scalar_type() == at::kFloat && up.scalar_type() == at::kFloat,
              "silu_mul: float32 expected");
  TORCH_CHECK(gate.sizes() == up.sizes(), "silu_mul: shapes differ");
  auto gc = gate.contiguous();
  auto uc = up.contiguous();
  auto y = at::empty_like(gc);
  const long long n = gc.numel();
  if (n == 0) return y;
  const int threads = 256;
  long long blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  silu_mul_kernel<<<(unsigned int)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      gc.data_ptr<float>(), uc.data_ptr<float>(), y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
'''

# Module level, as PIKE's candidates do: the build happens when the file is imported.
_ext = load_inline(
    name='kiln_bench_silu_mul',
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=['silu_mul'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        with torch.no_grad():
            g = torch.mm(x, self.gate.weight.t())
            u = torch.mm(x, self.up.weight.t())
            return torch.mm(_ext.silu_mul(g, u), self.down.weight.t())
