#!/usr/bin/env python3
"""A PIKE-style baseline evaluator, written for kiln's throughput benchmark.

It reproduces the costs and semantics of PIKE's evaluator (scripts/eval.py run by an eval worker,
as the pike-project/pike repository runs it; the paper is arXiv 2511.16964), not its code:

  * one fresh Python process per candidate, at most --jobs of them at a time;
  * no build cache: every process gets its own empty TORCH_EXTENSIONS_DIR, TRITON_CACHE_DIR and
    TMPDIR, removed afterwards, so every load_inline builds from scratch and every Triton kernel
    is JIT-compiled again;
  * the task and the candidate are imported (a module-level load_inline compiles here) and both
    models are built (seed 1 before each) before the GPU lock is taken; inputs come from seed 0
    then get_inputs();
  * an exclusive per-GPU lock (fcntl.flock on <lock dir>/gpu_<index>.lock, blocking) is held for
    the correctness trial and the timing;
  * one correctness trial under no_grad: candidate first, then the reference, allclose with
    atol = rtol = 1e-2 per output (plus a count and shape check, which PIKE lacks);
  * timing of the candidate and then of the reference with
    triton.testing.do_bench(bench, rep=5000, warmup=1000, return_mode="mean"), where bench calls
    the model and synchronizes (under no_grad, as kiln times). Without Triton (or on the CPU) a
    plain loop with the same time budgets and the mean stands in.

Usage (driver):
    python3 bench/pike_style.py --stream bench/stream/stream.tsv --jobs 8 --out results.jsonl
Each finished evaluation is appended to --out as one JSON object; the summary (evaluations,
wall_s, evals_per_hour, ...) is printed on stdout as one JSON object and written to --summary
(default: <out>.summary.json). The manifest has one `<task path>\\t<candidate path>` per line,
paths relative to the manifest's folder; blank lines and lines starting with '#' are skipped.

The worker mode (--worker) is what each fresh process runs; it is not meant to be called by hand.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ATOL = 1e-2
RTOL = 1e-2


# ------------------------------------------------------------------------------------------------
# manifest

def read_manifest(path):
    """[(task_abs, candidate_abs)] from a stream manifest."""
    base = os.path.dirname(os.path.abspath(path))
    pairs = []
    with open(path, "r", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) < 2:
                raise SystemExit("%s:%d: expected '<task>\\t<candidate>'" % (path, lineno))
            task, cand = parts[0].strip(), parts[1].strip()
            pairs.append((os.path.normpath(os.path.join(base, task)),
                          os.path.normpath(os.path.join(base, cand))))
    return pairs


# ------------------------------------------------------------------------------------------------
# worker: one evaluation, in a fresh process

def _load_module(path, name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % path)
    module = importlib.util.module_from_spec(spec)
    # Registered, because Triton finds a kernel's source through its module.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _fallback_bench(fn, rep_ms, warmup_ms):
    """do_bench's budget logic without Triton: estimate, warm up, then time n calls; mean ms."""
    fn()
    t0 = time.perf_counter()
    for _ in range(5):
        fn()
    estimate_ms = max((time.perf_counter() - t0) * 1000.0 / 5.0, 1e-6)
    n_warmup = max(1, int(warmup_ms / estimate_ms))
    n_repeat = max(1, int(rep_ms / estimate_ms))
    for _ in range(n_warmup):
        fn()
    times = []
    for _ in range(n_repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return sum(times) / len(times)


def worker(args):
    t_start = time.perf_counter()
    res = {"task": args.task, "candidate": args.candidate, "loaded": False, "correct": None,
           "status": "error", "runtime_ms": None, "ref_ms": None, "speedup": None,
           "max_diff": None, "compile_s": None, "construct_s": None, "lock_wait_s": None,
           "first_call_s": None, "bench_s": None, "timer": None, "error": ""}
    lock_fd = None
    try:
        import torch

        device = torch.device(args.device)
        is_cuda = device.type == "cuda"
        t0 = time.perf_counter()
        task = _load_module(args.task, "pike_task")
        # PIKE: inputs from seed 0, then the constructor arguments; seed 1 before each model.
        torch.manual_seed(0)
        inputs = list(task.get_inputs())
        init_inputs = list(task.get_init_inputs())
        torch.manual_seed(1)
        ref_model = task.Model(*init_inputs).eval()
        t1 = time.perf_counter()
        cand_mod = _load_module(args.candidate, "pike_candidate")  # load_inline builds here
        t2 = time.perf_counter()
        res["compile_s"] = round(t2 - t1, 3)
        model_cls = getattr(cand_mod, "ModelNew", None) or getattr(cand_mod, "Model", None)
        if model_cls is None:
            raise ImportError("the candidate defines no ModelNew")
        torch.manual_seed(1)
        model = model_cls(*init_inputs)
        if isinstance(model, torch.nn.Module):
            model = model.eval()
        res["construct_s"] = round((t1 - t0) + (time.perf_counter() - t2), 3)
        res["loaded"] = True

        # The GPU lock: taken only now, after imports, builds and construction.
        import fcntl

        os.makedirs(args.lock_dir, exist_ok=True)
        index = device.index if (is_cuda and device.index is not None) else 0
        lock_path = os.path.join(args.lock_dir, "%s_%d.lock" % ("gpu" if is_cuda else "cpu",
                                                               index))
        t_lock = time.perf_counter()
        lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        res["lock_wait_s"] = round(time.perf_counter() - t_lock, 3)
        if is_cuda:
            torch.cuda.set_device(device)

        def sync():
            if is_cuda:
                torch.cuda.synchronize(device)

        t_first = time.perf_counter()
        with torch.no_grad():
            # Candidate first, then the reference (PIKE, commit 241f339).
            model = model.to(device)
            dev_inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
            out_new = model(*dev_inputs)
            sync()
            res["first_call_s"] = round(time.perf_counter() - t_first, 3)
            ref_model = ref_model.to(device)
            out_ref = ref_model(*dev_inputs)
            sync()
        if not isinstance(out_ref, (tuple, list)):
            out_ref, out_new = (out_ref,), (out_new,)
        elif not isinstance(out_new, (tuple, list)):
            out_new = (out_new,)
        correct = len(out_ref) == len(out_new)
        diffs = []
        for r, c in zip(out_ref, out_new):
            r = torch.as_tensor(r).detach().cpu()
            c = torch.as_tensor(c).detach().cpu()
            if r.shape != c.shape:
                correct = False
                diffs.append(float("inf"))
                continue
            diffs.append(float((r.double() - c.double()).abs().max()) if r.numel() else 0.0)
            if not torch.allclose(r, c.to(r.dtype), rtol=RTOL, atol=ATOL):
                correct = False
        res["max_diff"] = diffs
        res["correct"] = bool(correct)
        res["status"] = "correct" if correct else "incorrect"
        del out_new, out_ref

        if correct and not args.no_timing:
            bench_fn = None
            timer = "loop"
            if is_cuda:
                try:
                    import triton.testing

                    bench_fn = triton.testing.do_bench
                    timer = "do_bench"
                except Exception:  # no Triton: the loop below
                    bench_fn = None

            def time_one(m):
                def bench():
                    m(*dev_inputs)
                    sync()

                with torch.no_grad():
                    if bench_fn is not None:
                        return float(bench_fn(bench, rep=args.rep_ms, warmup=args.warmup_ms,
                                              return_mode="mean"))
                    return float(_fallback_bench(bench, args.rep_ms, args.warmup_ms))

            t_bench = time.perf_counter()
            res["runtime_ms"] = time_one(model)
            res["ref_ms"] = time_one(ref_model)
            res["bench_s"] = round(time.perf_counter() - t_bench, 3)
            res["timer"] = timer
            if res["runtime_ms"] > 0:
                res["speedup"] = res["ref_ms"] / res["runtime_ms"]
    except BaseException as exc:  # a candidate may raise anything, SystemExit included
        import traceback

        res["error"] = " ".join(("%s: %s" % (type(exc).__name__, exc)).split())[:500]
        sys.stderr.write(traceback.format_exc())
    finally:
        if lock_fd is not None:
            try:
                import fcntl

                fcntl.flock(lock_fd, fcntl.LOCK_UN)
                os.close(lock_fd)
            except OSError:
                pass
    res["worker_s"] = round(time.perf_counter() - t_start, 3)
    text = json.dumps(res)
    if args.result_file:
        with open(args.result_file, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text, flush=True)
    sys.stderr.flush()
    os._exit(0)  # leave at once: no teardown of CUDA contexts or candidate atexit hooks


# ------------------------------------------------------------------------------------------------
# driver

def run_one(index, task, cand, args, lock_dir):
    """Runs one worker process; returns its result dict (with the outside wall time)."""
    scratch = tempfile.mkdtemp(prefix="pike_eval_%03d_" % index, dir=args.scratch)
    env = dict(os.environ)
    for key, sub in (("TORCH_EXTENSIONS_DIR", "torch_ext"), ("TRITON_CACHE_DIR", "triton_cache"),
                     ("TMPDIR", "tmp")):
        os.makedirs(os.path.join(scratch, sub))
        env[key] = os.path.join(scratch, sub)
    if args.arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = args.arch_list
    result_file = os.path.join(scratch, "result.json")
    cmd = [args.python, os.path.abspath(__file__), "--worker", "--task", task, "--candidate", cand,
           "--device", args.device, "--lock-dir", lock_dir, "--result-file", result_file,
           "--rep-ms", str(args.rep_ms), "--warmup-ms", str(args.warmup_ms)]
    if args.no_timing:
        cmd.append("--no-timing")
    t0 = time.perf_counter()
    timed_out = False
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=args.timeout, cwd=scratch)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        timed_out = True
        stdout, stderr, rc = exc.stdout or b"", exc.stderr or b"", None
    wall = time.perf_counter() - t0
    res = None
    if not timed_out and os.path.exists(result_file):
        try:
            with open(result_file, "r", encoding="utf-8") as f:
                res = json.loads(f.read())
        except (OSError, ValueError):
            res = None
    if res is None:
        res = {"task": task, "candidate": cand, "loaded": False, "correct": None,
               "status": "timeout" if timed_out else "error", "runtime_ms": None,
               "ref_ms": None, "speedup": None, "compile_s": None,
               "error": "timed out after %ss" % args.timeout if timed_out
               else "worker exited with %s and no result" % rc}
    res["index"] = index
    res["wall_s"] = round(wall, 3)
    tail = stderr.decode("utf-8", "replace")[-2000:] if stderr else ""
    if res.get("status") != "correct" and tail:
        res["stderr_tail"] = tail
    if not args.keep_scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return res


