// Device health (see evaluate.hpp): after a runner ended badly, a fresh runner runs a small
// kernel before the device gets another job.

#include "gpu/evaluate.hpp"
#include "gpu/runner.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace kiln {

namespace {

/// A health job allocates a few MB, runs one kernel and synchronizes; on a GPU a fresh
/// process also creates its CUDA context, which takes seconds, not minutes.
constexpr double health_timeout_s = 120;

} // namespace

bool evaluation_engine::healthy() const {
  return health_->healthy;
}

std::string evaluation_engine::health_problem() const {
  return health_->problem;
}

std::string evaluation_engine::check_health() {
  auto& h = *health_;
  auto unhealthy = [&] { return "device " + settings_.device + " is unhealthy: " + h.problem; };
  if (!h.healthy)
    return unhealthy();
  if (!h.suspect)
    return {};
  h.suspect = false;
  runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(settings_.cfg)};
  attach(ctx);
  if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device))
    return {}; // evaluate() reports the unknown device itself
  runner_job job;
  job.mode = "health";
  job.device = ctx.runner_device;
  job.threads = ctx.threads;
  auto r = run_runner(ctx, job, health_timeout_s);
  auto f = judge_process(r, health_timeout_s);
  if (f.reason.empty()) {
    spdlog::info("evaluator {}: healthy after {}", settings_.device, h.suspect_reason);
    return {};
  }
  // Kept until the engine is made again (a restart of the evaluator): a device that failed
  // once is not trusted with timings, and a human should look at it.
  h.healthy = false;
  h.problem = "health check after " + h.suspect_reason + " failed: " + f.reason;
  if (auto err = tail_of_file(r.stderr_path, 300); !err.empty()) {
    std::replace(err.begin(), err.end(), '\n', ' ');
    h.problem += " (stderr: " + err + ")";
  }
  spdlog::error("evaluator {}: {}", settings_.device, unhealthy());
  return unhealthy();
}

} // namespace kiln
