# PEERS (c) #3 (GPU only), side-stream work: launches the forward on its own CUDA stream and
# returns without making the current stream wait, so events recorded on the default stream see
# almost nothing. Expected on a GPU: correct, with the stream note, and a time that includes
# the side stream's work (kiln_timing synchronizes the whole device before the end event).
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
        self.stream = None

    def forward(self, x):
        if self.stream is None:
            self.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            return self.net(x)
