# Honest idiom: load_inline with a CUDA kernel and the usual switches: extra_cflags,
# extra_cuda_cflags=["-O3", "--use_fast_math"], with_cuda=True, verbose=True and a build folder
# from tempfile.mkdtemp(). For bench/tasks/2_RowSoftmax.py (CUDA only).
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = "torch::Tensor softmax_temperature(torch::Tensor x, double temperature);"

cuda_src = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cfloat>

namespace {

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Reduces across the block; every thread gets the result. `shared` holds one value per warp.
template <int THREADS, bool MAX>
__device__ float block_reduce(float v, float* shared) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const float identity = MAX ? -FLT_MAX : 0.0f;
  v = MAX ? warp_max(v) : warp_sum(v);
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < THREADS / 32 ? shared[lane] : identity;
    v = MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0)
      shared[0] = v;
  }
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}

// One block per row: softmax(x / T).
template <int THREADS>
__global__ void softmax_temperature_kernel(const float* __restrict__ x, float* __restrict__ y,
                                           int cols, float inv_t) {
  __shared__ float shared[THREADS / 32];
  const float* in = x + static_cast<long long>(blockIdx.x) * cols;
  float* out = y + static_cast<long long>(blockIdx.x) * cols;
  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += THREADS)
    m = fmaxf(m, in[c] * inv_t);
  m = block_reduce<THREADS, true>(m, shared);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += THREADS)
    s += __expf(in[c] * inv_t - m);
  s = block_reduce<THREADS, false>(s, shared);
  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += THREADS)
    out[c] = __expf(in[c] * inv_t - m) * inv;
}

} // namespace

torch::Tensor softmax_temperature(torch::Tensor x, double temperature) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32,
              "softmax_temperature: a 2-D float32 CUDA tensor expected");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int rows = static_cast<int>(xc.size(0));
  const int cols = static_cast<int>(xc.size(1));
  if (rows == 0 || cols == 0)
    return y;
  constexpr int threads = 256;
  softmax_temperature_kernel<threads><<<rows, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), y.data_ptr<float>(), cols, static_cast<float>(1.0 / temperature));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

softmax_ext = load_inline(
    name="honest_softmax_temperature",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["softmax_temperature"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    with_cuda=True,
    verbose=True,
    build_directory=tempfile.mkdtemp(prefix="honest_softmax_"),
)


class ModelNew(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        return softmax_ext.softmax_temperature(x, self.temperature)
