// The evaluation procedure (docs/evaluation.md explains every rule):
//
//   static scan ─> draw seeds ─> reference runner ─> stash its outputs in memory
//        ─> candidate runner ─> nonce, harness violations ─> process outcomes ─> structure
//        ─> mutation, aliasing ─> libtorch comparison per trial ─> post-timing re-check
//        ─> timing sanity ─> correct (speedup = reference median / candidate median) + notes
//
// Both runners are fresh processes of gpu/harness/kiln_harness.py, started one after the other
// (never two timed things at once), with a scrubbed environment. The parent trusts the
// runners' files only as far as it must and derives every judgement itself.

#include "gpu/evaluate.hpp"
#include "gpu/json_text.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "gpu/compare.hpp"
#include "gpu/facts_cache.hpp"
#include "gpu/harness.hpp"
#include "gpu/judge.hpp"
#include "gpu/nvml.hpp"
#include "gpu/process.hpp"
#include "gpu/reference_cache.hpp"
#include "gpu/runner.hpp"
#include "gpu/scan.hpp"
#include "gpu/timing.hpp"

namespace kiln {

namespace {

namespace fs = std::filesystem;

double sum_of(const std::vector<double>& xs) {
  return std::accumulate(xs.begin(), xs.end(), 0.0);
}

/// Speedups above this are physically suspicious for most tasks (KernelBench flags them too):
/// a note asks a human to look, the verdict stands.
constexpr double suspicious_speedup = 10.0;

/// Gives `s` a device share of its own when it has none (one engine, one lane).
void ensure_share(eval_settings& s) {
  if (!s.share)
    s.share = std::make_shared<device_share>(s.cache_dir.empty() ? s.cfg.cache_dir : s.cache_dir);
}

} // namespace

std::vector<eval_settings> device_lanes(eval_settings base) {
  const int64_t lanes = base.device == "cpu" ? 1 : std::max<int64_t>(1, base.cfg.gpu_lanes);
  ensure_share(base);
  std::vector<eval_settings> out;
  for (int64_t i = 0; i < lanes; ++i) {
    out.push_back(base);
    if (i > 0)
      out.back().work_dir += "-lane" + std::to_string(i);
  }
  return out;
}

evaluation_engine::evaluation_engine(eval_settings settings) : settings_(std::move(settings)) {
  ensure_share(settings_);
  settings_.python = absolute_program(settings_.python);
  if (settings_.work_dir.empty())
    throw std::runtime_error("evaluator: empty work_dir");
  settings_.work_dir = fs::absolute(settings_.work_dir).lexically_normal().string();
  fs::create_directories(settings_.work_dir);
  harness_path_ = install_harness(settings_.work_dir);
  pool_ = std::make_unique<runner_pool>(
      runner_pool_launch(settings_, harness_path_),
      static_cast<size_t>(std::max<int64_t>(0, settings_.cfg.pool_size)));
  // Warm now: the interpreters import torch while the first job is still being prepared.
  pool_->refill();
}

evaluation_engine::~evaluation_engine() = default;
evaluation_engine::evaluation_engine(evaluation_engine&&) noexcept = default;
evaluation_engine& evaluation_engine::operator=(evaluation_engine&&) noexcept = default;

void evaluation_engine::attach(runner_context& ctx) {
  ctx.pool = pool_.get();
  ctx.health = &settings_.share->health;
}

std::optional<timing_stats> evaluation_engine::find_reference(const reference_key& key) {
  std::lock_guard<std::mutex> lock{settings_.share->references_mutex};
  return settings_.share->references.find(key);
}

void evaluation_engine::store_reference(const reference_key& key, const timing_stats& stats) {
  std::lock_guard<std::mutex> lock{settings_.share->references_mutex};
  settings_.share->references.store(key, stats);
}

verdict evaluation_engine::evaluate(const eval_job& job, uint64_t seed) {
  auto t0 = steady::now();
  verdict v;
  v.device = settings_.device;
  pool_refill_guard refill{*pool_}; // CPU: the next interpreters import between evaluations
  scratch_guard guard;
  guard.keep = settings_.keep_scratch;
  const auto& cfg = settings_.cfg;
  try {
    using vs = verdict_status;
    if (auto problem = check_health(); !problem.empty()) {
      v.status = vs::runtime_error;
      v.reason = problem;
      v.wall_ms = ms_since(t0);
      return v;
    }
    runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(cfg)};
    attach(ctx);
    if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device))
      throw std::runtime_error("unknown device " + settings_.device);
    ctx.scratch = make_scratch(settings_.work_dir, counter_);
    guard.dir = ctx.scratch;

    // The task as it was read when the run started (task_spec::source), not as the file on
    // disk may be now.
    auto task_source = job.task.source.empty() ? read_file(job.task.path) : job.task.source;
    auto task_path = ctx.scratch + "/task.py";
    auto candidate_path = ctx.scratch + "/candidate.py";
    write_file(task_path, task_source);
    write_file(candidate_path, job.code);

    // The static scan reads the candidate's text before any of it runs (gpu/scan.hpp).
    auto scan = scan_candidate(job.code);
    v.notes = scan.notes;
    if (!scan.rejections.empty()) {
      for (size_t i = 1; i < scan.rejections.size(); ++i)
        v.notes.push_back("also: " + scan.rejections[i].text());
      v.status = vs::rejected;
      v.code = scan_code(scan.rejections.front().rule);
      v.reason = scan.rejections.front().text() + ": " + scan_cause(v.code);
      v.wall_ms = ms_since(t0);
      return v;
    }

    // Fresh inputs and weights per evaluation: a candidate cannot learn the inputs it will be
    // judged on. PIKE mode pins them to PIKE's constants instead.
    const bool pike = cfg.mode == "pike";
    uint64_t weight_seed = 1;
    uint64_t recheck_seed = 1;
    std::vector<uint64_t> seeds;
    std::vector<uint64_t> extra_seeds; // for a borderline mismatch only
    if (pike) {
      seeds = {0};
    } else {
      // 63 bits: a seed must also fit a signed int64 wherever torch or a task stores one.
      std::mt19937_64 rng{seed};
      weight_seed = rng() >> 1;
      for (int64_t i = 0; i < std::max<int64_t>(1, cfg.trials); ++i)
        seeds.push_back(rng() >> 1);
      recheck_seed = rng() >> 1;
      for (int64_t i = 0; i < cfg.borderline_trials; ++i)
        extra_seeds.push_back(rng() >> 1);
    }
    const double timeout_s = job.timeout_s > 0 ? job.timeout_s : cfg.timeout_s;
    const auto ref_key = reference_key_for(task_source, "");
    auto fill_tails = [&v](const runner_report& r) {
      v.stdout_tail = tail_of_file(r.stdout_path, tail_bytes);
      v.stderr_tail = tail_of_file(r.stderr_path, tail_bytes);
    };
    auto finish = [&](vs status, std::string code, std::string reason) {
      v.status = status;
      v.code = std::move(code);
      v.reason = std::move(reason);
      v.wall_ms = ms_since(t0);
      return v;
    };
    auto unhealthy = [&] {
      return finish(vs::runtime_error, "device_unhealthy",
                    "device " + settings_.device + " is unhealthy: " + health_problem()
                        + " (a problem of the device, not of this candidate)");
    };
    // The device's lock (gpu/device_share.hpp): untimed work shares the device with the other
    // lanes' untimed work; a timing has it to itself. A pooled reference runner, like a
    // candidate's, runs its trials shared and takes the device whole at its gate, for the timing
    // alone; there the cache is asked again, and a reference that another lane timed meanwhile
    // is told to stop. Without a gate (no pool, PIKE mode) a reference to be timed holds
    // the device whole from the start, once the cache has been asked again under that hold.
    device_hold hold{settings_.share->lock};
    auto cached = find_reference(ref_key);
    const bool ref_gated = !cached && ctx.pool != nullptr && !pike;
    if (cached || ref_gated) {
      hold.shared();
    } else {
      hold.exclusive();
      cached = find_reference(ref_key);
      if (cached)
        hold.shared();
    }
    // Another lane's health check may have failed while this one waited for the device.
    if (!healthy())
      return unhealthy();
    bool time_reference = !cached;

    runner_job ref_job;
    ref_job.mode = "reference";
    ref_job.task_path = task_path;
    ref_job.dir = ctx.scratch + "/ref";
    ref_job.device = ctx.runner_device;
    ref_job.weight_seed = weight_seed;
    ref_job.seeds = seeds;
    ref_job.time = time_reference;
    ref_job.threads = ctx.threads;
    ref_job.pike = pike;
    ref_job.recheck = true;
    ref_job.recheck_seed = recheck_seed;
    ref_job.nonce = fresh_nonce();
    ref_job.gate = ref_gated;
    // Another lane's health check may fail while this one waits at a gate for the device: the
    // gate then says stop, and nothing is timed (or cached) on a device that failed it.
    bool unhealthy_at_gate = false;
    bool ref_gate_asked = false;
    clock_sampler ref_clocks{settings_.device};
    auto ref = run_runner(ctx, ref_job, timeout_s, [&](const std::string&) {
      if (ref_gate_asked)
        return false;
      ref_gate_asked = true;
      cached = find_reference(ref_key);
      if (!cached) {
        unhealthy_at_gate = !hold_for_timing(hold);
        if (!unhealthy_at_gate)
          cached = find_reference(ref_key);
      }
      if (cached || unhealthy_at_gate) {
        hold.shared(); // it still ends on the device
        time_reference = false;
        return false;
      }
      return true;
    });
    ref_clocks.stop();
    spdlog::debug("evaluator {}: reference runner {:.0f} ms ({})", settings_.device,
                  ref.proc.wall_ms, ref.phases);
    references_timed_ += time_reference ? 1 : 0;

    if (unhealthy_at_gate)
      return unhealthy();

    // A reference that fails is the task's problem, not the candidate's.
    auto ref_failure = judge_process(ref, timeout_s);
    if (ref_failure.reason.empty() && ref.trials.size() != seeds.size())
      ref_failure.reason = "reported " + std::to_string(ref.trials.size()) + " trials of "
                           + std::to_string(seeds.size());
    if (ref_failure.reason.empty() && time_reference && ref.samples_ms.empty())
      ref_failure.reason = "no timing samples";
    if (ref_failure.reason.empty() && ref_gated && time_reference && !ref.gate_go)
      ref_failure.reason = "timed without the evaluator's go at its gate";
    if (ref_failure.reason.empty() && ref.nonce != ref_job.nonce)
      ref_failure.reason = "result.json without this runner's nonce";
    if (ref_failure.reason.empty() && !ref.have_recheck)
      ref_failure.reason = "no re-check output";
    if (!ref_failure.reason.empty()) {
      fill_tails(ref);
      // kiln's own failure to start a runner says so itself; anything else is the task's.
      if (ref_failure.code == "runner_start")
        return finish(vs::runtime_error, "runner_start", "reference failed: " + ref_failure.reason);
      return finish(vs::runtime_error, "reference_failed",
                    "reference failed: " + ref_failure.reason
                        + " (a problem of the task or the interpreter, not of the candidate)");
    }
    timing_stats reference_stats =
        time_reference ? with_clocks(summarize(ref.samples_ms), ref_clocks, ref.timing_wall_ms)
                       : *cached;
    if (time_reference)
      store_reference(ref_key, reference_stats);
    // Released only once the timing is in the share: a lane waiting for the device must find it
    // there, not time the reference a second time.
    hold.release();

    // The reference's outputs leave the disk while the candidate runs, so the candidate cannot
    // read them or overwrite them: they are read into kiln's memory, then their files removed.
    std::vector<file_bytes> ref_outputs;
    for (size_t k = 0; k < seeds.size(); ++k)
      ref_outputs.push_back(file_bytes::open(ref.dir + "/out_" + std::to_string(k) + ".pt"));
    const file_bytes ref_recheck = file_bytes::open(ref.dir + "/out_recheck.pt");
    // Exactly equal outputs for different inputs: the task does not depend on its inputs, so any
    // constant passes it (PEERS (c) #10). The task is at fault; a note asks a human to look.
    // Equal bytes mean equal outputs; raw files that differ hold different values (the first
    // differing byte ends the check, for a real task one of the first); a torch.save archive
    // names its records after the file, so those are compared by value.
    bool all_equal = seeds.size() > 1;
    for (size_t k = 1; k < seeds.size() && all_equal; ++k) {
      if (ref_outputs[k].bytes() == ref_outputs[0].bytes())
        continue;
      try {
        all_equal = !is_raw_outputs(ref_outputs[0]) && !is_raw_outputs(ref_outputs[k])
                    && compare_output_files(ref_outputs[0], ref_outputs[k], {0, 0}).ok;
      } catch (const std::exception&) {
        all_equal = false; // unreadable: the comparison below will say so
      }
    }
    if (all_equal)
      v.notes.push_back("check: the reference's output does not depend on its inputs (equal on "
                        "every trial); the task cannot tell a constant from real work");
    fs::remove_all(ref.dir);

    runner_job cand_job = ref_job;
    cand_job.mode = "candidate";
    cand_job.candidate_path = candidate_path;
    cand_job.dir = ctx.scratch + "/cand";
    cand_job.time = true;
    cand_job.nonce = fresh_nonce();
    cand_job.inputs_on = ref.inputs_on; // the same values as the reference's, made the same way
    clock_sampler cand_clocks{settings_.device};
    // Trial outputs are compared as soon as the runner has written them (the gate), before it
    // times anything: a candidate whose outputs are wrong costs no timing.
    cand_job.gate = true;
    auto compare_trials = [&](const std::string& dir) {
      return compare_trial_files(ref_outputs, dir, seeds, {cfg.atol, cfg.rtol});
    };
    // Until the gate the candidate only runs untimed work, shared with the other lanes; the
    // gate lets go of the device while the parent compares, then takes it whole for the
    // timing and the re-check after it. Without a gate (no pool, PIKE mode) the
    // candidate has the device to itself from the start. The gate answers once: a second
    // `trials` (only a candidate that found the socket can send one) gets `stop`.
    const bool gated = ctx.pool != nullptr && !pike;
    if (gated)
      hold.shared();
    else
      hold.exclusive();
    bool gate_asked = false;
    auto cand = run_runner(ctx, cand_job, timeout_s, [&](const std::string& dir) {
      if (gate_asked)
        return false;
      gate_asked = true;
      if (gated)
        hold.release();
      const auto t_gate = std::chrono::steady_clock::now();
      bool go = false;
      try {
        // A borderline mismatch is timed too: more seeds decide it after the run.
        const auto c = compare_trials(dir);
        go = c.all.ok || (c.borderline_only && !pike && !extra_seeds.empty());
      } catch (const std::exception&) {
        // unreadable: not timed; the comparison after the run says why
      }
      spdlog::debug("evaluator {}: comparisons at the gate {:.0f} ms", settings_.device,
                    ms_since(t_gate));
      // Stopped, the runner still ends (its CUDA context too) on the device: shared, so that
      // no other lane times beside it.
      if (go) {
        go = hold_for_timing(hold);
        unhealthy_at_gate = !go;
      } else if (gated) {
        hold.shared();
      }
      return go;
    });
    hold.release();
    cand_clocks.stop();
    spdlog::debug("evaluator {}: candidate runner {:.0f} ms ({})", settings_.device,
                  cand.proc.wall_ms, cand.phases);
    fill_tails(cand);
    if (unhealthy_at_gate)
      return unhealthy();
    if (cand.model_class == "Model")
      v.notes.push_back("the candidate defines no class ModelNew: its class Model was judged (as "
                        "PIKE's evaluator does)");

    // Integrity first: a forged result.json or a rule the harness saw broken outranks how the
    // process ended (the harness stops the candidate at the first violation).
    if (cand.have_result && cand.nonce != cand_job.nonce)
      return finish(vs::rejected, "forged_result",
                    "result.json was not written by the harness (wrong nonce): the candidate "
                    "wrote its own");
    if (cand.have_result && !cand.violations.empty()) {
      auto [code, cause] = violation_code(cand.violations.front());
      return finish(vs::rejected, code, "candidate " + cand.violations.front() + cause);
    }
    // Samples the parent never said go for were taken beside other lanes' work: the candidate
    // got past the harness's gate (replaced it, say) to time itself.
    if (gated && !cand.gate_go && !cand.samples_ms.empty())
      return finish(vs::rejected, "timed_without_go",
                    "candidate was timed without the evaluator's go: it got past the gate after "
                    "its trials");
    if (auto f = judge_process(cand, timeout_s); !f.reason.empty())
      return finish(f.status, f.code, f.reason);
    if (auto problem = judge_runs(cand, ref, seeds); !problem.reason.empty())
      return finish(problem.status, problem.code, problem.reason);
    for (size_t k = 0; k < seeds.size(); ++k)
      if (int32_t i = new_alias(cand.trials[k], ref.trials[k]); i >= 0)
        return finish(vs::rejected, "output_aliases_input", alias_text(i, ""));

    // The verdict compares the files as they are now, whatever the gate saw: the gate only
    // decides whether to time, and anyone holding the runner's socket could have rung it early.
    if (cand.gate_stopped)
      v.notes.push_back("not timed: its outputs were wrong");
    trial_comparisons cmp;
    const auto t_compare = std::chrono::steady_clock::now();
    try {
      cmp = compare_trials(cand.dir);
    } catch (const std::exception& e) {
      return finish(vs::runtime_error, "unreadable_outputs",
                    std::string{"cannot compare outputs: "} + e.what());
    }
    spdlog::debug("evaluator {}: comparisons {:.0f} ms", settings_.device, ms_since(t_compare));
    v.max_abs_diff = cmp.all.max_abs_diff;
    v.max_rel_diff = cmp.all.max_rel_diff;
    // Borderline mismatches, of the trials and of the re-check, wait for more seeds (below).
    std::vector<std::string> borderline;
    if (!cmp.all.ok) {
      if (!cmp.borderline_only || pike || extra_seeds.empty()) {
        std::string reason = cmp.reason;
        std::string code = cmp.all.code;
        if (code == "nan_output" && !pike) {
          hold.shared();
          std::tie(code, reason) =
              diagnose_nan(ctx, cand_job, ref_outputs, cmp, timeout_s, settings_.device);
          hold.release();
        } else if (cmp.all.borderline()) {
          reason += "; a handful of values just outside, like rounding noise, but PIKE's rule "
                    "(and borderline_trials = 0) allows none";
        }
        return finish(cmp.all.status, code, reason);
      }
      borderline.push_back(cmp.reason);
    }

    // The post-timing re-check (harness: fresh values written into the timed input tensors,
    // one more call). Meaningless for a stateful task, whose answer depends on the number of
    // calls the timing made.
    if (ref.stateful) {
      v.notes.push_back("post-timing re-check skipped: the reference's state changes between "
                        "calls");
    } else {
      if (!cand.have_recheck || cand.recheck.seed != recheck_seed)
        return finish(vs::rejected, "recheck_skipped",
                      "candidate runner skipped the post-timing re-check");
      if (cand.recheck.inputs_mutated)
        return finish(vs::rejected, "mutated_inputs",
                      "candidate mutated its inputs (post-timing re-check)" + mutation_cause());
      if (int32_t i = new_alias(cand.recheck, ref.recheck); i >= 0)
        return finish(vs::rejected, "output_aliases_input",
                      alias_text(i, " (post-timing re-check)"));
      output_comparison again;
      try {
        again = compare_output_files(
            ref_recheck, file_bytes::open(cand.dir + "/out_recheck.pt", outputs_cap(ref_recheck)),
            {cfg.atol, cfg.rtol});
      } catch (const std::exception& e) {
        return finish(vs::runtime_error, "unreadable_outputs",
                      std::string{"cannot compare outputs: "} + e.what());
      }
      if (!again.ok && again.borderline() && !pike && !extra_seeds.empty())
        borderline.push_back("post-timing re-check: " + again.reason);
      else if (!again.ok)
        return finish(vs::rejected, "cached_result",
                      "result cached across calls (or another path once timed): after timing, "
                      "fresh inputs written into the timed tensors got a wrong answer: "
                          + again.reason);
    }

    if (!borderline.empty()) {
      hold.shared();
      auto more =
          check_more_seeds(ctx, ref_job, cand_job, extra_seeds, timeout_s, {cfg.atol, cfg.rtol});
      hold.release();
      if (!more.failure.reason.empty()) {
        auto& f = more.failure;
        return finish(f.status, f.code,
                      borderline.front() + "; re-checked on " + std::to_string(extra_seeds.size())
                          + " more input seeds: " + f.reason);
      }
      v.notes.push_back("borderline: " + borderline.front() + "; re-checked on "
                        + std::to_string(extra_seeds.size())
                        + " more input seeds: " + std::to_string(more.borderline)
                        + " had a few values just outside as well, none beyond that, so it is "
                          "judged rounding noise (at most 4 values or 0.01 % of an output, each "
                          "within 2x the allowed difference)");
    }

    // Timing sanity: samples must be real durations, and a process cannot have spent more
    // time in calls than it lived (a patched clock or event would show up here).
    if (cand.samples_ms.empty())
      return finish(vs::rejected, "timing_invalid", "candidate runner reported no timing samples");
    for (double s : cand.samples_ms)
      if (!std::isfinite(s) || s <= 0)
        return finish(vs::rejected, "timing_invalid",
                      "candidate runner reported an invalid timing sample");
    const double in_process = sum_of(cand.samples_ms);
    if (in_process > cand.proc.wall_ms
        || (cand.timing_wall_ms > 0 && in_process > cand.timing_wall_ms * 1.01 + 1.0))
      return finish(vs::rejected, "timing_invalid",
                    "in-process timings exceed the wall clock: the candidate changed a clock or "
                    "the timing's own records");

    v.candidate = with_clocks(summarize(cand.samples_ms), cand_clocks, cand.timing_wall_ms);
    v.reference = reference_stats;
    // PIKE reports do_bench's mean; kiln the median, which one slow call cannot move.
    const double ref_t = pike ? v.reference.mean_ms : v.reference.median_ms;
    const double cand_t = pike ? v.candidate.mean_ms : v.candidate.median_ms;
    v.speedup = cand_t > 0 ? ref_t / cand_t : 0;
    if (v.speedup > suspicious_speedup) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "check: speedup above %.0fx (%.1fx); verify it is real",
                    suspicious_speedup, v.speedup);
      v.notes.push_back(buf);
    }
    std::ostringstream why;
    why.precision(3);
    why << "correct on " << seeds.size() << " trials, " << v.candidate.median_ms << " ms vs "
        << v.reference.median_ms << " ms";
    return finish(vs::correct, "ok", why.str());
  } catch (const std::exception& e) {
    v.status = verdict_status::runtime_error;
    v.code = "evaluator_error";
    v.reason = std::string{"evaluator: "} + e.what() + " (a problem of kiln, not of the candidate)";
  } catch (...) {
    v.status = verdict_status::runtime_error;
    v.code = "evaluator_error";
    v.reason = "evaluator: unknown exception (a problem of kiln, not of the candidate)";
  }
  v.wall_ms = ms_since(t0);
  spdlog::error("evaluator {}: {}: {}", settings_.device, job.candidate_id, v.reason);
  return v;
}

