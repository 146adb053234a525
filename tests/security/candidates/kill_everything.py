# SIGKILL to every process it may signal (kill(-1)), its parent and pid 1. Expected:
# runtime_error (it killed itself), and kiln, its pool and the next evaluation unharmed.
import os
import signal

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        for pid in (os.getppid(), 1):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if os.getuid() != 0:  # never as root outside a sandbox: that would be the whole host
            os.kill(-1, signal.SIGKILL)
        raise RuntimeError("still here after kill(-1)")
