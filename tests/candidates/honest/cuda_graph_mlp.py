# Honest idiom: the MLP block captured once in a CUDA graph (warm-up on a side stream, then
# torch.cuda.graph), replayed on a static input buffer; the output is cloned out of the graph's
# pool. For bench/tasks/4_MLPBlock.py (CUDA only).
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
        return self.fc2(F.gelu(self.fc1(x)))

    def _capture(self, x):
        self._static_in = x.detach().clone()
        warmup = torch.cuda.Stream(device=x.device)
        warmup.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(warmup):
            for _ in range(2):
                self._eager(self._static_in)
        torch.cuda.current_stream(x.device).wait_stream(warmup)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._static_out = self._eager(self._static_in)
        self._graph = graph
        self._key = (tuple(x.shape), x.dtype, x.device)

    def forward(self, x):
        if not x.is_cuda:
            return self._eager(x)
        if self._graph is None or self._key != (tuple(x.shape), x.dtype, x.device):
            self._capture(x)
        self._static_in.copy_(x)
        self._graph.replay()
        return self._static_out.clone()
