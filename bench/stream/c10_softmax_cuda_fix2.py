# kiln bench candidate for ../tasks/2_RowSoftmax.py: a second error-fix round of c03 (same build
# name, sources and flags). The Python checks the temperature once at construction, makes x
# contiguous only when it is not, and sends anything but float32 to torch.softmax.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CPP_SRC = 'at::Tensor row_softmax(at::Tensor x, double temperature);'

_CUDA_SRC = r'''
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

constexpr int kThreads = 256;  // a power of two: the tree reductions below rely on it

// One block per row: y = softmax(x * inv_temp) along the row.
__global__ void __launch_bounds__(kThreads)
row_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int cols, float inv_temp) {
  __shared__ float red[kThreads];
  const long long off = (long long)blockIdx.x * cols;
  const float* xr = x + off;
  float* yr = y + off;
  const int t = threadIdx.x;

  float m = -3.402823466e+38f;
  for (int j = t; j < cols; j += kThreads) m = fmaxf(m, xr[j] * inv_temp);
  red[t] = m;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) red[t] = fmaxf(red[t], red[t + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();  // everyone has read red[0] before it is overwritten

  float sum = 0.0f;
  for (int j = t; j < cols; j += kThreads) sum += expf(xr[j] * inv_temp - m);
  red[t] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    __syncthreads();
  }
  const float inv = 1.0f / red[0];
  for (int j = t; j < cols; j += kThreads) yr[j] = expf(xr[j] * inv_temp - m) * inv;
}

at::Tensor row_softmax(at::Tensor x, double temperature) {
  TORCH_CHECK(x.is_cuda(), "row_softmax: a CUDA tensor expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "row_softmax: float32 expected");
  TORCH_CHECK(x.dim() >= 1 && temperature > 0.0, "row_softmax: bad arguments");
  auto xc = x.contiguous();
  auto y = at::empty_like(xc);
  const long long cols = xc.size(-1);
  TORCH_CHECK(cols > 0 && cols < (1LL << 31), "row_softmax: bad row length");
  const long long rows = xc.numel() / cols;
  if (rows == 0) return y;
  TORCH_CHECK(rows < (1LL << 31), "row_softmax: too many rows");
  row_softmax_kernel<<<(unsigned int)rows, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), y.data_ptr<float>(), (int)cols, (float)(1.0 / temperature));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
'''

# Module level, as PIKE's candidates do: the build happens when the file is imported.
_ext = load_inline(
    name='kiln_bench_row_softmax',
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=['row_softmax'],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        if not temperature > 0:
            raise ValueError("temperature must be positive")
        self.temperature = float(temperature)

    def forward(self, x):
        with torch.no_grad():
            if x.dtype != torch.float32:
                return torch.softmax(x / self.temperature, dim=-1)
            if not x.is_contiguous():
                x = x.contiguous()
            return _ext.row_softmax(x, self.temperature)
