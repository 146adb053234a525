#!/usr/bin/python3
"""Checks candidates of the rules provider against their tasks, the way the evaluator would.

    rules_check.py [--device DEV] [--time] MANIFEST
        checks every candidate listed, one per line `TASK.py CAND.py`; a relative task path is
        taken from the repository root (`@/NAME.py`: from the manifest's folder), a relative
        candidate path from the manifest's folder.
        --time also times each candidate against its reference (for docs/rules.md);
        --jobs N checks N candidates at once (default 2; timing always runs one at a time);
        --reps N sets the number of timed calls (default 40).
    rules_check.py --one TASK CAND [--reps N] [--device DEV]
        checks one candidate (used internally: one fresh process each)

A candidate passes when it imports, ModelNew builds with the same seed as Model, and on two input
seeds its outputs have the reference's structure, shapes and dtypes and match within
atol = rtol = 1e-2, without mutating its inputs. The two models are called alternately in the same
order, so a module that keeps state between calls is compared call for call. Every candidate runs
in a fresh interpreter so that global switches one rewrite flips cannot help or hurt another.

Prints one line per candidate, `PASS task label [notes]` or `FAIL task label: reason`, and exits
non-zero if any failed.
"""
import concurrent.futures
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

WEIGHT_SEED = 1
INPUT_SEEDS = (0, 7)
TOLERANCE = 1e-2


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def flatten(out):
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def clone_inputs(inputs):
    import torch
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def to_device(inputs, device):
    import torch
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def check_one(task_path, cand_path, timing, device):
    import torch
    # Checks run two at a time on two cores: one thread each, so neither spins against the other.
    torch.set_num_threads(2 if timing else 1)
    task = load(task_path, "kiln_task")
    cand = load(cand_path, "kiln_candidate")
    init = task.get_init_inputs()
    # Built and prepared like the evaluation harness does: seed, construct, eval(), move.
    torch.manual_seed(WEIGHT_SEED)
    ref = task.Model(*init).eval().to(device)
    torch.manual_seed(WEIGHT_SEED)
    new = cand.ModelNew(*init).eval().to(device)
    worst = 0.0
    # The first seed comes back at the end: a stateful module must still agree on a repeat.
    for seed in INPUT_SEEDS + INPUT_SEEDS[:1]:
        torch.manual_seed(seed)
        inputs = to_device(task.get_inputs(), device)
        ref_in, new_in = clone_inputs(inputs), clone_inputs(inputs)
        with torch.no_grad():
            expected = flatten(ref(*ref_in))
            got = flatten(new(*new_in))
        for a, b in zip(inputs, new_in):
            if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                raise AssertionError("the candidate mutated its inputs")
        if len(expected) != len(got):
            raise AssertionError("%d outputs instead of %d" % (len(got), len(expected)))
        for i, (e, g) in enumerate(zip(expected, got)):
            if not isinstance(g, torch.Tensor):
                raise AssertionError("output %d is %s, not a tensor" % (i, type(g).__name__))
            e, g = e.detach().cpu(), g.detach().cpu()
            if e.shape != g.shape or e.dtype != g.dtype:
                raise AssertionError("output %d is %s %s, expected %s %s"
                                     % (i, tuple(g.shape), g.dtype, tuple(e.shape), e.dtype))
            diff = (e.float() - g.float()).abs().max().item() if e.numel() else 0.0
            worst = max(worst, diff)
            if not torch.allclose(e, g, atol=TOLERANCE, rtol=TOLERANCE):
                raise AssertionError("seed %d output %d differs: max abs diff %.3g"
                                     % (seed, i, diff))
    result = {"max_abs_diff": worst}
    if timing:
        result.update(time_pair(task, ref, new, timing, device))
    return result


def time_pair(task, ref, new, reps, device):
    """Median of `reps` calls after warm-up, reference and candidate interleaved so that load
    changes on the machine hit both alike. Both run under no_grad, like the harness."""
    import torch
    torch.manual_seed(0)
    inputs = to_device(task.get_inputs(), device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def timed(model):
        sync()
        t = time.perf_counter()
        model(*inputs)
        sync()
        return time.perf_counter() - t

    ref_times, new_times = [], []
    with torch.no_grad():
        for _ in range(5):
            ref(*inputs)
            new(*inputs)
        for _ in range(reps):
            ref_times.append(timed(ref))
            new_times.append(timed(new))
    r, c = statistics.median(ref_times) * 1e3, statistics.median(new_times) * 1e3
    # The minimum too: on a shared machine the median moves with other people's load, while the
    # fastest call of each is what the code can do when left alone.
    rmin, cmin = min(ref_times) * 1e3, min(new_times) * 1e3
    return {"reference_ms": round(r, 4), "candidate_ms": round(c, 4), "speedup": round(r / c, 3),
            "reference_min_ms": round(rmin, 4), "candidate_min_ms": round(cmin, 4),
            "speedup_min": round(rmin / cmin, 3)}


def run_child(task_path, cand_path, timing, device):
    cmd = [sys.executable, os.path.abspath(__file__), "--one", task_path, cand_path,
           "--reps", str(timing), "--device", device]
    try:
        # OpenMP's idle threads spin by default, which costs many times over on a shared CPU
        # (the evaluation runners set the same).
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    except subprocess.TimeoutExpired:
        return False, "timed out", ""
    lines = proc.stdout.strip().splitlines()
    notes = sorted({l.strip() for l in proc.stderr.splitlines() if l.startswith("kiln-rules:")})
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return False, tail, ""
    return True, lines[-1], " ".join(notes)


def main(argv):
    # Two at a time by default: the CI machine has two cores. Timing runs one at a time.
    device, reps, timing, jobs = "cpu", 0, 0, 2
    rest = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--device", "--reps", "--jobs"):
            if argv[i] == "--device":
                device = argv[i + 1]
            elif argv[i] == "--jobs":
                jobs = int(argv[i + 1])
            else:
                reps = int(argv[i + 1])
            i += 2
            continue
        if argv[i] == "--time":
            timing = 40
        else:
            rest.append(argv[i])
        i += 1
    if timing and reps:
        timing = reps
    if rest[:1] == ["--one"]:
        try:
            print(json.dumps(check_one(rest[1], rest[2], reps, device)))
        except Exception as e:  # the reason goes to the parent on stderr's last line
            print("%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip()
                              else ""), file=sys.stderr)
            return 1
        return 0
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    here = os.path.dirname(os.path.abspath(rest[0]))
    with open(rest[0]) as f:
        # `@/` marks a task file that lives beside the manifest rather than in the checkout.
        pairs = [(os.path.join(here, t[2:]) if t.startswith("@/") else os.path.join(root, t),
                  os.path.join(here, c))
                 for t, c in (line.split() for line in f if line.strip())]
    failed = 0
    workers = 1 if timing else jobs
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        jobs = [(t, c, pool.submit(run_child, t, c, timing, device)) for t, c in pairs]
        for task_path, cand_path, job in jobs:
            ok, detail, notes = job.result()
            task = os.path.basename(task_path)[:-3]
            label = os.path.basename(cand_path)[:-3]
            if ok:
                print("PASS %s %s %s %s" % (task, label, detail, notes), flush=True)
            else:
                failed += 1
                print("FAIL %s %s: %s" % (task, label, detail), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
