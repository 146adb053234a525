# kiln bench candidate for ../tasks/1_BiasGeluScale.py: a second error-fix round of c01. The build
# (name, cpp/cuda sources, flags) is byte for byte c01's; only the Python changed: x is viewed as
# rows of `cols`, the bias goes in detached, and anything but float32 takes the eager ops.
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
    def __init__(self, cols, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)
        self.cols = int(cols)
        self.scale = float(scale)

    def forward(self, x):
        with torch.no_grad():
            if x.dtype != torch.float32:
                return F.gelu(x + self.bias) * self.scale
            rows = x.reshape(-1, self.cols)
            y = _ext.bias_gelu_scale(rows, self.bias.detach(), self.scale)
            return y.view(x.shape)
