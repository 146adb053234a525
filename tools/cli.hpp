#pragma once

// The `kiln` program's subcommands. Each returns the process exit code: 0 done, 1 failed at run
// time, 2 bad input (config, paths, arguments) with nothing started.

#include <string>
#include <vector>

#include "config/config.hpp"
#include "gpu/devices.hpp"
#include "messages/run.hpp"

namespace kiln::cli {

struct run_args {
  std::string config;
  std::vector<std::string> tasks;
  std::string out;
};

struct eval_args {
  std::string task;
  std::string candidate;
  std::string device; ///< empty: the config's first device, else cpu (eval_device)
  double timeout_s = 0;
  bool json = false;
  std::string config;
  std::string stream; ///< a manifest instead of --task/--candidate
};

struct baseline_args {
  std::vector<std::string> tasks;
  std::string device; ///< empty: the first device of `auto`
  std::vector<std::string> modes = {"eager"};
  std::string config;
  std::string out; ///< empty: stdout
};

struct llm_args {
  std::string config;
  std::string profile;
  std::string prompt;
  std::string system;     ///< empty: the profile's
  int64_t max_tokens = 0; ///< 0: the profile's
  bool json = false;
  int64_t repeat = 1;   ///< send the prompt this many times (a load check of a setup)
  int64_t parallel = 1; ///< with at most this many in flight
};

int run(const run_args& args);
/// `kiln llm`: one prompt through one profile, the reply with its tokens and cost.
int llm(const llm_args& args);
int eval(const eval_args& args);
/// The device `kiln eval` uses: `--device`; without it the first of the config's `[evaluator]
/// devices` when the config names them (not `auto`), else the CPU: a config that names a GPU
/// must not be timed on the CPU in silence.
device_info eval_device(const eval_args& args, const evaluator_config& cfg);
/// `kiln eval --stream`: every line of a manifest through dispatcher, compilers and evaluator.
int eval_stream(const eval_args& args);
/// One verdict as the JSON object `kiln eval --json` prints.
std::string verdict_json(const verdict& v);
/// `{"median_ms", "p10_ms", "p90_ms", "mean_ms", "n", "sm_clock_mhz", "mem_clock_mhz"}`; a clock
/// that could not be read is null.
std::string timing_stats_json(const timing_stats& s);
/// Lists the devices evaluators would see: CUDA devices first, the CPU last.
int devices(bool json);
/// Times the references of a task set (eager and torch.compile modes) and writes them as JSON.
int baseline(const baseline_args& args);

/// Task files named by `paths` (files, or folders whose `*.py` files are tasks), sorted by
/// their numeric id; throws std::runtime_error naming a path that does not exist or holds none.
std::vector<task_spec> find_tasks(const std::vector<std::string>& paths);

/// A file's contents; throws std::runtime_error("cannot read <what> <path>").
std::string read_text(const std::string& path, const std::string& what);

/// PIKE's aggregation: tasks without a correct candidate count 1.0, every task at least 1.0,
/// geometric mean over tasks.
double geomean_speedup(const std::vector<task_result>& tasks);

/// Writes `summary.json` and `best/<task>.py` into `dir`.
void write_run_outputs(const std::string& dir, const run_summary& s);

/// The closing table of a run, for the terminal.
std::string render_table(const run_summary& s, int64_t query_limit, const std::string& dir);

/// The one-shot commands' log level: warnings, or `KILN_LOG` (trace, debug, info, warn, error)
/// when set, so a user can see where an evaluation spends its time.
void quiet_logging();

/// JSON string escaping.
std::string json_escape(const std::string& s);

} // namespace kiln::cli
