# What a candidate never needs, each tried through libc: ptrace of every pid it sees, a mount,
# new user and mount namespaces, a key in the session keyring, a BPF map, a perf event, kexec
# and a module load. Expected: correct; the candidate fails loudly if any of them succeeded.
import ctypes
import os

import torch
import torch.nn as nn

_libc = ctypes.CDLL(None, use_errno=True)
_sys = _libc.syscall
_sys.restype = ctypes.c_long
_worked = []


def _try(name, result):
    if result != -1 and result is not None and result >= 0:
        _worked.append(name)


for _pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
    if _pid != os.getpid():
        _try("ptrace %d" % _pid, _libc.ptrace(16, _pid, None, None))  # PTRACE_ATTACH
_try("mount", _libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
_try("unshare user+mount", _libc.unshare(0x10000000 | 0x00020000))
_try("add_key", _sys(248, b"user", b"kiln-sec", b"x", 1, ctypes.c_long(-3)))  # session keyring
_attr = (ctypes.c_uint32 * 8)(1, 4, 4, 1, 0, 0, 0, 0)  # a hash map, 4-byte keys and values
_try("bpf", _sys(321, 0, ctypes.byref(_attr), ctypes.sizeof(_attr)))
_pattr = (ctypes.c_uint32 * 32)()
_pattr[0], _pattr[1] = 1, 128  # PERF_TYPE_SOFTWARE, size of the struct
_try("perf_event_open", _sys(298, ctypes.byref(_pattr), 0, -1, -1, 0))
_try("kexec_load", _sys(246, 0, 0, None, 0))
_try("init_module", _sys(175, None, 0, b""))


class ModelNew(nn.Module):
    def forward(self, x):
        if _worked:
            raise RuntimeError("allowed: " + ", ".join(_worked))
        return torch.softmax(x, dim=-1)
