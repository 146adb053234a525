# kiln timing benchmark candidate for ../tasks/3_TinyResStackCPU.py: every batch norm folded
# into the convolution before it (scale into the weights, shift into a bias), ReLU and the
# residual add done in place. Removes a third of the ops of an overhead-bound stack.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)


def randomize_bn(bn):
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.2, 0.2)
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)


def fold(conv, bn):
    with torch.no_grad():
        k = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        return conv.weight * k.view(-1, 1, 1, 1), bn.bias - bn.running_mean * k


class ModelNew(nn.Module):
    def __init__(self, channels, blocks):
        super().__init__()
        # Same modules, same order, same random draws as the task: seeded weights match.
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(channels)
        self.blocks = nn.ModuleList([Block(channels) for _ in range(blocks)])
        for bn in [self.stem_bn] + [b.bn1 for b in self.blocks] + [b.bn2 for b in self.blocks]:
            randomize_bn(bn)
        pairs = [(self.stem, self.stem_bn)]
        for b in self.blocks:
            pairs += [(b.conv1, b.bn1), (b.conv2, b.bn2)]
        # Buffers, so that they follow the module to its device.
        for i, (conv, bn) in enumerate(pairs):
            w, bias = fold(conv, bn)
            self.register_buffer("w%d" % i, w)
            self.register_buffer("b%d" % i, bias)
        self.count = len(pairs)

    def forward(self, x):
        with torch.no_grad():
            x = F.conv2d(x, self.w0, self.b0, padding=1).relu_()
            for i in range(1, self.count, 2):
                y = F.conv2d(x, getattr(self, "w%d" % i), getattr(self, "b%d" % i), padding=1)
                y = F.conv2d(y.relu_(), getattr(self, "w%d" % (i + 1)),
                             getattr(self, "b%d" % (i + 1)), padding=1)
                x = y.add_(x).relu_()
            return x.mean(dim=(2, 3)).mul_(4.0)
