# kiln bench candidate for ../tasks/2_RowSoftmax.py: a two-pass ("online") Triton softmax for rows
# of any length. One program per row walks the row in chunks of BLOCK columns; pass 1 keeps a
# running maximum and a running sum of exponentials per lane (the sum rescaled whenever the
# maximum grows), pass 2 writes exp(x / T - max) / sum. BLOCK 512, 4 warps.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_online_kernel(x_ptr, y_ptr, n_cols, inv_temp, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    # A finite start, not -inf: lanes that never see a column then give exp(0) * 0, not NaN.
    m_run = tl.zeros([BLOCK], dtype=tl.float32) - 3.0e38
    s_run = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        z = tl.load(x_ptr + base + offs, mask=mask, other=-float("inf")) * inv_temp
        m_new = tl.maximum(m_run, z)
        s_run = s_run * tl.exp(m_run - m_new) + tl.exp(z - m_new)
        m_run = m_new
    m = tl.max(m_run, axis=0)
    s = tl.sum(s_run * tl.exp(m_run - m), axis=0)
    inv_s = 1.0 / s
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        z = tl.load(x_ptr + base + offs, mask=mask, other=0.0) * inv_temp
        tl.store(y_ptr + base + offs, tl.exp(z - m) * inv_s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        with torch.no_grad():
            x = x.contiguous()
            cols = x.shape[-1]
            y = torch.empty_like(x)
            rows = x.numel() // cols
            if rows == 0:
                return y
            _softmax_online_kernel[(rows,)](x, y, cols, 1.0 / self.temperature, BLOCK=512,
                                            num_warps=4)
            return y