runner_facts evaluation_engine::facts() {
  if (have_facts_)
    return facts_;
  runner_facts out;
  out.device = settings_.device;
  out.python = settings_.python;
  // The CPU's facts may come from disk (gpu/facts_cache.hpp): a one-shot `kiln eval` then
  // starts no Python beside the pool's.
  std::string facts_dir;
  std::string identity;
  std::error_code ec;
  const auto resolved_python = fs::canonical(settings_.python, ec).string();
  if (settings_.device == "cpu") {
    // Beside the reference timings these facts key (empty where those live in memory only).
    if (const auto& references = settings_.share->references.dir(); !references.empty())
      facts_dir = (fs::path{references}.parent_path() / "facts").string();
    identity = "python=" + settings_.python + " resolved=" + resolved_python
               + " device=cpu threads=" + std::to_string(runner_threads(settings_.cfg))
               + " sandbox=" + settings_.cfg.sandbox
               + " memory_limit_gb=" + std::to_string(settings_.cfg.memory_limit_gb)
               + " harness=" + stable_digest(harness_identity()) + " " + cpu_host_identity();
    if (auto cached = load_facts(facts_dir, identity)) {
      facts_ = *cached;
      facts_.device = settings_.device;
      have_facts_ = true;
      spdlog::debug("evaluator {}: facts from {}", settings_.device, facts_dir);
      return facts_;
    }
  }
  // Never kept, even with keep_scratch: it holds nothing about a candidate, and evaluate() may
  // run it (for the reference cache's key) inside an evaluation someone is inspecting.
  scratch_guard guard;
  try {
    runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(settings_.cfg)};
    if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device))
      throw std::runtime_error("unknown device " + settings_.device);
    ctx.scratch = make_scratch(settings_.work_dir, counter_);
    guard.dir = ctx.scratch;
    runner_job job;
    job.mode = "facts";
    job.dir = ctx.scratch + "/facts";
    job.device = ctx.runner_device;
    job.threads = ctx.threads;
    device_hold hold{settings_.share->lock};
    hold.shared();
    auto r = run_runner(ctx, job, facts_timeout_s);
    hold.release();
    if (auto f = judge_process(r, facts_timeout_s); !f.reason.empty()) {
      // Not cached: the next call tries again (the interpreter may have been fixed).
      spdlog::error("evaluator {}: the runner cannot report its facts: {}; stderr: {}",
                    settings_.device, f.reason, tail_of_file(r.stderr_path, 500));
      return out;
    }
    out = r.facts;
    out.device = settings_.device;
    if (out.python.empty())
      out.python = settings_.python;
    facts_ = out;
    have_facts_ = true;
    // Only an interpreter kiln starts directly: a wrapper script or a version manager's shim
    // can pick another Python behind the same path, which no stamp of the real one shows.
    if (!facts_dir.empty() && !r.facts_executable.empty() && resolved_python == r.facts_executable)
      store_facts(facts_dir, identity, out, r.facts_stamps);
    spdlog::info("evaluator {}: {} python {} torch {} cuda {} triton {} threads {}",
                 settings_.device, out.device_name, out.python_version, out.torch_version, out.cuda,
                 out.triton, out.cpu_threads);
  } catch (const std::exception& e) {
    spdlog::error("evaluator {}: facts: {}", settings_.device, e.what());
  }
  return out;
}

} // namespace kiln
