#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/task.hpp"

namespace kiln {

/// What a runner reports it has; prompts and the rules proposer adapt to it.
struct runner_facts {
  std::string device;      ///< `cpu` or `cuda:N`
  std::string device_name; ///< e.g. `NVIDIA H200` or the CPU model
  std::string python;      ///< interpreter path
  std::string python_version;
  std::string torch_version;
  bool cuda = false;       ///< torch sees a CUDA device
  bool triton = false;     ///< `import triton` works
  bool compile = false;    ///< torch.compile exists (torch 2.x)
  int32_t cpu_threads = 1; ///< torch threads the runner uses
  int32_t multiprocessors = 0;
  int64_t memory_bytes = 0;
  std::string capability;          ///< CUDA compute capability, e.g. `9.0`
  double memory_bandwidth_gbs = 0; ///< peak, from the memory clock and bus width; 0 = unknown
  int64_t l2_bytes = 0;            ///< 0 = unknown
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, runner_facts& x) {
  return f(caf::meta::type_name("runner_facts"), x.device, x.device_name, x.python,
           x.python_version, x.torch_version, x.cuda, x.triton, x.compile, x.cpu_threads,
           x.multiprocessors, x.memory_bytes, x.capability, x.memory_bandwidth_gbs, x.l2_bytes);
}

/// Robust statistics of repeated timed calls, in milliseconds.
struct timing_stats {
  double median_ms = 0;
  double p10_ms = 0;
  double p90_ms = 0;
  double mean_ms = 0;
  int32_t n = 0;
  /// GPU clocks seen while the samples were taken (median of readings), 0 where unreadable.
  int32_t sm_clock_mhz = 0;
  int32_t mem_clock_mhz = 0;
  /// The timing window's drift record (gpu/nvml.hpp): lowest and highest SM clock, highest
  /// temperature, median power (0 where unreadable), the host's busy cores and load average
  /// (-1 where unreadable).
  int32_t sm_min_mhz = 0;
  int32_t sm_max_mhz = 0;
  int32_t temperature_c = 0;
  double power_w = 0;
  double host_busy = -1;
  double load_avg = -1;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, timing_stats& x) {
  return f(caf::meta::type_name("timing_stats"), x.median_ms, x.p10_ms, x.p90_ms, x.mean_ms, x.n,
           x.sm_clock_mhz, x.mem_clock_mhz, x.sm_min_mhz, x.sm_max_mhz, x.temperature_c, x.power_w,
           x.host_busy, x.load_avg);
}

/// One statistic's figures in a verdict: the candidate's and the reference's, and their ratio
/// with a ~95 % interval (gpu/timing.hpp, paired_ratio). For the steady-state statistic
/// `median_ms` is the cost of one call within a batch, and `n` counts batches.
struct timing_view {
  timing_stats candidate;
  timing_stats reference;
  double speedup = 0;
  double speedup_lo = 0;
  double speedup_hi = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, timing_view& x) {
  return f(caf::meta::type_name("timing_view"), x.candidate, x.reference, x.speedup, x.speedup_lo,
           x.speedup_hi);
}

/// The verdict kinds (docs/evaluation.md), in the order a candidate can fail them.
enum class verdict_status : uint8_t {
  correct,
  incorrect, ///< numerics differ beyond the tolerance
  rejected,  ///< an integrity rule was broken
  compile_error,
  runtime_error,
  timeout,
};

const char* to_string(verdict_status s);
/// Parses the wire name; returns false for an unknown one.
bool from_string(const std::string& s, verdict_status& out);

/// The judgement of one candidate.
struct verdict {
  verdict_status status = verdict_status::runtime_error;
  /// One sentence for a human: what was seen and its likely cause.
  std::string reason;
  /// A stable name for the kind of outcome (`ok`, `tolerance`, `nan_output`, `scan_patch`, ...),
  /// for programs; docs/evaluation.md has the table of codes.
  std::string code;
  std::string stdout_tail;
  std::string stderr_tail;
  std::vector<double> max_abs_diff; ///< per output, worst over the trials
  std::vector<double> max_rel_diff;
  /// The figures of the statistic that drives the search (`statistic`), set for `correct`;
  /// `per_call` and `steady` hold both statistics' figures.
  timing_stats candidate;
  timing_stats reference;
  double speedup = 0; ///< reference median / candidate median, for `correct`
  /// ~95 % interval of `speedup`; equal to it when the timing gives none.
  double speedup_lo = 0;
  double speedup_hi = 0;
  /// `steady`, `per_call` or `pike_mean` (PIKE mode: do_bench's mean).
  std::string statistic;
  /// Reference and candidate were timed alternately in one window (docs/evaluation.md).
  bool paired = false;
  timing_view per_call;
  timing_view steady;
  double wall_ms = 0; ///< the whole evaluation, as the parent saw it
  std::string device;
  double compile_ms = 0;       ///< the compile stage ahead of the GPU (0 when skipped)
  bool compile_cached = false; ///< every extension the candidate built came from the cache
  /// Observations that do not change the verdict but a reader should see, e.g. an output
  /// computed in lower precision than the reference's, or a missing sandbox feature.
  std::vector<std::string> notes;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, verdict& x) {
  return f(caf::meta::type_name("verdict"), x.status, x.reason, x.code, x.stdout_tail,
           x.stderr_tail, x.max_abs_diff, x.max_rel_diff, x.candidate, x.reference, x.speedup,
           x.speedup_lo, x.speedup_hi, x.statistic, x.paired, x.per_call, x.steady, x.wall_ms,
           x.device, x.compile_ms, x.compile_cached, x.notes);
}

/// One evaluation to run: a candidate against its task.
struct eval_job {
  task_spec task;
  std::string candidate_id; ///< `<task>#<seq>`, for logs
  std::string code;         ///< the candidate's Python source
  double timeout_s = 0;     ///< 0 means the evaluator's default
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, eval_job& x) {
  return f(caf::meta::type_name("eval_job"), x.task, x.candidate_id, x.code, x.timeout_s);
}

/// What the compile stage (ahead of the GPU) made of a candidate.
struct compile_report {
  bool ok = true;      ///< false: `failure` is the candidate's verdict (compile_error)
  verdict failure;     ///< set when !ok
  double wall_ms = 0;  ///< the stage's wall time
  bool cached = false; ///< every extension came from the cache (or there was none)
  int32_t builds = 0;  ///< extensions built in this stage
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compile_report& x) {
  return f(caf::meta::type_name("compile_report"), x.ok, x.failure, x.wall_ms, x.cached, x.builds);
}

/// The final re-timing of a task's best candidates: `rounds` rounds, each timing the reference
/// and then every candidate in a fresh process, so that drift hits all of them alike.
struct retime_job {
  task_spec task;
  std::vector<std::string> candidate_ids;
  std::vector<std::string> codes; ///< parallel to candidate_ids
  int32_t rounds = 3;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, retime_job& x) {
  return f(caf::meta::type_name("retime_job"), x.task, x.candidate_ids, x.codes, x.rounds);
}

/// Timings of a re-timing: each the median over rounds of the per-round medians.
struct retime_result {
  std::string device;
  timing_stats reference;
  std::vector<timing_stats> candidates; ///< parallel to the job's candidate_ids
  std::vector<double> speedups;         ///< 0 where a candidate failed to run
  std::string error;                    ///< set when the reference itself could not be timed
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, retime_result& x) {
  return f(caf::meta::type_name("retime_result"), x.device, x.reference, x.candidates, x.speedups,
           x.error);
}

} // namespace kiln
