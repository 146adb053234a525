# Expected verdict: correct (for tests/tasks/cpu/3_Softmax.py) where the sandbox gives runners a
# /tmp of their own. At import it writes /tmp/kiln_private_tmp_probe.txt, a tempfile and a file
# in /dev/shm, reads each back and raises when any of them failed; the test then finds none of
# them in the host's /tmp and /dev/shm. It also says what it saw of /tmp, for a test of two
# runners side by side.
import os
import sys
import tempfile

import torch
import torch.nn as nn

PROBE = "/tmp/kiln_private_tmp_probe.txt"
SHM = "/dev/shm/kiln_private_shm_probe"

# Probes found before writing any: another runner's, seen through a /tmp that is not private.
# (kiln's own folders beneath the host's /tmp, bound back read-only, may show there too.)
_seen = sorted(n for n in os.listdir("/tmp") if n.startswith("kiln_private"))
_mine = "pid %d of %s" % (os.getpid(), os.environ.get("HOME", "?"))
with open(PROBE, "w") as f:
    f.write(_mine)
with open(PROBE) as f:
    assert f.read() == _mine, "another process wrote /tmp/kiln_private_tmp_probe.txt"
with tempfile.NamedTemporaryFile("w+", delete=False) as f:
    f.write("kiln")
_temp = f.name
with open(_temp) as g:
    assert g.read() == "kiln"
with open(SHM, "w") as f:
    f.write(_mine)
with open(SHM) as f:
    assert f.read() == _mine
os.makedirs(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "probe"), exist_ok=True)
print("kiln tmp probe: TMPDIR=%s tempfile=%s /tmp held %s" % (os.environ.get("TMPDIR"), _temp,
                                                             _seen))
sys.stdout.flush()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
