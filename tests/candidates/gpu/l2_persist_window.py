# The L2 access-policy exploit: at its first call, the largest persisting-L2 limit the device
# allows and an access-policy window over the table on the current stream, persisting. A flush cannot evict persisting lines, so without
# kiln's reset (cuCtxSetLimit to 0 and cuCtxResetPersistingL2Cache before each flush) every
# per-call sample would read the table from L2 while the reference reads it from memory.
# Expected on a GPU: correct, at its honest figure (l2_honest.py's), never faster.
import ctypes

import torch
import torch.nn as nn

_driver = ctypes.CDLL("libcuda.so.1")
_LIMIT_PERSISTING_L2 = 0x06  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
_ATTR_MAX_PERSISTING_L2 = 108  # CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE
_ATTR_MAX_WINDOW = 109  # CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE
_STREAM_ATTR_WINDOW = 1  # CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW


class _Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t),
                ("hit_ratio", ctypes.c_float), ("hit_prop", ctypes.c_int),
                ("miss_prop", ctypes.c_int)]


class _Value(ctypes.Union):  # CUstreamAttrValue: a 64-byte union
    _fields_ = [("window", _Window), ("pad", ctypes.c_char * 64)]


def _attribute(attr):
    device = ctypes.c_int()
    _driver.cuCtxGetDevice(ctypes.byref(device))
    value = ctypes.c_int()
    _driver.cuDeviceGetAttribute(ctypes.byref(value), attr, device)
    return value.value


_limits = {}


def pin_in_l2(tensor):
    """Persisting lines for `tensor` on the current stream, set up once (as the published
    exploit does at start-up): no driver call afterwards, so that the exploit costs no host time
    per call."""
    if _limits.get("pinned") == tensor.data_ptr():
        return
    limit = _attribute(_ATTR_MAX_PERSISTING_L2)
    size = min(tensor.numel() * tensor.element_size(), _attribute(_ATTR_MAX_WINDOW))
    _driver.cuCtxSetLimit(_LIMIT_PERSISTING_L2, ctypes.c_size_t(limit))
    value = _Value()
    value.window.base_ptr = tensor.data_ptr()
    value.window.num_bytes = size
    # A window larger than the set-aside would thrash it: persist the share that fits.
    value.window.hit_ratio = min(1.0, limit / max(size, 1))
    value.window.hit_prop = 2  # CU_ACCESS_PROPERTY_PERSISTING
    value.window.miss_prop = 1  # CU_ACCESS_PROPERTY_STREAMING
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    _driver.cuStreamSetAttribute(stream, _STREAM_ATTR_WINDOW, ctypes.byref(value))
    _limits["pinned"] = tensor.data_ptr()


class ModelNew(nn.Module):
    def __init__(self, rows, cols):
        super().__init__()
        self.table = nn.Parameter(torch.randn(rows, cols))

    def forward(self, x):
        pin_in_l2(self.table)
        return x + torch.sum(self.table, dim=1)
