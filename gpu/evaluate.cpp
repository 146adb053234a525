// The evaluation engine of one device: its lanes, its runner pool, the reference cache and the
// facts of its runners. One evaluation's stages are in gpu/evaluation.cpp.

#include "gpu/evaluate.hpp"

#include "config/secrets.hpp"
#include "gpu/evaluation.hpp"
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

namespace {

// A verdict's text is the candidate's to shape: what it prints, raises or makes a build say
// reaches the log, the archive and the error fixer's prompt. A secret it found goes no further.
verdict redacted(verdict v) {
  v.reason = secrets::clean(std::move(v.reason));
  v.stdout_tail = secrets::clean(std::move(v.stdout_tail));
  v.stderr_tail = secrets::clean(std::move(v.stderr_tail));
  for (auto& note : v.notes)
    note = secrets::clean(std::move(note));
  return v;
}

} // namespace

verdict evaluation_engine::evaluate(const eval_job& job, uint64_t seed) {
  std::string doubt;
  auto once = [&]() -> verdict {
    pool_refill_guard refill{*pool_}; // CPU: the next interpreters import between evaluations
    evaluation e{*this, job, seed};
    try {
      auto v = e.run();
      doubt = e.clock_doubt();
      return redacted(std::move(v));
    } catch (const std::exception& ex) {
      auto& v = e.partial();
      v.status = verdict_status::runtime_error;
      v.code = "evaluator_error";
      v.reason =
          std::string{"evaluator: "} + ex.what() + " (a problem of kiln, not of the candidate)";
    } catch (...) {
      auto& v = e.partial();
      v.status = verdict_status::runtime_error;
      v.code = "evaluator_error";
      v.reason = "evaluator: unknown exception (a problem of kiln, not of the candidate)";
    }
    doubt.clear();
    auto v = redacted(e.partial());
    spdlog::error("evaluator {}: {}: {}", settings_.device, job.candidate_id, v.reason);
    return v;
  };
  auto v = once();
  if (doubt.empty())
    return v;
  // A disagreement of durations alone may be the host's (a stall of the parent or of the
  // runner's core, seen on a GPU machine for honest candidates in 3 of 78 timings): one more
  // measurement, from fresh runners, decides. A rewritten record disagrees every time.
  const auto first = secrets::clean(doubt);
  spdlog::info("evaluator {}: {}: the parent's clock doubted the timing ({}); measuring again",
               settings_.device, job.candidate_id, first);
  v = once();
  v.notes.push_back("timing: measured twice (the first time, " + first + ")");
  if (!doubt.empty() && v.status == verdict_status::rejected)
    v.reason += " (the first measurement disagreed too)";
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
