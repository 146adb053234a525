// Timing a task's reference by itself (`kiln baseline`), and the key under which evaluations
// cache reference timings (see evaluate.hpp and reference_cache.hpp).

#include "gpu/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include <spdlog/spdlog.h>

#include "gpu/nvml.hpp"
#include "gpu/quiet_host.hpp"
#include "gpu/runner.hpp"
#include "gpu/timing.hpp"

namespace kiln {

namespace fs = std::filesystem;

reference_key evaluation_engine::reference_key_for(const std::string& task_source,
                                                   const std::string& compile_mode) {
  auto f = facts(); // cached after the first success; an empty one leaves the key incomplete
  reference_key k;
  k.task_source = task_source;
  k.device_name = f.device_name;
  k.capability = f.capability;
  k.torch_version = f.torch_version;
  k.python_version = f.python_version;
  k.settings = timing_settings_text(settings_.cfg, runner_threads(settings_.cfg), compile_mode);
  k.harness = harness_identity();
  return k;
}

reference_timing evaluation_engine::time_reference(const task_spec& task,
                                                   const std::string& compile_mode) {
  reference_timing out;
  scratch_guard guard;
  guard.keep = settings_.keep_scratch;
  const auto& cfg = settings_.cfg;
  try {
    if (!compile_mode.empty()) {
      auto f = facts();
      if (!f.torch_version.empty() && !f.compile) {
        out.available = false;
        out.reason = "torch " + f.torch_version + " has no torch.compile";
        return out;
      }
    }
    runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(cfg)};
    attach(ctx);
    if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device))
      throw std::runtime_error("unknown device " + settings_.device);
    ctx.scratch = make_scratch(settings_.work_dir, counter_);
    guard.dir = ctx.scratch;
    auto task_source = task.source.empty() ? read_file(task.path) : task.source;
    auto task_path = ctx.scratch + "/task.py";
    write_file(task_path, task_source);

    // PIKE's constant seeds: a baseline is one fixed measurement, comparable across runs.
    runner_job job;
    job.mode = "reference";
    job.task_path = task_path;
    job.dir = ctx.scratch + "/ref";
    job.device = ctx.runner_device;
    job.weight_seed = 1;
    job.seeds = {0};
    job.time = true;
    job.threads = ctx.threads;
    job.pike = cfg.mode == "pike";
    job.compile_mode = compile_mode;
    // max-autotune compiles and benchmarks many kernels before the first call returns.
    const double timeout_s =
        compile_mode.empty() ? cfg.timeout_s : std::max(cfg.timeout_s, cfg.compile_timeout_s);
    // The key asks for the runner's facts, which take the device shared: before the hold.
    const auto ref_key = reference_key_for(task_source, "");
    // Timed: the device to itself, until the timing is in the share (a lane waiting for the
    // device then finds it there).
    device_hold hold{settings_.share->lock};
    hold.exclusive();
    clock_sampler clocks{settings_.device};
    // The whole run is timed (no gate): the host stays quiet from its start to its end.
    configure_quiet_host(quiet_host_settings_from(cfg));
    std::optional<quiet_window> quiet;
    ctx.on_start = [&](pid_t pid) { quiet.emplace(std::vector<pid_t>{pid}, settings_.device); };
    auto r = run_runner(ctx, job, timeout_s);
    clocks.stop();
    if (quiet) {
      quiet->close();
      if (auto note = quiet->note(); !note.empty()) {
        spdlog::warn("evaluator {}: reference of {}: {}", settings_.device, task.name, note);
        out.notes.push_back(note);
      }
      quiet.reset();
    }
    if (auto f = judge_process(r, timeout_s); !f.reason.empty()) {
      out.reason = f.reason;
      return out;
    }
    if (r.samples_ms.empty()) {
      out.reason = "the runner reported no timing samples";
      return out;
    }
    for (double s : r.samples_ms)
      if (!std::isfinite(s) || s <= 0) {
        out.reason = "the runner reported an invalid timing sample";
        return out;
      }
    out.stats = with_clocks(summarize(r.samples_ms), clocks, r.timing_wall_ms);
    out.steady = with_clocks(summarize(pooled(steady_blocks(r.blocks))), clocks, r.timing_wall_ms);
    out.ok = true;
    if (compile_mode.empty())
      store_reference(ref_key, out.stats);
  } catch (const std::exception& e) {
    out.reason = std::string{"evaluator: "} + e.what();
  }
  if (!out.ok)
    spdlog::warn("evaluator {}: reference of {} ({}): {}", settings_.device, task.name,
                 compile_mode.empty() ? "eager" : compile_mode, out.reason);
  return out;
}

} // namespace kiln
