"""CPU stand-ins for Triton and load_inline, used by `check_cpu.py --emulate` only.

They let the Python side of the GPU candidates run on a machine without CUDA or Triton:
  * a tiny Triton emulator: @triton.jit kernels run program by program on torch CPU tensors,
    with real pointer arithmetic, masks, loads, stores and reductions, so index and mask bugs in
    the kernels show up as wrong numbers;
  * load_inline returns torch re-implementations of this folder's five CUDA kernels (the same
    math, written from the .cu sources), so the wrappers' argument order, parameter use and
    shapes are exercised. The CUDA code itself is NOT run: check it by compiling (see README).
Nothing here is used on the GPU machine.
"""

import itertools
import sys
import types

import torch

LOADS = []  # (name, cpp_sources, cuda_sources, flags) of every emulated load_inline call


# ------------------------------------------------------------------------------------------------
# Triton

class _Ptr:
    def __init__(self, flat, offs=0):
        self.flat = flat
        self.offs = offs

    def __add__(self, other):
        return _Ptr(self.flat, self.offs + other)

    __radd__ = __add__


def _as_index(offs):
    return torch.as_tensor(offs, dtype=torch.int64)


def _load(ptr, mask=None, other=0.0):
    idx = _as_index(ptr.offs)
    if mask is None:
        mask = torch.ones_like(idx, dtype=torch.bool)
    mask = torch.as_tensor(mask).expand(idx.shape)
    out = torch.full(idx.shape, float(other), dtype=ptr.flat.dtype)
    sel = idx[mask]
    if sel.numel():
        if int(sel.min()) < 0 or int(sel.max()) >= ptr.flat.numel():
            raise IndexError("emulated tl.load out of bounds")
        out[mask] = ptr.flat[sel]
    return out


def _store(ptr, value, mask=None):
    idx = _as_index(ptr.offs)
    value = torch.as_tensor(value, dtype=ptr.flat.dtype).expand(idx.shape)
    if mask is None:
        mask = torch.ones_like(idx, dtype=torch.bool)
    mask = torch.as_tensor(mask).expand(idx.shape)
    sel = idx[mask]
    if sel.numel():
        if int(sel.min()) < 0 or int(sel.max()) >= ptr.flat.numel():
            raise IndexError("emulated tl.store out of bounds")
        ptr.flat[sel] = value[mask]


def _where(c, a, b):
    a = torch.as_tensor(a, dtype=torch.float32) if not isinstance(a, torch.Tensor) else a
    b = torch.as_tensor(b, dtype=a.dtype) if not isinstance(b, torch.Tensor) else b
    return torch.where(torch.as_tensor(c), a, b)


class _Kernel:
    def __init__(self, fn):
        self.fn = fn
        self.pid = (0, 0, 0)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            kwargs.pop("num_warps", None)
            kwargs.pop("num_stages", None)
            conv = []
            for a in args:
                if isinstance(a, torch.Tensor):
                    if not a.is_contiguous():
                        raise ValueError("emulated launch: non-contiguous tensor argument")
                    conv.append(_Ptr(a.view(-1)))
                else:
                    conv.append(a)
            g = tuple(grid) + (1,) * (3 - len(grid))
            for pid in itertools.product(range(g[0]), range(g[1]), range(g[2])):
                _STATE["pid"] = pid
                self.fn(*conv, **kwargs)

        return launch


_STATE = {"pid": (0, 0, 0)}


