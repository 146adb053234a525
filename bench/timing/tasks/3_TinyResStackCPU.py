# kiln timing benchmark task (bench/timing/README.md), CPU size. Overhead-bound on the CPU: a
# stack of tiny residual blocks (8 channels, 8 x 8, batch 1), so that each of its ~170 ops costs
# a few microseconds of dispatch and a few of arithmetic; a few ms in all on a small machine.
# A process that steals the CPU shows in it at once.
import torch
import torch.nn as nn

channels = 8
size = 8
blocks = 24


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


class Model(nn.Module):
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
        return x.mean(dim=(2, 3)) * 4.0


def get_inputs():
    return [torch.randn(1, 3, size, size)]


def get_init_inputs():
    return [channels, blocks]
