// The final re-timing of a task's winners (see evaluate.hpp).
//
//   round 0:  ref  c0  c1  c2        every entry a fresh runner, timed with the same routine
//   round 1:  c2   c1  c0  ref       as evaluations (one untimed call first, no comparison)
//   round 2:  ref  c0  c1  c2
//
// The search picked its winners as the fastest of many noisy measurements, so their own numbers
// are biased low; fresh, interleaved measurements are not. Alternating the order spreads a
// slow drift of the device (clocks, temperature) over all of them alike. Each entry's figure is
// the median of its round medians.

#include "gpu/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include <spdlog/spdlog.h>

#include "gpu/judge.hpp"
#include "gpu/nvml.hpp"
#include "gpu/quiet_host.hpp"
#include "gpu/runner.hpp"
#include "gpu/timing.hpp"

namespace kiln {

namespace fs = std::filesystem;

namespace {

/// A token the harness must echo in result.json: a candidate cannot know it in advance.
std::string nonce(std::mt19937_64& rng) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

int32_t median_mhz(std::vector<int32_t> xs) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

} // namespace

retime_result evaluation_engine::retime(const retime_job& job, uint64_t seed) {
  retime_result r;
  r.device = settings_.device;
  const size_t n = job.candidate_ids.size();
  r.candidates.resize(n);
  r.speedups.assign(n, 0.0);
  scratch_guard guard;
  guard.keep = settings_.keep_scratch;
  const auto& cfg = settings_.cfg;
  try {
    if (job.codes.size() != n) {
      r.error = "retime job with " + std::to_string(n) + " candidate ids but "
                + std::to_string(job.codes.size()) + " codes";
      return r;
    }
    runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(cfg)};
    attach(ctx);
    if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device))
      throw std::runtime_error("unknown device " + settings_.device);
    ctx.scratch = make_scratch(settings_.work_dir, counter_);
    guard.dir = ctx.scratch;
    auto task_path = ctx.scratch + "/task.py";
    write_file(task_path, job.task.source.empty() ? read_file(job.task.path) : job.task.source);
    std::vector<std::string> paths;
    for (size_t i = 0; i < n; ++i) {
      paths.push_back(ctx.scratch + "/candidate_" + std::to_string(i) + ".py");
      write_file(paths.back(), job.codes[i]);
    }

    // One input set for all: the numbers must differ only by the code that ran.
    const bool pike = cfg.mode == "pike";
    uint64_t weight_seed = 1;
    uint64_t input_seed = 0;
    if (!pike) {
      std::mt19937_64 rng{seed};
      weight_seed = rng() >> 1;
      input_seed = rng() >> 1;
    }
    std::mt19937_64 rng_nonce{std::random_device{}()};
    const int rounds = std::max<int>(1, job.rounds);
    // Entry 0 is the reference, entry i + 1 candidate i.
    std::vector<std::vector<std::vector<double>>> samples(n + 1);
    std::vector<std::vector<int32_t>> sm(n + 1);
    std::vector<std::vector<int32_t>> mem(n + 1);
    std::vector<bool> failed(n + 1, false);
    std::vector<int> doubts(n + 1, 0);
    configure_quiet_host(quiet_host_settings_from(cfg));
    for (int round = 0; round < rounds; ++round) {
      // This round's reference, whose loop overhead calibrates the outside clock's check of
      // the candidates timed after it.
      std::optional<runner_report> round_ref;
      bool clock_reliable = true;
      for (size_t e : interleaved_order(n + 1, round)) {
        if (failed[e])
          continue;
        runner_job j;
        j.mode = e == 0 ? "reference" : "candidate";
        j.task_path = task_path;
        j.candidate_path = e == 0 ? std::string{} : paths[e - 1];
        j.dir = ctx.scratch + "/r" + std::to_string(round) + "-" + std::to_string(e);
        j.device = ctx.runner_device;
        j.weight_seed = weight_seed;
        j.seeds = {input_seed};
        j.time = true;
        j.threads = ctx.threads;
        j.pike = pike;
        j.nonce = nonce(rng_nonce);
        // Every run here is timed: a pooled runner starts, imports and runs its trial beside the
        // other lanes' untimed work, and takes the device whole at its gate, for the timing; a
        // runner without the pool (or PIKE mode) holds it whole throughout.
        const bool gated = ctx.pool != nullptr && !pike;
        j.gate = gated;
        device_hold hold{settings_.share->lock};
        if (gated)
          hold.shared();
        else
          hold.exclusive();
        bool asked = false;
        bool unhealthy = false;
        // Quiet from the gate's go (a gated runner) or from the start (the whole run is timed)
        // until the runner has ended.
        std::optional<quiet_window> quiet;
        pid_t runner_pid = -1;
        ctx.on_start = [&](pid_t pid) {
          runner_pid = pid;
          if (!gated)
            quiet.emplace(std::vector<pid_t>{pid}, settings_.device);
        };
        clock_sampler clocks{settings_.device};
        auto rep = run_runner(ctx, j, cfg.timeout_s, [&](const std::string&) {
          if (asked)
            return false;
          asked = true;
          // Another lane's health check may have failed while this runner waited for the device.
          unhealthy = !hold_for_timing(hold);
          if (!unhealthy && runner_pid > 0)
            quiet.emplace(std::vector<pid_t>{runner_pid}, settings_.device);
          return !unhealthy;
        });
        clocks.stop();
        ctx.on_start = nullptr;
        if (quiet) {
          quiet->close();
          if (auto note = quiet->note(); !note.empty())
            spdlog::warn(
                "evaluator {}: re-timing {}: {} in round {}: {}", settings_.device, job.task.name,
                e == 0 ? std::string{"reference"} : job.candidate_ids[e - 1], round + 1, note);
          quiet.reset();
        }
        hold.release();
        if (unhealthy) {
          r.error = "device " + settings_.device + " is unhealthy: " + health_problem();
          return r;
        }
        auto problem = judge_process(rep, cfg.timeout_s).reason;
        if (problem.empty())
          problem = timing_problem(rep);
        if (problem.empty() && rep.nonce != j.nonce)
          problem = "result.json was not written by the harness (wrong nonce)";
        if (problem.empty() && gated && !rep.gate_go)
          problem = "timed without the evaluator's go at its gate";
        if (problem.empty() && gated && e == 0) {
          // A reference that disagrees with the parent's clock says the clock is unreliable
          // here (a starved host): this round's candidates are then not checked against it.
          auto own = outside_clock_problem(rep.stamps, rep.samples_ms, rep.blocks);
          clock_reliable = own.empty();
          if (clock_reliable)
            round_ref = rep;
          else
            spdlog::warn("evaluator {}: re-timing {}: the reference's {}; round {} is not "
                         "checked against the parent's clock",
                         settings_.device, job.task.name, own, round + 1);
        } else if (problem.empty() && gated && clock_reliable) {
          auto check = check_outside_clock(rep.stamps, rep.samples_ms, rep.blocks,
                                           round_ref ? &round_ref->stamps : nullptr,
                                           round_ref ? &round_ref->samples_ms : nullptr);
          // A doubt of durations alone may be the host's, as in an evaluation: the round is
          // left out for this candidate, and only a second doubt fails it.
          if (check.statistical && ++doubts[e] < 2) {
            spdlog::warn("evaluator {}: re-timing {}: {}'s round {} left out: {}", settings_.device,
                         job.task.name, job.candidate_ids[e - 1], round + 1, check.problem);
            continue;
          }
          problem = std::move(check.problem);
        }
        if (!problem.empty()) {
          if (e == 0) {
            r.error = "reference failed in round " + std::to_string(round + 1) + ": " + problem;
            spdlog::error("evaluator {}: re-timing {}: {}", settings_.device, job.task.name,
                          r.error);
            return r;
          }
          failed[e] = true;
          spdlog::warn("evaluator {}: re-timing {}: {} failed in round {} (speedup 0): {}",
                       settings_.device, job.task.name, job.candidate_ids[e - 1], round + 1,
                       problem);
        } else {
          // The statistic that drives the search drives the re-timing too; a runner whose
          // batches gave no steady figure falls back to its per-call samples.
          auto steady = pooled(steady_blocks(rep.blocks));
          samples[e].push_back(!pike && cfg.timing_statistic == "steady" && !steady.empty()
                                   ? std::move(steady)
                                   : rep.samples_ms);
          auto c = clocks.last(rep.timing_wall_ms);
          if (c.sm_mhz > 0) {
            sm[e].push_back(c.sm_mhz);
            mem[e].push_back(c.mem_mhz);
          }
        }
      }
    }

    auto stats_of = [&](size_t e) {
      auto s = combine_rounds(samples[e]);
      s.sm_clock_mhz = median_mhz(sm[e]);
      s.mem_clock_mhz = median_mhz(mem[e]);
      return s;
    };
    r.reference = stats_of(0);
    // PIKE reports do_bench's mean; kiln the median, as in evaluations.
    const double ref_t = pike ? r.reference.mean_ms : r.reference.median_ms;
    for (size_t i = 0; i < n; ++i) {
      if (failed[i + 1] || samples[i + 1].empty())
        continue;
      r.candidates[i] = stats_of(i + 1);
      const double t = pike ? r.candidates[i].mean_ms : r.candidates[i].median_ms;
      r.speedups[i] = t > 0 ? ref_t / t : 0;
    }
    spdlog::info("evaluator {}: re-timed {} in {} rounds: reference {:.4g} ms, {} candidates",
                 settings_.device, job.task.name, rounds, ref_t, n);
  } catch (const std::exception& e) {
    r.error = std::string{"evaluator: "} + e.what();
    spdlog::error("evaluator {}: re-timing {}: {}", settings_.device, job.task.name, r.error);
  }
  return r;
}

} // namespace kiln
