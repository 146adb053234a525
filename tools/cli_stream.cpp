// `kiln eval --stream FILE`: a fixed list of candidates evaluated through the same pipeline a
// run uses (compile workers ahead of the device, the device's evaluator, pre-warmed runners),
// one JSON line or one text line per verdict as it arrives. This is what the throughput
// benchmark measures.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/compiler.hpp"
#include "actors/dispatcher.hpp"
#include "actors/evaluator.hpp"
#include "config/defaults.hpp"
#include "config/input_file.hpp"
#include "gpu/build_cache.hpp"
#include "gpu/device_lock.hpp"
#include "gpu/devices.hpp"
#include "gpu/json_text.hpp"
#include "gpu/python.hpp"
#include "messages/error.hpp"
#include "messages/register.hpp"
#include "tools/cli.hpp"

namespace fs = std::filesystem;

namespace kiln::cli {

namespace {

struct stream_entry {
  eval_job job;
  std::string candidate_path;
  int line = 0; ///< in the manifest: which of several lines naming one file a verdict is for
};

/// Reads `task<TAB>candidate` lines (paths relative to the manifest's folder; `#` starts a
/// comment); throws naming the file and line of the first bad one.
std::vector<stream_entry> read_manifest(const std::string& path) {
  std::istringstream in{read_input_file(path, "stream manifest", max_manifest_bytes)};
  auto base = fs::path{path}.parent_path();
  std::vector<stream_entry> out;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    auto hash = line.find('#');
    if (hash != std::string::npos)
      line.erase(hash);
    std::istringstream fields{line};
    std::string task, candidate, extra;
    if (!(fields >> task))
      continue;
    auto where = path + ":" + std::to_string(no) + ": ";
    if (!(fields >> candidate) || (fields >> extra))
      throw std::runtime_error(where + "expected `<task file> <candidate file>`");
    auto resolve = [&](const std::string& p) {
      return fs::path{p}.is_absolute() ? p : (base / p).lexically_normal().string();
    };
    stream_entry e;
    e.line = no;
    try {
      e.job.task = find_tasks({resolve(task)}).front();
      e.candidate_path = resolve(candidate);
      e.job.code = read_text(e.candidate_path, "candidate");
    } catch (const std::exception& err) {
      throw std::runtime_error(where + err.what());
    }
    e.job.candidate_id = e.job.task.name + "#" + std::to_string(out.size() + 1) + "-"
                         + fs::path{e.candidate_path}.stem().string();
    out.push_back(std::move(e));
  }
  if (out.empty())
    throw std::runtime_error(path + ": no `<task file> <candidate file>` lines");
  return out;
}

void print_verdict(const stream_entry& e, const verdict& v, bool json) {
  if (json) {
    auto body = verdict_json(v);
    std::cout << "{\"task\": " << json_quote(e.job.task.path)
              << ", \"candidate\": " << json_quote(e.candidate_path) << ", \"line\": " << e.line
              << ", " << body.substr(1) << "\n"
              << std::flush;
    return;
  }
  std::printf("%-40s %-14s %8.3fx  %s\n", e.candidate_path.c_str(), to_string(v.status),
              v.status == verdict_status::correct ? v.speedup : 0.0, v.reason.c_str());
  std::fflush(stdout);
}

} // namespace

int eval_stream(const eval_args& args) {
  std::vector<stream_entry> entries;
  evaluator_config ev;
  device_info device;
  std::string python;
  std::string cache_dir;
  try {
    if (!args.config.empty())
      ev = load_config(args.config).evaluator;
    entries = read_manifest(args.stream);
    device = eval_device(args, ev);
    python = find_python(ev.python);
    cache_dir = resolve_cache_dir(ev.cache_dir);
    prepare_cache_dir(cache_dir);
  } catch (const std::exception& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 2;
  }
  quiet_logging();
  // Held until the process ends: no other kiln process on the host evaluates on the device
  // meanwhile (gpu/device_lock.hpp).
  std::vector<device_claim> claims;
  try {
    claims = claim_devices({device.id}, {ev.device_lock_wait_s, "", cache_dir, {}});
  } catch (const std::exception& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 1;
  }
  for (auto& e : entries)
    if (args.timeout_s > 0)
      e.job.timeout_s = args.timeout_s;
  auto scratch = fs::temp_directory_path() / ("kiln-stream-" + std::to_string(::getpid()));

  caf::actor_system_config cfg;
  add_message_types(cfg);
  cfg.set("scheduler.max-threads", std::max(2u, std::thread::hardware_concurrency()));
  std::atomic<int> failures{0};
  auto t0 = std::chrono::steady_clock::now();
  {
    caf::actor_system sys{cfg};
    eval_settings s;
    s.python = python;
    s.device = device.id;
    s.cfg = ev;
    s.cache_dir = cache_dir;
    s.work_dir = (scratch / "work").string();
    auto lanes = device_lanes(s);
    auto disp = sys.spawn(dispatcher, lanes.size());
    std::vector<evaluator_actor> evaluators;
    for (size_t i = 0; i < lanes.size(); ++i) {
      evaluators.push_back(spawn_evaluator(sys, lanes[i], std::random_device{}()));
      caf::anon_send(disp, put_atom::value, static_cast<int32_t>(i), evaluators.back());
    }
    std::vector<compiler_actor> compilers;
    try {
      compilers = make_compilers(sys, s, device.capability);
    } catch (const std::exception& e) {
      std::cerr << "kiln: " << e.what() << "\n";
      return 2;
    }
    for (auto& c : compilers)
      caf::anon_send(disp, put_atom::value, c);

    // An event-based client sends every job at once, so the compilers can work ahead of the
    // device; it prints each verdict as it arrives and quits after the last.
    auto client = sys.spawn([&](caf::event_based_actor* me) {
      auto pending = std::make_shared<size_t>(entries.size());
      auto done = [me, pending] {
        if (--*pending == 0)
          me->quit();
      };
      for (size_t i = 0; i < entries.size(); ++i)
        me->request(disp, defaults::request_timeout, eval_atom::value, entries[i].job)
            .then(
                [&, i, done](verdict& v) {
                  print_verdict(entries[i], v, args.json);
                  done();
                },
                [&, i, done](caf::error& err) {
                  ++failures;
                  std::cerr << "kiln: " << entries[i].candidate_path << ": " << render(err) << "\n";
                  done();
                });
    });
    caf::scoped_actor self{sys};
    self->wait_for(client);
    for (auto& c : compilers)
      self->send_exit(c, caf::exit_reason::user_shutdown);
    for (auto& e : evaluators)
      self->send_exit(e, caf::exit_reason::user_shutdown);
    self->send_exit(disp, caf::exit_reason::user_shutdown);
  }
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  std::fprintf(stderr, "kiln: %zu evaluations in %.1f s (%.0f per hour)\n", entries.size(), wall_s,
               wall_s > 0 ? 3600.0 * static_cast<double>(entries.size()) / wall_s : 0.0);
  return failures == 0 ? 0 : 1;
}

} // namespace kiln::cli
