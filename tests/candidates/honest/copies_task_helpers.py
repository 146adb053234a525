# Honest idiom: the task's module-level sizes and its get_inputs/get_init_inputs copied into the
# candidate, as generated solutions often do (kiln uses the task's own, never these).
# For tests/tasks/cpu/2_ConvBnRelu.py (same layers and initialisation as the task).
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
in_channels = 3
mid_channels = 32
out_channels = 32
height = 32
width = 32
kernel_size = 3


def _init_bn(bn):
    c = bn.num_features
    with torch.no_grad():
        bn.running_mean.copy_(torch.linspace(-0.3, 0.3, c))
        bn.running_var.copy_(torch.linspace(0.25, 1.0, c))
        bn.weight.copy_(torch.linspace(0.5, 1.5, c))
        bn.bias.copy_(torch.linspace(-0.2, 0.2, c))


def _fold(conv, bn):
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    weight = conv.weight * scale.view(-1, 1, 1, 1)
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

    def forward(self, x):
        w1, b1 = _fold(self.conv1, self.bn1)
        w2, b2 = _fold(self.conv2, self.bn2)
        x = F.relu(F.conv2d(x, w1, b1, padding=self.pad))
        return F.relu(F.conv2d(x, w2, b2, padding=self.pad))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, mid_channels, out_channels, kernel_size]
