#pragma once

// Every default of kiln, defined once. The reference preset `config/reference.toml` documents
// each key; the loader takes its defaults from here.

#include <chrono>
#include <cstdint>

namespace kiln::defaults {

// [run]
inline constexpr const char* out_dir = "runs/latest";
inline constexpr uint64_t seed = 1;
/// Tasks searched at the same time.
inline constexpr int64_t parallel_tasks = 4;
inline constexpr const char* log_level = "info";

// [budget]
inline constexpr int64_t queries_per_task = 40;
inline constexpr double usd_total = 0;    // 0 = no dollar cap
inline constexpr double usd_per_task = 0; // 0 = no dollar cap

// [evaluator]
inline constexpr const char* devices = "auto";
/// Empty: the first of `python3` on PATH and `/usr/bin/python3` that imports torch.
inline constexpr const char* python = "";
inline constexpr double timeout_s = 300;
inline constexpr int64_t trials = 3;
inline constexpr double atol = 1e-2;
inline constexpr double rtol = 1e-2;
/// Torch threads of every CPU runner, reference and candidate alike (0 = all cores).
inline constexpr int64_t cpu_threads = 0;
/// Timing: warm-up calls, then samples until the median's CI is within `target_ci` or the cap.
inline constexpr int64_t warmup_calls = 3;
inline constexpr int64_t min_samples = 10;
inline constexpr int64_t max_samples = 400;
/// On a GPU, sampling lasts at least this long (its clocks and power state drift over tens of
/// milliseconds, so one short window is one state, and medians of runs drift apart).
inline constexpr double min_timing_s = 0.3;
inline constexpr double max_timing_s = 2.0;
inline constexpr double target_ci = 0.01;
/// Which figure drives the search and the reported speedup: `steady` (back-to-back calls, the
/// cost of a model called in a loop) or `per_call` (one call from an idle device, launch and
/// synchronize included). docs/evaluation.md, "Timing", says why steady is the default.
inline constexpr const char* timing_statistic = "steady";
/// Rounds of a paired timing: reference and candidate each time this many blocks, alternately
/// (ABBA...), in one window with the device held.
inline constexpr int64_t timing_rounds = 3;
/// Extra input seeds a borderline mismatch (a handful of values just outside the tolerance) is
/// re-checked on before it is called; 0 = none, any value outside makes it incorrect.
inline constexpr int64_t borderline_trials = 8;
/// `kiln` or `pike` (one trial, seeds 0 and 1, mean timing), see docs/evaluation.md.
inline constexpr const char* mode = "kiln";
/// Shared build caches (extensions, precompiled headers, Triton) and cached reference timings.
/// Empty: `$XDG_CACHE_HOME/kiln`, else `$HOME/.cache/kiln`.
inline constexpr const char* cache_dir = "";
/// Processes that build candidates' extensions ahead of the GPU (0 = half the cores, at least 1).
inline constexpr int64_t compile_workers = 0;
/// Evaluations in flight per GPU: their untimed phases overlap, only timing is exclusive.
inline constexpr int64_t gpu_lanes = 2;
/// One compile stage (import with no GPU visible, extension builds included).
inline constexpr double compile_timeout_s = 900;
/// Nice increment of compile runners and the compilers they start (not a config key): builds
/// are background work beside timings.
inline constexpr int compile_nice = 10;
/// Pre-warmed interpreters (torch imported, CUDA untouched) kept ready per device.
inline constexpr int64_t pool_size = 2;
/// Address-space limit of CPU runners in GiB (0 = three quarters of physical memory). CUDA
/// runners get none: the CUDA driver reserves far more address space than it uses.
inline constexpr double memory_limit_gb = 0;
/// `auto` (isolate as far as the machine allows and say what is missing), `required` (refuse to
/// evaluate without network and filesystem isolation) or `off`.
inline constexpr const char* sandbox = "auto";
/// Rounds of the final re-timing of each task's best candidates, interleaved with the
/// reference (0 = report the search's own measurements).
inline constexpr int64_t retime_rounds = 3;
/// How many of a task's best candidates are re-timed at the end.
inline constexpr int64_t retime_top = 3;
/// How long a kiln process waits for another kiln process on the host to let go of a device
/// before it gives up: long enough for a `kiln eval` or a baseline beside it to finish, short
/// enough that a run queued behind someone's overnight run fails within minutes, not hours.
inline constexpr double device_lock_wait_s = 600;
/// While a runner is timed, freeze kiln's other runners and compile workers of the host
/// (gpu/quiet_host.hpp).
inline constexpr bool quiet_host = true;
/// Cores of each GPU's timed runner, which nothing else of kiln's runs on (0 = no pinning). Two:
/// one for the Python thread that launches the kernels, one for what runs beside it (the CUDA
/// driver's and torch's helper threads, the garbage collector), so neither waits for the other.
inline constexpr int64_t timer_cores = 2;
/// A window open longer than this thaws kiln's other processes by itself (not a config key): a
/// hung timing must not starve the builds. Far above a timing's own budget (max_timing_s,
/// PIKE's 6 s of do_bench) plus a cold runner's start.
inline constexpr double quiet_max_freeze_s = 120;
/// Foreign load worth a note (not config keys): processes that are not kiln's used on average
/// at least this many cores per timer core of a GPU timing (at least one core)...
inline constexpr double foreign_load_per_timer_core = 1.0;
/// ...or this many cores during a CPU timing, whose threads share every core with them.
inline constexpr double foreign_load_cpu_cores = 0.5;

// [llm.<name>]
/// The profile a config without any [llm.*] or [agents.*] gets, and its provider: offline.
inline constexpr const char* llm_profile = "main";
inline constexpr const char* llm_provider = "rules";
inline constexpr double temperature = 0.8;
inline constexpr int64_t max_tokens = 32000;
inline constexpr double llm_timeout_s = 600;
inline constexpr double llm_connect_timeout_s = 10;
/// Long enough for a reasoning model's silence before its first token when not streaming.
inline constexpr double llm_idle_timeout_s = 300;
inline constexpr int64_t llm_max_concurrency = 8;
inline constexpr int64_t llm_max_retries = 6;
inline constexpr double llm_retry_initial_s = 1;
inline constexpr double llm_retry_max_s = 60;

// [agents.<name>]
inline constexpr int64_t max_attempts = 5;

// [strategy]
inline constexpr const char* strategy = "pike-b";
inline constexpr int64_t max_ideas = 10;
inline constexpr int64_t phases = 30;
inline constexpr int64_t parents = 4;
/// In-flight candidates per task (LLM queries plus evaluations).
inline constexpr int64_t parallel_candidates = 10;

// Actor plumbing.
inline constexpr auto request_timeout = std::chrono::seconds(3600);
/// A whole run: its budgets end it, not this (CAF 0.17 durations have no hours).
inline constexpr auto run_timeout = std::chrono::seconds(365 * 24 * 3600);
inline constexpr auto flush_timeout = std::chrono::seconds(60);
inline constexpr auto restart_backoff_min = std::chrono::milliseconds(100);
inline constexpr auto restart_backoff_max = std::chrono::seconds(30);
/// A worker that crashes more often than this within `restart_window` takes the run down.
inline constexpr int64_t max_restarts = 5;
inline constexpr auto restart_window = std::chrono::seconds(60);

} // namespace kiln::defaults
