#pragma once

// The evaluation procedure of one device, as a plain blocking object. The evaluator actor owns
// one and runs it on its own thread; `kiln eval` uses it directly.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "config/config.hpp"
#include "messages/eval.hpp"

namespace kiln {

struct eval_settings {
  std::string python;   ///< interpreter (already resolved by find_python)
  std::string work_dir; ///< scratch space; one subfolder per evaluation, removed afterwards
  std::string device = "cpu";
  evaluator_config cfg; ///< timeouts, trials, tolerances, timing
  bool keep_scratch = false;
};

/// Runs the reference and the candidate in separate fresh processes, compares their outputs
/// on `cfg.trials` input sets drawn from per-evaluation seeds, and times both the same way.
class evaluation_engine {
public:
  explicit evaluation_engine(eval_settings settings);

  /// Judges one candidate; `seed` is the evaluation's seed from which trial seeds are drawn.
  /// Never throws: every failure becomes a verdict.
  verdict evaluate(const eval_job& job, uint64_t seed);

  /// Times the reference and the job's candidates again, interleaved round by round, each in a
  /// fresh runner; `seed` draws the weights and inputs. Never throws (gpu/retime.cpp).
  retime_result retime(const retime_job& job, uint64_t seed);

  /// What the runners of this device have (runs the harness once, then cached).
  runner_facts facts();

  const eval_settings& settings() const { return settings_; }

private:
  eval_settings settings_;
  std::string harness_path_;
  bool have_facts_ = false;
  runner_facts facts_;
  /// Reference timings per task source hash: the reference is timed once per device.
  std::map<std::string, timing_stats> reference_times_;
  uint64_t counter_ = 0;
};

} // namespace kiln
