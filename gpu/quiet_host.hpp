#pragma once

// A quiet host while kiln times (docs/evaluation.md, "Quiet host while timing"). kiln's own
// children (pre-warmed runners, other lanes' runners, compile workers and the compilers they
// start) compete with a timed runner for the CPU that launches its kernels; a launch-bound model
// timed 11.3 ms beside a dozen builds and 6.5 ms on a quiet host. While a `quiet_window` is
// open, every process group kiln started that no open window times is frozen, the timed runner
// runs on cores of its own, and the window measures how busy the rest of the host was.
//
// Every process group that gpu/process.cpp starts is registered here with its role and removed
// when it ends (just before its leader is reaped, so that a reused pid is never signalled). All
// functions are safe to call from any thread.
//
// A timing path opens a window once it may time, with the runner's pid (runner_context::on_start
// tells it; the pid is the group id), and closes it when the runner has ended:
//
//   configure_quiet_host(quiet_host_settings_from(cfg));          // once, cheap when repeated
//   std::optional<quiet_window> quiet;
//   ... at the gate's go: quiet.emplace(std::vector<pid_t>{pid}, settings.device);
//   ... a second runner timed alternately: quiet->add(other_pid);
//   ... once run_runner has returned: quiet->close(); notes.push_back(quiet->note()) if any

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "config/config.hpp"
#include "gpu/process.hpp"

namespace kiln {

const char* role_name(process_role role);

/// How the quiet host behaves; one set per process (every engine of a run has the same config).
struct quiet_host_settings {
  /// Freeze kiln's other children while a window is open (`[evaluator] quiet_host`).
  bool freeze = defaults::quiet_host;
  /// Cores of each GPU's timer (`[evaluator] timer_cores`); 0: no pinning.
  int timer_cores = static_cast<int>(defaults::timer_cores);
  /// GPUs that get timer cores; -1: as many CUDA devices as gpu/devices.hpp finds.
  int gpus = -1;
  /// A window open longer than this stops freezing by itself (a hung timing must not starve
  /// the builds forever).
  double max_freeze_s = defaults::quiet_max_freeze_s;
  /// kiln's usable cores; empty: sched_getaffinity of this process. Tests pass fake lists.
  std::vector<int> cpus;
  /// Freeze through cgroup v2 where kiln can make cgroups of its own; false: always by signals
  /// (tests of that way). Changes take effect while nothing is frozen.
  bool allow_cgroup = true;
};

/// The settings of a config, GPUs counted by gpu/devices.hpp.
quiet_host_settings quiet_host_settings_from(const evaluator_config& cfg);

/// Applies `s` from now on (windows already open keep their cores). Idempotent; an engine calls
/// it before its first window, a test to choose its cores.
void configure_quiet_host(const quiet_host_settings& s);

/// Which cores each GPU's timer gets and which cores the rest of kiln's children keep.
struct core_plan {
  bool pinning = false;                ///< false: nobody is pinned (see `why`)
  std::string why;                     ///< why pinning is off, for the log
  std::vector<std::vector<int>> timer; ///< timer[i]: the cores of cuda:i, ascending
  std::vector<int> rest;               ///< everything else of `cpus`, ascending
};

/// The core arithmetic, pure: from the top of `cpus` (kiln's allowed cores, any order, no
/// duplicates needed), `timer_cores` per GPU, one disjoint set per GPU index; pinning only when
/// the rest keeps at least half of the cores (at least one). The CPU device gets no set of its
/// own: its runner keeps `rest` (docs/evaluation.md).
core_plan plan_cores(std::vector<int> cpus, int gpus, int timer_cores);

/// The plan now in force (configured, else from the defaults).
core_plan current_core_plan();

/// How the groups are frozen: `cgroup` (a cgroup v2 freezer of kiln's own subtree) or `signals`
/// (SIGSTOP/SIGCONT of the process group); `off` when freezing is switched off or cannot be
/// made safe (no watchdog).
std::string freeze_method();

// -- the registry (gpu/process.cpp calls these) --------------------------------------------------

/// A child of kiln that leads its own process group (`pgid` = its pid). A group registered
/// while a window is open is frozen at once (unless a window times it).
void register_group(pid_t pgid, process_role role);
/// The group is gone (reaped): it is thawed in the books and forgotten. Harmless for a group
/// never registered.
void unregister_group(pid_t pgid);
/// How long `pgid` has been frozen in all, the current freeze included: time that a deadline of
/// its own must not count.
double frozen_seconds(pid_t pgid);
/// Whether kiln holds `pgid` frozen now (tests, logs).
bool group_frozen(pid_t pgid);
/// The cores a child of `role` is confined to at spawn (empty: no confinement).
std::vector<int> spawn_cores(process_role role);

/// Foreign load of a window: how busy the host was with what kiln does not time.
struct foreign_load_info {
  std::string device;      ///< the window's device
  double seconds = 0;      ///< how long the window measured
  double other_cores = 0;  ///< average cores busy with anything but the timed groups and kiln
  double load_average = 0; ///< /proc/loadavg, 1 minute, at the last sample
  int host_cores = 0;      ///< online cores of the host
  int timer_cores = 0;     ///< cores the timed runner ran on (0: not pinned)
};

/// Whether `info` is heavy enough to say so: the others used more than half the cores the timer
/// runs on (pinned), or more than defaults::foreign_load_cores (not pinned). The note, or empty.
std::string foreign_load_note(const foreign_load_info& info);

/// While it lives, every process of `leader`'s tree is stopped (SIGSTOP): its process group
/// and every descendant of the leader, those that left the group included (setsid, setpgid). A
/// candidate's runner is held so while the reference times its turns: nothing the candidate
/// started can load the host, or watch for the reference's turns to do so, then. Continued
/// (SIGCONT) when it goes; each process is signalled through a pidfd checked against the start
/// time the scan saw, so a reused pid is never touched.
class stopped_tree {
public:
  explicit stopped_tree(pid_t leader);
  ~stopped_tree();
  stopped_tree(const stopped_tree&) = delete;
  stopped_tree& operator=(const stopped_tree&) = delete;
  /// How many processes it holds.
  size_t size() const { return fds_.size() + pids_.size(); }

private:
  void stop(pid_t pid, unsigned long long start);
  std::vector<int> fds_;
  std::vector<pid_t> pids_; ///< without pidfds (kernels before 5.3)
};

/// The quiet host for one timing: open while a runner (or two, measured alternately) is timed.
/// Construct it with the groups it times and their device (`cuda:N` or `cpu`); more groups may
/// join later. Not copyable or movable; one thread at a time may use one window.
class quiet_window {
public:
  quiet_window(std::vector<pid_t> pgids, std::string device);
  ~quiet_window();
  quiet_window(const quiet_window&) = delete;
  quiet_window& operator=(const quiet_window&) = delete;

  /// Times `pgid` too (thawed and pinned like the first).
  void add(pid_t pgid);
  /// Ends the window now (the destructor does nothing more); idempotent.
  void close();

  /// The foreign load so far (final once closed).
  foreign_load_info foreign_load() const;
  /// foreign_load_note of it: empty unless the host was busy.
  std::string note() const;
  /// The cores the timed groups are pinned to (empty: not pinned).
  const std::vector<int>& cores() const { return cores_; }
  /// Whether the window ran past max_freeze_s and stopped freezing.
  bool expired() const;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::vector<int> cores_;
};

} // namespace kiln
