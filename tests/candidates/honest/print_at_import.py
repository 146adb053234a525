# Honest idiom: a print when the file is imported and when the model is built, a logging
# logger and a warnings.warn, as generated solutions often leave in. For
# tests/tasks/cpu/4_LayerNorm.py.
import logging
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

print("honest layer norm candidate loaded; torch", torch.__version__)
log = logging.getLogger(__name__)
log.setLevel(logging.INFO)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        print(f"ModelNew: normalized_shape={tuple(normalized_shape)}")
        log.info("built ModelNew")
        if not torch.cuda.is_available():
            warnings.warn("CUDA is not available; running the torch path", RuntimeWarning)

    def forward(self, x):
        return F.layer_norm(x, self.ln.normalized_shape, self.ln.weight, self.ln.bias, self.ln.eps)
