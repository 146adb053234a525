# kiln bench candidate for ../tasks/4_MLPBlock.py: plain PyTorch that splits the hidden dim in
# chunks of 2048: for each chunk, addmm (fc1 bias fused) and GELU, then the chunk's share of fc2
# accumulated into the output with addmm_ (fc2 bias added by the first chunk). Only one chunk of
# the hidden activation exists at a time.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)
        self.chunk = 2048

    def forward(self, x):
        with torch.no_grad():
            x2 = x.reshape(-1, x.shape[-1])
            w1, b1, w2 = self.fc1.weight, self.fc1.bias, self.fc2.weight
            out = None
            for k in range(0, w1.shape[0], self.chunk):
                h = F.gelu(torch.addmm(b1[k:k + self.chunk], x2, w1[k:k + self.chunk].t()))
                w2_part = w2[:, k:k + self.chunk].t()
                if out is None:
                    out = torch.addmm(self.fc2.bias, h, w2_part)
                else:
                    out.addmm_(h, w2_part)
            return out.view(*x.shape[:-1], out.shape[-1])
