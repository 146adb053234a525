# PEERS (c) #4, background threads, hidden from the static scan (the module is fetched by a
# computed name): the worker fills the output after forward has returned. Expected: rejected by
# the harness, which sees a thread of the candidate still alive after the call.
import logging
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        layers = []
        width = in_features
        for h in hidden_sizes:
            layers.append(nn.Linear(width, h))
            layers.append(nn.ReLU())
            width = h
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)
        self.out_features = out_features

    def forward(self, x):
        worker_module = getattr(logging, "thr" + "eading")
        out = torch.empty(x.shape[0], self.out_features)

        def work():
            with torch.no_grad():
                out.copy_(self.net(x))
            time.sleep(2.0)  # lingers, as a real deferral would while more work queues up

        worker_module.Thread(target=work, daemon=True).start()
        return out
