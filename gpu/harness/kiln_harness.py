# kiln's runner harness: runs ONE model (the task's reference or a candidate) in a fresh
# process and reports what it did. It never judges correctness: outputs go to files that the
# C++ evaluator compares with libtorch, so a candidate cannot grade itself.
#
# Invoked as `<python> -I -B kiln_harness.py <job.json>` with cwd = a scratch folder.
# Works on torch 1.13 (CPU) and torch 2.x (CUDA). See docs/evaluation.md for the protocol.

import sys


def _main(argv):
    # Everything lives in locals of this function (no module globals with results), so that a
    # candidate has to work harder to find and rewrite the harness's state.
    import gc
    import importlib.util
    import json
    import os
    import time
    import traceback
    import uuid

    if len(argv) != 2:
        sys.stderr.write("usage: kiln_harness.py <job.json>\n")
        return 2
    with open(argv[1], "r", encoding="utf-8") as f:
        job = json.load(f)

    out_dir = job["out_dir"]
    mode = job["mode"]
    result = {"ok": False, "stage": "import", "error": "", "traceback": "", "facts": {},
              "structure": "", "trials": [], "samples_ms": [], "timing_wall_ms": 0.0,
              "load_ms": 0.0}
    stage = ["import"]

    def write_result():
        # Atomic: the parent either sees a complete result.json or none at all.
        path = os.path.join(out_dir, "result.json")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def one_line(exc):
        text = "%s: %s" % (type(exc).__name__, exc)
        text = " ".join(text.split())
        return text[:500]

    try:
        import torch

        threads = int(job.get("threads", 0))
        if threads > 0:
            torch.set_num_threads(threads)

        device = torch.device(job.get("device", "cpu"))
        is_cuda = device.type == "cuda"
        if is_cuda:
            torch.cuda.set_device(device)

        result["facts"] = _facts(torch, device, full=(mode == "facts"))
        if mode == "facts":
            result["stage"] = "done"
            result["ok"] = True
            write_result()
            return 0

        def sync():
            if is_cuda:
                torch.cuda.synchronize(device)

        def load_module(path, prefix):
            # A unique name per load, so a candidate cannot collide with the task module or
            # find either of them under a predictable name.
            name = "%s_%s" % (prefix, uuid.uuid4().hex)
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError("cannot load %s" % path)
            module = importlib.util.module_from_spec(spec)
            # Registered in sys.modules because dataclasses, pickling and Triton's source
            # lookups expect a module to be findable by its __name__.
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module

        t_load = time.perf_counter()
        # The task file is the only source of inputs and constructor arguments, also in
        # candidate mode: a candidate must never choose its own inputs.
        task = load_module(job["task_path"], "kiln_task")
        if mode == "candidate":
            candidate = load_module(job["candidate_path"], "kiln_candidate")
            model_class = getattr(candidate, "ModelNew", None)
            if model_class is None:
                raise ImportError("no class ModelNew")
        elif mode == "reference":
            model_class = getattr(task, "Model", None)
            if model_class is None:
                raise ImportError("the task defines no class Model")
        else:
            raise ValueError("unknown mode %r" % mode)

        stage[0] = "build"
        init_inputs = list(task.get_init_inputs())
        # Seeding right before construction gives a candidate that creates the same parameters
        # in the same order the same weights as the reference (PIKE's contract).
        torch.manual_seed(int(job["weight_seed"]))
        model = model_class(*init_inputs)
        if isinstance(model, torch.nn.Module):
            model.eval()
            model = model.to(device)
        sync()
        result["load_ms"] = (time.perf_counter() - t_load) * 1000.0

        def make_inputs(seed):
            torch.manual_seed(int(seed))
            inputs = list(task.get_inputs())
            return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]

        stage[0] = "run"
        structure = None
        for k, seed in enumerate(job["seeds"]):
            inputs = make_inputs(seed)
            originals = [x.clone() if isinstance(x, torch.Tensor) else None for x in inputs]
            with torch.no_grad():
                out = model(*inputs)
            sync()
            mutated = any(o is not None and not _same(torch, x, o)
                          for x, o in zip(inputs, originals))
            flat = []
            shape = _flatten(torch, out, flat)
            if structure is None:
                structure = shape
            elif shape != structure:
                raise RuntimeError("output structure changed between calls: %s, then %s"
                                   % (structure, shape))
            name = "out_%d.pt" % k
            # Saved at once, before the next call can touch a buffer the output may share. A
            # tuple, not a list: libtorch 1.13's unpickler has no APPEND opcode, which pickle
            # uses for a one-element list.
            torch.save(tuple(flat), os.path.join(out_dir, name))
            result["trials"].append({"seed": int(seed), "file": name,
                                     "inputs_mutated": bool(mutated)})
            del out, flat, originals, inputs
        result["structure"] = structure or ""

        if job.get("time"):
            stage[0] = "time"
            gc.collect()
            seeds = job["seeds"]
            inputs = make_inputs(seeds[0] if seeds else 0)
            samples, wall_ms = _time_calls(torch, model, inputs, device, job.get("timing", {}),
                                           bool(job.get("pike_mode")))
            result["samples_ms"] = samples
            result["timing_wall_ms"] = wall_ms

        stage[0] = "done"
        result["stage"] = "done"
        result["ok"] = True
    except BaseException as exc:  # SystemExit and KeyboardInterrupt from a candidate too
        result["ok"] = False
        result["stage"] = stage[0]
        result["error"] = one_line(exc)
        tb = traceback.format_exc()
        result["traceback"] = tb[-4000:]
        # Also on stderr, whose tail the error fixer reads.
        sys.stderr.write(tb)
        sys.stderr.flush()
    write_result()
    return 0


