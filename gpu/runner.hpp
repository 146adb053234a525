#pragma once

// One runner process of the harness: what it is asked (job.json), how it is started (scrubbed
// environment, own process group, timeout), and what it reported (result.json). The evaluation
// procedure (evaluate.cpp) builds its judgements on these.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/evaluate.hpp"
#include "gpu/process.hpp"
#include "messages/eval.hpp"

namespace kiln {

using steady = std::chrono::steady_clock;

/// How much of a runner's stdout/stderr a verdict carries.
constexpr size_t tail_bytes = 4000;
/// The facts runner only imports torch (and Triton); this is generous.
constexpr double facts_timeout_s = 300;

double ms_since(steady::time_point t0);
std::string read_file(const std::string& path);
void write_file(const std::string& path, std::string_view text);

/// One runner invocation: what job.json says.
struct runner_job {
  std::string mode; ///< facts | reference | candidate
  std::string task_path;
  std::string candidate_path;
  std::string dir;    ///< out_dir and cwd of the runner
  std::string device; ///< as the runner sees it (`cpu` or `cuda:0`)
  uint64_t weight_seed = 0;
  std::vector<uint64_t> seeds;
  bool time = false;
  int threads = 1;
  bool pike = false;
};

struct trial_record {
  uint64_t seed = 0;
  bool inputs_mutated = false;
};

/// How one runner process ended and what its result.json said.
struct runner_report {
  process_result proc;
  bool have_result = false;
  std::string result_problem; ///< why result.json is missing or unusable
  bool ok = false;
  std::string stage;
  std::string error;
  std::string structure;
  std::vector<trial_record> trials;
  std::vector<double> samples_ms;
  double timing_wall_ms = 0;
  double load_ms = 0;
  runner_facts facts;
  std::string stdout_path;
  std::string stderr_path;
};

/// Why a runner failed, and the verdict kind that failure means; empty reason when it did not.
struct runner_failure {
  verdict_status status = verdict_status::runtime_error;
  std::string reason;
};

/// Stops the scratch folder from outliving an evaluation, whatever path leaves it.
struct scratch_guard {
  std::string dir;
  bool keep = false;
  ~scratch_guard();
};

/// Everything one evaluation needs to start runners; built by evaluate().
struct runner_context {
  const eval_settings& settings;
  std::string harness_path;
  std::string scratch;
  std::string visible_devices;
  std::string runner_device;
  int threads = 1;
};

/// job.json for `j`, with the timing settings of `cfg`.
std::string job_json(const runner_job& j, const evaluator_config& cfg);

/// Reads result.json into `r`; on a missing or malformed file sets `result_problem`.
void parse_result(const std::string& path, runner_report& r);

/// The runners' environment: nothing inherited but the few variables named in runner.cpp.
std::vector<std::string> runner_env(const std::string& python, const std::string& scratch,
                                    const std::string& work_dir, const std::string& visible,
                                    int threads);

/// `program` as an absolute path (looked up on PATH when it is a bare name).
std::string absolute_program(const std::string& program);

/// The verdict a runner's ending means; an empty reason when it ended well.
runner_failure judge_process(const runner_report& r, double timeout_s);

/// Starts one runner for `job`, waits for it (at most `timeout_s`) and reads its report.
runner_report run_runner(const runner_context& ctx, const runner_job& job, double timeout_s);

/// Maps `cpu` / `cuda:N` to CUDA_VISIBLE_DEVICES and the device name the runner uses.
bool map_device(const std::string& device, std::string& visible, std::string& runner_device);

/// Torch threads of a runner.
int runner_threads(const evaluator_config& cfg);

/// A fresh `<work_dir>/e<counter>-<pid>`; skips names another engine already took.
std::string make_scratch(const std::string& work_dir, uint64_t& counter);

} // namespace kiln
