# kiln's timing loops, loaded by kiln_harness.py. Reference and candidate are timed by this
# same code in their own processes, so neither can get a friendlier clock than the other.
# docs/evaluation.md ("Timing") explains every choice.

# PIKE's do_bench budget (scripts/eval.py): 5000 ms of timed reps after 1000 ms of warm-up.
PIKE_REP_MS = 5000.0
PIKE_WARMUP_MS = 1000.0
# The buffer that do_bench zeroes (256 MB, sized for 50-60 MB L2s); kiln zeroes twice the L2.
DEFAULT_FLUSH_BYTES = 256 * 1024 * 1024
# Rotating input sets: at least two (so consecutive calls never see the same addresses), at
# most this many (cloning thousands of tiny tensors would cost more set-up than it buys: the L2
# flush already makes every call start cold).
MIN_BUFFER_SETS = 2
MAX_BUFFER_SETS = 256
# New input values before every timed call, unless one refresh takes longer than this (then the
# sets keep their cloned values; timing_info says which).
REFRESH_MAX_MS = 2.0
# The extra sets may take at most this share of the free device memory, and at most 2 GiB.
BUFFER_MEMORY_SHARE = 0.25
BUFFER_MEMORY_CAP = 2 * 1024 * 1024 * 1024


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


# The steady-state figure (docs/evaluation.md, "Timing"): batches of back-to-back calls between
# two events, long enough that the batch's own start and end cost little beside it.
STEADY_BATCH_MS = 2.0
STEADY_MIN_CALLS = 2
STEADY_MAX_CALLS = 4096
STEADY_MIN_BATCHES = 3
# New values for every set a batch uses, unless refreshing them all takes longer than this (the
# batch then reuses the values of the last refresh; timing_info says so).
STEADY_REFRESH_MAX_MS = 50.0


def time_calls(torch, model, inputs, device, timing, pike_mode, info=None, refresh=None,
               next_block=None, stamp=None):
    """Per-call times in ms, and the wall span of the whole loop in ms.

    kiln mode: warm-up calls, then one sample per call on rotating copies of `inputs` (which is
    itself the first set, so a caller can write fresh values into it afterwards and call again)
    until n >= min_samples and the median's CI is within target_ci, or max_samples, or
    max_seconds of sampling; then the steady-state batches (info["blocks"]). pike mode: Triton's
    do_bench on the fixed `inputs`, exactly as PIKE's eval.py runs it; the parent reports the
    mean. `info`, when given, receives what the loop chose (buffer sets, flush size, do_bench's
    estimate and counts, the blocks). `refresh(k, set)`, when given, writes new values into a
    set's tensors; kiln mode calls it before every timed call when it is cheap (REFRESH_MAX_MS),
    so no two calls see the same values. `next_block()`, when given, is asked after each block
    whether to time another: the parent alternates this runner's blocks with another's (the
    reference's and the candidate's, ABBA...), each block a `1 / timing["blocks"]` share of the
    budget. `stamp(bytes)`, when given, tells the parent as the loop goes: `p` when a block's
    per-call sampling starts, `c` after each sample, `s` before and `e <calls>` after each
    steady batch, `d` when the batch before was thrown away; the parent's clock then checks
    the loop's own (gpu/outside_clock.hpp)."""
    import time

    if info is None:
        info = {}
    is_cuda = device.type == "cuda"
    t_begin = time.perf_counter_ns()
    with torch.no_grad():
        if pike_mode:
            samples = _pike(torch, model, inputs, device, timing, info)
        else:
            timer = _Timer(torch, model, inputs, device, timing, info, refresh, stamp)
            blocks = max(1, int(timing.get("blocks", 1))) if next_block is not None else 1
            while True:
                timer.block(1.0 / blocks)
                if next_block is None or not next_block():
                    break
            samples = timer.finish()
    if is_cuda:
        torch.cuda.synchronize(device)
    wall_ms = (time.perf_counter_ns() - t_begin) / 1e6
    return samples, wall_ms


# -- kiln mode -----------------------------------------------------------------------------------

def _no_refresh(k):
    pass


def _no_stamp(message):
    pass


