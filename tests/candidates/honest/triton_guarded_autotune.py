# Honest idiom: `@triton.autotune` and `@triton.heuristics` on a row-softmax kernel with
# `tl.constexpr` parameters (one with a default), behind a guarded import; the torch path on the
# CPU. For tests/tasks/cpu/3_Softmax.py.
import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False

if HAS_TRITON:

    @triton.autotune(
        configs=[
            triton.Config({"ROWS_PER_PROGRAM": 1}, num_warps=4),
            triton.Config({"ROWS_PER_PROGRAM": 2}, num_warps=8),
        ],
        key=["n_cols"],
    )
    @triton.heuristics({"EVEN_COLS": lambda args: args["n_cols"] == args["BLOCK"]})
    @triton.jit
    def _softmax_rows(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr,
                      ROWS_PER_PROGRAM: tl.constexpr, EVEN_COLS: tl.constexpr = False):
        cols = tl.arange(0, BLOCK)
        for r in range(ROWS_PER_PROGRAM):
            row = tl.program_id(0) * ROWS_PER_PROGRAM + r
            if row < n_rows:
                if EVEN_COLS:
                    x = tl.load(x_ptr + row * n_cols + cols)
                else:
                    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols,
                                other=-float("inf"))
                e = tl.exp(x - tl.max(x, axis=0))
                y = e / tl.sum(e, axis=0)
                tl.store(y_ptr + row * n_cols + cols, y, mask=cols < n_cols)


def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    if not (HAS_TRITON and x.is_cuda):
        return torch.softmax(x, dim=-1)
    x = x.contiguous()
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    grid = lambda meta: (triton.cdiv(n_rows, meta["ROWS_PER_PROGRAM"]),)
    _softmax_rows[grid](x, y, n_rows, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax_rows(x)
