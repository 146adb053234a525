# kiln timing benchmark candidate for ../tasks/1_LaunchBoundResStack.py: the same ~300 kernels,
# captured once in a CUDA graph and replayed, so the host launches one graph instead of each
# kernel. Every call copies its input into the graph's static input buffer and returns a fresh
# copy of the static output. The ops are the task's own (no folding), so the numbers match the
# reference's up to cuDNN's choices; on the CPU it runs them eagerly.
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + x)


def randomize_bn(bn):
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.2, 0.2)
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)


class ModelNew(nn.Module):
    def __init__(self, channels, blocks):
        super().__init__()
        # Same modules, same order, same random draws as the task: seeded weights match.
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(channels)
        self.blocks = nn.ModuleList([Block(channels) for _ in range(blocks)])
        for bn in [self.stem_bn] + [b.bn1 for b in self.blocks] + [b.bn2 for b in self.blocks]:
            randomize_bn(bn)
        self._graph = None
        self._key = None
        self._static_in = None
        self._static_out = None

    def _eager(self, x):
        x = torch.relu(self.stem_bn(self.stem(x)))
        for b in self.blocks:
            x = b(x)
        return x.mean(dim=(2, 3)) * 4.0

    def _capture(self, x, key):
        self._graph = None
        self._static_in = x.clone()
        # Warm-up on a side stream, as torch.cuda.graph requires: cuDNN picks its algorithms and
        # allocates its workspaces before capture.
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
            if not x.is_cuda or self.training:
                return self._eager(x)
            # A graph replays fixed addresses: recapture if the input's shape or the weights'
            # storage changed (after a .to(), say).
            key = (tuple(x.shape), x.dtype, x.device, self.stem.weight.data_ptr())
            if self._graph is None or self._key != key:
                self._capture(x, key)
            self._static_in.copy_(x)
            self._graph.replay()
            return self._static_out.clone()
