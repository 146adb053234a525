// The static scan on small sources: every rule fires on the tampering it names, at the right
// line, and stays quiet on the honest idioms that look like it.

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <catch2/catch.hpp>

#include "gpu/scan.hpp"

namespace fs = std::filesystem;

namespace {

std::string first_rejection(const std::string& source) {
  auto r = kiln::scan_candidate(source);
  return r.rejections.empty() ? std::string{} : r.rejections.front().text();
}

bool clean(const std::string& source) {
  auto r = kiln::scan_candidate(source);
  for (const auto& f : r.rejections)
    UNSCOPED_INFO("unexpected: " << f.text());
  return r.rejections.empty();
}

std::string slurp(const fs::path& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

} // namespace

TEST_CASE("patching timing functions is rejected with the name and the line", "[scan]") {
  CHECK(first_rejection("import torch\n\n\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.001\n")
        == "static scan: patches torch.cuda.Event.elapsed_time (line 4)");
  CHECK(first_rejection("import time\ntime.perf_counter = lambda: 0.0\n")
        == "static scan: patches time.perf_counter (line 2)");
  CHECK(first_rejection("import torch\ntorch.allclose = lambda *a, **k: True\n")
        == "static scan: patches torch.allclose (line 2)");
  CHECK(first_rejection("import torch\nsetattr(torch, 'allclose', f)\n")
        == "static scan: patches torch.allclose (line 2)");
  CHECK(first_rejection("import torch\nsetattr(torch.cuda.Event, 'record', f)\n")
        == "static scan: patches torch.cuda.Event.record (line 2)");
  CHECK(first_rejection("import triton.testing\ntriton.testing.do_bench = f\n")
        == "static scan: patches triton.testing.do_bench (line 2)");
  CHECK(first_rejection("import builtins\nbuiltins.print = f\n")
        == "static scan: patches builtins.print (line 2)");
  CHECK(first_rejection("import torch\ndel torch.Tensor.clone\n")
        == "static scan: patches torch.Tensor.clone (line 2)");
  CHECK(first_rejection("import torch\ntorch.Tensor.__eq__, x = f, 1\n")
        == "static scan: patches torch.Tensor.__eq__ (line 2)");
  CHECK(first_rejection("import torch\ntorch.__dict__['allclose'] = f\n")
        == "static scan: patches torch.__dict__ (line 2)");
}

TEST_CASE("patching is seen through import aliases and plain rebinding", "[scan]") {
  CHECK(first_rejection("import torch.cuda as tc\ntc.synchronize = f\n")
        == "static scan: patches torch.cuda.synchronize (line 2)");
  CHECK(first_rejection("from torch.cuda import Event as E\nE.elapsed_time = f\n")
        == "static scan: patches torch.cuda.Event.elapsed_time (line 2)");
  CHECK(first_rejection("import torch\nEv = torch.cuda.Event\nEv.record = f\n")
        == "static scan: patches torch.cuda.Event.record (line 3)");
  CHECK(first_rejection("import time as t\nt.perf_counter_ns = f\n")
        == "static scan: patches time.perf_counter_ns (line 2)");
  CHECK(first_rejection("import torch.nn as nn\nnn.Module.__call__ = f\n")
        == "static scan: patches torch.nn.Module.__call__ (line 2)");
}

TEST_CASE("scanning the garbage collector and reading frames are rejected", "[scan]") {
  CHECK(first_rejection("import gc\nxs = [o for o in gc.get_objects()]\n")
        == "static scan: scans the garbage collector with gc.get_objects (line 2)");
  CHECK(first_rejection("from gc import get_referrers\n")
        == "static scan: scans the garbage collector with gc.get_referrers (line 1)");
  CHECK(first_rejection("import sys\nf = sys._getframe(1)\n")
        == "static scan: reads the harness's frames with sys._getframe (line 2)");
  CHECK(first_rejection("import inspect\nfor fr in inspect.stack(): pass\n")
        == "static scan: reads the harness's frames with inspect.stack (line 2)");
  CHECK(first_rejection("def f(e):\n    return e.__traceback__.tb_frame\n")
        == "static scan: reads the harness's frames with .tb_frame (line 2)");
  CHECK(first_rejection("import sys\nm = sys.modules['__main__']\n")
        == "static scan: reads the harness's modules with sys.modules (line 2)");
  CHECK(first_rejection("import sys\nsys.settrace(f)\n")
        == "static scan: hooks the interpreter with sys.settrace (line 2)");
  CHECK(first_rejection("import sys\npath = sys.argv[1]\n")
        == "static scan: reads the harness's arguments with sys.argv (line 2)");
  // The same names through getattr, and guarded modules read by a name the scan cannot see.
  CHECK(first_rejection("import sys\nm = getattr(sys, 'modules')['__main__']\n")
        == "static scan: reads the harness's modules with sys.modules (line 2)");
  CHECK(first_rejection("import gc\nxs = getattr(gc, 'get_objects')()\n")
        == "static scan: scans the garbage collector with gc.get_objects (line 2)");
  CHECK(first_rejection("import sys\nm = getattr(sys, 'mod' + 'ules')\n")
        == "static scan: reads sys by a name the scan cannot see with getattr() (line 2)");
  CHECK(first_rejection("import sys as s\nns = vars(s)\n")
        == "static scan: reads sys by a name the scan cannot see with vars() (line 2)");
}

TEST_CASE("strings that name the harness's files are rejected", "[scan]") {
  CHECK(first_rejection("p = '../ref/out_0.pt'\n")
        == "static scan: reads the harness's files ('out_*.pt') (line 1)");
  CHECK(first_rejection("x = 1\nopen(\"job.json\").read()\n")
        == "static scan: reads the harness's files ('job.json') (line 2)");
  CHECK(first_rejection("p = f'{d}/result.json'\n")
        == "static scan: reads the harness's files ('result.json') (line 1)");
  CHECK(first_rejection("p = r'/proc/self/maps'\n")
        == "static scan: reads process internals ('/proc/') (line 1)");
  CHECK(first_rejection("import kiln_harness\n")
        == "static scan: reads the harness with kiln_harness (line 1)");
}

TEST_CASE("background work, the network and hidden code are rejected", "[scan]") {
  CHECK(first_rejection("import threading\n")
        == "static scan: starts background work with threading (line 1)");
  CHECK(first_rejection("from concurrent.futures import ThreadPoolExecutor\n")
        == "static scan: starts background work with concurrent.futures (line 1)");
  CHECK(first_rejection("import torch.multiprocessing as mp\n")
        == "static scan: starts background work with torch.multiprocessing (line 1)");
  CHECK(first_rejection("import os\nos.fork()\n")
        == "static scan: starts background work with os.fork (line 2)");
  CHECK(first_rejection("import os\nos.system('x')\n")
        == "static scan: starts background work with os.system (line 2)");
  CHECK(first_rejection("import subprocess as sp\n")
        == "static scan: starts background work with subprocess (line 1)");
  CHECK(first_rejection("import queue\nt = queue.threading.Thread(target=f)\n")
        == "static scan: reaches a forbidden module through .threading (line 2)");
  CHECK(first_rejection("import socket\n") == "static scan: uses the network with socket (line 1)");
  CHECK(first_rejection("exec('import th' + 'reading')\n")
        == "static scan: loads code the scan cannot read with exec() (line 1)");
  CHECK(first_rejection("m = __import__('gc')\n")
        == "static scan: loads code the scan cannot read with __import__() (line 1)");
}

TEST_CASE("honest code that looks like tampering is not rejected", "[scan]") {
  CHECK(clean(R"PY(
"""Docstring that mentions result.json, job.json and time.perf_counter = x."""
import os
import torch
import torch.nn as nn
import torch.nn.functional as F
# torch.allclose = lambda *a: True   (a comment, not code)
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True
os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"


class ModelNew(nn.Module):
    """Uses out_features and .pt-free names; eval() below is a method."""

    def __init__(self, n):
        super().__init__()
        self.time = 0
        setattr(self, "weight", nn.Parameter(torch.randn(n, n)))
        self.act = getattr(F, "gelu")
        self.dtype = getattr(torch, "float" + "32")
        self.state = vars(self)
        self.eval()

    def eval(self):
        return super().eval()

    def forward(self, x):
        time = x.shape[0]          # a local named like a module
        gc = time * 2
        out = F.relu(x @ self.weight)
        s = 'a string with # no comment'
        return out.view(time, -1) + gc * 0
)PY"));
}

TEST_CASE("an annotation is not an assignment to the annotation", "[scan]") {
  // Triton constants named inside a kernel and at module level (a published solution kiln
  // rejected: `INV_HW: tl.constexpr = 1.0 / (H * W)`).
  CHECK(clean(R"PY(
import triton
import triton.language as tl
LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)

@triton.jit
def k(x_ptr, n, H: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr = 1024):
    INV_HW: tl.constexpr = 1.0 / (H * W)
    acc: tl.tensor = tl.zeros([BLOCK], dtype=tl.float32)
)PY"));
  // Parameters annotated with defaults, return annotations, typing's wrappers (also on one line).
  CHECK(clean(R"PY(
import torch
from typing import Dict, Optional, Tuple
def f(x: torch.Tensor, add: torch.Tensor = None, out: Optional[torch.Tensor] = None,
      dt: torch.dtype = torch.float32) -> torch.Tensor:
    return x
def g(x: torch.Tensor = None) -> Tuple[torch.Tensor, torch.Tensor]: return x, x
async def h(x: torch.Tensor = None) -> torch.Tensor: return x
)PY"));
  // Annotated assignments at module, class and instance level; dataclass fields.
  CHECK(clean(R"PY(
import torch
from dataclasses import dataclass
from typing import Dict, Tuple
x: torch.Tensor = None
weight: torch.Tensor
_cache: Dict[Tuple[int, torch.dtype], object] = {}
torch.backends.cudnn.benchmark: bool = True
class C: dtype: torch.dtype = torch.float32
@dataclass
class Cfg:
    dtype: torch.dtype = torch.float32
    block: int = 128
class M(torch.nn.Module):
    scale: float
    def __init__(self):
        super().__init__()
        self.w: torch.Tensor = torch.zeros(3, dtype=torch.float16)
)PY"));
}

TEST_CASE("defaults, keywords, literals and one-line bodies are not assignments", "[scan]") {
  CHECK(clean(R"PY(
import os, re
import torch
import torch.nn.functional as F
from typing import Callable
act = lambda a=torch.float16, b=torch.float32: a
to = lambda x, dt=torch.bfloat16: x.to(dt)
fn: Callable[[torch.Tensor], torch.Tensor] = lambda t, dt=torch.float32: F.relu(t)
y = torch.zeros(4, 4, dtype=torch.float32, device=torch.device("cpu"))
kw = dict(dtype=torch.float16, memory_format=torch.channels_last)
names = {torch.float16: "half", torch.bfloat16: "bf16"}
ok = {torch.float16, torch.bfloat16}
names[torch.float16] = "h"
names[(torch.float16, 2)] = "h2"
y[:, torch.arange(2)] = 0
a, b = torch.float16, torch.float32
if (n := torch.numel(y)) > 0: m = n
for dt in torch.float16, torch.bfloat16: last = dt
with torch.no_grad(), torch.autocast("cpu"): z = y * 2
del os.environ["X"]
del names[torch.float16]
match y.dtype:
    case torch.float16: kind = 1
    case _: kind = 0
match = re.match("a", "a")
)PY"));
}

TEST_CASE("an assignment to a guarded name is rejected however it is spelled", "[scan]") {
  // Annotated targets: the target is what comes before the colon.
  CHECK(first_rejection("import torch\ntorch.allclose: object = f\n")
        == "static scan: patches torch.allclose (line 2)");
  CHECK(first_rejection("import time\ntime.perf_counter: int = 1\n")
        == "static scan: patches time.perf_counter (line 2)");
  CHECK(first_rejection("import torch\ntorch.cuda.Event.elapsed_time: Callable = lambda s, e: 1\n")
        == "static scan: patches torch.cuda.Event.elapsed_time (line 2)");
  CHECK(first_rejection("import torch\nx: int = 1; torch.equal: object = f\n")
        == "static scan: patches torch.equal (line 2)");
  // No honest code annotates another module's attribute, with or without a value.
  CHECK(first_rejection("import torch\ntorch.allclose: object\n")
        == "static scan: patches torch.allclose (line 2)");
  // Bodies on the header's line.
  CHECK(first_rejection("import torch\nif True: torch.allclose = f\n")
        == "static scan: patches torch.allclose (line 2)");
  CHECK(first_rejection("import torch\nif x:\n    pass\nelse: torch.allclose = f\n")
        == "static scan: patches torch.allclose (line 4)");
  CHECK(first_rejection("import torch\ndef g(a=1) -> int: torch.allclose = f\n")
        == "static scan: patches torch.allclose (line 2)");
  CHECK(first_rejection("import torch\nf = lambda: 0; torch.allclose = f\n")
        == "static scan: patches torch.allclose (line 2)");
  // Target lists: parenthesized, starred, chained, augmented.
  CHECK(first_rejection("import torch\n(torch.allclose, x) = (f, 1)\n")
        == "static scan: patches torch.allclose (line 2)");
  CHECK(first_rejection("import time\n[time.perf_counter] = [f]\n")
        == "static scan: patches time.perf_counter (line 2)");
  CHECK(first_rejection("import torch\nx, *torch.allclose = 1, f\n")
        == "static scan: patches torch.allclose (line 2)");
  CHECK(first_rejection("import torch\na = torch.allclose = f\n")
        == "static scan: patches torch.allclose (line 2)");
  CHECK(first_rejection("import time\ntime.perf_counter += 1\n")
        == "static scan: patches time.perf_counter (line 2)");
  CHECK(first_rejection("import torch\ndel (torch.allclose)\n")
        == "static scan: patches torch.allclose (line 2)");
  // Loops, comprehensions and `with ... as` bind too.
  CHECK(first_rejection("import torch\nfor torch.allclose in [f]: pass\n")
        == "static scan: patches torch.allclose (line 2)");
  CHECK(first_rejection("import time\nxs = [0 for time.perf_counter in [f]]\n")
        == "static scan: patches time.perf_counter (line 2)");
  CHECK(first_rejection("import torch\nwith open(p) as torch.allclose: pass\n")
        == "static scan: patches torch.allclose (line 2)");
}

TEST_CASE("aliases are followed through annotations, walruses and one-line bodies", "[scan]") {
  CHECK(first_rejection("import torch\nE: type = torch.cuda.Event\nE.elapsed_time = f\n")
        == "static scan: patches torch.cuda.Event.elapsed_time (line 3)");
  CHECK(first_rejection("import torch\nif (E := torch.cuda.Event):\n    E.record = f\n")
        == "static scan: patches torch.cuda.Event.record (line 3)");
  CHECK(first_rejection("import torch\nif True: E = torch.cuda.Event\nE.record = f\n")
        == "static scan: patches torch.cuda.Event.record (line 3)");
  CHECK(first_rejection("try: import time as t\nexcept ImportError: pass\nt.perf_counter = f\n")
        == "static scan: patches time.perf_counter (line 3)");
  // The scan knows no branches: a rebinding that may never run leaves a guarded module's name.
  CHECK(first_rejection("import time\nif False:\n    time = None\ntime.perf_counter_ns = f\n")
        == "static scan: patches time.perf_counter_ns (line 4)");
  CHECK(first_rejection("import time\nif False: time = None\ntime.perf_counter_ns = f\n")
        == "static scan: patches time.perf_counter_ns (line 3)");
  // Bound to another module, it names that one.
  CHECK(first_rejection("import torch\nE = torch.cuda.Event\nE = torch.cuda.Stream\nE.query = f\n")
        == "static scan: patches torch.cuda.Stream.query (line 4)");
}

TEST_CASE("the bundled tasks and honest candidates pass the scan", "[scan]") {
  int n = 0;
  for (const auto* dir : {"/tests/tasks/cpu", "/tests/candidates"}) {
    for (const auto& e : fs::directory_iterator{std::string{KILN_SOURCE_DIR} + dir}) {
      if (e.path().extension() != ".py")
        continue;
      INFO(e.path());
      CHECK(clean(slurp(e.path())));
      ++n;
    }
  }
  CHECK(n >= 10);
}

TEST_CASE("reduced precision and side streams are notes, not rejections", "[scan]") {
  auto r = kiln::scan_candidate("import torch\n"
                                "torch.backends.cuda.matmul.allow_tf32 = True\n"
                                "def f(x):\n"
                                "    s = torch.cuda.Stream()\n"
                                "    return x.half().to(torch.bfloat16)\n");
  CHECK(r.rejections.empty());
  REQUIRE(r.notes.size() == 2);
  CHECK(r.notes[0].rfind("reduced precision: TF32 (line 2), float16 (line 5), bfloat16 (line 5)", 0)
        == 0);
  CHECK(r.notes[1].rfind("uses CUDA streams (line 4)", 0) == 0);
  CHECK(kiln::scan_candidate("import torch\ny = torch.relu(x)\n").notes.empty());
}

TEST_CASE("malformed Python is scanned without throwing", "[scan]") {
  CHECK_NOTHROW(kiln::scan_candidate("class ModelNew(nn.Module)\n    def f(\n"));
  CHECK_NOTHROW(kiln::scan_candidate("s = '''unterminated\n"));
  CHECK_NOTHROW(kiln::scan_candidate("x = 'open\n"));
  CHECK_NOTHROW(kiln::scan_candidate(""));
  CHECK(first_rejection("x = 'unterminated\nimport socket\n")
        == "static scan: uses the network with socket (line 2)");
}
