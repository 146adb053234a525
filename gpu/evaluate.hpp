#pragma once

// The evaluation procedure of one device, as a plain blocking object. The evaluator actor owns
// one and runs it on its own thread; `kiln eval` uses it directly.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "gpu/device_share.hpp"
#include "messages/eval.hpp"

namespace kiln {

struct eval_settings {
  std::string python;   ///< interpreter (already resolved by find_python)
  std::string work_dir; ///< scratch space; one subfolder per evaluation, removed afterwards
  std::string device = "cpu";
  evaluator_config cfg; ///< timeouts, trials, tolerances, timing
  /// The shared build cache (resolve_cache_dir in build_cache.hpp), given to every runner so a
  /// candidate compiled ahead only loads; empty: none (torch builds in each runner).
  std::string cache_dir;
  bool keep_scratch = false;
  /// Added to the nice value of the runners started cold (process_options::nice).
  int nice = 0;
  /// The device's lock, health and reference timings, shared by the lanes of one device
  /// (engines made with the same pointer); null: the engine makes its own.
  std::shared_ptr<device_share> share;
};

/// The settings of one device's evaluation lanes: `[evaluator] gpu_lanes` of them on a GPU, one
/// on the CPU (whose timings every other process on the host disturbs). They share one
/// device_share; each has its own work folder (`<work_dir>`, then `<work_dir>-lane1`, ...).
std::vector<eval_settings> device_lanes(eval_settings base);

/// One timing of a task's reference by itself (`kiln baseline`).
struct reference_timing {
  bool ok = false;
  bool available = true; ///< false: this mode cannot run here (no torch.compile); see reason
  std::string reason;    ///< why not ok
  timing_stats stats;    ///< per call
  timing_stats steady;   ///< the steady-state figure (n = 0 where there is none)
  /// What may have disturbed the timing (a busy host, gpu/quiet_host.hpp); empty: nothing.
  std::vector<std::string> notes;
};

/// Runs the reference and the candidate in separate fresh processes, compares their outputs
/// on `cfg.trials` input sets drawn from per-evaluation seeds, and times both the same way.
class runner_pool;
struct runner_context;
class evaluation;

class evaluation_engine {
public:
  /// Starts the device's runner pool (`[evaluator] pool_size` warm interpreters).
  explicit evaluation_engine(eval_settings settings);
  /// Kills the idle runners of the pool.
  ~evaluation_engine();
  evaluation_engine(evaluation_engine&&) noexcept;
  evaluation_engine& operator=(evaluation_engine&&) noexcept;

  /// Judges one candidate; `seed` is the evaluation's seed from which trial seeds are drawn.
  /// Never throws: every failure becomes a verdict.
  verdict evaluate(const eval_job& job, uint64_t seed);

  /// Times the reference and the job's candidates again, interleaved round by round, each in a
  /// fresh runner; `seed` draws the weights and inputs. Never throws (gpu/retime.cpp).
  retime_result retime(const retime_job& job, uint64_t seed);

  /// Times the task's reference alone with the evaluations' routine, under torch.compile when
  /// `compile_mode` is set (`default`, `max-autotune`); eager timings also go to the reference
  /// cache. Never throws (gpu/baseline.cpp).
  reference_timing time_reference(const task_spec& task, const std::string& compile_mode);

  /// What the runners of this device have (runs the harness once, then cached).
  runner_facts facts();

  /// How many reference runners this engine asked to time (the rest came from the cache).
  int64_t references_timed() const { return references_timed_; }

  const eval_settings& settings() const { return settings_; }

  /// False once a health check failed (gpu/health.cpp); evaluate() then refuses to start
  /// runners and answers runtime_error "device <d> is unhealthy: <why>".
  bool healthy() const;
  std::string health_problem() const;
  /// Runs the health job if a runner ended badly since the last check; returns the problem
  /// ("device cuda:0 is unhealthy: ...") or empty when the device is fine.
  std::string check_health();

  /// Lets `ctx` take runners from this engine's pool and report bad endings to its health.
  void attach(runner_context& ctx);
  runner_pool& pool() { return *pool_; }

private:
  friend class evaluation; // its stages (gpu/evaluation.cpp) are this engine's procedure
  std::unique_ptr<runner_pool> pool_;

  eval_settings settings_;
  std::string harness_path_;
  bool have_facts_ = false;
  runner_facts facts_;
  /// The key under which the reference timing of `task_source` is cached (runs facts()).
  reference_key reference_key_for(const std::string& task_source, const std::string& compile_mode);

  /// Reference timings, memory then `<cache_dir>/reference/` (gpu/reference_cache.hpp), under
  /// the share's mutex.
  std::optional<timing_stats> find_reference(const reference_key& key);
  /// At a gate: takes the device whole for the timing. False when another lane's health check
  /// failed meanwhile; the hold is then shared again (the runner still ends on the device).
  bool hold_for_timing(device_hold& hold);
  void store_reference(const reference_key& key, const timing_stats& stats);
  int64_t references_timed_ = 0;
  uint64_t counter_ = 0;
};

} // namespace kiln