def _make_triton():
    triton = types.ModuleType("triton")
    tl = types.ModuleType("triton.language")
    math = types.ModuleType("triton.language.math")
    testing = types.ModuleType("triton.testing")
    triton.jit = lambda fn=None, **kw: _Kernel(fn) if fn is not None else (lambda f: _Kernel(f))
    triton.cdiv = lambda a, b: (a + b - 1) // b
    triton.next_power_of_2 = lambda n: 1 << (int(n) - 1).bit_length()
    triton.language = tl
    triton.testing = testing
    tl.constexpr = type("constexpr", (), {})
    tl.int64 = torch.int64
    tl.int32 = torch.int32
    tl.float32 = torch.float32
    tl.program_id = lambda axis: torch.tensor(_STATE["pid"][axis], dtype=torch.int32)
    tl.arange = lambda a, b: torch.arange(a, b, dtype=torch.int32)
    tl.load = _load
    tl.store = _store
    tl.max = lambda x, axis=None: x.max() if axis is None else x.max(dim=axis).values
    tl.sum = lambda x, axis=None: x.sum() if axis is None else x.sum(dim=axis)
    tl.maximum = lambda a, b: torch.maximum(torch.as_tensor(a), torch.as_tensor(b))
    tl.zeros = lambda shape, dtype: torch.zeros(tuple(shape), dtype=dtype)
    tl.exp = torch.exp
    tl.sqrt = torch.sqrt
    tl.where = _where
    tl.math = math
    math.erf = torch.erf
    math.exp = torch.exp
    tl.sigmoid = torch.sigmoid
    testing.do_bench = None
    return triton, tl, math, testing


# ------------------------------------------------------------------------------------------------
# load_inline

def _check_float(*ts):
    for t in ts:
        if t.dtype != torch.float32:
            raise TypeError("emulated kernel: float32 expected")


def bias_gelu_scale(x, bias, scale):
    _check_float(x, bias)
    if not (x.dim() >= 1 and bias.dim() == 1 and x.size(-1) == bias.size(0)):
        raise ValueError("bias must match the last dimension of x")
    v = x.contiguous() + bias
    return 0.5 * v * (1.0 + torch.erf(v * 0.70710678118654752)) * float(scale)


def row_softmax(x, temperature):
    _check_float(x)
    if not temperature > 0:
        raise ValueError("bad temperature")
    z = x.contiguous() * float(1.0 / temperature)
    m = z.max(dim=-1, keepdim=True).values
    e = torch.exp(z - m)
    return e * (1.0 / e.sum(dim=-1, keepdim=True))


def add_layer_norm(x, residual, weight, bias, eps):
    _check_float(x, residual, weight, bias)
    if x.shape != residual.shape:
        raise ValueError("x and residual differ in shape")
    cols = x.size(-1)
    if weight.numel() != cols or bias.numel() != cols:
        raise ValueError("bad affine")
    v = x.contiguous() + residual.contiguous()
    mean = v.mean(dim=-1, keepdim=True)
    var = ((v * v).mean(dim=-1, keepdim=True) - mean * mean).clamp_min(0.0)
    return (v - mean) * torch.rsqrt(var + float(eps)) * weight + bias


def silu_mul(gate, up):
    _check_float(gate, up)
    if gate.shape != up.shape:
        raise ValueError("shapes differ")
    g = gate.contiguous()
    return g / (1.0 + torch.exp(-g)) * up.contiguous()


def silu_mul_halves(gu):
    _check_float(gu)
    if not (gu.dim() >= 1 and gu.size(-1) % 2 == 0):
        raise ValueError("the last dimension must be even")
    g, u = gu.contiguous().chunk(2, dim=-1)  # [gate | up] along the last dim
    return g / (1.0 + torch.exp(-g)) * u


_FUNCS = {"bias_gelu_scale": bias_gelu_scale, "row_softmax": row_softmax,
          "add_layer_norm": add_layer_norm, "silu_mul": silu_mul,
          "silu_mul_halves": silu_mul_halves}


def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                extra_cuda_cflags=None, verbose=False, **kwargs):
    LOADS.append((name, cpp_sources, cuda_sources, tuple(extra_cuda_cflags or ())))
    ns = types.SimpleNamespace()
    for f in functions or []:
        if f not in _FUNCS:
            raise ImportError("no CPU stand-in for %s" % f)
        if f not in (cuda_sources or "") or f not in (cpp_sources or ""):
            raise ImportError("%s is not defined in the sources" % f)
        setattr(ns, f, _FUNCS[f])
    return ns


def install():
    """Puts the stand-ins in place (sys.modules and torch.utils.cpp_extension.load_inline)."""
    triton, tl, math, testing = _make_triton()
    sys.modules["triton"] = triton
    sys.modules["triton.language"] = tl
    sys.modules["triton.language.math"] = math
    sys.modules["triton.testing"] = testing
    import torch.utils.cpp_extension as ce

    ce.load_inline = load_inline