def _facts(torch, device, full):
    import os
    import platform

    facts = {
        "python": sys.executable,
        "python_version": platform.python_version(),
        "torch_version": str(torch.__version__),
        "cuda": bool(torch.cuda.is_available()),
        "triton": False,
        "compile": hasattr(torch, "compile"),
        "device_name": "",
        "cpu_threads": int(torch.get_num_threads()),
        "multiprocessors": 0,
        "memory_bytes": 0,
        "capability": "",
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts["device_name"] = str(props.name)
        facts["multiprocessors"] = int(props.multi_processor_count)
        facts["memory_bytes"] = int(props.total_memory)
        facts["capability"] = "%d.%d" % (props.major, props.minor)
    else:
        facts["device_name"] = _cpu_name() or platform.processor() or platform.machine()
        try:
            facts["memory_bytes"] = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            pass
    if full:
        # Importing Triton costs time, so only the facts run checks it.
        try:
            import triton  # noqa: F401
            facts["triton"] = True
        except Exception:
            facts["triton"] = False
    return facts


def _cpu_name():
    try:
        with open("/proc/cpuinfo", "r", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _same(torch, now, before):
    # Bitwise-style equality that treats NaN == NaN, so a task whose inputs contain NaNs does
    # not look mutated.
    if now.shape != before.shape or now.dtype != before.dtype or now.device != before.device:
        return False
    if torch.equal(now, before):
        return True
    if now.is_floating_point() or now.is_complex():
        both_nan = torch.isnan(now) & torch.isnan(before)
        return bool(((now == before) | both_nan).all())
    return False


def _flatten(torch, out, flat):
    """Appends the tensors of `out` to `flat` (CPU, contiguous, own storage) and returns the
    structure, e.g. `tensor`, `tuple:3`, or `tuple:2[tensor,list:2]` when nested."""
    if isinstance(out, torch.Tensor):
        # clone: a fresh storage of exactly this size, so a view does not drag its base along.
        flat.append(out.detach().to("cpu").clone(memory_format=torch.contiguous_format))
        return "tensor"
    if isinstance(out, (bool, int, float, complex)):
        flat.append(torch.as_tensor(out))
        return "scalar"
    if isinstance(out, (tuple, list)):
        kind = "tuple" if isinstance(out, tuple) else "list"
        parts = [_flatten(torch, x, flat) for x in out]
        if all(p == "tensor" for p in parts):
            return "%s:%d" % (kind, len(parts))
        return "%s:%d[%s]" % (kind, len(parts), ",".join(parts))
    raise TypeError("forward returned a %s; expected tensors, tuples or lists of them"
                    % type(out).__name__)


def _median_ci_rel(samples):
    # Distribution-free ~95% confidence interval of the median from order statistics:
    # ranks n/2 -+ 1.96 * sqrt(n) / 2. Relative half-width; 1.0 when n is too small to tell.
    import math

    n = len(samples)
    if n < 6:
        return 1.0
    s = sorted(samples)
    half = 1.96 * math.sqrt(n) / 2.0
    lo = min(max(int(math.floor(n / 2.0 - half)), 1), n)  # 1-based ranks, as gpu/timing.cpp
    hi = min(max(int(math.ceil(n / 2.0 + half)), 1), n)
    median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    width = s[hi - 1] - s[lo - 1]
    if not median > 0:
        return 0.0 if width == 0 else 1.0
    return width / 2.0 / median


def _time_calls(torch, model, inputs, device, timing, pike_mode):
    """Per-call times in ms on fixed inputs, and the wall span of the whole loop in ms.

    Samples until n >= min_samples and the median's CI is within target_ci (kiln mode), or
    max_samples, or max_seconds of sampling. pike_mode never stops early on the CI: like
    do_bench it fills the time budget and the parent reports the mean."""
    import time

    warmup = max(0, int(timing.get("warmup_calls", 3)))
    min_samples = max(1, int(timing.get("min_samples", 10)))
    max_samples = max(min_samples, int(timing.get("max_samples", 400)))
    max_ns = float(timing.get("max_seconds", 2.0)) * 1e9
    target_ci = float(timing.get("target_ci", 0.01))
    is_cuda = device.type == "cuda"

    samples = []
    t_begin = time.perf_counter_ns()
    with torch.no_grad():
        if is_cuda:
            # Zeroing 256 MB between calls evicts the L2 (50 MB on an H100/H200), so every call
            # starts cold, as in Triton's do_bench.
            flush = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device=device)
            for _ in range(warmup):
                model(*inputs)
            torch.cuda.synchronize(device)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            t_sampling = time.perf_counter_ns()
            while True:
                flush.zero_()
                start.record()
                model(*inputs)
                end.record()
                torch.cuda.synchronize(device)
                samples.append(float(start.elapsed_time(end)))
                if _enough(samples, t_sampling, min_samples, max_samples, max_ns, target_ci,
                           pike_mode, time.perf_counter_ns):
                    break
            del flush
        else:
            for _ in range(warmup):
                model(*inputs)
            t_sampling = time.perf_counter_ns()
            while True:
                t0 = time.perf_counter_ns()
                model(*inputs)
                t1 = time.perf_counter_ns()
                samples.append((t1 - t0) / 1e6)
                if _enough(samples, t_sampling, min_samples, max_samples, max_ns, target_ci,
                           pike_mode, time.perf_counter_ns):
                    break
    wall_ms = (time.perf_counter_ns() - t_begin) / 1e6
    return samples, wall_ms


def _enough(samples, t_sampling, min_samples, max_samples, max_ns, target_ci, pike_mode, now_ns):
    n = len(samples)
    if n >= max_samples:
        return True
    # A few samples at least, even for a slow model that blows the time cap in one call.
    if now_ns() - t_sampling >= max_ns and n >= min(3, min_samples):
        return True
    if pike_mode or n < min_samples:
        return False
    # Sorting every call would cost host time between calls; every ~5% of n is enough.
    step = max(1, n // 20)
    if (n - min_samples) % step:
        return False
    return _median_ci_rel(samples) <= target_ci


if __name__ == "__main__":
    _code = _main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # result.json is written: leave at once, so that a candidate's atexit hooks, non-daemon
    # threads or teardown crashes can neither hang the runner nor change its exit status.
    import os

    os._exit(_code)
