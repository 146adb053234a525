# Build-cache poisoning through the staging folder kiln publishes from once the runner has
# ended: plants entries a real build would never leave. An extension whose folder is not the key
# of its manifest; entries with the right key whose library is a symbolic link to a file
# elsewhere, a second hard link of a file or a FIFO; a Triton group with a link in it and one
# with host code; a precompiled-header request with a field beyond the flag set; a precompiled
# header nobody asked for. kiln must reject or skip every one. Expected: correct (it computes
# the honest softmax), and integrity_test.cpp checks that the cache is unchanged.
import hashlib
import json
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
    raise RuntimeError("kiln's staging folder was not found: the test proves nothing")


_stage = _kiln_state().stage


def _entry(name, folder=None, library=None):
    """Stages ext/<key of a manifest for `name`>/ (or ext/<folder>/) with a manifest, meta.json
    and the library `library(path)` makes (a regular file by default)."""
    manifest = {"v": "kiln-ext-2", "kind": "load_inline", "args": {"name": name}}
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()
    path = os.path.join(_stage, "ext", folder or key)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "manifest.json"), "w") as f:
        f.write(text)
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump({"artifact": name + ".so", "module": name, "kind": "load_inline", "name": name,
                   "is_python_module": True, "is_standalone": False}, f)
    so = os.path.join(path, name + ".so")
    if library is None:
        with open(so, "wb") as f:
            f.write(b"\x7fELF planted")
    else:
        library(so)


def _hard_link(so):
    spare = os.path.join(_stage, "spare")
    with open(spare, "wb") as f:
        f.write(b"\x7fELF planted")
    os.link(spare, so)


_entry("kiln_forged", folder="f" * 64)
_entry("kiln_forged_link", library=lambda so: os.symlink("/etc/hostname", so))
_entry("kiln_forged_hardlink", library=_hard_link)
_entry("kiln_forged_fifo", library=os.mkfifo)

_triton = os.path.join(_stage, "triton", "sm90")
os.makedirs(os.path.join(_triton, "LINKED"))
with open(os.path.join(_triton, "LINKED", "kernel.cubin"), "wb") as f:
    f.write(b"cubin")
os.symlink("/etc/hostname", os.path.join(_triton, "LINKED", "kernel.json"))
os.makedirs(os.path.join(_triton, "LAUNCHER"))
with open(os.path.join(_triton, "LAUNCHER", "__triton_launcher.so"), "wb") as f:
    f.write(b"\x7fELF host code")

os.makedirs(os.path.join(_stage, "pch-requests"))
with open(os.path.join(_stage, "pch-requests", "2" * 64 + ".json"), "w") as f:
    json.dump({"extra_cflags": [], "with_cuda": False, "cxx": "/bin/sh"}, f)
os.makedirs(os.path.join(_stage, "pch", "3" * 64, "torch"))
for _name in ("extension.h", "extension.h.gch"):
    with open(os.path.join(_stage, "pch", "3" * 64, "torch", _name), "w") as f:
        f.write("planted")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
