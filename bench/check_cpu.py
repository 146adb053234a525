#!/usr/bin/env python3
"""CPU correctness check of the bench material (runs on torch 1.13 CPU, no CUDA, no Triton).

For every manifest line whose candidate uses neither load_inline nor Triton, it builds the task's
Model and the candidate's ModelNew the way PIKE does (inputs from seed 0 then get_inputs(); seed 1
before each constructor) and checks allclose(atol=rtol=1e-2) on that trial and on two more input
seeds (as kiln's several trials would), plus equal shapes, no NaN/Inf, unchanged inputs, and
that parameter names/shapes of both models agree (the seeded-weights contract).
Candidates that need a GPU are listed as skipped; every task is still run once.

With --emulate, the GPU candidates are checked too, through the CPU stand-ins of
bench/emulate_gpu.py: their Triton kernels run in a small Triton emulator (real index and mask
arithmetic), their load_inline modules are replaced by torch versions of the same kernel math
(so only the Python wrappers are exercised, not the CUDA code), and the load_inline calls are
grouped to show which candidates share byte-identical kernel sources.

    /usr/bin/python3 bench/check_cpu.py [--emulate] [manifest ...]
        (default manifests: bench/stream/stream.tsv, bench/stream/stream-long.tsv and
        bench/repeat/repeat.tsv; a pair listed by several manifests is checked once)
With the default manifests, a candidate file in bench/stream/ that none of them lists is
reported and counts as a failure, so a new candidate cannot be left out of the check.
Exit status 0 when every checked pair passes.
"""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GPU_MARKERS = ("load_inline", "import triton", "from triton")


def read_manifest(path):
    base = os.path.dirname(os.path.abspath(path))
    out = []
    with open(path, "r", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            task, cand = [p.strip() for p in line.split("\t")[:2]]
            out.append((os.path.normpath(os.path.join(base, task)),
                        os.path.normpath(os.path.join(base, cand))))
    return out


_count = [0]


def load(path):
    _count[0] += 1
    name = "bench_mod_%d" % _count[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def outputs(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def check(torch, task_path, cand_path):
    task = load(task_path)
    cand = load(cand_path)
    torch.manual_seed(0)
    inputs0 = list(task.get_inputs())
    init = list(task.get_init_inputs())
    torch.manual_seed(1)
    ref = task.Model(*init).eval()
    torch.manual_seed(1)
    new = cand.ModelNew(*init).eval()
    rp = [(n, tuple(p.shape)) for n, p in ref.named_parameters()]
    cp = [(n, tuple(p.shape)) for n, p in new.named_parameters()]
    if [s for _, s in rp] != [s for _, s in cp]:
        return False, "parameter shapes differ: %s vs %s" % (rp, cp)
    for (_, a), (_, b) in zip(ref.named_parameters(), new.named_parameters()):
        if not torch.equal(a, b):
            return False, "seeded parameters differ (creation order?)"
    worst = 0.0
    for trial, seed in enumerate((None, 7, 12345)):
        if seed is None:
            inputs = inputs0
        else:
            torch.manual_seed(seed)
            inputs = list(task.get_inputs())
        saved = [x.clone() for x in inputs if isinstance(x, torch.Tensor)]
        with torch.no_grad():
            got = outputs(new(*inputs))  # candidate first, as PIKE
            want = outputs(ref(*inputs))
        now = [x for x in inputs if isinstance(x, torch.Tensor)]
        if any(not torch.equal(a, b) for a, b in zip(saved, now)):
            return False, "trial %d: the candidate mutated its inputs" % trial
        if len(got) != len(want):
            return False, "trial %d: %d outputs, expected %d" % (trial, len(got), len(want))
        for g, w in zip(got, want):
            if g.shape != w.shape or g.dtype != w.dtype:
                return False, "trial %d: %s %s vs %s %s" % (trial, tuple(g.shape), g.dtype,
                                                           tuple(w.shape), w.dtype)
            if not torch.isfinite(g).all():
                return False, "trial %d: NaN/Inf in the output" % trial
            diff = float((g.double() - w.double()).abs().max())
            worst = max(worst, diff)
            if not torch.allclose(g, w, atol=1e-2, rtol=1e-2):
                return False, "trial %d: not allclose, max abs diff %.3g" % (trial, diff)
    return True, "3 trials, max abs diff %.2e" % worst


def main(argv):
    import torch

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    args = argv[1:]
    emulate = "--emulate" in args
    args = [a for a in args if a != "--emulate"]
    if emulate:
        sys.path.insert(0, HERE)
        import emulate_gpu

        emulate_gpu.install()
    manifests = args or [os.path.join(HERE, "stream", "stream.tsv"),
                         os.path.join(HERE, "stream", "stream-long.tsv"),
                         os.path.join(HERE, "repeat", "repeat.tsv")]
    pairs = []
    for m in manifests:
        for p in read_manifest(m):
            if p not in pairs:
                pairs.append(p)
    failures = 0
    if not args:
        listed = {c for _, c in pairs}
        folder = os.path.join(HERE, "stream")
        for f in sorted(os.listdir(folder)):
            path = os.path.normpath(os.path.join(folder, f))
            if f.endswith(".py") and path not in listed:
                print("FAIL  %-50s listed by no default manifest" % f)
                failures += 1
    tasks = sorted({t for t, _ in pairs})
    for t in tasks:
        mod = load(t)
        torch.manual_seed(0)
        inputs = list(mod.get_inputs())
        torch.manual_seed(1)
        model = mod.Model(*mod.get_init_inputs()).eval()
        with torch.no_grad():
            y = outputs(model(*inputs))
        big = float((y[0].abs() > 1e-2).float().mean())
        ok = all(torch.isfinite(o).all() for o in y) and all(x.device.type == "cpu"
                                                             for x in inputs)
        print("task  %-28s %s  out %s, %.1f%% of |y| > 1e-2" % (
            os.path.basename(t), "ok  " if ok else "FAIL", tuple(y[0].shape), 100 * big))
        failures += 0 if ok else 1
    for t, c in pairs:
        with open(c, "r", encoding="utf-8") as f:
            src = f.read()
        name = "%s <- %s" % (os.path.basename(c), os.path.basename(t))
        gpu = any(m in src for m in GPU_MARKERS)
        if gpu and emulate:
            name += " [emulated]"
        elif gpu:
            print("skip  %-50s (needs CUDA or Triton)" % name)
            continue
        try:
            ok, why = check(torch, t, c)
        except Exception as exc:  # report and go on
            ok, why = False, "%s: %s" % (type(exc).__name__, exc)
        print("%s  %-50s %s" % ("ok  " if ok else "FAIL", name, why))
        failures += 0 if ok else 1
    if emulate:
        groups = {}
        for name, cpp, cu, flags in emulate_gpu.LOADS:
            groups.setdefault(name, set()).add((cpp, cu, flags))
        for name, variants in sorted(groups.items()):
            n = sum(1 for x in emulate_gpu.LOADS if x[0] == name)
            same = len(variants) == 1
            print("load_inline %-28s %d import(s), %s" % (
                name, n, "identical sources" if same else "DIFFERENT sources under one name"))
            failures += 0 if same else 1
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
