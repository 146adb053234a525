#include "prompts/templates.hpp"

// The template texts are generated from prompts/templates/*.txt by kiln_embed (see
// prompts/CMakeLists.txt); this file only declares them and holds the worked example.
namespace kiln::embedded {
extern const std::string_view template_brainstorm;
extern const std::string_view template_optimize;
extern const std::string_view template_improve;
extern const std::string_view template_fix;
extern const std::string_view template_fix_correctness;
extern const std::string_view template_crossover;
extern const std::string_view template_review;
} // namespace kiln::embedded

namespace kiln {

namespace {

// A toy task in KernelBench form: one projection followed by a scaled SiLU, which eager PyTorch
// runs as three elementwise passes over the projection's output.
constexpr std::string_view toy_reference = R"kiln(import torch
import torch.nn as nn


class Model(nn.Module):
    """A projection followed by a scaled SiLU."""

    def __init__(self, features, scale):
        super().__init__()
        self.proj = nn.Linear(features, features)
        self.scale = scale

    def forward(self, x):
        y = self.proj(x)
        y = y * torch.sigmoid(y)
        return y * self.scale


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return [1024, 0.5])kiln";

// The honest speedup for the toy: keep the projection (cuBLAS is hard to beat at this size) and
// replace the sigmoid, multiply and scale passes with one kernel that reads the projection once
// and writes the result once. The parameters are created exactly as in the toy, so the weights
// match.
constexpr std::string_view toy_candidate = R"kiln(import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One kernel replaces three elementwise passes (sigmoid, multiply, scale): the projection's
# output is read once and the result written once.
_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void scaled_silu_kernel(const float* __restrict__ in, float* __restrict__ out,
                                   float scale, int64_t n) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = in[i];
        out[i] = scale * v / (1.0f + __expf(-v));
    }
}

torch::Tensor scaled_silu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "expects a float32 CUDA tensor");
    auto in = x.contiguous();
    auto out = torch::empty_like(in);
    int64_t n = in.numel();
    if (n == 0) {
        return out;
    }
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 4096);
    scaled_silu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        in.data_ptr<float>(), out.data_ptr<float>(), (float)scale, n);
    return out;
}
"""

_cpp_source = "torch::Tensor scaled_silu(torch::Tensor x, double scale);"

_ext = load_inline(name="toy_scaled_silu", cpp_sources=_cpp_source, cuda_sources=_cuda_source,
                   functions=["scaled_silu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        # The same parameter, created in the same place as in Model, so the weights match.
        self.proj = nn.Linear(features, features)
        self.scale = scale

    def forward(self, x):
        return _ext.scaled_silu(self.proj(x), self.scale))kiln";

} // namespace

std::string_view builtin_template(prompt_kind kind) {
  switch (kind) {
    case prompt_kind::brainstorm:
      return embedded::template_brainstorm;
    case prompt_kind::optimize:
      return embedded::template_optimize;
    case prompt_kind::improve:
      return embedded::template_improve;
    case prompt_kind::fix:
      return embedded::template_fix;
    case prompt_kind::crossover:
      return embedded::template_crossover;
    case prompt_kind::review:
      return embedded::template_review;
    case prompt_kind::fix_correctness:
      return embedded::template_fix_correctness;
  }
  return embedded::template_optimize;
}

std::string_view example_reference() {
  return toy_reference;
}

std::string_view example_candidate() {
  return toy_candidate;
}

} // namespace kiln
