#include <algorithm>
#include <random>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "actors/compiler.hpp"
#include "actors/dispatcher.hpp"
#include "actors/evaluator.hpp"
#include "gpu/build_cache.hpp"
#include "gpu/device_lock.hpp"
#include "gpu/devices.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/runner_pool.hpp"
#include "gpu/json_text.hpp"
#include "gpu/python.hpp"
#include "tools/cli.hpp"

namespace fs = std::filesystem;

namespace kiln::cli {

std::string verdict_json(const verdict& v) {
  auto max_of = [](const std::vector<double>& xs) {
    return xs.empty() ? 0.0 : *std::max_element(xs.begin(), xs.end());
  };
  auto list = [](const std::vector<double>& xs) {
    std::string s = "[";
    for (size_t i = 0; i < xs.size(); ++i)
      s += (i ? ", " : "") + json_number(xs[i]);
    return s + "]";
  };
  bool ok = v.status == verdict_status::correct;
  std::ostringstream js;
  // Every verdict kiln makes has a code; one from elsewhere (an old archive) shows its status.
  const std::string code = v.code.empty() ? std::string{to_string(v.status)} : v.code;
  js << "{\"status\": \"" << to_string(v.status) << "\", \"code\": \"" << json_escape(code)
     << "\", \"reason\": \"" << json_escape(v.reason) << "\", "
     << "\"speedup\": " << (ok ? json_number(v.speedup) : "null") << ", "
     << "\"runtime_ms\": " << (ok ? json_number(v.candidate.median_ms) : "null") << ", "
     << "\"reference_ms\": " << (v.reference.n > 0 ? json_number(v.reference.median_ms) : "null")
     << ", "
     << "\"max_abs_diff\": "
     << (v.max_abs_diff.empty() ? "null" : json_number(max_of(v.max_abs_diff)))
     << ", \"max_abs_diffs\": " << list(v.max_abs_diff)
     << ", \"max_rel_diffs\": " << list(v.max_rel_diff);
  if (ok) {
    auto view = [](const timing_view& t) {
      return "{\"runtime_ms\": " + json_number(t.candidate.median_ms) + ", \"reference_ms\": "
             + json_number(t.reference.median_ms) + ", \"speedup\": " + json_number(t.speedup)
             + ", \"speedup_ci\": [" + json_number(t.speedup_lo) + ", " + json_number(t.speedup_hi)
             + "], \"runtime\": " + timing_stats_json(t.candidate)
             + ", \"reference\": " + timing_stats_json(t.reference) + "}";
    };
    js << ", \"speedup_ci\": [" << json_number(v.speedup_lo) << ", " << json_number(v.speedup_hi)
       << "], \"statistic\": \"" << json_escape(v.statistic)
       << "\", \"paired\": " << (v.paired ? "true" : "false")
       << ", \"runtime\": " << timing_stats_json(v.candidate)
       << ", \"reference\": " << timing_stats_json(v.reference)
       << ", \"per_call\": " << view(v.per_call) << ", \"steady\": " << view(v.steady);
  }
  js << ", \"device\": \"" << json_escape(v.device) << "\", \"wall_ms\": " << json_number(v.wall_ms)
     << ", \"stdout_tail\": \"" << json_escape(v.stdout_tail) << "\", \"stderr_tail\": \""
     << json_escape(v.stderr_tail) << "\", \"compile_ms\": " << json_number(v.compile_ms)
     << ", \"compile_cached\": " << (v.compile_cached ? "true" : "false") << ", \"notes\": [";
  for (size_t i = 0; i < v.notes.size(); ++i)
    js << (i ? ", " : "") << "\"" << json_escape(v.notes[i]) << "\"";
  js << "]}";
  return js.str();
}

std::string timing_stats_json(const timing_stats& s) {
  auto clock = [](int32_t mhz) { return mhz > 0 ? std::to_string(mhz) : std::string{"null"}; };
  std::ostringstream o;
  o << "{\"median_ms\": " << json_number(s.median_ms) << ", \"p10_ms\": " << json_number(s.p10_ms)
    << ", \"p90_ms\": " << json_number(s.p90_ms) << ", \"mean_ms\": " << json_number(s.mean_ms)
    << ", \"n\": " << s.n << ", \"sm_clock_mhz\": " << clock(s.sm_clock_mhz)
    << ", \"mem_clock_mhz\": " << clock(s.mem_clock_mhz)
    << ", \"sm_min_mhz\": " << clock(s.sm_min_mhz) << ", \"sm_max_mhz\": " << clock(s.sm_max_mhz)
    << ", \"temperature_c\": " << clock(s.temperature_c)
    << ", \"power_w\": " << (s.power_w > 0 ? json_number(s.power_w) : std::string{"null"})
    << ", \"host_busy\": " << (s.host_busy >= 0 ? json_number(s.host_busy) : std::string{"null"})
    << ", \"load_avg\": " << (s.load_avg >= 0 ? json_number(s.load_avg) : std::string{"null"})
    << "}";
  return o.str();
}

device_info eval_device(const eval_args& args, const evaluator_config& cfg) {
  if (!args.device.empty())
    return select_devices({args.device}).front();
  if (cfg.devices != std::vector<std::string>{defaults::devices}) // without a config: `auto`
    return select_devices(cfg.devices).front();
  return select_devices({"cpu"}).front();
}

int eval(const eval_args& args) {
  if (!args.stream.empty())
    return eval_stream(args);
  if (args.task.empty() || args.candidate.empty()) {
    std::cerr << "kiln: eval needs --task and --candidate, or --stream\n";
    return 2;
  }
  eval_settings s;
  eval_job job;
  std::string capability;
  try {
    if (!args.config.empty())
      s.cfg = load_config(args.config).evaluator;
    auto tasks = find_tasks({args.task});
    job.task = tasks.front();
    job.code = read_text(args.candidate, "candidate");
    job.candidate_id = job.task.name + "#" + fs::path{args.candidate}.stem().string();
    job.timeout_s = args.timeout_s;
    auto device = eval_device(args, s.cfg);
    s.device = device.id;
    capability = device.capability;
    s.python = find_python(s.cfg.python);
    s.cache_dir = resolve_cache_dir(s.cfg.cache_dir);
    prepare_cache_dir(s.cache_dir);
  } catch (const std::exception& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 2;
  }
  quiet_logging();
  auto scratch = fs::temp_directory_path() / ("kiln-eval-" + std::to_string(::getpid()));
  s.work_dir = scratch.string();
  verdict v;
  // The compile stage first, as in a run: extension builds happen with no GPU visible, and the
  // evaluation only loads them. Its failure is the verdict.
  compile_outcome built;
  const bool builds = builds_extensions(job.code);
  if (builds) {
    try {
      compile_engine compiler{compile_settings_for(s, capability)};
      built = compiler.compile(job);
    } catch (const std::exception& e) {
      built.problem = e.what(); // as in a run: the GPU stage builds it then
    }
    if (!built.problem.empty())
      std::cerr << "kiln: compile stage: " << built.problem << "; the evaluation builds it\n";
  }
  // The device is held from before its runners start until the process ends: no other kiln
  // process on the host evaluates on it meanwhile (gpu/device_lock.hpp).
  std::vector<device_claim> claims;
  if (!built.failed) {
    try {
      claims = claim_devices({s.device}, {s.cfg.device_lock_wait_s, "", s.cache_dir, {}});
    } catch (const std::exception& e) {
      std::cerr << "kiln: " << e.what() << "\n";
      std::error_code ignored;
      fs::remove_all(scratch, ignored);
      return 1;
    }
  }
  if (built.failed) {
    v.device = "compiler";
  } else {
    evaluation_engine engine{s};
    engine.pool().resize(0); // one evaluation: the runners warming now are all it takes
    v = engine.evaluate(job, std::random_device{}());
  }
  if (builds)
    apply_compile_outcome(built, v);
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  if (args.json) {
    std::cout << verdict_json(v) << "\n";
    return 0;
  }
  std::cout << job.task.name << ": " << to_string(v.status);
  if (v.status == verdict_status::correct) {
    std::printf(" speedup %.3fx [%.3f, %.3f] (%s: candidate %.4f ms, reference %.4f ms, n=%d)",
                v.speedup, v.speedup_lo, v.speedup_hi, v.statistic.c_str(), v.candidate.median_ms,
                v.reference.median_ms, v.candidate.n);
    if (v.statistic != "per_call")
      std::printf("\n  per call: speedup %.3fx (candidate %.4f ms, reference %.4f ms, n=%d)",
                  v.per_call.speedup, v.per_call.candidate.median_ms,
                  v.per_call.reference.median_ms, v.per_call.candidate.n);
  }
  std::cout << std::flush;
  std::printf("\n  %s\n", v.reason.c_str());
  if (v.status != verdict_status::correct && !v.stderr_tail.empty())
    std::printf("  stderr (tail):\n%s\n", v.stderr_tail.c_str());
  return 0;
}

} // namespace kiln::cli
