#pragma once

// The `kiln` program's subcommands. Each returns the process exit code: 0 done, 1 failed at run
// time, 2 bad input (config, paths, arguments) with nothing started.

#include <string>
#include <vector>

#include "config/config.hpp"
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
  std::string device = "cpu";
  double timeout_s = 0;
  bool json = false;
  std::string config;
};

int run(const run_args& args);
int eval(const eval_args& args);
/// Lists the devices evaluators would see: CUDA devices first, the CPU last.
int devices(bool json);

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

/// JSON string escaping.
std::string json_escape(const std::string& s);

} // namespace kiln::cli
