# Honest: eval-mode BatchNorm folded into the convolution weights (constant folding), ReLU in
# place on the intermediate. The layers are created and initialised exactly like the task's,
# so the seeded weights match. Expected: correct.
import torch
import torch.nn as nn
import torch.nn.functional as F


def _init_bn(bn):
    c = bn.num_features
    with torch.no_grad():
        bn.running_mean.copy_(torch.linspace(-0.3, 0.3, c))
        bn.running_var.copy_(torch.linspace(0.25, 1.0, c))
        bn.weight.copy_(torch.linspace(0.5, 1.5, c))
        bn.bias.copy_(torch.linspace(-0.2, 0.2, c))


def _fold(conv, bn):
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    weight = conv.weight * scale.reshape(-1, 1, 1, 1)
    bias = (conv.bias - bn.running_mean) * scale + bn.bias
    return weight.detach(), bias.detach()


class ModelNew(nn.Module):
    def __init__(self, in_channels, mid_channels, out_channels, kernel_size):
        super().__init__()
        self.pad = kernel_size // 2
        self.conv1 = nn.Conv2d(in_channels, mid_channels, kernel_size, padding=self.pad)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.conv2 = nn.Conv2d(mid_channels, out_channels, kernel_size, padding=self.pad)
        self.bn2 = nn.BatchNorm2d(out_channels)
        _init_bn(self.bn1)
        _init_bn(self.bn2)
        self.folded = None

    def forward(self, x):
        if self.folded is None:  # weights only: the same for every input
            self.folded = (_fold(self.conv1, self.bn1), _fold(self.conv2, self.bn2))
        (w1, b1), (w2, b2) = self.folded
        y = F.conv2d(x, w1, b1, padding=self.pad).relu_()
        return F.conv2d(y, w2, b2, padding=self.pad).relu_()
