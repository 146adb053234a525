# PEERS (c) #6 through an annotation: `torch.cuda.synchronize: object = ...` rebinds the call the
# timing waits on. An annotated assignment is an assignment. Expected: rejected by the static scan.
import torch
import torch.nn as nn
torch.cuda.synchronize: object = lambda *a, **k: None
class ModelNew(nn.Module):
    def __init__(self, *a):
        super().__init__()
    def forward(self, x):
        return x
