# kiln bench candidate for ../tasks/4_MLPBlock.py: plain PyTorch with bias folded into addmm,
# replayed as a CUDA graph on the GPU (static input buffer refreshed on every call, a fresh
# output returned). On the CPU it runs the same ops eagerly.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)
        self._graph = None
        self._key = None
        self._static_in = None
        self._static_out = None

    def _eager(self, x):
        h = torch.addmm(self.fc1.bias, x, self.fc1.weight.t())
        return torch.addmm(self.fc2.bias, F.gelu(h), self.fc2.weight.t())

    def _capture(self, x, key):
        self._graph = None
        self._static_in = x.clone()
        side = torch.cuda.Stream(device=x.device)
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                self._eager(self._static_in)
        torch.cuda.current_stream(x.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._static_out = self._eager(self._static_in)
        self._graph = graph
        self._key = key

    def forward(self, x):
        with torch.no_grad():
            if not x.is_cuda:
                return self._eager(x)
            key = (tuple(x.shape), x.dtype, x.device, self.fc1.weight.data_ptr(),
                   self.fc2.weight.data_ptr())
            if self._graph is None or self._key != key:
                self._capture(x, key)
            self._static_in.copy_(x)
            self._graph.replay()
            return self._static_out.clone()
