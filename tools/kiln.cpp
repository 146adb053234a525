// The kiln program: subcommands over the actors library.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "config/log_sink.hpp"
#include "config/secrets.hpp"
#include "tools/cli.hpp"

namespace {

// Like the config's `timeout_s` (above 0, at most a day): CLI::Range lets NaN through.
const CLI::Validator seconds_flag{
    [](const std::string& text) -> std::string {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0 || v > 86400)
        return "must be a number of seconds above 0 and at most 86400, not '" + text + "'";
      return {};
    },
    "SECONDS"};

} // namespace

int main(int argc, char** argv) {
  // spdlog's own default logger writes to stdout, which carries the JSON of every `--json`
  // command: logs go to stderr (and a run's kiln.log) only.
  kiln::secrets::add_from_environment();
  spdlog::set_default_logger(kiln::redacting_logger(
      "kiln-stderr",
      std::vector<spdlog::sink_ptr>{std::make_shared<spdlog::sinks::stderr_color_sink_mt>()}));
  CLI::App app{"kiln: LLM agents make PyTorch inference faster; every proposal is measured"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version and exit");

  kiln::cli::run_args ra;
  auto* run = app.add_subcommand("run", "search for faster versions of a set of tasks");
  run->add_option("--config", ra.config, "TOML config file")->required();
  run->add_option("--tasks", ra.tasks, "task files or folders (replace [run] tasks)");
  run->add_option("--out", ra.out, "run directory (replaces [run] out)");

  kiln::cli::eval_args ea;
  auto* ev = app.add_subcommand("eval", "evaluate one candidate against its task, or a stream");
  auto* task_opt = ev->add_option("--task", ea.task, "the task file (KernelBench format)");
  auto* cand_opt = ev->add_option("--candidate", ea.candidate, "the candidate file (ModelNew)");
  auto* stream_opt = ev->add_option("--stream", ea.stream,
                                    "a manifest of `task<TAB>candidate` lines, evaluated through "
                                    "the whole pipeline (compilers ahead of the device)");
  stream_opt->excludes(task_opt)->excludes(cand_opt);
  task_opt->needs(cand_opt);
  cand_opt->needs(task_opt);
  ev->add_option(
      "--device", ea.device,
      "cpu or cuda:N (default: the first of the config's [evaluator] devices, else cpu)");
  ev->add_option("--timeout", ea.timeout_s, "seconds per runner process")->check(seconds_flag);
  ev->add_flag("--json", ea.json, "print the verdict as JSON");
  ev->add_option("--config", ea.config, "take [evaluator] settings from this config");

  bool devices_json = false;
  auto* dev = app.add_subcommand("devices", "list the devices evaluators see");
  dev->add_flag("--json", devices_json, "print the list as JSON");

  kiln::cli::baseline_args ba;
  auto* base = app.add_subcommand("baseline", "time the references of a task set as JSON");
  base->add_option("--tasks", ba.tasks, "task files or folders")->required();
  base->add_option("--device", ba.device, "cpu or cuda:N (default: the first GPU, else cpu)");
  base->add_option("--modes", ba.modes, "eager, compile, compile-max-autotune (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  base->add_option("--config", ba.config, "take [evaluator] settings from this config");
  base->add_option("--out", ba.out, "write the JSON here instead of stdout");

  kiln::cli::llm_args la;
  auto* llm = app.add_subcommand("llm", "send one prompt through an LLM profile (check a setup)");
  llm->add_option("--config", la.config, "TOML config file")->required();
  llm->add_option("--profile", la.profile, "the [llm.<name>] profile")->required();
  llm->add_option("--prompt", la.prompt, "the prompt text")->required();
  llm->add_option("--system", la.system, "system prompt (default: the profile's)");
  llm->add_option("--max-tokens", la.max_tokens, "reply limit (default: the profile's)")
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}));
  llm->add_flag("--json", la.json, "print text, tokens and cost as JSON");
  llm->add_option("--repeat", la.repeat,
                  "send the prompt N times and report latencies, CPU time "
                  "and memory instead of the reply")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  llm->add_option("--parallel", la.parallel, "with --repeat: at most N queries in flight")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    auto code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (version) {
    std::cout << "kiln " << KILN_VERSION << " (CAF " << KILN_CAF_VERSION << ", libtorch "
              << KILN_TORCH_VERSION << (KILN_WITH_CUDA ? ", CUDA" : ", CPU only") << ")\n";
    return 0;
  }
  if (*run)
    return kiln::cli::run(ra);
  if (*ev) {
    const int code = kiln::cli::eval(ea);
    // Everything of the evaluation is torn down by now (runners killed, scratch removed). What
    // is left are the libraries' static destructors, OpenBLAS's thread pool and libtorch's
    // among them: 0.25 s of a one-shot evaluation's 3 s on the development machine, for nothing.
    std::cout.flush();
    std::cerr.flush();
    spdlog::shutdown();
    std::fflush(nullptr);
    ::_exit(code);
  }
  if (*dev)
    return kiln::cli::devices(devices_json);
  if (*base)
    return kiln::cli::baseline(ba);
  if (*llm)
    return kiln::cli::llm(la);
  std::cout << app.help();
  return 2;
}
