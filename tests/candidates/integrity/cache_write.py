# Build-cache poisoning, directly: finds kiln's shared build cache through the extension wrapper
# kiln installs (its closure holds the cache's path) and tries to write into it: a planted
# extension, the files of entries already there, a Triton group, a precompiled-header request,
# the lock files, kiln's own tmp/ and the reference timings, and to move the whole ext/ aside.
# Runners may only read the cache, so every attempt must fail; it raises if one succeeds, and
# otherwise computes the honest softmax. Expected: correct, and integrity_test.cpp checks that
# the cache is unchanged.
import os

import torch
import torch.nn as nn
import torch.utils.cpp_extension as ce


def _kiln_state():
    for cell in getattr(ce.load_inline, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if hasattr(value, "cache") and hasattr(value, "stage"):
            return value
    raise RuntimeError("kiln's build cache was not found: the test proves nothing")


_cache = _kiln_state().cache
_done = []


def _attempt(path, data=b"planted"):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "ab") as f:
            f.write(data)
        _done.append(path)
    except OSError:
        pass


_attempt(os.path.join(_cache, "ext", "0" * 64, "meta.json"),
         b'{"artifact": "kiln_gelu_tail.so", "module": "kiln_gelu_tail"}')
for _root, _dirs, _files in os.walk(os.path.join(_cache, "ext")):
    for _name in _files:
        _attempt(os.path.join(_root, _name), b"")
_attempt(os.path.join(_cache, "triton", "sm90", "PLANTED", "kernel.cubin"))
_attempt(os.path.join(_cache, "pch", "requests", "1" * 64 + ".json"),
         b'{"extra_cflags": [], "with_cuda": false}')
_attempt(os.path.join(_cache, "locks", "000.lock"), b"")
_attempt(os.path.join(_cache, "locks", "planted.lock"))
_attempt(os.path.join(_cache, "tmp", "planted"))
_attempt(os.path.join(_cache, "reference", "planted"))
try:
    os.rename(os.path.join(_cache, "ext"), os.path.join(_cache, "ext.moved"))
    _done.append("ext moved")
except OSError:
    pass
if _done:
    raise RuntimeError("wrote into kiln's build cache: %s" % _done)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
