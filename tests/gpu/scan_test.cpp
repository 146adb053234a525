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
