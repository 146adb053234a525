# kiln timing benchmark task (bench/timing/README.md). Launch-bound: a ResNet-like stack of small
# residual blocks at batch 2 and 16 x 16 resolution, so that every kernel (3x3 conv, batch norm,
# ReLU, residual add) runs for a few microseconds and eager time is mostly the host launching
# about 300 of them. This is the shape of work whose timing suffers most when other processes
# take the host's CPU: on the H200 machine eager timed 8.7-9.8 ms, almost all of it launch, and
# a CUDA graph of the same ops 1.3-1.4 ms.
import torch
import torch.nn as nn

batch = 2
channels = 32
size = 16
blocks = 40


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
    # Running statistics away from 0 / 1 so that folding them is real work to get right; kiln
    # evaluates in eval mode, where batch norm uses these buffers.
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.2, 0.2)
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)


class Model(nn.Module):
    """stem conv + BN + ReLU, then `blocks` residual blocks, then global average pooling."""

    def __init__(self, channels, blocks):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(channels)
        self.blocks = nn.ModuleList([Block(channels) for _ in range(blocks)])
        for bn in [self.stem_bn] + [b.bn1 for b in self.blocks] + [b.bn2 for b in self.blocks]:
            randomize_bn(bn)

    def forward(self, x):
        x = torch.relu(self.stem_bn(self.stem(x)))
        for b in self.blocks:
            x = b(x)
        # Scaled so that the outputs sit well above the 1e-2 tolerance.
        return x.mean(dim=(2, 3)) * 4.0


def get_inputs():
    return [torch.randn(batch, 3, size, size)]


def get_init_inputs():
    return [channels, blocks]
