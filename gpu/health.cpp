// Device health (see evaluate.hpp): after a runner ended badly, a fresh runner runs a small
// kernel before the device gets another job.

#include "gpu/evaluate.hpp"
#include "gpu/runner.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace kiln {

using rules::health_timeout_s;

bool evaluation_engine::healthy() const {
  std::lock_guard<std::mutex> lock{settings_.share->health.mutex};
  return settings_.share->health.healthy;
}

bool evaluation_engine::hold_for_timing(device_hold& hold) {
  hold.exclusive();
  if (healthy())
    return true;
  hold.shared();
  return false;
}

std::string evaluation_engine::health_problem() const {
  std::lock_guard<std::mutex> lock{settings_.share->health.mutex};
  return settings_.share->health.problem;
}

std::string evaluation_engine::check_health() {
  auto& h = settings_.share->health;
  auto unhealthy = [&] { return "device " + settings_.device + " is unhealthy: " + h.problem; };
  // The check has the device to itself: no other lane's runner starts on a device that may
  // be broken, and none is running while the small kernel decides.
  device_hold hold{settings_.share->lock};
  std::unique_lock<std::mutex> lock{h.mutex};
  if (!h.healthy)
    return unhealthy();
  if (!h.suspect)
    return {};
  lock.unlock();
  hold.exclusive();
  lock.lock();
  if (!h.healthy)
    return unhealthy(); // another lane's check failed meanwhile
  if (!h.suspect)
    return {}; // or it passed
  // `suspect` stays set until the check has passed: a lane that asks meanwhile waits for the
  // device above and then reads the outcome, instead of going on to a device about to fail.
  std::string suspect_reason = h.suspect_reason;
  lock.unlock();
  std::string problem;
  try {
    runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(settings_.cfg)};
    attach(ctx);
    if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device)) {
      std::lock_guard<std::mutex> guard{h.mutex};
      h.suspect = false; // nothing to check: evaluate() reports the unknown device itself
      return {};
    }
    runner_job job;
    job.mode = "health";
    job.device = ctx.runner_device;
    job.threads = ctx.threads;
    auto r = run_runner(ctx, job, health_timeout_s);
    auto f = judge_process(r, health_timeout_s);
    if (f.reason.empty()) {
      lock.lock();
      h.suspect = false;
      lock.unlock();
      spdlog::info("evaluator {}: healthy after {}", settings_.device, suspect_reason);
      return {};
    }
    problem = "health check after " + suspect_reason + " failed: " + f.reason;
    if (auto err = tail_of_file(r.stderr_path, 300); !err.empty()) {
      std::replace(err.begin(), err.end(), '\n', ' ');
      problem += " (stderr: " + err + ")";
    }
  } catch (const std::exception& e) {
    // A check that cannot run (no disk for its folder, say) has not shown the device works.
    problem = "health check after " + suspect_reason + " could not run: " + e.what();
  }
  // Kept for as long as the device's share lives (the daemon's run): a device that failed once
  // is not trusted with timings by any lane, and a human should look at it.
  lock.lock();
  h.healthy = false;
  h.problem = problem;
  auto answer = unhealthy();
  lock.unlock();
  spdlog::error("evaluator {}: {}", settings_.device, answer);
  return answer;
}

} // namespace kiln
