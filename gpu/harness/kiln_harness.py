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

    # The harness's own modules live next to this file; -I keeps that folder off sys.path.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        import kiln_build
        import kiln_timing
    finally:
        sys.path.remove(here)

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

        # Before any task or candidate code: extension builds go through kiln's cache.
        kiln_build.install(torch, job)

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
            samples, wall_ms = kiln_timing.time_calls(torch, model, inputs, device,
                                                      job.get("timing", {}),
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


if __name__ == "__main__":
    _code = _main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # result.json is written: leave at once, so that a candidate's atexit hooks, non-daemon
    # threads or teardown crashes can neither hang the runner nor change its exit status.
    import os

    os._exit(_code)