def _refresher(torch, refresh, sets, device, info):
    """`refresh` bound to the rotating sets, or a no-op where a refresh costs too much. Clones keep
    their values, so without it a candidate that caches on input values (a checksum, not an
    address) would answer every timed call after the first round of sets from its cache."""
    import time

    if refresh is None:
        info["refresh"] = "off"
        return _no_refresh, 0.0
    try:
        t0 = time.perf_counter_ns()
        refresh(0, sets[0])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        cost_ms = (time.perf_counter_ns() - t0) / 1e6
    except Exception as exc:  # a get_inputs that cannot run twice keeps the clones
        info["refresh"] = "failed: %s" % str(exc)[:200]
        return _no_refresh, 0.0
    info["refresh_ms"] = round(cost_ms, 3)
    if cost_ms > REFRESH_MAX_MS:
        info["refresh"] = "too slow"
        return _no_refresh, 0.0
    info["refresh"] = "every call"
    calls = [0]

    def fresh(k):
        # A running count, warm-up and samples alike, so no value set is ever made twice.
        calls[0] += 1
        refresh(calls[0], sets[k % len(sets)])

    return fresh, cost_ms


class _Timer:
    """kiln mode's measurement of one model, in blocks: each block re-warms, takes per-call
    samples (one call from an idle device per sample), then steady-state batches (back-to-back
    calls between two events, the L2 flush inside the batch and its own time subtracted)."""

    def __init__(self, torch, model, inputs, device, timing, info, refresh, stamp=None):
        self.torch = torch
        self.stamp = stamp if stamp is not None else _no_stamp
        self.model = model
        self.device = device
        self.info = info
        self.is_cuda = device.type == "cuda"
        self.warmup = max(0, int(timing.get("warmup_calls", 3)))
        self.min_samples = max(1, int(timing.get("min_samples", 10)))
        self.max_samples = max(self.min_samples, int(timing.get("max_samples", 400)))
        self.max_ns = float(timing.get("max_seconds", 2.0)) * 1e9
        # A GPU's clocks and power state move over tens of milliseconds: a 30 ms window measures
        # one state, and medians of separate runs drift apart by several percent (measured on an
        # H200). Sampling on a GPU lasts at least min_seconds, after a warm-up of at least a
        # tenth of that, so every measurement averages over the same kind of window.
        self.min_ns = min(float(timing.get("min_seconds", 0.3)) * 1e9, self.max_ns)
        self.target_ci = float(timing.get("target_ci", 0.01))
        self.l2_bytes = _l2_bytes(torch, device) if self.is_cuda else 0
        self.sets = _buffer_sets(torch, inputs, device, self.l2_bytes,
                                 int(timing.get("buffer_sets", 0)))
        self.wanted_sets = int(timing.get("buffer_sets", 0))
        info["buffer_sets"] = len(self.sets)
        self.fresh, self.refresh_ms = _refresher(torch, refresh, self.sets, device, info)
        self.flush = None
        self.l2_reset = _no_l2_reset
        if self.is_cuda:
            flush_bytes = 2 * self.l2_bytes
            info["flush_bytes"] = flush_bytes
            self.flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device=device)
            if timing.get("reset_persisting_l2", True):
                self.l2_reset = _persisting_l2_reset(info)
        self.samples = []
        self.loop = []
        self.blocks = []
        self.calls = 0  # every call so far, warm-up included: which set comes next
        self.batch_calls = 0

    def _call(self):
        args = self.sets[self.calls % len(self.sets)]
        self.calls += 1
        return self.model(*args)

    def block(self, share):
        import time

        torch = self.torch
        min_samples = max(1, int(round(self.min_samples * share)))
        max_samples = max(min_samples, int(round(self.max_samples * share)))
        max_ns = self.max_ns * share
        # The window rule is the GPU's (clocks, power states); on the CPU the CI decides.
        min_ns = self.min_ns * share if self.is_cuda else 0.0
        # The CI of the pooled samples is what matters; a block's own may be wider by sqrt.
        target_ci = self.target_ci / max(share, 1e-6) ** 0.5
        first = len(self.samples)
        if self.is_cuda:
            t_warm = time.perf_counter_ns()
            k = 0
            # The other runner of the pair used the device between blocks: warm up again.
            while k < max(1, self.warmup) or time.perf_counter_ns() - t_warm < min_ns / 10:
                self.fresh(self.calls)
                self._call()
                torch.cuda.synchronize()
                k += 1
            self.info["warmup_calls"] = self.info.get("warmup_calls", 0) + k
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            loop = self.loop
            t_sampling = time.perf_counter_ns()
            self.stamp(b"p\n")
            while True:
                t_a = time.perf_counter_ns()
                # Zeroing twice the L2 evicts it, so every call starts cold, as in do_bench.
                # The device-wide synchronize inside the events puts work on side streams and
                # the host's launch overhead into the sample, as PIKE's closure does. The
                # synchronize after the flush puts all of that overhead there: launched behind a
                # queued flush, a call would hide as much of it as the flush lasts (do_bench's
                # 256 MB, ~70 us on an H200, hides most of a Triton launch), so the sample would
                # depend on the flush's size.
                self.fresh(self.calls)
                self.l2_reset()
                self.flush.zero_()
                torch.cuda.synchronize()
                t_b = time.perf_counter_ns()
                start.record()
                self._call()
                torch.cuda.synchronize()
                end.record()
                end.synchronize()
                t_c = time.perf_counter_ns()
                self.samples.append(float(start.elapsed_time(end)))
                self.stamp(b"c\n")
                enough = _enough(self.samples[first:], t_sampling, min_samples, max_samples,
                                 max_ns, target_ci, time.perf_counter_ns, min_ns)
                # Where the loop's own time goes, as this process sees it (a diagnosis of the
                # outside clock's figures, never trusted: the candidate shares the process).
                loop.append((t_b - t_a, t_c - t_b, time.perf_counter_ns() - t_c))
                if enough:
                    break
        else:
            for _ in range(self.warmup if not self.blocks else min(self.warmup, 1)):
                self.fresh(self.calls)
                self._call()
            t_sampling = time.perf_counter_ns()
            self.stamp(b"p\n")
            while True:
                self.fresh(self.calls)
                t0 = time.perf_counter_ns()
                self._call()
                t1 = time.perf_counter_ns()
                self.samples.append((t1 - t0) / 1e6)
                self.stamp(b"c\n")
                if _enough(self.samples[first:], t_sampling, min_samples, max_samples, max_ns,
                           target_ci, time.perf_counter_ns):
                    break
        per_call = sorted(self.samples[first:])[(len(self.samples) - first) // 2]
        sampled_ns = time.perf_counter_ns() - t_sampling
        batches, flush_ms = self._steady(per_call, max(min_ns, sampled_ns), max_ns)
        self.blocks.append({"n": len(self.samples) - first, "batches": batches,
                            "flush_ms": flush_ms})

    def _steady(self, per_call_ms, min_ns, max_ns):
        """Batches of back-to-back calls: [[batch ms, calls], ...] and the flush's own time in
        ms (measured the same way, batch without calls: subtracted by the parent). They last at
        least half of `min_ns`, which the caller makes as long as its per-call sampling took: a
        steady figure from three batches would be far noisier than the per-call one."""
        import time

        torch = self.torch
        calls = self._batch_size(per_call_ms)
        batches = []
        flushes = []
        t_start = time.perf_counter_ns()
        refreshes = "every batch"
        sized = False
        while True:
            used = min(calls, len(self.sets))
            if self.refresh_ms * used <= STEADY_REFRESH_MAX_MS:
                # New values for every set the batch will use, before the events, so that no
                # call in it sees values it has seen before (unless it has more calls than sets).
                for j in range(used):
                    self.fresh(self.calls + j)
            else:
                refreshes = "too slow"
            if self.is_cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                # The flush alone, exactly as a batch is framed: its time, and the synchronize's
                # latency at the end, come off each batch's.
                torch.cuda.synchronize()
                start.record()
                self.flush.zero_()
                torch.cuda.synchronize()
                end.record()
                end.synchronize()
                flushes.append(float(start.elapsed_time(end)))
                torch.cuda.synchronize()
                self.l2_reset()
                self.stamp(b"s\n")
                start.record()
                self.flush.zero_()
                for _ in range(calls):
                    self._call()
                # Side-stream work counts, as in a per-call sample: the whole device is done.
                torch.cuda.synchronize()
                end.record()
                end.synchronize()
                batches.append([float(start.elapsed_time(end)), calls])
                self.stamp(b"e %d\n" % calls)
            else:
                self.stamp(b"s\n")
                t0 = time.perf_counter_ns()
                for _ in range(calls):
                    self._call()
                batches.append([(time.perf_counter_ns() - t0) / 1e6, calls])
                self.stamp(b"e %d\n" % calls)
            if len(batches) == 1 and not sized:
                sized = True
                # The first batch says what a call costs back to back; size the rest by it.
                fl = flushes[0] if flushes else 0.0
                est = max((batches[0][0] - fl) / calls, 1e-6)
                better = self._batch_size(est)
                if better != calls:
                    calls = better
                    batches = []
                    flushes = []
                    self.stamp(b"d\n")
                    continue
            elapsed = time.perf_counter_ns() - t_start
            if len(batches) >= STEADY_MIN_BATCHES and elapsed >= min_ns / 2:
                break
            # A slow model gets fewer batches rather than a longer window.
            if elapsed >= max_ns / 2:
                break
        self.info["steady_refresh"] = refreshes
        self.info["steady_calls"] = calls
        flush_ms = sorted(flushes)[len(flushes) // 2] if flushes else 0.0
        return batches, flush_ms

    def _batch_size(self, call_ms):
        import math

        calls = int(math.ceil(STEADY_BATCH_MS / max(call_ms, 1e-6)))
        calls = min(max(calls, STEADY_MIN_CALLS), STEADY_MAX_CALLS)
        if calls > len(self.sets) and self.wanted_sets <= 0 and self.refresh_ms > 0:
            # Enough distinct sets that no call of a batch repeats another's values, within
            # the memory budget of the rotation.
            grown = _buffer_sets(self.torch, self.sets[0], self.device, self.l2_bytes, 0,
                                 at_least=calls, have=self.sets)
            self.info["buffer_sets"] = len(grown)
        return calls

    def finish(self):
        import os

        self.info["blocks"] = self.blocks
        if self.loop:
            for k, name in enumerate(("loop_prepare_ms", "loop_sample_ms", "loop_after_ms")):
                spans = sorted(entry[k] for entry in self.loop)
                self.info[name] = spans[len(spans) // 2] / 1e6
        try:
            self.info["cores"] = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            pass
        del self.sets
        self.flush = None
        return self.samples


def _no_l2_reset():
    pass


def _persisting_l2_reset(info):
    """What runs before every flush: the context's persisting-L2 limit back to 0 and every
    persisting line made normal (cuCtxSetLimit, cuCtxResetPersistingL2Cache). A candidate that
    set an access-policy window on its stream would otherwise keep its weights resident in the
    set-aside L2 across the flush, which cannot evict persisting lines, and every call of it
    would start warm while the reference's start cold. Through the driver, which every CUDA
    process has loaded; where it cannot be reached, timing_info says so."""
    try:
        import ctypes

        driver = ctypes.CDLL("libcuda.so.1")
        set_limit = driver.cuCtxSetLimit
        set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
        reset = driver.cuCtxResetPersistingL2Cache
        reset.argtypes = []
    except Exception as exc:
        info["l2_reset"] = "unavailable: %s" % str(exc)[:200]
        return _no_l2_reset
    limit_persisting_l2 = 0x06  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
    first = [set_limit(limit_persisting_l2, 0), reset()]
    if any(first):
        # CUDA_ERROR_NOT_SUPPORTED on a GPU without persisting L2 (before Ampere): nothing to do.
        info["l2_reset"] = "not supported (CUresult %d, %d)" % tuple(first)
        return _no_l2_reset
    info["l2_reset"] = "before every flush"

    def l2_reset():
        set_limit(limit_persisting_l2, 0)
        reset()

    return l2_reset


def _l2_bytes(torch, device):
    # torch 2.x reports the L2's size; without it assume 128 MB, more than any GPU's L2 today,
    # so that the flush is do_bench's 256 MB and the rotation errs on the side of more sets.
    try:
        size = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0))
    except Exception:
        size = 0
    return size if size > 0 else DEFAULT_FLUSH_BYTES // 2


def _buffer_sets(torch, inputs, device, l2_bytes, wanted, at_least=0, have=None):
    """`inputs` itself, then clones of it (same values, other addresses): enough that together
    they exceed the L2 (and, for steady-state batches, `at_least`), at least MIN_BUFFER_SETS,
    within the memory budget. A candidate that caches results by data_ptr, or replays a CUDA
    graph without copying its inputs in, then either pays for the copy or computes with stale
    inputs on every other call. `have`, when given, is the list to extend in place."""
    per_set = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    if wanted > 0:
        count = wanted
    elif per_set == 0:
        count = 1  # nothing to rotate
    else:
        count = max(MIN_BUFFER_SETS, l2_bytes // per_set + 1, at_least)
        budget = BUFFER_MEMORY_CAP
        if device.type == "cuda":
            try:
                free, _ = torch.cuda.mem_get_info(device)
                # What the sets already hold counts against the budget as if it were free.
                held = per_set * (len(have) - 1) if have else 0
                budget = min(budget, int((free + held) * BUFFER_MEMORY_SHARE))
            except Exception:
                pass
        count = min(count, MAX_BUFFER_SETS, max(MIN_BUFFER_SETS, budget // per_set + 1))
    sets = have if have is not None else [list(inputs)]
    while len(sets) < count:
        sets.append([x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    return sets


def _enough(samples, t_sampling, min_samples, max_samples, max_ns, target_ci, now_ns, min_ns=0):
    n = len(samples)
    elapsed = now_ns() - t_sampling
    # The window wins over the sample count: a 40 us kernel reaches 400 samples in 60 ms.
    if n >= max_samples and elapsed >= min_ns:
        return True
    # A few samples at least, even for a slow model that blows the time cap in one call.
    if elapsed >= max_ns and n >= min(3, min_samples):
        return True
    if n < min_samples or elapsed < min_ns:
        return False
    # Sorting every call would cost host time between calls; every ~5% of n is enough.
    step = max(1, n // 20)
    if (n - min_samples) % step:
        return False
    return _median_ci_rel(samples) <= target_ci


# -- pike mode -----------------------------------------------------------------------------------

def _pike(torch, model, inputs, device, timing, info):
    rep_ms = float(timing.get("pike_rep_ms") or PIKE_REP_MS)
    warmup_ms = float(timing.get("pike_warmup_ms") or PIKE_WARMUP_MS)
    info["buffer_sets"] = 1  # PIKE times the same tensors every call
    info["pike_rep_ms"] = rep_ms
    info["pike_warmup_ms"] = warmup_ms
    is_cuda = device.type == "cuda"

    if is_cuda:
        def bench():
            model(*inputs)
            torch.cuda.synchronize()

        try:
            from triton.testing import do_bench
        except Exception:
            do_bench = None
        if do_bench is not None:
            try:
                times = do_bench(bench, warmup=warmup_ms, rep=rep_ms, return_mode="all")
            except (AssertionError, TypeError, ValueError):
                times = None  # a Triton without return_mode="all": same arithmetic below
            if times is not None:
                info["pike_source"] = "triton.testing.do_bench"
                return [float(t) for t in times]
        return _pike_cuda(torch, bench, warmup_ms, rep_ms, info)
    return _pike_cpu(lambda: model(*inputs), warmup_ms, rep_ms, info)


def _pike_counts(estimate_ms, warmup_ms, rep_ms, info):
    # do_bench's arithmetic: whole calls that fit the budgets, at least one of each.
    est = max(estimate_ms, 1e-6)
    n_warmup = max(1, int(warmup_ms / est))
    n_repeat = max(1, int(rep_ms / est))
    info["pike_estimate_ms"] = estimate_ms
    info["pike_n_warmup"] = n_warmup
    info["pike_n_repeat"] = n_repeat
    return n_warmup, n_repeat


def _pike_cuda(torch, bench, warmup_ms, rep_ms, info):
    info["pike_source"] = "kiln (do_bench arithmetic)"
    bench()
    torch.cuda.synchronize()
    cache = torch.empty(DEFAULT_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        bench()
    end.record()
    torch.cuda.synchronize()
    n_warmup, n_repeat = _pike_counts(start.elapsed_time(end) / 5, warmup_ms, rep_ms, info)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        bench()
    for i in range(n_repeat):
        cache.zero_()
        starts[i].record()
        bench()
        ends[i].record()
    torch.cuda.synchronize()
    return [float(s.elapsed_time(e)) for s, e in zip(starts, ends)]


def _pike_cpu(bench, warmup_ms, rep_ms, info):
    import time

    info["pike_source"] = "kiln (do_bench arithmetic)"
    bench()
    t0 = time.perf_counter_ns()
    for _ in range(5):
        bench()
    n_warmup, n_repeat = _pike_counts((time.perf_counter_ns() - t0) / 1e6 / 5, warmup_ms, rep_ms,
                                      info)
    for _ in range(n_warmup):
        bench()
    samples = []
    for _ in range(n_repeat):
        t0 = time.perf_counter_ns()
        bench()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return samples
