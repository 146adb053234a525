# kiln bench candidate for ../tasks/3_LayerNormResidual.py: a second error-fix round of c05 (same
# build name, sources and flags). The Python broadcasts x and residual against each other as
# `x + residual` would, flattens both to rows of `hidden`, and passes the affine detached.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CPP_SRC = 'at::Tensor add_layer_norm(at::Tensor x, at::Tensor residual, at::Tensor weight, at::Tensor bias, double eps);'

_CUDA_SRC = r'''
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

constexpr int kThreads = 512;  // a power of two: the tree reduction below relies on it

// One block per row: v = x + residual; y = (v - mean) * rstd * weight + bias.
__global__ void __launch_bounds__(kThreads)
add_layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ r,
                      const float* __restrict__ w, const float* __restrict__ b,
                      float* __restrict__ y, int cols, float eps) {
  __shared__ float s_sum[kThreads];
  __shared__ float s_sq[kThreads];
  const long long off = (long long)blockIdx.x * cols;
  const int t = threadIdx.x;

  float sum = 0.0f, sq = 0.0f;
  for (int j = t; j < cols; j += kThreads) {
    const float v = x[off + j] + r[off + j];
    sum += v;
    sq += v * v;
  }
  s_sum[t] = sum;
  s_sq[t] = sq;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) {
      s_sum[t] += s_sum[t + s];
      s_sq[t] += s_sq[t + s];
    }
    __syncthreads();
  }
  const float mean = s_sum[0] / (float)cols;
  const float var = fmaxf(s_sq[0] / (float)cols - mean * mean, 0.0f);
  const float rstd = rsqrtf(var + eps);
  for (int j = t; j < cols; j += kThreads) {
    const float v = x[off + j] + r[off + j];
    y[off + j] = (v - mean) * rstd * w[j] + b[j];
  }
}

at::Tensor add_layer_norm(at::Tensor x, at::Tensor residual, at::Tensor weight,
                          at::Tensor bias, double eps) {
  TORCH_CHECK(x.is_cuda() && residual.is_cuda() && weight.is_cuda() && bias.is_cuda(),
              "add_layer_norm: CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && residual.scalar_type() == at::kFloat &&
              weight.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat,
              "add_layer_norm: float32 expected");
  TORCH_CHECK(x.sizes() == residual.sizes(), "add_layer_norm: x and residual differ in shape");
  const long long cols = x.size(-1);
  TORCH_CHECK(weight.numel() == cols && bias.numel() == cols, "add_layer_norm: bad affine");
  auto xc = x.contiguous();
  auto rc = residual.contiguous();
  auto wc = weight.contiguous();
  auto bc = bias.contiguous();
  auto y = at::empty_like(xc);
  const long long rows = xc.numel() / cols;
  if (rows == 0) return y;
  add_layer_norm_kernel<<<(unsigned int)rows, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), rc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
      y.data_ptr<float>(), (int)cols, (float)eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
'''

# Module level, as PIKE's candidates do: the build happens when the file is imported.
_ext = load_inline(
    name='kiln_bench_add_layer_norm',
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=['add_layer_norm'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(hidden))
        self.bias = nn.Parameter(0.2 * torch.randn(hidden))
        self.hidden = int(hidden)
        self.eps = float(eps)

    def forward(self, x, residual):
        with torch.no_grad():
            x, residual = torch.broadcast_tensors(x, residual)
            x2 = x.contiguous().view(-1, self.hidden)
            r2 = residual.contiguous().view(-1, self.hidden)
            y = _ext.add_layer_norm(x2, r2, self.weight.detach(), self.bias.detach(), self.eps)
            return y.view(x.shape)
