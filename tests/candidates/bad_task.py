# Not a candidate: a broken TASK (get_inputs raises). Any candidate evaluated against it must get
# runtime_error with a reason starting "reference failed:", since the fault is the task's.
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    raise ValueError("kiln test: this task cannot make inputs")


def get_init_inputs():
    return []