def default_python():
    """The first of `python3` on PATH and /usr/bin/python3 that imports torch (kiln's rule)."""
    for exe in (shutil.which("python3"), "/usr/bin/python3", sys.executable):
        if not exe:
            continue
        try:
            ok = subprocess.run([exe, "-c", "import torch"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, timeout=120).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return exe
    return sys.executable


def driver(args):
    pairs = read_manifest(args.stream)
    if args.limit:
        pairs = pairs[:args.limit]
    if not pairs:
        raise SystemExit("no candidates in %s" % args.stream)
    if not args.python:
        args.python = default_python()
    if args.scratch:
        os.makedirs(args.scratch, exist_ok=True)
    lock_dir = args.lock_dir or tempfile.mkdtemp(prefix="pike_gpu_locks_")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    out_lock = threading.Lock()
    results = []
    with open(args.out, "w", encoding="utf-8") as out:
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_one, i, t, c, args, lock_dir)
                       for i, (t, c) in enumerate(pairs)]
            for fut in concurrent.futures.as_completed(futures):
                res = fut.result()
                with out_lock:
                    out.write(json.dumps(res) + "\n")
                    out.flush()
                    results.append(res)
                sys.stderr.write("[pike_style %3.0fs] %-28s %-10s %s\n" % (
                    time.perf_counter() - t0, os.path.basename(res["candidate"]),
                    res.get("status"),
                    ("%.4f ms" % res["runtime_ms"]) if res.get("runtime_ms") else
                    (res.get("error") or "")[:80]))
        wall = time.perf_counter() - t0
    statuses = {}
    for r in results:
        statuses[r.get("status")] = statuses.get(r.get("status"), 0) + 1
    summary = {"evaluator": "pike_style", "evaluations": len(results), "wall_s": round(wall, 3),
               "evals_per_hour": round(len(results) * 3600.0 / wall, 2) if wall > 0 else None,
               "jobs": args.jobs, "device": args.device, "python": args.python,
               "rep_ms": args.rep_ms, "warmup_ms": args.warmup_ms, "statuses": statuses,
               "stream": os.path.abspath(args.stream), "out": os.path.abspath(args.out)}
    summary_path = args.summary or (args.out + ".summary.json")
    with open(summary_path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    print(json.dumps(summary), flush=True)
    if not args.lock_dir:
        shutil.rmtree(lock_dir, ignore_errors=True)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stream", help="manifest: <task>\\t<candidate> per line")
    p.add_argument("--jobs", type=int, default=8, help="processes at a time (default 8)")
    p.add_argument("--out", default="pike_results.jsonl", help="per-candidate JSON lines")
    p.add_argument("--summary", default="", help="summary JSON (default <out>.summary.json)")
    p.add_argument("--device", default="cuda:0", help="cuda:N (default cuda:0) or cpu")
    p.add_argument("--limit", type=int, default=0, help="only the first N manifest lines")
    p.add_argument("--python", default="", help="interpreter of the workers (default: the "
                   "first of python3 on PATH and /usr/bin/python3 that imports torch)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per worker (PIKE: 900)")
    p.add_argument("--rep-ms", type=float, default=5000.0, help="do_bench rep (PIKE: 5000)")
    p.add_argument("--warmup-ms", type=float, default=1000.0, help="do_bench warmup (PIKE: 1000)")
    p.add_argument("--arch-list", default=None,
                   help="TORCH_CUDA_ARCH_LIST for the workers (default: 9.0 on cuda, as PIKE's "
                        "worker sets it; '' leaves the environment alone)")
    p.add_argument("--lock-dir", default="", help="GPU lock folder (default: a fresh temp dir)")
    p.add_argument("--scratch", default=None, help="parent of the per-evaluation temp dirs")
    p.add_argument("--keep-scratch", action="store_true", help="keep per-evaluation dirs")
    p.add_argument("--no-timing", action="store_true", help="correctness only (for tests)")
    # worker mode
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--task", help=argparse.SUPPRESS)
    p.add_argument("--candidate", help=argparse.SUPPRESS)
    p.add_argument("--result-file", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        if not (args.task and args.candidate and args.lock_dir):
            p.error("--worker needs --task, --candidate and --lock-dir")
        return worker(args)
    if not args.stream:
        p.error("--stream is required")
    if args.jobs < 1:
        p.error("--jobs must be >= 1")
    if args.arch_list is None:
        args.arch_list = "9.0" if args.device.startswith("cuda") else ""
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
