#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <fcntl.h>
#include <unistd.h>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/compiler.hpp"
#include "actors/supervisor.hpp"
#include "config/defaults.hpp"
#include "config/log_sink.hpp"
#include "gpu/build_cache.hpp"
#include "gpu/device_lock.hpp"
#include "gpu/devices.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/python.hpp"
#include "gpu/sandbox.hpp"
#include "messages/error.hpp"
#include "messages/register.hpp"
#include "tools/cli.hpp"

namespace fs = std::filesystem;

namespace kiln::cli {

namespace {

/// `kiln.log` in the run directory gets everything at the configured level; the terminal
/// only warnings, so that progress lines stay readable.
void setup_logging(const std::string& dir, const std::string& level) {
  auto file =
      std::make_shared<spdlog::sinks::basic_file_sink_mt>((fs::path{dir} / "kiln.log").string());
  auto term = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  term->set_level(spdlog::level::warn);
  auto logger = kiln::redacting_logger("kiln", std::vector<spdlog::sink_ptr>{file, term});
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

int signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  char c = static_cast<char>(sig);
  // Only async-signal-safe work here: hand the signal to the watcher thread.
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &c, 1);
}

/// Turns SIGINT/SIGTERM into a clean stop of the supervisor; a second signal ends the process
/// at once (runners die with it, the archive is consistent after every event). A handler, not
/// sigwait: libraries (OpenBLAS) start threads before main, so no signal mask covers them all.
class signal_watch {
public:
  explicit signal_watch(std::function<void()> on_signal) {
    if (::pipe2(signal_pipe, O_CLOEXEC) != 0)
      throw std::runtime_error("cannot create the signal pipe");
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    // Also when a shell started kiln in the background with SIGINT ignored.
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    thread_ = std::thread([on_signal] {
      int seen = 0;
      char c = 0;
      while (::read(signal_pipe[0], &c, 1) == 1 && c != 0) {
        if (++seen > 1) {
          std::fprintf(stderr, "kiln: second signal, exiting now\n");
          std::_Exit(130);
        }
        std::fprintf(stderr, "kiln: stopping (in-flight work finishes; signal again to quit)\n");
        on_signal();
      }
    });
  }
  ~signal_watch() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    char c = 0;
    [[maybe_unused]] auto n = ::write(signal_pipe[1], &c, 1);
    thread_.join();
    ::close(signal_pipe[0]);
    ::close(signal_pipe[1]);
  }

private:
  std::thread thread_;
};

void print_progress(const task_progress& p, bool ended) {
  static std::mutex mx;
  std::lock_guard<std::mutex> guard{mx};
  auto what = ended         ? std::string{"done"}
              : p.phase < 0 ? std::string{"ideas"}
                            : "phase " + std::to_string(p.phase);
  std::fprintf(stderr,
               "kiln: %-24s %-8s queries %lld/%lld  evals %lld (%lld correct)  best %.3fx\n",
               p.task.c_str(), what.c_str(), static_cast<long long>(p.queries),
               static_cast<long long>(p.query_limit), static_cast<long long>(p.evaluations),
               static_cast<long long>(p.correct), p.best_speedup);
}

/// Runs every task's reference once before any query: a task whose reference does not import or
/// run would spend its whole budget on candidates that can only fail. One thread per device
/// (its first lane's settings, so that the eager timings land in the cache the evaluations
/// read). Returns the usable tasks; reports each one left out on stderr and in the log.
std::vector<task_spec> check_references(const run_plan& plan) {
  std::vector<const eval_settings*> per_device;
  for (const auto& e : plan.evaluators)
    if (std::none_of(per_device.begin(), per_device.end(),
                     [&](const eval_settings* d) { return d->device == e.device; }))
      per_device.push_back(&e);
  std::vector<std::string> problem(plan.tasks.size());
  std::vector<std::thread> threads;
  for (size_t d = 0; d < per_device.size(); ++d)
    threads.emplace_back([&, d] {
      auto s = *per_device[d];
      s.work_dir = (fs::path{s.work_dir}.parent_path() / ("check-" + s.device)).string();
      try {
        evaluation_engine engine{s};
        for (size_t t = d; t < plan.tasks.size(); t += per_device.size()) {
          auto r = engine.time_reference(plan.tasks[t], "");
          if (!r.ok)
            problem[t] = r.reason.empty() ? "it gave no timing" : r.reason;
        }
      } catch (const std::exception& e) {
        for (size_t t = d; t < plan.tasks.size(); t += per_device.size())
          if (problem[t].empty())
            problem[t] = std::string{"evaluator: "} + e.what();
      }
    });
  for (auto& th : threads)
    th.join();
  std::vector<task_spec> usable;
  for (size_t t = 0; t < plan.tasks.size(); ++t) {
    if (problem[t].empty()) {
      usable.push_back(plan.tasks[t]);
      continue;
    }
    // The runner's words are a candidate's ("the candidate raised ..."): here it is the task's.
    auto why = problem[t];
    for (auto [from, to] : {std::pair{"importing the candidate", "importing the task"},
                            std::pair{"the candidate", "the reference"}})
      if (auto at = why.find(from); at != std::string::npos)
        why.replace(at, std::strlen(from), to);
    spdlog::error("kiln: task {} ({}): its reference does not run, so the run leaves it out: {}",
                  plan.tasks[t].name, plan.tasks[t].path, why);
  }
  return usable;
}

} // namespace

