#pragma once

// Child processes for runners: own process group, scrubbed environment, output to files,
// a timeout that terminates and then kills the whole group, death with the parent, and the
// isolation of gpu/sandbox.hpp when asked for.

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace kiln {

struct sandbox_policy;

/// What a child of kiln is for (gpu/quiet_host.hpp keeps a registry of them): a runner that may
/// be timed, a compile worker, or anything else kiln starts. Every group that is not timed is
/// frozen alike while a timing runs; the role is for logs and tests.
enum class process_role { runner, compile, other };

struct process_options {
  std::vector<std::string> argv; ///< argv[0] is the program (absolute path or found on PATH)
  std::vector<std::string> env;  ///< the complete environment (`KEY=value`); nothing is inherited
  std::string cwd;               ///< working directory; empty keeps the parent's
  std::string stdout_path;       ///< file that receives stdout (truncated first)
  std::string stderr_path;       ///< file that receives stderr (truncated first)
  double timeout_s = 60;         ///< wall-clock limit; <= 0 means none
  double kill_grace_s = 2;       ///< between SIGTERM to the group and SIGKILL
  long memory_limit_bytes = 0;   ///< RLIMIT_AS when > 0
  /// Added to the child's nice value (0: the daemon's): background work such as builds yields
  /// the host's CPUs to what is being timed.
  int nice = 0;
  /// Becomes the child's stdin when >= 0 (duplicated; the caller keeps and closes its own);
  /// otherwise stdin is /dev/null.
  int stdin_fd = -1;
  /// Isolation to apply (gpu/sandbox.hpp); null applies none. With a new PID namespace the
  /// child is a small init that runs the program as its only child and reports how it ended,
  /// so that when it ends the kernel kills everything the program left behind.
  const sandbox_policy* sandbox = nullptr;
  /// Registered with the quiet host under this role for as long as it lives; it starts confined
  /// to the cores no timer uses (gpu/quiet_host.hpp), and its timeout does not count the time
  /// it spends frozen while another runner is timed.
  process_role role = process_role::other;
};

struct process_result {
  bool started = false; ///< false when fork/exec failed; see `error`
  int exit_code = -1;   ///< when it exited normally
  int signal = 0;       ///< the signal that ended it, 0 if none
  bool timed_out = false;
  double wall_ms = 0;
  std::string error; ///< why it could not start
};

/// A started child that has not been reaped yet. Move-only; destroying it kills its group.
/// One thread at a time may use it; any thread of the process may.
class child_process {
public:
  child_process() = default;
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;

  /// False when it could not be started (see `error()`) or was already waited for.
  bool running() const { return pid_ > 0; }
  const std::string& error() const { return error_; }
  pid_t pid() const { return pid_; }
  /// Whether it is running and has not exited yet (does not reap).
  bool alive() const;
  /// A descriptor that becomes readable when the child exits, or -1 (kernels before 5.3).
  int exit_fd() const { return pidfd_; }

  /// Waits until it exits or `timeout_s` (<= 0: none) has passed since this call, then
  /// SIGTERM to the group, `kill_grace_s`, SIGKILL. Reaps it; nothing of its group (or of its
  /// PID namespace) survives. `wall_ms` counts from this call.
  process_result wait(double timeout_s, double kill_grace_s);
  /// The same, and while waiting calls `on_readable` whenever `watch_fd` is readable; it
  /// returns false to stop watching (the descriptor is closed or done with).
  process_result wait(double timeout_s, double kill_grace_s, int watch_fd,
                      const std::function<bool()>& on_readable);
  /// SIGKILL to the group, then reaps as `wait` does.
  process_result kill();

private:
  friend child_process start_process(const process_options& opts);
  process_result finish(bool timed_out, std::chrono::steady_clock::time_point since);

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int status_fd_ = -1; ///< the init's report of how the program ended (PID namespace only)
  std::string error_;
};

/// Starts a child and returns at once; `running()` is false (with `error()`) when it could not
/// be started.
child_process start_process(const process_options& opts);

/// Runs a child to completion (blocking). The child gets its own process group and is killed
/// with SIGKILL if the calling process dies (PR_SET_PDEATHSIG).
process_result run_process(const process_options& opts);

/// Every executable file called `name` in the absolute directories of this process's PATH, in
/// PATH order. Relative entries are skipped: they would depend on a child's working directory.
std::vector<std::string> find_on_path(const std::string& name);

/// The last `max_bytes` of a file, or empty if it cannot be read.
std::string tail_of_file(const std::string& path, size_t max_bytes);

} // namespace kiln
