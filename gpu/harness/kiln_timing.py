# kiln's timing loops, loaded by kiln_harness.py. Reference and candidate are timed by this
# same code in their own processes, so neither can get a friendlier clock than the other.

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


def time_calls(torch, model, inputs, device, timing, pike_mode):
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