int run(const run_args& args) {
  run_plan plan;
  try {
    plan.cfg = load_config(args.config);
    if (!args.tasks.empty())
      plan.cfg.run.tasks = args.tasks;
    if (!args.out.empty())
      plan.cfg.run.out = args.out;
    if (plan.cfg.run.tasks.empty())
      throw config_error(args.config + ": [run] tasks is empty and no --tasks given");
    plan.tasks = find_tasks(plan.cfg.run.tasks);
    auto python = find_python(plan.cfg.evaluator.python);
    auto devices = select_devices(plan.cfg.evaluator.devices);
    auto work = fs::path{plan.cfg.run.out} / ".kiln";
    auto cache_dir = resolve_cache_dir(plan.cfg.evaluator.cache_dir);
    prepare_cache_dir(cache_dir);
    for (auto& d : devices) {
      eval_settings s;
      s.python = python;
      s.device = d.id;
      s.cfg = plan.cfg.evaluator;
      s.work_dir = (work / ("work-" + d.id)).string();
      s.cache_dir = cache_dir;
      for (auto& lane : device_lanes(std::move(s)))
        plan.evaluators.push_back(std::move(lane));
    }
    // The compile workers build for the devices' architecture (all of a host's GPUs are
    // normally alike; a mixed host gets every capability in the list).
    std::string archs;
    for (auto& d : devices)
      if (!d.capability.empty() && archs.find(d.capability) == std::string::npos)
        archs += (archs.empty() ? "" : ";") + d.capability;
    auto compile = compile_settings_for(plan.evaluators.front(), archs);
    compile.work_dir = (work / "compile").string();
    plan.compilers.assign(compile_worker_count(plan.cfg.evaluator), compile);
    fs::create_directories(plan.cfg.run.out);
  } catch (const std::exception& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 2;
  }
  auto out = plan.cfg.run.out;
  setup_logging(out, plan.cfg.run.log_level);
  spdlog::info("kiln {}: run of {} task(s) into {}", KILN_VERSION, plan.tasks.size(), out);
  auto query_limit = plan.cfg.budget.queries_per_task;
  plan.on_progress = print_progress;
  // Every device of the run is held from before its evaluators start until the run ends: no
  // other kiln process on the host evaluates on them meanwhile (gpu/device_lock.hpp).
  std::vector<device_claim> claims;
  try {
    std::vector<std::string> ids;
    for (const auto& e : plan.evaluators)
      if (std::find(ids.begin(), ids.end(), e.device) == ids.end())
        ids.push_back(e.device);
    claims = claim_devices(
        ids, {plan.cfg.evaluator.device_lock_wait_s, "", plan.evaluators.front().cache_dir, {}});
  } catch (const std::exception& e) {
    spdlog::error("kiln: {}", e.what());
    std::cerr << "kiln: " << e.what() << "\n";
    return 1;
  }
  {
    const runner_identity id = identity_for(plan.cfg.evaluator.runner_user);
    spdlog::info("sandbox ({}): {}; user: {}", plan.cfg.evaluator.sandbox,
                 probe_sandbox().description(),
                 id.available ? id.name : "the invoking user's (" + id.why_not + ")");
  }
  std::fprintf(stderr, "kiln: checking the references of %zu task(s)\n", plan.tasks.size());
  auto usable = check_references(plan);
  if (usable.empty()) {
    spdlog::error("kiln: no task of the run has a reference that runs; nothing to search");
    return 2;
  }
  plan.tasks = std::move(usable);

  caf::actor_system_config cfg;
  add_message_types(cfg);
  cfg.set("scheduler.max-threads", std::max(2u, std::thread::hardware_concurrency()));
  cfg.load<caf::io::middleman>();
  int code = 0;
  {
    caf::actor_system sys{cfg};
    supervisor_actor sup;
    try {
      sup = spawn_supervisor(sys, std::move(plan));
    } catch (const std::exception& e) {
      std::cerr << "kiln: " << e.what() << "\n";
      return 2;
    }
    signal_watch watch{[sup] { caf::anon_send(sup, stop_atom::value); }};
    caf::scoped_actor self{sys};
    // A run lasts as long as its budgets allow; the supervisor enforces those, not this wait.
    self->request(sup, defaults::run_timeout, run_atom::value)
        .receive(
            [&](run_summary& s) {
              try {
                write_run_outputs(out, s);
              } catch (const std::exception& e) {
                std::cerr << "kiln: " << e.what() << "\n";
                code = 1;
              }
              std::cout << render_table(s, query_limit, out) << std::flush;
              if (s.interrupted && code == 0)
                code = 130;
            },
            [&](caf::error& err) {
              std::cerr << "kiln: run failed: " << render(err) << "\n";
              code = 1;
            });
    self->send_exit(sup, caf::exit_reason::user_shutdown);
  }
  spdlog::info("kiln: run ended with exit code {}", code);
  claims.clear(); // the devices go back while the log still takes their lines
  spdlog::shutdown();
  return code;
}

} // namespace kiln::cli
