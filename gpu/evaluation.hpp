#pragma once

// One evaluation of evaluation_engine::evaluate, as named stages (gpu/evaluation.cpp). Internal
// to gpu/: the engine is the interface.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/evaluate.hpp"
#include "gpu/file_bytes.hpp"
#include "gpu/nvml.hpp"
#include "gpu/quiet_host.hpp"
#include "gpu/runner.hpp"

namespace kiln {

class gate_channel;

class evaluation {
public:
  evaluation(evaluation_engine& engine, const eval_job& job, uint64_t seed);
  /// Lets a reference that still waits at its gate go.
  ~evaluation();
  evaluation(const evaluation&) = delete;
  evaluation& operator=(const evaluation&) = delete;

  /// The verdict; may throw (evaluate() turns that into an evaluator_error verdict).
  verdict run();
  /// The verdict as far as it got (for the message of an exception).
  verdict& partial() { return v_; }
  /// Why the parent's clock doubted this timing by durations alone (a host hiccup can do that
  /// too, see clock_check); empty when it agreed or disagreed beyond doubt.
  const std::string& clock_doubt() const { return clock_doubt_; }

private:
  // The stages, in order; each returns false once the verdict is final (in v_).
  void setup();
  bool scan();
  void draw_seeds();
  bool reference();
  bool candidate();
  bool outputs();
  bool recheck(std::vector<std::string>& borderline);
  verdict timing();

  std::string at_candidate_gate(const gate_call& c);
  runner_failure reference_problem(const runner_report& ref, bool ended) const;
  verdict reference_failed(const runner_report& ref, const runner_failure& f);
  void keep_reference_outputs();
  /// Why the candidate's timing cannot be true by the parent's clock (gpu/outside_clock.hpp).
  std::string outside_problem();
  void update_reference_cache();
  /// Closes `quiet` and puts its foreign-load note, if any, into the verdict.
  void quiet_note(std::optional<quiet_window>& quiet);
  std::string ref_run_dir() const;
  verdict finish(verdict_status status, std::string code, std::string reason);
  verdict unhealthy();
  void fill_tails(const runner_report& r);

  evaluation_engine& engine_;
  const eval_job& job_;
  uint64_t seed_;
  const evaluator_config& cfg_;
  steady::time_point t0_ = steady::now();
  verdict v_;
  scratch_guard scratch_;
  runner_context ctx_;
  device_hold hold_;
  bool pike_ = false;
  std::string clock_doubt_;
  /// Reference and candidate time in alternating blocks in one window (the pool's gates).
  bool paired_ = false;
  double timeout_s_ = 0;
  std::string task_source_;
  std::string task_path_;
  std::string candidate_path_;

  uint64_t weight_seed_ = 1;
  uint64_t recheck_seed_ = 1;
  std::vector<uint64_t> seeds_;
  std::vector<uint64_t> extra_seeds_; ///< for a borderline mismatch only

  runner_job ref_job_;
  runner_job cand_job_;
  runner_report ref_;
  runner_report cand_;
  std::optional<timing_stats> cached_;
  timing_stats ref_clock_; ///< clocks of a reference timed on its own (not paired)
  std::vector<file_bytes> ref_outputs_;
  file_bytes ref_recheck_;

  // The paired timing. The channel outlives the reference's thread (declared first).
  std::unique_ptr<gate_channel> ref_channel_;
  std::unique_ptr<async_runner> ref_run_;
  std::vector<char> turns_; ///< 'R' and 'C', in order
  size_t next_turn_ = 0;
  bool gate_asked_ = false;
  bool unhealthy_at_gate_ = false;
  bool ref_broke_ = false;
  std::unique_ptr<clock_sampler> window_clocks_;
  std::optional<quiet_window> quiet_; ///< open from the candidate's go until both runners end
  steady::time_point window_start_ = steady::now();
  double window_ms_ = 0;
};

} // namespace kiln
