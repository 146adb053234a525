# kiln bench candidate for ../tasks/4_MLPBlock.py: an error-fix round of c08, whose build is c01's
# (same name, sources and flags). The Python now takes any leading dims, runs fc1 as F.linear
# without its bias (the kernel adds it, with GELU, scale 1) and fc2 as F.linear with its bias.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CPP_SRC = 'torch::Tensor bias_gelu_scale(torch::Tensor x, torch::Tensor bias, double scale);'

_CUDA_SRC = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

// y = gelu(x + bias[col]) * scale, exact (erf) GELU, grid-stride over the flat tensor.
__global__ void bias_gelu_scale_kernel(const float* __restrict__ x,
                                       const float* __restrict__ bias,
                                       float* __restrict__ y,
                                       long long n, long long cols, float scale) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (; i < n; i += stride) {
    const float v = x[i] + bias[i % cols];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)) * scale;
  }
}

torch::Tensor bias_gelu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "bias_gelu_scale: CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
              "bias_gelu_scale: float32 tensors expected");
  TORCH_CHECK(x.dim() >= 1 && bias.dim() == 1 && x.size(-1) == bias.size(0),
              "bias_gelu_scale: bias must match the last dimension of x");
  auto xc = x.contiguous();
  auto bc = bias.contiguous();
  auto y = torch::empty_like(xc);
  const long long n = xc.numel();
  const long long cols = bc.numel();
  if (n == 0) return y;
  const int threads = 256;
  long long blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  bias_gelu_scale_kernel<<<(unsigned int)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), n, cols, (float)scale);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
'''

# Module level, as PIKE's candidates do: the build happens when the file is imported.
_ext = load_inline(
    name='kiln_bench_bias_gelu_scale',
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=['bias_gelu_scale'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        with torch.no_grad():
            x2 = x.reshape(-1, x.shape[-1])
            h = F.linear(x2, self.fc1.weight)
            h = _ext.bias_gelu_scale(h, self.fc1.bias, 1.0)
            y = F.linear(h, self.fc2.weight, self.fc2.bias)
            return y.view(*x.shape[:-1], y.shape[-1])
