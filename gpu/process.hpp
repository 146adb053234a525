#pragma once

// Child processes for runners: own process group, scrubbed environment, output to files,
// a timeout that terminates and then kills the whole group, and death with the parent.

#include <string>
#include <vector>

namespace kiln {

struct process_options {
  std::vector<std::string> argv; ///< argv[0] is the program (absolute path or found on PATH)
  std::vector<std::string> env;  ///< the complete environment (`KEY=value`); nothing is inherited
  std::string cwd;               ///< working directory; empty keeps the parent's
  std::string stdout_path;       ///< file that receives stdout (truncated first)
  std::string stderr_path;       ///< file that receives stderr (truncated first)
  double timeout_s = 60;         ///< wall-clock limit; <= 0 means none
  double kill_grace_s = 2;       ///< between SIGTERM to the group and SIGKILL
  long memory_limit_bytes = 0;   ///< RLIMIT_AS when > 0
};

struct process_result {
  bool started = false; ///< false when fork/exec failed; see `error`
  int exit_code = -1;   ///< when it exited normally
  int signal = 0;       ///< the signal that ended it, 0 if none
  bool timed_out = false;
  double wall_ms = 0;
  std::string error; ///< why it could not start
};

/// Runs a child to completion (blocking). The child gets its own process group and is killed
/// with SIGKILL if the calling process dies (PR_SET_PDEATHSIG).
process_result run_process(const process_options& opts);

/// Every executable file called `name` in the absolute directories of this process's PATH, in
/// PATH order. Relative entries are skipped: they would depend on a child's working directory.
std::vector<std::string> find_on_path(const std::string& name);

/// The last `max_bytes` of a file, or empty if it cannot be read.
std::string tail_of_file(const std::string& path, size_t max_bytes);

} // namespace kiln
