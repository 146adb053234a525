// One evaluation, stage by stage (docs/evaluation.md explains every rule):
//
//   setup ─> scan ─> seeds ─> reference (trials; with the pool it then waits at its gate)
//     ─> candidate (trials; at its gate: comparison, then the paired timing: the device held,
//        reference and candidate timing blocks in turn, R C C R R C ...)
//     ─> outputs (integrity, process, structure, aliasing, comparisons, re-check, borderline)
//     ─> timing (sanity, both statistics, the speedup and its interval, notes)
//
// Both runners are fresh processes of gpu/harness/kiln_harness.py with a scrubbed environment;
// the reference never shares a process with the candidate. The parent trusts the runners'
// files only as far as it must and derives every judgement itself.

#include "gpu/evaluation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <spdlog/spdlog.h>

#include "config/rules.hpp"
#include "gpu/compare.hpp"
#include "gpu/judge.hpp"
#include "gpu/nvml.hpp"
#include "gpu/quiet_host.hpp"
#include "gpu/scan.hpp"
#include "gpu/timing.hpp"

namespace kiln {

namespace fs = std::filesystem;
using vs = verdict_status;

/// Between the thread that waits for a reference runner and the evaluation: the runner's gate
/// blocks in `await` until the evaluation sends its next command.
class gate_channel {
public:
  /// The runner's side: it said `message`; returns the command it gets.
  std::string await(const std::string& message, const std::string& dir) {
    std::unique_lock<std::mutex> lock{mu_};
    waiting_ = true;
    said_ = message;
    dir_ = dir;
    cv_.notify_all();
    cv_.wait(lock, [&] { return command_.has_value(); });
    waiting_ = false;
    auto c = *command_;
    command_.reset();
    return c;
  }
  /// The runner's process ended (from the waiting thread).
  void ended() {
    std::lock_guard<std::mutex> lock{mu_};
    ended_ = true;
    cv_.notify_all();
  }
  /// Waits until the runner is at its gate (true) or has ended (false).
  bool wait_at_gate() {
    std::unique_lock<std::mutex> lock{mu_};
    cv_.wait(lock, [&] { return (waiting_ && !command_) || ended_; });
    return waiting_ && !command_ && !ended_;
  }
  /// The runner's folder, once it has been at its gate.
  std::string dir() {
    std::lock_guard<std::mutex> lock{mu_};
    return dir_;
  }
  void send(const std::string& command) {
    std::lock_guard<std::mutex> lock{mu_};
    command_ = command;
    cv_.notify_all();
  }
  /// Lets a runner that still waits at its gate go without timing anything.
  void release() {
    std::lock_guard<std::mutex> lock{mu_};
    if (waiting_ && !command_)
      command_ = "stop";
    cv_.notify_all();
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool waiting_ = false;
  bool ended_ = false;
  std::string said_;
  std::string dir_;
  std::optional<std::string> command_;
};

namespace {

std::string ms_text(double ms) {
  std::ostringstream o;
  o.precision(3);
  o << ms;
  return o.str();
}

} // namespace

evaluation::evaluation(evaluation_engine& engine, const eval_job& job, uint64_t seed)
    : engine_(engine), job_(job), seed_(seed),
      cfg_(engine.settings_.cfg), ctx_{engine.settings_,
                                       engine.harness_path_,
                                       {},
                                       {},
                                       {},
                                       runner_threads(engine.settings_.cfg)},
      hold_{engine.settings_.share->lock} {
  v_.device = engine.settings_.device;
  scratch_.keep = engine.settings_.keep_scratch;
  pike_ = cfg_.mode == "pike";
}

evaluation::~evaluation() {
  if (ref_channel_)
    ref_channel_->release();
}

verdict evaluation::finish(verdict_status status, std::string code, std::string reason) {
  v_.status = status;
  v_.code = std::move(code);
  v_.reason = std::move(reason);
  v_.wall_ms = ms_since(t0_);
  return v_;
}

verdict evaluation::unhealthy() {
  return finish(vs::runtime_error, "device_unhealthy",
                "device " + engine_.settings_.device + " is unhealthy: " + engine_.health_problem()
                    + " (a problem of the device, not of this candidate)");
}

void evaluation::fill_tails(const runner_report& r) {
  v_.stdout_tail = tail_of_file(r.stdout_path, rules::tail_bytes);
  v_.stderr_tail = tail_of_file(r.stderr_path, rules::tail_bytes);
}

verdict evaluation::run() {
  if (auto problem = engine_.check_health(); !problem.empty()) {
    v_.status = vs::runtime_error;
    v_.reason = problem;
    v_.wall_ms = ms_since(t0_);
    return v_;
  }
  setup();
  if (!scan())
    return v_;
  draw_seeds();
  if (!reference())
    return v_;
  if (!candidate())
    return v_;
  if (!outputs())
    return v_;
  return timing();
}

// -- setup ---------------------------------------------------------------------------------------

void evaluation::setup() {
  engine_.attach(ctx_);
  configure_quiet_host(quiet_host_settings_from(cfg_));
  if (!map_device(engine_.settings_.device, ctx_.visible_devices, ctx_.runner_device))
    throw std::runtime_error("unknown device " + engine_.settings_.device);
  ctx_.scratch = make_scratch(engine_.settings_.work_dir, engine_.counter_);
  scratch_.dir = ctx_.scratch;
  // The task as it was read when the run started (task_spec::source), not as the file on disk
  // may be now.
  task_source_ = job_.task.source.empty() ? read_file(job_.task.path) : job_.task.source;
  task_path_ = ctx_.scratch + "/task.py";
  candidate_path_ = ctx_.scratch + "/candidate.py";
  write_file(task_path_, task_source_);
  write_file(candidate_path_, job_.code);
  timeout_s_ = job_.timeout_s > 0 ? job_.timeout_s : cfg_.timeout_s;
  // Reference and candidate alternate in one window only through the pool's control sockets;
  // PIKE mode times them one after the other, as PIKE does.
  paired_ = ctx_.pool != nullptr && !pike_;
}

bool evaluation::scan() {
  // The static scan reads the candidate's text before any of it runs (gpu/scan.hpp).
  auto scan = scan_candidate(job_.code);
  v_.notes = scan.notes;
  if (scan.rejections.empty())
    return true;
  for (size_t i = 1; i < scan.rejections.size(); ++i)
    v_.notes.push_back("also: " + scan.rejections[i].text());
  v_.status = vs::rejected;
  v_.code = scan_code(scan.rejections.front().rule);
  v_.reason = scan.rejections.front().text() + ": " + scan_cause(v_.code);
  v_.wall_ms = ms_since(t0_);
  return false;
}

void evaluation::draw_seeds() {
  // Fresh inputs and weights per evaluation: a candidate cannot learn the inputs it will be
  // judged on. PIKE mode pins them to PIKE's constants instead.
  if (pike_) {
    seeds_ = {0};
    return;
  }
  // 63 bits: a seed must also fit a signed int64 wherever torch or a task stores one.
  std::mt19937_64 rng{seed_};
  weight_seed_ = rng() >> 1;
  for (int64_t i = 0; i < std::max<int64_t>(1, cfg_.trials); ++i)
    seeds_.push_back(rng() >> 1);
  recheck_seed_ = rng() >> 1;
  for (int64_t i = 0; i < cfg_.borderline_trials; ++i)
    extra_seeds_.push_back(rng() >> 1);
}

// -- reference -----------------------------------------------------------------------------------

runner_failure evaluation::reference_problem(const runner_report& ref, bool ended) const {
  runner_failure f;
  if (ended)
    f = judge_process(ref, timeout_s_);
  if (f.reason.empty() && ref.trials.size() != seeds_.size())
    f.reason = "reported " + std::to_string(ref.trials.size()) + " trials of "
               + std::to_string(seeds_.size());
  if (f.reason.empty() && ref.nonce != ref_job_.nonce)
    f.reason = "result.json without this runner's nonce";
  if (f.reason.empty() && !ref.have_recheck)
    f.reason = "no re-check output";
  return f;
}

verdict evaluation::reference_failed(const runner_report& ref, const runner_failure& f) {
  fill_tails(ref);
  // kiln's own failure to start a runner says so itself; anything else is the task's.
  if (f.code == "runner_start")
    return finish(vs::runtime_error, "runner_start", "reference failed: " + f.reason);
  return finish(vs::runtime_error, "reference_failed",
                "reference failed: " + f.reason
                    + " (a problem of the task or the interpreter, not of the candidate)");
}

bool evaluation::reference() {
  ref_job_.mode = "reference";
  ref_job_.task_path = task_path_;
  ref_job_.dir = ctx_.scratch + "/ref";
  ref_job_.device = ctx_.runner_device;
  ref_job_.weight_seed = weight_seed_;
  ref_job_.seeds = seeds_;
  ref_job_.time = true;
  ref_job_.threads = ctx_.threads;
  ref_job_.pike = pike_;
  ref_job_.recheck = true;
  ref_job_.recheck_seed = recheck_seed_;
  ref_job_.nonce = fresh_nonce();
  ref_job_.gate = paired_;
  cached_ = engine_.find_reference(engine_.reference_key_for(task_source_, ""));
  if (paired_) {
    // The reference runs its trials beside other lanes' untimed work, then waits at its gate
    // (on a thread of its own) until the candidate's timing needs it.
    hold_.shared();
    ref_channel_ = std::make_unique<gate_channel>();
    auto* channel = ref_channel_.get();
    ref_run_ = std::make_unique<async_runner>(
        ctx_, ref_job_, timeout_s_,
        [channel](const gate_call& c) { return channel->await(c.message, c.dir); },
        [channel] { channel->ended(); });
    if (!ref_channel_->wait_at_gate()) {
      ref_ = ref_run_->finish();
      hold_.release();
      auto f = reference_problem(ref_, true);
      if (f.reason.empty())
        f.reason = "ended before its trials were compared";
      reference_failed(ref_, f);
      return false;
    }
    // What the reference wrote before its gate: its trials, inputs and re-check.
    parse_result(ref_run_dir() + "/result.json", ref_);
    if (auto f = reference_problem(ref_, false); !f.reason.empty()) {
      reference_failed(ref_, f);
      return false;
    }
  } else {
    // Timed as it runs: the device is its own from the start.
    hold_.exclusive();
    if (!engine_.healthy()) {
      unhealthy();
      return false;
    }
    clock_sampler clocks{engine_.settings_.device};
    {
      // Timed as it runs: quiet from its start to its end.
      std::optional<quiet_window> quiet;
      runner_context timed = ctx_;
      timed.on_start = [&](pid_t pid) {
        quiet.emplace(std::vector<pid_t>{pid}, engine_.settings_.device);
      };
      ref_ = run_runner(timed, ref_job_, timeout_s_);
      quiet_note(quiet);
    }
    clocks.stop();
    hold_.release();
    engine_.references_timed_ += 1;
    auto f = reference_problem(ref_, true);
    if (f.reason.empty() && ref_.samples_ms.empty())
      f.reason = "no timing samples";
    if (!f.reason.empty()) {
      reference_failed(ref_, f);
      return false;
    }
    ref_clock_ = with_clocks({}, clocks, ref_.timing_wall_ms);
  }
  spdlog::debug("evaluator {}: reference trials done ({})", engine_.settings_.device, ref_.phases);
  keep_reference_outputs();
  return true;
}

void evaluation::quiet_note(std::optional<quiet_window>& quiet) {
  if (!quiet)
    return;
  quiet->close();
  if (auto note = quiet->note(); !note.empty())
    v_.notes.push_back("timing: " + note);
  quiet.reset();
}

std::string evaluation::ref_run_dir() const {
  if (!ref_.dir.empty())
    return ref_.dir;
  return ref_channel_ ? ref_channel_->dir() : ref_job_.dir;
}

void evaluation::keep_reference_outputs() {
  const auto dir = ref_run_dir();
  // The reference's outputs leave the disk before the candidate runs, so the candidate cannot
  // read them or overwrite them: they are read into kiln's memory, then their files removed.
  for (size_t k = 0; k < seeds_.size(); ++k)
    ref_outputs_.push_back(file_bytes::open(dir + "/out_" + std::to_string(k) + ".pt"));
  ref_recheck_ = file_bytes::open(dir + "/out_recheck.pt");
  // Exactly equal outputs for different inputs: the task does not depend on its inputs, so any
  // constant passes it (PEERS (c) #10). The task is at fault; a note asks a human to look.
  // Equal bytes mean equal outputs; raw files that differ hold different values (the first
  // differing byte ends the check, for a real task one of the first); a torch.save archive
  // names its records after the file, so those are compared by value.
  bool all_equal = seeds_.size() > 1;
  for (size_t k = 1; k < seeds_.size() && all_equal; ++k) {
    if (ref_outputs_[k].bytes() == ref_outputs_[0].bytes())
      continue;
    try {
      all_equal = !is_raw_outputs(ref_outputs_[0]) && !is_raw_outputs(ref_outputs_[k])
                  && compare_output_files(ref_outputs_[0], ref_outputs_[k], {0, 0}).ok;
    } catch (const std::exception&) {
      all_equal = false; // unreadable: the comparison below will say so
    }
  }
  if (all_equal)
    v_.notes.push_back("check: the reference's output does not depend on its inputs (equal on "
                       "every trial); the task cannot tell a constant from real work");
  std::error_code ec;
  if (!ref_run_) {
    fs::remove_all(dir, ec); // the runner has ended
    return;
  }
  for (size_t k = 0; k < seeds_.size(); ++k)
    fs::remove(dir + "/out_" + std::to_string(k) + ".pt", ec);
  fs::remove(dir + "/out_recheck.pt", ec);
}

// -- candidate -----------------------------------------------------------------------------------

std::string evaluation::at_candidate_gate(const gate_call& c) {
  if (c.message == "trials") {
    if (gate_asked_) // a second `trials` only comes from a candidate that found the socket
      return "stop";
    gate_asked_ = true;
    if (paired_)
      hold_.release();
    const auto t_gate = steady::now();
    bool go = false;
    try {
      // A borderline mismatch is timed too: more seeds decide it after the run.
      const auto cmp = compare_trial_files(ref_outputs_, c.dir, seeds_, {cfg_.atol, cfg_.rtol});
      go = cmp.all.ok || (cmp.borderline_only && !pike_ && !extra_seeds_.empty());
    } catch (const std::exception&) {
      // unreadable: not timed; the comparison after the run says why
    }
    spdlog::debug("evaluator {}: comparisons at the gate {:.0f} ms", engine_.settings_.device,
                  ms_since(t_gate));
    if (go) {
      go = engine_.hold_for_timing(hold_);
      unhealthy_at_gate_ = !go;
    } else {
      // Stopped, the runner still ends (its CUDA context too) on the device: shared, so that
      // no other lane times beside it.
      hold_.shared();
    }
    if (!go) {
      if (ref_channel_)
        ref_channel_->send("stop");
      return "stop";
    }
    window_clocks_ = std::make_unique<clock_sampler>(engine_.settings_.device);
    window_start_ = steady::now();
    // Nothing else kiln owns runs on this host from here until both runners have ended.
    std::vector<pid_t> timed{c.pid};
    if (ref_run_ && ref_run_->pid() > 0)
      timed.push_back(ref_run_->pid());
    quiet_.emplace(timed, engine_.settings_.device);
    if (!ref_channel_)
      return "time";
    // R C, C R, R C, ...: a slow drift of the device over the window favours neither.
    for (int64_t r = 0; r < std::max<int64_t>(1, cfg_.timing_rounds); ++r) {
      turns_.push_back(r % 2 == 0 ? 'R' : 'C');
      turns_.push_back(r % 2 == 0 ? 'C' : 'R');
    }
  } else if (c.message != "block" || turns_.empty()) {
    return "done";
  }
  // The candidate is waiting for its next turn: the reference's turns before it come first,
  // with the candidate's whole process tree stopped (a child it left running could load the
  // host exactly while the reference times, and lift its speedup).
  std::optional<stopped_tree> held;
  if (next_turn_ < turns_.size() && turns_[next_turn_] == 'R' && c.pid > 0)
    held.emplace(c.pid);
  while (next_turn_ < turns_.size() && turns_[next_turn_] == 'R') {
    ++next_turn_;
    ref_channel_->send("block");
    if (!ref_channel_->wait_at_gate()) {
      ref_broke_ = true; // the reference ended inside its block: nothing more to pair with
      return "done";
    }
  }
  if (next_turn_ < turns_.size()) {
    ++next_turn_;
    return "block";
  }
  ref_channel_->send("done");
  return "done";
}

bool evaluation::candidate() {
  cand_job_ = ref_job_;
  cand_job_.mode = "candidate";
  cand_job_.candidate_path = candidate_path_;
  cand_job_.dir = ctx_.scratch + "/cand";
  cand_job_.time = true;
  cand_job_.nonce = fresh_nonce();
  cand_job_.inputs_on = ref_.inputs_on; // the same values as the reference's, made the same way
  // Trial outputs are compared as soon as the runner has written them (the gate), before it
  // times anything: a candidate whose outputs are wrong costs no timing. Until the gate the
  // candidate only runs untimed work, shared with the other lanes; the gate lets go of the
  // device while the parent compares, then takes it whole for the timing and the re-check
  // after it. Without the pool (or in PIKE mode) the candidate has it whole from the start.
  cand_job_.gate = ctx_.pool != nullptr && !pike_;
  runner_context cand_ctx = ctx_;
  if (cand_job_.gate) {
    hold_.shared();
  } else {
    hold_.exclusive();
    window_clocks_ = std::make_unique<clock_sampler>(engine_.settings_.device);
    window_start_ = steady::now();
    cand_ctx.on_start = [this](pid_t pid) {
      quiet_.emplace(std::vector<pid_t>{pid}, engine_.settings_.device);
    };
  }
  cand_ = run_runner(cand_ctx, cand_job_, timeout_s_,
                     gate_fn{[this](const gate_call& c) { return at_candidate_gate(c); }});
  if (window_clocks_)
    window_clocks_->stop();
  window_ms_ = ms_since(window_start_);
  if (ref_run_) {
    ref_channel_->release(); // not timed (the candidate failed before its gate): let it go
    ref_ = ref_run_->finish();
    ref_channel_.reset();
    std::error_code ec;
    fs::remove_all(ref_.dir, ec); // what is left of the reference runner's folder
  }
  quiet_note(quiet_);
  hold_.release();
  spdlog::debug("evaluator {}: candidate runner {:.0f} ms ({})", engine_.settings_.device,
                cand_.proc.wall_ms, cand_.phases);
  fill_tails(cand_);
  if (ref_broke_ && next_turn_ <= 1) {
    // The reference ended in its first block, before the candidate timed anything (it was
    // told `done` at once, so it skipped its re-check too): the task's failure.
    timing();
    return false;
  }
  if (unhealthy_at_gate_) {
    unhealthy();
    return false;
  }
  if (cand_.model_class == "Model")
    v_.notes.push_back("the candidate defines no class ModelNew: its class Model was judged (as "
                       "PIKE's evaluator does)");
  return true;
}

// -- outputs -------------------------------------------------------------------------------------

bool evaluation::outputs() {
  const bool gated = cand_job_.gate;
  // Integrity first: a forged result.json or a rule the harness saw broken outranks how the
  // process ended (the harness stops the candidate at the first violation).
  if (cand_.have_result && cand_.nonce != cand_job_.nonce) {
    finish(vs::rejected, "forged_result",
           "result.json was not written by the harness (wrong nonce): the candidate wrote its own");
    return false;
  }
  if (cand_.have_result && !cand_.violations.empty()) {
    auto [code, cause] = violation_code(cand_.violations.front());
    finish(vs::rejected, code, "candidate " + cand_.violations.front() + cause);
    return false;
  }
  // Samples the parent never said go for were taken beside other lanes' work: the candidate got
  // past the harness's gate (replaced it, say) to time itself.
  if (gated && !cand_.gate_go && !cand_.samples_ms.empty()) {
    finish(vs::rejected, "timed_without_go",
           "candidate was timed without the evaluator's go: it got past the gate after its trials");
    return false;
  }
  if (auto f = judge_process(cand_, timeout_s_); !f.reason.empty()) {
    finish(f.status, f.code, f.reason);
    return false;
  }
  if (auto problem = judge_runs(cand_, ref_, seeds_); !problem.reason.empty()) {
    finish(problem.status, problem.code, problem.reason);
    return false;
  }
  for (size_t k = 0; k < seeds_.size(); ++k)
    if (int32_t i = new_alias(cand_.trials[k], ref_.trials[k]); i >= 0) {
      finish(vs::rejected, "output_aliases_input", alias_text(i, ""));
      return false;
    }
  // The verdict compares the files as they are now, whatever the gate saw: the gate only
  // decides whether to time, and anyone holding the runner's socket could have rung it early.
  if (cand_.gate_stopped)
    v_.notes.push_back("not timed: its outputs were wrong");
  trial_comparisons cmp;
  const auto t_compare = steady::now();
  try {
    cmp = compare_trial_files(ref_outputs_, cand_.dir, seeds_, {cfg_.atol, cfg_.rtol});
  } catch (const std::exception& e) {
    finish(vs::runtime_error, "unreadable_outputs",
           std::string{"cannot compare outputs: "} + e.what());
    return false;
  }
  spdlog::debug("evaluator {}: comparisons {:.0f} ms", engine_.settings_.device,
                ms_since(t_compare));
  v_.max_abs_diff = cmp.all.max_abs_diff;
  v_.max_rel_diff = cmp.all.max_rel_diff;
  // Borderline mismatches, of the trials and of the re-check, wait for more seeds (below).
  std::vector<std::string> borderline;
  if (!cmp.all.ok) {
    if (!cmp.borderline_only || pike_ || extra_seeds_.empty()) {
      std::string reason = cmp.reason;
      std::string code = cmp.all.code;
      if (code == "nan_output" && !pike_) {
        hold_.shared();
        std::tie(code, reason) =
            diagnose_nan(ctx_, cand_job_, ref_outputs_, cmp, timeout_s_, engine_.settings_.device);
        hold_.release();
      } else if (cmp.all.borderline()) {
        reason += "; a handful of values just outside, like rounding noise, but PIKE's rule "
                  "(and borderline_trials = 0) allows none";
      }
      finish(cmp.all.status, code, reason);
      return false;
    }
    borderline.push_back(cmp.reason);
  }
  if (!recheck(borderline))
    return false;
  if (borderline.empty())
    return true;
  hold_.shared();
  auto more =
      check_more_seeds(ctx_, ref_job_, cand_job_, extra_seeds_, timeout_s_, {cfg_.atol, cfg_.rtol});
  hold_.release();
  if (!more.failure.reason.empty()) {
    auto& f = more.failure;
    finish(f.status, f.code,
           borderline.front() + "; re-checked on " + std::to_string(extra_seeds_.size())
               + " more input seeds: " + f.reason);
    return false;
  }
  v_.notes.push_back("borderline: " + borderline.front() + "; re-checked on "
                     + std::to_string(extra_seeds_.size())
                     + " more input seeds: " + std::to_string(more.borderline)
                     + " had a few values just outside as well, none beyond that, so it is "
                       "judged rounding noise (at most 4 values or 0.01 % of an output, each "
                       "within 2x the allowed difference)");
  return true;
}

bool evaluation::recheck(std::vector<std::string>& borderline) {
  // The post-timing re-check (harness: fresh values written into the timed input tensors, one
  // more call). Meaningless for a stateful task, whose answer depends on the number of calls
  // the timing made.
  if (ref_.stateful) {
    v_.notes.push_back("post-timing re-check skipped: the reference's state changes between "
                       "calls");
    return true;
  }
  if (!cand_.have_recheck || cand_.recheck.seed != recheck_seed_) {
    finish(vs::rejected, "recheck_skipped", "candidate runner skipped the post-timing re-check");
    return false;
  }
  if (cand_.recheck.inputs_mutated) {
    finish(vs::rejected, "mutated_inputs",
           "candidate mutated its inputs (post-timing re-check)" + mutation_cause());
    return false;
  }
  if (int32_t i = new_alias(cand_.recheck, ref_.recheck); i >= 0) {
    finish(vs::rejected, "output_aliases_input", alias_text(i, " (post-timing re-check)"));
    return false;
  }
  output_comparison again;
  try {
    again = compare_output_files(
        ref_recheck_, file_bytes::open(cand_.dir + "/out_recheck.pt", outputs_cap(ref_recheck_)),
        {cfg_.atol, cfg_.rtol});
  } catch (const std::exception& e) {
    finish(vs::runtime_error, "unreadable_outputs",
           std::string{"cannot compare outputs: "} + e.what());
    return false;
  }
  if (!again.ok && again.borderline() && !pike_ && !extra_seeds_.empty()) {
    borderline.push_back("post-timing re-check: " + again.reason);
  } else if (!again.ok) {
    finish(vs::rejected, "cached_result",
           "result cached across calls (or another path once timed): after timing, fresh inputs "
           "written into the timed tensors got a wrong answer: "
               + again.reason);
    return false;
  }
  return true;
}

// -- timing --------------------------------------------------------------------------------------

verdict evaluation::timing() {
  // The reference ended inside a block, or gave nothing to pair with: the task's failure.
  auto broken_reference = [&](const char* plain) {
    auto f = judge_process(ref_, timeout_s_);
    return reference_failed(
        ref_, {f.status, f.reason.empty() ? plain : f.reason + " while timed beside the candidate",
               "reference_failed"});
  };
  if (ref_broke_)
    return broken_reference("ended while timed beside the candidate");
  if (auto problem = timing_problem(cand_); !problem.empty())
    return finish(vs::rejected, "timing_invalid", "candidate runner " + problem);
  if (auto problem = outside_problem(); !problem.empty())
    return finish(vs::rejected, "timing_invalid", "candidate runner " + problem);
  if (ref_.samples_ms.empty())
    return broken_reference("no timing samples beside the candidate");
  if (auto problem = timing_problem(ref_); !problem.empty())
    return reference_failed(ref_, {vs::runtime_error, problem, "reference_failed"});
  if (paired_ && !ref_.gate_go)
    return reference_failed(
        ref_,
        {vs::runtime_error, "timed without the evaluator's go at its gate", "reference_failed"});
  engine_.references_timed_ += paired_ ? 1 : 0;
  v_.paired = paired_;

  // Both statistics, each from the blocks the two runners timed in turn.
  const auto ref_calls = per_call_blocks(ref_.samples_ms, ref_.blocks);
  const auto cand_calls = per_call_blocks(cand_.samples_ms, cand_.blocks);
  const auto ref_steady = steady_blocks(ref_.blocks);
  const auto cand_steady = steady_blocks(cand_.blocks);
  auto view = [&](const std::vector<std::vector<double>>& r,
                  const std::vector<std::vector<double>>& c, uint64_t salt) {
    timing_view out;
    out.reference = summarize(pooled(r));
    out.candidate = summarize(pooled(c));
    auto ratio = paired_ratio(r, c, seed_ ^ salt);
    out.speedup = ratio.ratio;
    out.speedup_lo = ratio.lo;
    out.speedup_hi = ratio.hi;
    return out;
  };
  v_.per_call = view(ref_calls, cand_calls, 0x5045u);
  v_.steady = view(ref_steady, cand_steady, 0x5354u);
  // The clocks of the window; a reference timed on its own, before, has its own.
  const double span = paired_ ? window_ms_ : cand_.timing_wall_ms;
  for (auto* s : {&v_.per_call.candidate, &v_.steady.candidate, &v_.per_call.reference,
                  &v_.steady.reference}) {
    const bool reference = s == &v_.per_call.reference || s == &v_.steady.reference;
    if (reference && !paired_) {
      s->sm_clock_mhz = ref_clock_.sm_clock_mhz;
      s->mem_clock_mhz = ref_clock_.mem_clock_mhz;
    } else if (window_clocks_) {
      *s = with_clocks(*s, *window_clocks_, span);
    }
  }

  if (window_clocks_)
    if (auto drift = drift_problem(window_clocks_->last(span)); !drift.empty())
      v_.notes.push_back("timing: " + drift + " during the timing window; the figures may be off");

  const timing_view* drive = &v_.per_call;
  v_.statistic = "per_call";
  if (pike_) {
    // PIKE reports do_bench's mean.
    v_.statistic = "pike_mean";
    v_.per_call.speedup = v_.per_call.candidate.mean_ms > 0
                              ? v_.per_call.reference.mean_ms / v_.per_call.candidate.mean_ms
                              : 0;
    v_.per_call.speedup_lo = v_.per_call.speedup_hi = v_.per_call.speedup;
  } else if (cfg_.timing_statistic == "steady") {
    if (v_.steady.candidate.n > 0 && v_.steady.reference.n > 0) {
      drive = &v_.steady;
      v_.statistic = "steady";
    } else {
      v_.notes.push_back("timing: no steady-state figure (its batches were no longer than the "
                         "flush alone); the per-call figure decides");
    }
  }
  v_.candidate = drive->candidate;
  v_.reference = drive->reference;
  v_.speedup = drive->speedup;
  v_.speedup_lo = drive->speedup_lo;
  v_.speedup_hi = drive->speedup_hi;
  update_reference_cache();

  if (v_.speedup > rules::suspicious_speedup) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "check: speedup above %.0fx (%.1fx); verify it is real",
                  rules::suspicious_speedup, v_.speedup);
    v_.notes.push_back(buf);
  }
  std::ostringstream why;
  why.precision(3);
  why << "correct on " << seeds_.size() << " trials, " << v_.candidate.median_ms << " ms vs "
      << v_.reference.median_ms << " ms";
  if (v_.statistic == "steady")
    why << " (steady state)";
  return finish(vs::correct, "ok", why.str());
}

