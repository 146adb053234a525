# Honest idiom: the batch norms folded into the convolutions once, in __init__, with
# torch.nn.utils.fusion.fuse_conv_bn_eval; module-level constants for the statistics.
# For tests/tasks/cpu/2_ConvBnRelu.py (same layers and initialisation as the task).
import torch
import torch.nn as nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

MEAN_RANGE = (-0.3, 0.3)
VAR_RANGE = (0.25, 1.0)
GAMMA_RANGE = (0.5, 1.5)
BETA_RANGE = (-0.2, 0.2)


def _init_bn(bn: nn.BatchNorm2d) -> None:
    c = bn.num_features
    with torch.no_grad():
        bn.running_mean.copy_(torch.linspace(*MEAN_RANGE, c))
        bn.running_var.copy_(torch.linspace(*VAR_RANGE, c))
        bn.weight.copy_(torch.linspace(*GAMMA_RANGE, c))
        bn.bias.copy_(torch.linspace(*BETA_RANGE, c))


class ModelNew(nn.Module):
    def __init__(self, in_channels, mid_channels, out_channels, kernel_size):
        super().__init__()
        pad = kernel_size // 2
        conv1 = nn.Conv2d(in_channels, mid_channels, kernel_size, padding=pad)
        bn1 = nn.BatchNorm2d(mid_channels)
        conv2 = nn.Conv2d(mid_channels, out_channels, kernel_size, padding=pad)
        bn2 = nn.BatchNorm2d(out_channels)
        _init_bn(bn1)
        _init_bn(bn2)
        self.fused1 = fuse_conv_bn_eval(conv1.eval(), bn1.eval())
        self.fused2 = fuse_conv_bn_eval(conv2.eval(), bn2.eval())

    def forward(self, x):
        return torch.relu(self.fused2(torch.relu(self.fused1(x))))
