// `kiln baseline`: reference timings of a task set, eager and under torch.compile, measured by the
// same routine as every evaluation, written as JSON.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "gpu/device_lock.hpp"
#include "gpu/devices.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/json_text.hpp"
#include "gpu/python.hpp"
#include "gpu/runner.hpp"
#include "tools/cli.hpp"

namespace fs = std::filesystem;

namespace kiln::cli {

namespace {

/// The modes `--modes` accepts and the torch.compile mode each means (empty: eager).
/// `compile-max-autotune` is what PIKE calls its torch.compile baseline.
const std::vector<std::pair<std::string, std::string>>& known_modes() {
  static const std::vector<std::pair<std::string, std::string>> modes = {
      {"eager", ""}, {"compile", "default"}, {"compile-max-autotune", "max-autotune"}};
  return modes;
}

std::string mode_list() {
  std::string s;
  for (const auto& [name, _] : known_modes())
    s += (s.empty() ? "" : ", ") + name;
  return s;
}

std::string timing_json(const reference_timing& t) {
  std::ostringstream o;
  if (!t.available) {
    o << "{\"available\": false, \"reason\": " << json_quote(t.reason) << "}";
  } else if (!t.ok) {
    o << "{\"available\": true, \"error\": " << json_quote(t.reason) << "}";
  } else {
    // The per-call figures at the top (as before the steady-state statistic), that one beside.
    auto per_call = timing_stats_json(t.stats);
    per_call.pop_back();
    o << per_call << ", \"steady\": " << timing_stats_json(t.steady) << "}";
  }
  return o.str();
}

} // namespace

int baseline(const baseline_args& args) {
  eval_settings s;
  std::vector<task_spec> tasks;
  std::vector<std::pair<std::string, std::string>> modes; // name, torch.compile mode
  try {
    if (!args.config.empty())
      s.cfg = load_config(args.config).evaluator;
    if (args.tasks.empty())
      throw std::runtime_error("no tasks given (--tasks FILE_OR_FOLDER...)");
    tasks = find_tasks(args.tasks);
    for (const auto& m : args.modes) {
      auto it = std::find_if(known_modes().begin(), known_modes().end(),
                             [&](const auto& k) { return k.first == m; });
      if (it == known_modes().end())
        throw std::runtime_error("unknown mode \"" + m + "\" in --modes; known: " + mode_list());
      if (std::any_of(modes.begin(), modes.end(), [&](const auto& k) { return k.first == m; }))
        throw std::runtime_error("mode \"" + m + "\" is listed twice in --modes");
      modes.push_back(*it);
    }
    if (modes.empty())
      throw std::runtime_error("no modes given; known: " + mode_list());
    // Without --device: the first device an evaluator would get (a GPU when there is one).
    s.device = select_devices({args.device.empty() ? "auto" : args.device}).front().id;
    s.python = find_python(s.cfg.python);
    if (!args.out.empty()) {
      auto parent = fs::absolute(args.out).parent_path();
      if (!fs::is_directory(parent))
        throw std::runtime_error("--out " + args.out + ": folder " + parent.string()
                                 + " does not exist");
    }
  } catch (const std::exception& e) {
    std::cerr << "kiln baseline: " << e.what() << "\n";
    return 2;
  }
  quiet_logging();
  auto scratch = fs::temp_directory_path() / ("kiln-baseline-" + std::to_string(::getpid()));
  s.work_dir = scratch.string();

  // Held until the process ends: no other kiln process on the host evaluates on the device
  // meanwhile (gpu/device_lock.hpp).
  std::vector<device_claim> claims;
  try {
    claims = claim_devices({s.device}, {s.cfg.device_lock_wait_s, "", s.cfg.cache_dir, {}});
  } catch (const std::exception& e) {
    std::cerr << "kiln baseline: " << e.what() << "\n";
    return 1;
  }
  bool failed = false;
  std::ostringstream js;
  {
    evaluation_engine engine{s};
    auto facts = engine.facts();
    const auto& c = s.cfg;
    js << "{\"device\": " << json_quote(s.device)
       << ",\n \"device_name\": " << json_quote(facts.device_name) << ",\n \"capability\": "
       << (facts.capability.empty() ? "null" : json_quote(facts.capability))
       << ",\n \"torch_version\": " << json_quote(facts.torch_version)
       << ",\n \"python_version\": " << json_quote(facts.python_version)
       << ",\n \"python\": " << json_quote(s.python)
       << ",\n \"timing\": {\"mode\": " << json_quote(c.mode)
       << ", \"statistic\": " << (c.mode == "pike" ? "\"mean\"" : "\"median\"")
       << ", \"warmup_calls\": " << c.warmup_calls << ", \"min_samples\": " << c.min_samples
       << ", \"max_samples\": " << c.max_samples
       << ", \"min_timing_s\": " << json_number(c.min_timing_s)
       << ", \"max_timing_s\": " << json_number(c.max_timing_s)
       << ", \"target_ci\": " << json_number(c.target_ci)
       << ", \"cpu_threads\": " << runner_threads(c) << "},\n \"modes\": [";
    for (size_t i = 0; i < modes.size(); ++i)
      js << (i ? ", " : "") << json_quote(modes[i].first);
    js << "],\n \"tasks\": [";
    for (size_t t = 0; t < tasks.size(); ++t) {
      js << (t ? ",\n  " : "\n  ") << "{\"task\": " << json_quote(tasks[t].name)
         << ", \"path\": " << json_quote(tasks[t].path) << ", \"modes\": {";
      for (size_t m = 0; m < modes.size(); ++m) {
        auto r = engine.time_reference(tasks[t], modes[m].second);
        failed = failed || (r.available && !r.ok);
        js << (m ? ", " : "") << json_quote(modes[m].first) << ": " << timing_json(r);
        // Progress on stderr, so that stdout stays one JSON document.
        if (r.ok)
          std::fprintf(stderr, "kiln baseline: %s %s: %.4g ms (n=%d)\n", tasks[t].name.c_str(),
                       modes[m].first.c_str(),
                       c.mode == "pike" ? r.stats.mean_ms : r.stats.median_ms, r.stats.n);
        else
          std::fprintf(stderr, "kiln baseline: %s %s: %s\n", tasks[t].name.c_str(),
                       modes[m].first.c_str(), r.reason.c_str());
      }
      js << "}}";
    }
    js << "]}\n";
  }
  std::error_code ignored;
  fs::remove_all(scratch, ignored);

  if (args.out.empty()) {
    std::cout << js.str();
  } else {
    std::ofstream out{args.out, std::ios::binary | std::ios::trunc};
    out << js.str();
    out.close();
    if (!out) {
      std::cerr << "kiln baseline: cannot write " << args.out << "\n";
      return 1;
    }
  }
  return failed ? 1 : 0;
}

} // namespace kiln::cli
