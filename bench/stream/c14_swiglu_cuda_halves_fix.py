# kiln bench candidate for ../tasks/5_GatedMLP.py: an error-fix round of c13 (same build name,
# sources and flags). The Python no longer concatenates the weights on every call: the gate and
# up GEMMs write straight into the two halves of one (tokens, 2 * d_ff) buffer, and x may have
# leading dims.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CPP_SRC = 'at::Tensor silu_mul_halves(at::Tensor gu);'

_CUDA_SRC = r'''
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

// gu has rows of 2 * width floats, [gate | up]; y has rows of width floats:
// y[r][j] = silu(gu[r][j]) * gu[r][width + j], elementwise over y, grid-stride.
__global__ void silu_mul_halves_kernel(const float* __restrict__ gu, float* __restrict__ y,
                                       long long n, long long width) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (; i < n; i += stride) {
    const long long r = i / width;
    const long long g_at = i + r * width;  // r * 2 * width + (i - r * width)
    const float a = gu[g_at];
    y[i] = a / (1.0f + expf(-a)) * gu[g_at + width];
  }
}

at::Tensor silu_mul_halves(at::Tensor gu) {
  TORCH_CHECK(gu.is_cuda(), "silu_mul_halves: a CUDA tensor expected");
  TORCH_CHECK(gu.scalar_type() == at::kFloat, "silu_mul_halves: float32 expected");
  TORCH_CHECK(gu.dim() >= 1 && gu.size(-1) % 2 == 0,
              "silu_mul_halves: the last dimension must be even");
  auto gc = gu.contiguous();
  const long long width = gc.size(-1) / 2;
  std::vector<int64_t> sizes = gc.sizes().vec();
  sizes.back() = width;
  auto y = at::empty(sizes, gc.options());
  const long long n = y.numel();
  if (n == 0) return y;
  const int threads = 256;
  long long blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  silu_mul_halves_kernel<<<(unsigned int)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      gc.data_ptr<float>(), y.data_ptr<float>(), n, width);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
'''

# Module level, as PIKE's candidates do: the build happens when the file is imported.
_ext = load_inline(
    name='kiln_bench_silu_mul_halves',
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=['silu_mul_halves'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)
        self.d_ff = int(d_ff)

    def forward(self, x):
        with torch.no_grad():
            x2 = x.reshape(-1, x.shape[-1])
            gu = x2.new_empty((x2.shape[0], 2 * self.d_ff))
            torch.mm(x2, self.gate.weight.t(), out=gu[:, :self.d_ff])
            torch.mm(x2, self.up.weight.t(), out=gu[:, self.d_ff:])
            y = torch.mm(_ext.silu_mul_halves(gu), self.down.weight.t())
            return y.view(*x.shape[:-1], y.shape[-1])
