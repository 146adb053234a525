#pragma once

// Pre-warmed runner interpreters of one device (docs/evaluation.md, "The runner pool").
//
//   spawn: <python> -I -B kiln_harness.py --serve   in its own folder (cwd, HOME, and its
//          tmp/ as /tmp and TMPDIR: the only place it may write besides `<work_dir>/cache`),
//          sandboxed
//     └─ imports torch (never CUDA), writes "ready\n" to its control socket (its stdin),
//        blocks reading one line
//   take:  an idle runner that is still alive (else a cold one, started now)
//   hand:  the job.json path and "\n" on the socket; the runner swaps its stdin for
//          /dev/null, runs exactly that job and exits
//
// Every job gets a fresh process; the pool only moves the interpreter's start-up (and the
// torch import, about 1 s) out of the job's way. All methods are for one thread: the thread
// that owns the engine, which is also the thread that forks, so that PR_SET_PDEATHSIG ties the
// runners' lives to it.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu/outside_clock.hpp"
#include "gpu/process.hpp"
#include "gpu/sandbox.hpp"

namespace kiln {

/// How the runners of one device are started.
struct runner_launch {
  std::string device; ///< for log lines
  std::string python;
  std::string harness_path;
  std::string runners_dir; ///< each runner gets a fresh folder `r<n>-<pid>` in here
  /// The environment of a runner whose folder (and HOME) is `dir` and whose TMPDIR is `tmp`.
  std::function<std::vector<std::string>(const std::string& dir, const std::string& tmp)> env;
  /// Isolation; the runner's own folder is added to the writable folders, its `tmp/` becomes
  /// its private /tmp.
  sandbox_policy sandbox;
  /// Refill as soon as a runner is taken (CUDA); otherwise only when `refill()` is called,
  /// between evaluations (CPU: a torch import in the background would disturb CPU timings).
  bool refill_on_take = false;
  /// Before handing out a runner, wait until no idle runner is still importing (CPU: the same
  /// reason).
  bool quiet_before_jobs = false;
  /// How long a runner may take to become ready before it is given up as broken.
  double ready_timeout_s = 300;
};

/// One runner process, for exactly one job.
class runner_process {
public:
  ~runner_process();
  runner_process(const runner_process&) = delete;
  runner_process& operator=(const runner_process&) = delete;

  const std::string& dir() const { return dir_; }
  std::string stdout_path() const { return dir_ + "/stdout.txt"; }
  std::string stderr_path() const { return dir_ + "/stderr.txt"; }
  pid_t pid() const { return child_.pid(); }
  /// Started before it was needed (and so, usually, with torch already imported).
  bool warm() const { return warm_; }
  /// Sent "ready" (torch imported).
  bool ready();

  /// Hands over `job_path` and waits at most `timeout_s` from now (then TERM, grace, KILL).
  /// With `gate`, what the runner says on its control socket (`trials` when its outputs are on
  /// disk, `block` after each block of a paired timing) is answered with `gate(message)`:
  /// `time`, `block`, `done` or `stop` (docs/evaluation.md, "The runner protocol").
  /// With `stamps`, the timing loop's stamps on the same socket are taken down as they arrive
  /// (gpu/outside_clock.hpp).
  process_result run(const std::string& job_path, double timeout_s, double kill_grace_s = 2,
                     const std::function<std::string(const std::string&)>& gate = {},
                     outside_clock* stamps = nullptr);

  /// From now on the caller removes the folder; by default it goes with this object.
  void keep_dir() { owns_dir_ = false; }

private:
  friend class runner_pool;
  runner_process() = default;
  /// Reads what the runner said on its control socket; false once it is closed.
  bool poll_control(int wait_ms);

  child_process child_;
  int control_ = -1; ///< our end of the runner's stdin socket
  std::string dir_;
  bool warm_ = false;
  bool ready_ = false;
  bool owns_dir_ = true;
};

class runner_pool {
public:
  /// Starts nothing yet: the first `refill()` or `take()` does.
  runner_pool(runner_launch launch, size_t size);
  /// Kills the idle runners and removes their folders.
  ~runner_pool();
  runner_pool(const runner_pool&) = delete;
  runner_pool& operator=(const runner_pool&) = delete;

  /// A runner for one job: the oldest idle one that is still alive (one that died while idle
  /// is discarded), else one started now. Null with `error` when none can be started.
  std::unique_ptr<runner_process> take(std::string& error);

  /// Starts runners until `size` are idle.
  void refill();

  size_t size() const { return size_; }
  /// From now on refill() keeps `n` idle; runners already idle stay. A one-shot command sets 0
  /// once its runners are warming, so that it starts none for a job that never comes.
  void resize(size_t n) { size_ = n; }
  size_t idle() const { return idle_.size(); }
  /// Pids of the idle runners, oldest first (for tests and logs).
  std::vector<pid_t> idle_pids() const;
  const runner_launch& launch() const { return launch_; }

private:
  std::unique_ptr<runner_process> spawn(bool warm, std::string& error);
  /// Waits (bounded) until every idle runner is ready; drops the ones that died or never are.
  void wait_quiet();
  void discard(std::unique_ptr<runner_process> r, const char* why);

  runner_launch launch_;
  size_t size_;
  std::deque<std::unique_ptr<runner_process>> idle_;
  uint64_t counter_ = 0;
};

/// Refills a pool when it goes out of scope: an evaluation declares one first, so that the
/// interpreters of the next evaluation import torch after this one is over.
struct pool_refill_guard {
  runner_pool& pool;
  ~pool_refill_guard() { pool.refill(); }
};

} // namespace kiln