std::string evaluation::outside_problem() {
  // Only a gated runner in kiln mode stamps its loop; one that was told to time and stamped
  // nothing at all dropped the stamps (or never ran the harness's loop).
  if (!cand_job_.gate || pike_)
    return {};
  const bool ref_stamped = paired_ && ref_job_.gate;
  if (ref_stamped) {
    // The trusted loop checked the same way: a reference that disagrees says the parent's
    // clock is unreliable here (a starved host), not that the candidate cheated.
    if (auto own = outside_clock_problem(ref_.stamps, ref_.samples_ms, ref_.blocks); !own.empty()) {
      spdlog::warn("evaluator {}: the reference's {}; the outside clock is not checked",
                   engine_.settings_.device, own);
      v_.notes.push_back("timing: not checked against the parent's clock (the reference's own "
                         "figures disagreed with it: a starved host?)");
      clock_doubt_ = "the reference's " + own;
      return {};
    }
  }
  auto check = check_outside_clock(cand_.stamps, cand_.samples_ms, cand_.blocks,
                                   ref_stamped ? &ref_.stamps : nullptr,
                                   ref_stamped ? &ref_.samples_ms : nullptr);
  auto& problem = check.problem;
  if (check.statistical)
    clock_doubt_ = "the candidate's " + problem;
  spdlog::debug("evaluator {}: outside clock: {} samples, {} batches at {:.3f} of the parent's "
                "span (reference {:.3f}); unreported per call {:.4f} ms (reference {:.4f} ms)",
                engine_.settings_.device, cand_.stamps.call_ms.size(), cand_.stamps.batch_ms.size(),
                batch_share(cand_.stamps, cand_.blocks),
                ref_stamped ? batch_share(ref_.stamps, ref_.blocks) : -1.0,
                unreported_ms(cand_.stamps, cand_.samples_ms),
                ref_stamped ? unreported_ms(ref_.stamps, ref_.samples_ms) : -1.0);
  spdlog::debug("evaluator {}: per-call loop as the runners saw it (ms, median): candidate "
                "{:.4f} before, {:.4f} sampled, {:.4f} after, {} core(s); reference {:.4f}, "
                "{:.4f}, {:.4f}, {} core(s)",
                engine_.settings_.device, cand_.loop_prepare_ms, cand_.loop_sample_ms,
                cand_.loop_after_ms, cand_.loop_cores, ref_.loop_prepare_ms, ref_.loop_sample_ms,
                ref_.loop_after_ms, ref_.loop_cores);
  return problem;
}

void evaluation::update_reference_cache() {
  // The cache is a hint (kiln baseline's figures, logs), never the denominator: the speedup
  // above came from the reference timed beside the candidate. A cached figure that disagrees
  // with this one by more than the rule allows is replaced.
  const auto key = engine_.reference_key_for(task_source_, "");
  const auto fresh = v_.per_call.reference;
  if (cached_ && cached_->median_ms > 0) {
    const double off = std::abs(fresh.median_ms / cached_->median_ms - 1);
    if (off > rules::reference_disagreement) {
      v_.notes.push_back("timing: the cached reference figure (" + ms_text(cached_->median_ms)
                         + " ms per call) was " + std::to_string(static_cast<int>(off * 100))
                         + " % off the reference timed beside this candidate ("
                         + ms_text(fresh.median_ms) + " ms) and was replaced");
      engine_.store_reference(key, fresh);
    }
    return;
  }
  engine_.store_reference(key, fresh);
}

} // namespace kiln
