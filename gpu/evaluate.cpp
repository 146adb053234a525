// The evaluation procedure (docs/evaluation.md explains every rule):
//
//   draw seeds ─> reference runner ─> stash its outputs in memory ─> candidate runner
//        ─> process outcomes ─> structure ─> mutation ─> libtorch comparison per trial
//        ─> timing sanity ─> correct (speedup = reference median / candidate median)
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
#include <vector>

#include <unistd.h>

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "gpu/compare.hpp"
#include "gpu/harness.hpp"
#include "gpu/process.hpp"
#include "gpu/runner.hpp"
#include "gpu/timing.hpp"

namespace kiln {

namespace {

namespace fs = std::filesystem;

double sum_of(const std::vector<double>& xs) {
  return std::accumulate(xs.begin(), xs.end(), 0.0);
}

} // namespace

evaluation_engine::evaluation_engine(eval_settings settings) : settings_(std::move(settings)) {
  settings_.python = absolute_program(settings_.python);
  if (settings_.work_dir.empty())
    throw std::runtime_error("evaluator: empty work_dir");
  settings_.work_dir = fs::absolute(settings_.work_dir).lexically_normal().string();
  fs::create_directories(settings_.work_dir);
  fs::create_directories(settings_.work_dir + "/cache/torch_extensions");
  fs::create_directories(settings_.work_dir + "/cache/triton");
  harness_path_ = install_harness(settings_.work_dir);
}

verdict evaluation_engine::evaluate(const eval_job& job, uint64_t seed) {
  auto t0 = steady::now();
  verdict v;
  v.device = settings_.device;
  scratch_guard guard;
  guard.keep = settings_.keep_scratch;
  const auto& cfg = settings_.cfg;
  try {
    using vs = verdict_status;
    runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(cfg)};
    if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device))
      throw std::runtime_error("unknown device " + settings_.device);
    ctx.scratch = make_scratch(settings_.work_dir, counter_);
    guard.dir = ctx.scratch;
    fs::create_directories(ctx.scratch + "/tmp");

    // The task as it was read when the run started (task_spec::source), not as the file on
    // disk may be now.
    auto task_source = job.task.source.empty() ? read_file(job.task.path) : job.task.source;
    auto task_path = ctx.scratch + "/task.py";
    auto candidate_path = ctx.scratch + "/candidate.py";
    write_file(task_path, task_source);
    write_file(candidate_path, job.code);

    // Fresh inputs and weights per evaluation: a candidate cannot learn the inputs it will be
    // judged on. PIKE mode pins them to PIKE's constants instead.
    const bool pike = cfg.mode == "pike";
    uint64_t weight_seed = 1;
    std::vector<uint64_t> seeds;
    if (pike) {
      seeds = {0};
    } else {
      // 63 bits: a seed must also fit a signed int64 wherever torch or a task stores one.
      std::mt19937_64 rng{seed};
      weight_seed = rng() >> 1;
      for (int64_t i = 0; i < std::max<int64_t>(1, cfg.trials); ++i)
        seeds.push_back(rng() >> 1);
    }
    const double timeout_s = job.timeout_s > 0 ? job.timeout_s : cfg.timeout_s;
    const auto ref_key =
        std::to_string(std::hash<std::string>{}(task_source)) + "@" + settings_.device;
    const auto cached = reference_times_.find(ref_key);
    const bool time_reference = cached == reference_times_.end();

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
    auto ref = run_runner(ctx, ref_job, timeout_s);

    auto fill_tails = [&v](const runner_report& r) {
      v.stdout_tail = tail_of_file(r.stdout_path, tail_bytes);
      v.stderr_tail = tail_of_file(r.stderr_path, tail_bytes);
    };
    auto finish = [&](vs status, std::string reason) {
      v.status = status;
      v.reason = std::move(reason);
      v.wall_ms = ms_since(t0);
      return v;
    };

    // A reference that fails is the task's problem, not the candidate's.
    auto ref_failure = judge_process(ref, timeout_s);
    if (ref_failure.reason.empty() && ref.trials.size() != seeds.size())
      ref_failure.reason = "reported " + std::to_string(ref.trials.size()) + " trials of "
                           + std::to_string(seeds.size());
    if (ref_failure.reason.empty() && time_reference && ref.samples_ms.empty())
      ref_failure.reason = "no timing samples";
    if (!ref_failure.reason.empty()) {
      fill_tails(ref);
      return finish(vs::runtime_error, "reference failed: " + ref_failure.reason);
    }
    timing_stats reference_stats = time_reference ? summarize(ref.samples_ms) : cached->second;
    if (time_reference)
      reference_times_[ref_key] = reference_stats;

    // The reference's outputs leave the disk while the candidate runs, so the candidate cannot
    // read them or overwrite them; they come back for the comparison.
    std::vector<std::string> ref_outputs;
    for (size_t k = 0; k < seeds.size(); ++k)
      ref_outputs.push_back(read_file(ref_job.dir + "/out_" + std::to_string(k) + ".pt"));
    fs::remove_all(ref_job.dir);

    runner_job cand_job = ref_job;
    cand_job.mode = "candidate";
    cand_job.candidate_path = candidate_path;
    cand_job.dir = ctx.scratch + "/cand";
    cand_job.time = true;
    auto cand = run_runner(ctx, cand_job, timeout_s);
    fill_tails(cand);

    if (auto f = judge_process(cand, timeout_s); !f.reason.empty())
      return finish(f.status, f.reason);
    if (cand.trials.size() != seeds.size())
      return finish(vs::rejected, "candidate runner reported " + std::to_string(cand.trials.size())
                                      + " trials of " + std::to_string(seeds.size()));
    for (size_t k = 0; k < seeds.size(); ++k)
      if (cand.trials[k].seed != seeds[k])
        return finish(vs::rejected, "candidate runner used other input seeds");
    if (cand.structure != ref.structure)
      return finish(vs::rejected,
                    "output structure " + cand.structure + ", expected " + ref.structure);
    for (const auto& t : cand.trials)
      if (t.inputs_mutated)
        return finish(vs::rejected, "candidate mutated its inputs");

    // The comparison reads files in a folder made after the candidate is gone; file names are
    // the parent's, never taken from the runner's report.
    auto cmp_dir = ctx.scratch + "/cmp";
    fs::create_directories(cmp_dir);
    output_comparison cmp;
    for (size_t k = 0; k < seeds.size(); ++k) {
      auto ref_file = cmp_dir + "/ref_" + std::to_string(k) + ".pt";
      write_file(ref_file, ref_outputs[k]);
      auto cand_file = cand_job.dir + "/out_" + std::to_string(k) + ".pt";
      output_comparison trial;
      try {
        trial = compare_outputs(ref_file, cand_file, {cfg.atol, cfg.rtol});
      } catch (const std::exception& e) {
        return finish(vs::runtime_error, std::string{"cannot compare outputs: "} + e.what());
      }
      if (k == 0)
        cmp = trial;
      else
        merge_comparison(cmp, trial);
    }
    v.max_abs_diff = cmp.max_abs_diff;
    v.max_rel_diff = cmp.max_rel_diff;
    if (!cmp.ok)
      return finish(cmp.status, cmp.reason);

    // Timing sanity: samples must be real durations, and a process cannot have spent more
    // time in calls than it lived (a patched clock or event would show up here).
    if (cand.samples_ms.empty())
      return finish(vs::rejected, "candidate runner reported no timing samples");
    for (double s : cand.samples_ms)
      if (!std::isfinite(s) || s <= 0)
        return finish(vs::rejected, "candidate runner reported an invalid timing sample");
    const double in_process = sum_of(cand.samples_ms);
    if (in_process > cand.proc.wall_ms
        || (cand.timing_wall_ms > 0 && in_process > cand.timing_wall_ms * 1.01 + 1.0))
      return finish(vs::rejected, "in-process timings exceed the wall clock");

    v.candidate = summarize(cand.samples_ms);
    v.reference = reference_stats;
    // PIKE reports do_bench's mean; kiln the median, which one slow call cannot move.
    const double ref_t = pike ? v.reference.mean_ms : v.reference.median_ms;
    const double cand_t = pike ? v.candidate.mean_ms : v.candidate.median_ms;
    v.speedup = cand_t > 0 ? ref_t / cand_t : 0;
    std::ostringstream why;
    why.precision(3);
    why << "correct on " << seeds.size() << " trials, " << v.candidate.median_ms << " ms vs "
        << v.reference.median_ms << " ms";
    return finish(vs::correct, why.str());
  } catch (const std::exception& e) {
    v.status = verdict_status::runtime_error;
    v.reason = std::string{"evaluator: "} + e.what();
  } catch (...) {
    v.status = verdict_status::runtime_error;
    v.reason = "evaluator: unknown exception";
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
  scratch_guard guard;
  guard.keep = settings_.keep_scratch;
  try {
    runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(settings_.cfg)};
    if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device))
      throw std::runtime_error("unknown device " + settings_.device);
    ctx.scratch = make_scratch(settings_.work_dir, counter_);
    guard.dir = ctx.scratch;
    fs::create_directories(ctx.scratch + "/tmp");
    runner_job job;
    job.mode = "facts";
    job.dir = ctx.scratch + "/facts";
    job.device = ctx.runner_device;
    job.threads = ctx.threads;
    auto r = run_runner(ctx, job, facts_timeout_s);
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
    spdlog::info("evaluator {}: {} python {} torch {} cuda {} triton {} threads {}",
                 settings_.device, out.device_name, out.python_version, out.torch_version, out.cuda,
                 out.triton, out.cpu_threads);
  } catch (const std::exception& e) {
    spdlog::error("evaluator {}: facts: {}", settings_.device, e.what());
  }
  return out;
}

} // namespace kiln
