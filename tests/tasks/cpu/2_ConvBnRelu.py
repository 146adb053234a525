# Exercises: two Conv2d -> BatchNorm2d (eval, affine) -> ReLU blocks; the classic conv/BN folding target.
import torch
import torch.nn as nn

batch_size = 16
in_channels = 3
mid_channels = 32
out_channels = 32
height = 32
width = 32
kernel_size = 3


def _init_bn(bn):
    # Deterministic, non-trivial running statistics and affine parameters (no RNG is consumed), so
    # that eval-mode BN is not the identity and a folded conv must get the arithmetic right.
    # A candidate that rebuilds these layers must apply the same initialisation.
    c = bn.num_features
    with torch.no_grad():
        bn.running_mean.copy_(torch.linspace(-0.3, 0.3, c))
        bn.running_var.copy_(torch.linspace(0.25, 1.0, c))
        bn.weight.copy_(torch.linspace(0.5, 1.5, c))
        bn.bias.copy_(torch.linspace(-0.2, 0.2, c))


class Model(nn.Module):
    """Conv(k, pad k//2) -> BN -> ReLU, twice. Evaluated in eval mode (BN uses running stats)."""

    def __init__(self, in_channels, mid_channels, out_channels, kernel_size):
        super().__init__()
        pad = kernel_size // 2
        self.conv1 = nn.Conv2d(in_channels, mid_channels, kernel_size, padding=pad)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.conv2 = nn.Conv2d(mid_channels, out_channels, kernel_size, padding=pad)
        self.bn2 = nn.BatchNorm2d(out_channels)
        _init_bn(self.bn1)
        _init_bn(self.bn2)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return x


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, mid_channels, out_channels, kernel_size]
