# Honest idiom: channels_last memory format for the convolutions, torch.backends.cudnn.benchmark
# = True at import, and the batch norms applied by F.batch_norm on the running statistics.
# For tests/tasks/cpu/2_ConvBnRelu.py (same layers and initialisation as the task).
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = False


def _init_bn(bn):
    c = bn.num_features
    with torch.no_grad():
        bn.running_mean.copy_(torch.linspace(-0.3, 0.3, c))
        bn.running_var.copy_(torch.linspace(0.25, 1.0, c))
        bn.weight.copy_(torch.linspace(0.5, 1.5, c))
        bn.bias.copy_(torch.linspace(-0.2, 0.2, c))


class ModelNew(nn.Module):
    def __init__(self, in_channels, mid_channels, out_channels, kernel_size):
        super().__init__()
        pad = kernel_size // 2
        self.conv1 = nn.Conv2d(in_channels, mid_channels, kernel_size, padding=pad)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.conv2 = nn.Conv2d(mid_channels, out_channels, kernel_size, padding=pad)
        self.bn2 = nn.BatchNorm2d(out_channels)
        _init_bn(self.bn1)
        _init_bn(self.bn2)
        self.to(memory_format=torch.channels_last)

    def _block(self, x, conv, bn):
        y = conv(x)
        y = F.batch_norm(y, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False,
                         eps=bn.eps)
        return F.relu(y, inplace=True)

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        x = self._block(x, self.conv1, self.bn1)
        x = self._block(x, self.conv2, self.bn2)
        return x.contiguous()
