#include "gpu/quiet_host.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "gpu/devices.hpp"

// How it fits together:
//
//   registry   pgid -> {role, frozen?, how, since, frozen time so far}     (mutex `mu`)
//   windows    open quiet_windows, each with the groups it times
//   reconcile  a group is frozen iff some unexpired window is open and no open window times it;
//              run whenever a window opens, closes, gains a group, expires, or a group registers
//   watchdog   a process of its own (not kiln's child, no PDEATHSIG, its own session) that
//              holds the read end of a pipe; kiln writes "frozen g" / "thawed g" before it
//              freezes and after it thaws; when kiln dies the pipe reaches EOF and the watchdog
//              thaws what is still frozen (SIGCONT, or 0 into cgroup.freeze), then exits
//   monitor    one thread: samples the host's CPU use while windows are open (foreign load),
//              expires windows open longer than max_freeze_s
//
// Lock order: `sample_mu` before `mu`, never the other way.

namespace kiln {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string read_small(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return {};
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > (1U << 20))
        break;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  ::close(fd);
  return out;
}

bool write_text(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  errno = err;
  return n == static_cast<ssize_t>(text.size());
}

// -- /proc -----------------------------------------------------------------------------------

struct proc_entry {
  pid_t pid = 0;
  char state = 0;
  pid_t pgrp = 0;
  pid_t ppid = 0;
  /// Clock ticks after boot when it started: with the pid, who it is (pids are reused).
  unsigned long long start = 0;
  /// utime + stime + cutime + cstime: what the process and the children it reaped used, so that
  /// a compiler or a PID namespace's program reaped inside the group still counts as the group's.
  unsigned long long ticks = 0;
};

bool parse_stat(const std::string& text, proc_entry& out) {
  // The command name may hold anything, spaces and parentheses included: fields start after the
  // last ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos)
    return false;
  char state = 0;
  int ppid = 0;
  int pgrp = 0;
  unsigned long long utime = 0, stime = 0;
  long long cutime = 0, cstime = 0;
  unsigned long long start = 0;
  if (std::sscanf(text.c_str() + close + 1,
                  " %c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld %*d %*d %*d %*d "
                  "%llu",
                  &state, &ppid, &pgrp, &utime, &stime, &cutime, &cstime, &start)
      != 8)
    return false;
  out.state = state;
  out.pgrp = pgrp;
  out.ppid = ppid;
  out.start = start;
  out.ticks = utime + stime + static_cast<unsigned long long>(std::max(0LL, cutime))
              + static_cast<unsigned long long>(std::max(0LL, cstime));
  return true;
}

template <class F> void for_each_process(F f) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr)
    return;
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    proc_entry p;
    p.pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (parse_stat(read_small(std::string("/proc/") + e->d_name + "/stat"), p))
      f(p);
  }
  ::closedir(proc);
}

/// The live members of each of `pgids`.
std::map<pid_t, std::vector<pid_t>> members_of(const std::set<pid_t>& pgids) {
  std::map<pid_t, std::vector<pid_t>> out;
  if (pgids.empty())
    return out;
  for_each_process([&](const proc_entry& p) {
    if (pgids.count(p.pgrp) != 0 && p.state != 'Z' && p.state != 'X')
      out[p.pgrp].push_back(p.pid);
  });
  return out;
}

/// Every thread of `pid`: affinity is per thread, and torch's pools already run when a window
/// opens (threads started later inherit the mask of the thread that starts them).
void set_process_cores(pid_t pid, const cpu_set_t& set) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    ::sched_setaffinity(pid, sizeof set, &set);
    return;
  }
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    // ESRCH (the thread ended) and EINVAL (none of the cores online any more) leave it as it is.
    ::sched_setaffinity(static_cast<pid_t>(std::atoi(e->d_name)), sizeof set, &set);
  }
  ::closedir(d);
}

cpu_set_t to_set(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores)
    if (c >= 0 && c < CPU_SETSIZE)
      CPU_SET(c, &set);
  return set;
}

void set_group_cores(const std::set<pid_t>& pgids, const std::vector<int>& cores) {
  if (cores.empty() || pgids.empty())
    return;
  const cpu_set_t set = to_set(cores);
  for (auto& [pgid, pids] : members_of(pgids))
    for (pid_t pid : pids)
      set_process_cores(pid, set);
}

std::vector<int> own_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  // The main thread's (its tid is the pid): a worker thread may have been pinned by a library.
  if (::sched_getaffinity(::getpid(), sizeof set, &set) != 0)
    return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set))
      out.push_back(c);
  return out;
}

/// Busy ticks of the whole host (/proc/stat `cpu`: user, nice, system, irq, softirq, steal;
/// guest time is already inside user).
std::optional<unsigned long long> host_busy_ticks() {
  auto text = read_small("/proc/stat");
  unsigned long long v[8] = {};
  if (std::sscanf(text.c_str(), "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                  &v[3], &v[4], &v[5], &v[6], &v[7])
      < 7)
    return std::nullopt;
  return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
}

double load_average() {
  double one = 0;
  auto text = read_small("/proc/loadavg");
  if (std::sscanf(text.c_str(), "%lf", &one) != 1)
    return 0;
  return one;
}

unsigned long long self_ticks() {
  proc_entry p;
  if (!parse_stat(read_small("/proc/self/stat"), p))
    return 0;
  return p.ticks;
}

/// The N of `cuda:N`, or -1.
int gpu_index(const std::string& device) {
  if (device.rfind("cuda:", 0) != 0 || device.size() <= 5
      || device.find_first_not_of("0123456789", 5) != std::string::npos || device.size() > 9)
    return -1;
  return std::atoi(device.c_str() + 5);
}

// -- the watchdog --------------------------------------------------------------------------------

/// One line of the pipe to the watchdog; smaller than PIPE_BUF, so every write is whole.
struct watchdog_record {
  int32_t op = 0;
  int32_t pgid = 0;
};
enum : int32_t {
  wd_signal_frozen = 1,
  wd_cgroup_frozen = 2,
  wd_thawed = 3,
  wd_cgroup_made = 4, ///< g<pgid> exists: removed at the end unless kiln said it is gone
  wd_cgroup_gone = 5,
};
constexpr int watchdog_slots = 4096;

/// Formats `n` into `out` (async-signal-safe); returns the length.
int format_uint(char* out, unsigned n) {
  char rev[16];
  int len = 0;
  do {
    rev[len++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n != 0 && len < 16);
  for (int i = 0; i < len; ++i)
    out[i] = rev[len - 1 - i];
  return len;
}

void close_fds(int first, int last) {
  if (first < 0)
    first = 0;
  if (first > last)
    return;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), static_cast<unsigned>(last), 0) == 0)
    return;
#endif
  for (int fd = first; fd <= last && fd < 65536; ++fd)
    ::close(fd);
}

// Runs in a process forked from a multithreaded one: system calls only, no allocation.
[[noreturn]] void watchdog_main(int read_fd, int base_fd, const char* base_path) {
  ::setsid(); // a terminal's ^C to kiln's group must not take the watchdog with it
  // Nothing of kiln's may stay open here: another thread's pipes must reach EOF as before.
  const int lo = std::min(read_fd, base_fd);
  const int hi = std::max(read_fd, base_fd);
  close_fds(0, lo - 1);
  close_fds(lo + 1, hi - 1);
  close_fds(hi + 1, INT_MAX);
  static int32_t pgids[watchdog_slots];
  static int32_t kinds[watchdog_slots];
  static int32_t cgroups[watchdog_slots];
  int n = 0;
  int made = 0;
  for (;;) {
    watchdog_record rec;
    ssize_t got = ::read(read_fd, &rec, sizeof rec);
    if (got < 0 && errno == EINTR)
      continue;
    if (got != static_cast<ssize_t>(sizeof rec))
      break; // EOF: kiln is gone (or broke the protocol: thaw all the same)
    if (rec.op == wd_cgroup_made || rec.op == wd_cgroup_gone) {
      int at = -1;
      for (int i = 0; i < made; ++i)
        if (cgroups[i] == rec.pgid)
          at = i;
      if (rec.op == wd_cgroup_gone && at >= 0)
        cgroups[at] = cgroups[--made];
      else if (rec.op == wd_cgroup_made && at < 0 && made < watchdog_slots)
        cgroups[made++] = rec.pgid;
      continue;
    }
    int at = -1;
    for (int i = 0; i < n; ++i)
      if (pgids[i] == rec.pgid)
        at = i;
    if (rec.op == wd_thawed) {
      if (at >= 0) {
        pgids[at] = pgids[n - 1];
        kinds[at] = kinds[n - 1];
        --n;
      }
    } else if (at >= 0) {
      kinds[at] = rec.op;
    } else if (n < watchdog_slots) {
      pgids[n] = rec.pgid;
      kinds[n] = rec.op;
      ++n;
    }
  }
  // SIGCONT again a few times over half a second: seen under load on two cores, a group's
  // busy orphan now and then stayed stopped after the first (kiln's stop and this continue may
  // reach it out of order while its parent dies); more continues cost nothing.
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < n; ++i)
      if (kinds[i] == wd_signal_frozen)
        ::kill(-pgids[i], SIGCONT);
    timespec nap{0, 100'000'000};
    ::nanosleep(&nap, nullptr);
  }
  for (int i = 0; i < n; ++i) {
    if (kinds[i] == wd_signal_frozen)
      continue;
    char path[64] = {'g'};
    int len = 1 + format_uint(path + 1, static_cast<unsigned>(pgids[i]));
    std::memcpy(path + len, "/cgroup.freeze", 15);
    int fd = ::openat(base_fd, path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t ignored = ::write(fd, "0", 1);
      (void)ignored;
      ::close(fd);
    }
  }
  // kiln's children die with it (PDEATHSIG), so their cgroups empty within moments: a few
  // tries over about two seconds; one that still holds a process (an orphan that lives on) stays,
  // harmless and empty once it ends.
  for (int round = 0; round < 40 && (made > 0 || base_path != nullptr); ++round) {
    for (int i = 0; i < made;) {
      char path[32] = {'g'};
      path[1 + format_uint(path + 1, static_cast<unsigned>(cgroups[i]))] = '\0';
      if (::unlinkat(base_fd, path, AT_REMOVEDIR) == 0 || errno == ENOENT)
        cgroups[i] = cgroups[--made];
      else
        ++i;
    }
    if (made == 0 && (base_path == nullptr || ::rmdir(base_path) == 0 || errno == ENOENT))
      break;
    timespec nap{0, 50'000'000};
    ::nanosleep(&nap, nullptr);
  }
  ::_exit(0);
}

pid_t raw_fork() {
  // Like gpu/process.cpp: no atfork handlers in a child that only makes system calls.
  return static_cast<pid_t>(::syscall(SYS_clone, static_cast<unsigned long>(SIGCHLD), nullptr,
                                      nullptr, nullptr, nullptr));
}

/// Starts the watchdog (a grandchild, so that it is nobody's child to reap in kiln); returns
/// the write end of its pipe, or -1.
int start_watchdog(int base_fd, const std::string& base_path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return -1;
  const char* path = base_path.empty() ? nullptr : base_path.c_str();
  pid_t first = raw_fork();
  if (first == 0) {
    pid_t second = raw_fork();
    if (second == 0) {
      ::close(fds[1]);
      watchdog_main(fds[0], base_fd, path);
    }
    ::_exit(second > 0 ? 0 : 1);
  }
  ::close(fds[0]);
  if (first < 0) {
    ::close(fds[1]);
    return -1;
  }
  int status = 0;
  while (::waitpid(first, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ::close(fds[1]);
    return -1;
  }
  // A stuck watchdog must never block kiln: a record that does not fit is dropped (and said).
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  return fds[1];
}

// -- cgroup v2 -------------------------------------------------------------------------------

/// kiln's own cgroup v2 folder, from /proc/self/cgroup and the cgroup2 mount; empty if none.
std::string own_cgroup_dir() {
  std::string rel;
  auto groups = read_small("/proc/self/cgroup");
  for (size_t at = 0; at < groups.size();) {
    auto nl = groups.find('\n', at);
    auto line = groups.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? groups.size() : nl + 1;
    if (line.rfind("0::", 0) == 0)
      rel = line.substr(3);
  }
  if (rel.empty() || rel.find("(deleted)") != std::string::npos)
    return {};
  // mountinfo: id parent major:minor root mount-point options... - fstype source superoptions
  auto info = read_small("/proc/self/mountinfo");
  for (size_t at = 0; at < info.size();) {
    auto nl = info.find('\n', at);
    auto line = info.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? info.size() : nl + 1;
    auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0)
      continue;
    char root[4096];
    char mount[4096];
    if (std::sscanf(line.c_str(), "%*s %*s %*s %4095s %4095s", root, mount) != 2)
      continue;
    std::string r = root;
    if (r != "/" && rel.rfind(r, 0) != 0)
      continue;
    std::string tail = r == "/" ? rel : rel.substr(r.size());
    std::string dir = mount + (tail == "/" ? std::string{} : tail);
    return dir;
  }
  return {};
}

/// Removes what dead kiln processes left under `dir` (kiln-quiet-<pid> whose pid is gone): the
/// watchdog gives up on a cgroup an orphan still held, which is empty by now. One that still
/// holds a process stays.
void sweep_dead_bases(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return;
  std::vector<std::string> dead;
  const std::string prefix = "kiln-quiet-";
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()
        || name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + prefix.size()));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH)
      dead.push_back(dir + "/" + name);
  }
  ::closedir(d);
  for (const auto& base : dead) {
    if (DIR* b = ::opendir(base.c_str())) {
      std::vector<std::string> groups;
      while (dirent* e = ::readdir(b))
        if (e->d_name[0] == 'g' && e->d_type == DT_DIR)
          groups.push_back(base + "/" + e->d_name);
      ::closedir(b);
      for (const auto& g : groups)
        ::rmdir(g.c_str());
    }
    if (::rmdir(base.c_str()) == 0)
      spdlog::debug("quiet host: removed {}, left by a kiln that has ended", base);
  }
}

// -- state ---------------------------------------------------------------------------------------

struct group_entry {
  process_role role = process_role::other;
  bool frozen = false;
  bool by_cgroup = false;  ///< frozen through g<pgid>/cgroup.freeze (else SIGSTOP)
  bool has_cgroup = false; ///< g<pgid> exists
  clock_type::time_point since{};
  double frozen_total_s = 0;
  int confined_plan = -1; ///< the plan generation its cores were set for
};

enum class method { unknown, off, signals, cgroup };

} // namespace

struct quiet_window::state {
  std::set<pid_t> pgids;
  std::string device;
  clock_type::time_point opened{};
  bool open = true;
  bool expired = false;
  int timer_cores = 0;
  // Foreign load: the host's cumulative counters at the window's first sample.
  double start_foreign_ticks = 0;
  clock_type::time_point start_sample{};
  foreign_load_info final_load;
};

namespace {

struct host_state {
  std::mutex mu;
  std::condition_variable changed;
  bool configured = false;
  quiet_host_settings settings;
  core_plan plan;
  int plan_gen = 0;
  std::map<pid_t, group_entry> groups;
  std::vector<std::shared_ptr<quiet_window::state>> windows;
  std::vector<pid_t> stale_cgroups; ///< groups whose g<pgid> is to go once empty
  method how = method::unknown;
  std::string cgroup_base; ///< <kiln's cgroup>/kiln-quiet-<pid>
  int watchdog_fd = -1;
  bool monitor_started = false;
  int monitor_plan_gen = -1;
  bool said_watchdog_full = false;
  bool said_cgroup_fallback = false;

  // Foreign load (sample_mu).
  std::mutex sample_mu;
  bool have_sample = false;
  clock_type::time_point last_time{};
  unsigned long long last_busy = 0;
  unsigned long long last_self = 0;
  std::map<pid_t, unsigned long long> last_timed;
  double foreign_ticks = 0; ///< cumulative over every interval sampled
  double load = 0;
};

host_state& host() {
  // Never destroyed: the monitor thread may still run while static destructors do.
  static host_state* h = new host_state;
  return *h;
}

const double ticks_per_s = static_cast<double>(std::max(1L, ::sysconf(_SC_CLK_TCK)));
constexpr auto sample_interval = std::chrono::milliseconds(250);

int host_cores() {
  return static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

int count_gpus() {
  int n = 0;
  for (const auto& d : discover_devices())
    if (gpu_index(d.id) >= 0)
      ++n;
  return n;
}

void decide_method_locked(host_state& h);

void apply_settings_locked(host_state& h, quiet_host_settings s) {
  if (s.gpus < 0)
    s.gpus = count_gpus();
  if (s.cpus.empty())
    s.cpus = own_cpus();
  const bool same = h.configured && s.freeze == h.settings.freeze
                    && s.timer_cores == h.settings.timer_cores && s.gpus == h.settings.gpus
                    && s.max_freeze_s == h.settings.max_freeze_s && s.cpus == h.settings.cpus
                    && s.allow_cgroup == h.settings.allow_cgroup;
  if (same)
    return;
  auto plan = plan_cores(s.cpus, s.gpus, s.timer_cores);
  if (!plan.pinning && s.timer_cores > 0 && s.gpus > 0 && (!h.configured || plan.why != h.plan.why))
    spdlog::info("quiet host: no timer cores: {}", plan.why);
  else if (plan.pinning && (!h.configured || plan.timer != h.plan.timer))
    spdlog::info("quiet host: {} timer core(s) per GPU for {} GPU(s), {} core(s) for the rest",
                 s.timer_cores, s.gpus, plan.rest.size());
  h.settings = std::move(s);
  h.plan = std::move(plan);
  h.configured = true;
  ++h.plan_gen;
  // The way of freezing changes only while nothing is frozen: a thaw must undo what was done.
  const bool frozen =
      std::any_of(h.groups.begin(), h.groups.end(), [](const auto& g) { return g.second.frozen; });
  if (h.how != method::unknown && !frozen)
    decide_method_locked(h);
}

void ensure_configured_locked(host_state& h) {
  if (!h.configured)
    apply_settings_locked(h, quiet_host_settings{});
}

void tell_watchdog(host_state& h, int32_t op, pid_t pgid) {
  if (h.watchdog_fd < 0)
    return;
  watchdog_record rec{op, static_cast<int32_t>(pgid)};
  if (::write(h.watchdog_fd, &rec, sizeof rec) != static_cast<ssize_t>(sizeof rec)
      && !h.said_watchdog_full) {
    h.said_watchdog_full = true;
    spdlog::warn("quiet host: the watchdog's pipe is full; groups frozen from now on may stay "
                 "frozen if kiln dies");
  }
}

/// How to freeze now: cgroup v2 where kiln could make cgroups of its own (and may), else
/// signals; off without a watchdog, since then nothing could thaw what kiln leaves frozen.
void decide_method_locked(host_state& h) {
  if (h.watchdog_fd < 0)
    h.how = method::off;
  else
    h.how = h.settings.allow_cgroup && !h.cgroup_base.empty() ? method::cgroup : method::signals;
}

/// Looks for a cgroup of kiln's own and starts the watchdog (once, at the first freeze).
void choose_method_locked(host_state& h) {
  if (h.how != method::unknown)
    return;
  int base_fd = -1;
  std::string dir = own_cgroup_dir();
  if (!dir.empty() && ::access((dir + "/cgroup.procs").c_str(), W_OK) == 0) {
    sweep_dead_bases(dir);
    std::string base = dir + "/kiln-quiet-" + std::to_string(::getpid());
    if ((::mkdir(base.c_str(), 0755) == 0 || errno == EEXIST)
        && ::access((base + "/cgroup.freeze").c_str(), W_OK) == 0) {
      base_fd = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (base_fd >= 0)
        h.cgroup_base = base;
      else
        ::rmdir(base.c_str());
    } else {
      ::rmdir(base.c_str());
    }
  }
  h.watchdog_fd = start_watchdog(base_fd, h.cgroup_base);
  decide_method_locked(h);
  if (h.how == method::off)
    spdlog::warn("quiet host: cannot start the watchdog; kiln's other processes are not frozen "
                 "while it times");
  else
    spdlog::info("quiet host: freezing by {}", h.how == method::cgroup
                                                   ? "the cgroup v2 freezer under " + h.cgroup_base
                                                   : std::string{"SIGSTOP/SIGCONT"});
  // The watchdog has its own copy; kiln needs none.
  if (base_fd >= 0)
    ::close(base_fd);
}

bool cgroup_freeze_locked(host_state& h, pid_t pgid, group_entry& g,
                          const std::vector<pid_t>& members) {
  const std::string dir = h.cgroup_base + "/g" + std::to_string(pgid);
  if (!g.has_cgroup) {
    tell_watchdog(h, wd_cgroup_made, pgid);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return false;
    g.has_cgroup = true;
  }
  // Members join when they are first frozen: whatever they start later is born inside.
  for (pid_t pid : members)
    if (!write_text(dir + "/cgroup.procs", std::to_string(pid)) && errno != ESRCH)
      return false;
  return write_text(dir + "/cgroup.freeze", "1");
}

void freeze_locked(host_state& h, pid_t pgid, group_entry& g,
                   const std::map<pid_t, std::vector<pid_t>>& members) {
  if (h.how == method::cgroup) {
    tell_watchdog(h, wd_cgroup_frozen, pgid);
    auto it = members.find(pgid);
    if (cgroup_freeze_locked(h, pgid, g, it == members.end() ? std::vector<pid_t>{} : it->second)) {
      g.frozen = true;
      g.by_cgroup = true;
      g.since = clock_type::now();
      return;
    }
    if (!h.said_cgroup_fallback) {
      h.said_cgroup_fallback = true;
      spdlog::warn("quiet host: cannot freeze group {} through its cgroup ({}); using SIGSTOP",
                   pgid, std::strerror(errno));
    }
  }
  tell_watchdog(h, wd_signal_frozen, pgid);
  if (::kill(-pgid, SIGSTOP) != 0) {
    tell_watchdog(h, wd_thawed, pgid);
    return; // ESRCH: the group is gone and about to be unregistered
  }
  g.frozen = true;
  g.by_cgroup = false;
  g.since = clock_type::now();
}

void thaw_locked(host_state& h, pid_t pgid, group_entry& g) {
  if (!g.frozen)
    return;
  // Harmless when the group died meanwhile: ESRCH, or a cgroup with nobody in it.
  if (g.by_cgroup)
    write_text(h.cgroup_base + "/g" + std::to_string(pgid) + "/cgroup.freeze", "0");
  else
    ::kill(-pgid, SIGCONT);
  tell_watchdog(h, wd_thawed, pgid);
  g.frozen_total_s += seconds_between(g.since, clock_type::now());
  g.frozen = false;
}

std::set<pid_t> timed_locked(const host_state& h) {
  std::set<pid_t> out;
  for (const auto& w : h.windows)
    out.insert(w->pgids.begin(), w->pgids.end());
  return out;
}

void reconcile_locked(host_state& h) {
  bool active = false;
  for (const auto& w : h.windows)
    active = active || !w->expired;
  const bool freeze = active && h.settings.freeze;
  if (freeze)
    choose_method_locked(h);
  const auto timed = timed_locked(h);
  std::set<pid_t> to_freeze;
  for (auto& [pgid, g] : h.groups) {
    const bool want = freeze && h.how != method::off && timed.count(pgid) == 0;
    if (want && !g.frozen)
      to_freeze.insert(pgid);
    else if (!want && g.frozen)
      thaw_locked(h, pgid, g);
  }
  if (to_freeze.empty())
    return;
  // Only the cgroup freezer needs the members (to move them into the group's cgroup).
  const auto members =
      h.how == method::cgroup ? members_of(to_freeze) : std::map<pid_t, std::vector<pid_t>>{};
  for (pid_t pgid : to_freeze)
    freeze_locked(h, pgid, h.groups[pgid], members);
}

/// The cores `device`'s timed runner gets under `plan`: its GPU's timer cores, the rest for the
/// CPU device (docs/evaluation.md); empty: not pinned.
std::vector<int> window_cores(const core_plan& plan, const std::string& device) {
  if (!plan.pinning)
    return {};
  int index = gpu_index(device);
  if (index >= 0)
    return index < static_cast<int>(plan.timer.size()) ? plan.timer[static_cast<size_t>(index)]
                                                       : std::vector<int>{};
  return plan.rest;
}

/// Gives every registered group that is not timed the rest of the cores, once per plan (the
/// ones started before the plan existed, or before it changed).
void confine_untimed_locked(host_state& h) {
  if (!h.plan.pinning)
    return;
  const auto timed = timed_locked(h);
  std::set<pid_t> todo;
  for (auto& [pgid, g] : h.groups)
    if (g.confined_plan != h.plan_gen && timed.count(pgid) == 0) {
      todo.insert(pgid);
      g.confined_plan = h.plan_gen;
    }
  set_group_cores(todo, h.plan.rest);
}

/// One sample of the host's CPU use: the interval since the last one adds what neither the
/// timed groups (and `extra`, which is about to be timed) nor kiln itself used.
void sample_locked_s(host_state& h, const std::set<pid_t>& extra) {
  std::set<pid_t> timed;
  {
    std::lock_guard<std::mutex> lock{h.mu};
    timed = timed_locked(h);
  }
  timed.insert(extra.begin(), extra.end());
  const auto now = clock_type::now();
  const auto busy = host_busy_ticks();
  const auto self = self_ticks();
  std::map<pid_t, unsigned long long> cur;
  if (!timed.empty())
    for_each_process([&](const proc_entry& p) {
      if (timed.count(p.pgrp) != 0)
        cur[p.pid] = p.ticks;
    });
  if (!busy)
    return;
  if (h.have_sample) {
    double timed_ticks = 0;
    for (auto& [pid, ticks] : cur) {
      auto it = h.last_timed.find(pid);
      if (it != h.last_timed.end() && ticks >= it->second)
        timed_ticks += static_cast<double>(ticks - it->second);
    }
    const double total = static_cast<double>(*busy - std::min(*busy, h.last_busy));
    const double own = static_cast<double>(self - std::min(self, h.last_self));
    // Per interval and clamped: the counters are rounded to ticks, and a group's reaped child
    // lands in its parent's counters all at once.
    h.foreign_ticks += std::max(0.0, total - timed_ticks - own);
  }
  h.have_sample = true;
  h.last_time = now;
  h.last_busy = *busy;
  h.last_self = self;
  h.last_timed = std::move(cur);
  h.load = load_average();
}

foreign_load_info load_since_s(const host_state& h, const quiet_window::state& w) {
  foreign_load_info out;
  out.device = w.device;
  out.seconds = seconds_between(w.start_sample, h.last_time);
  if (out.seconds > 0)
    out.other_cores = (h.foreign_ticks - w.start_foreign_ticks) / ticks_per_s / out.seconds;
  out.load_average = h.load;
  out.host_cores = host_cores();
  out.timer_cores = w.timer_cores;
  return out;
}

void monitor_main() {
  auto& h = host();
  for (;;) {
    bool sample = false;
    {
      std::unique_lock<std::mutex> lock{h.mu};
      if (!h.windows.empty())
        h.changed.wait_for(lock, sample_interval);
      else if (h.stale_cgroups.empty())
        h.changed.wait(lock, [&] { return !h.windows.empty() || !h.stale_cgroups.empty(); });
      else // a cgroup whose last process is still exiting: look again in a while
        h.changed.wait_for(lock, std::chrono::seconds(1), [&] { return !h.windows.empty(); });
      // The monitor is kiln's too: it keeps off the timers' cores.
      if (h.monitor_plan_gen != h.plan_gen && h.plan.pinning) {
        const cpu_set_t set = to_set(h.plan.rest);
        ::sched_setaffinity(0, sizeof set, &set);
        h.monitor_plan_gen = h.plan_gen;
      }
      const auto now = clock_type::now();
      bool expired = false;
      for (auto& w : h.windows)
        if (!w->expired && seconds_between(w->opened, now) > h.settings.max_freeze_s) {
          w->expired = true;
          expired = true;
          spdlog::warn("quiet host: a timing on {} has held the host quiet for more than {:.0f} "
                       "s; thawing kiln's other processes",
                       w->device, h.settings.max_freeze_s);
        }
      if (expired)
        reconcile_locked(h);
      for (auto it = h.stale_cgroups.begin(); it != h.stale_cgroups.end();) {
        if (::rmdir((h.cgroup_base + "/g" + std::to_string(*it)).c_str()) == 0 || errno == ENOENT) {
          tell_watchdog(h, wd_cgroup_gone, *it);
          it = h.stale_cgroups.erase(it);
        } else {
          ++it;
        }
      }
      sample = !h.windows.empty();
    }
    if (sample) {
      std::lock_guard<std::mutex> lock{h.sample_mu};
      sample_locked_s(h, {});
    }
  }
}

void ensure_monitor_locked(host_state& h) {
  if (h.monitor_started)
    return;
  h.monitor_started = true;
  std::thread{monitor_main}.detach();
}

} // namespace

const char* role_name(process_role role) {
  switch (role) {
    case process_role::runner:
      return "runner";
    case process_role::compile:
      return "compile";
    case process_role::other:
      return "other";
  }
  return "other";
}

quiet_host_settings quiet_host_settings_from(const evaluator_config& cfg) {
  quiet_host_settings s;
  s.freeze = cfg.quiet_host;
  s.timer_cores = static_cast<int>(cfg.timer_cores);
  s.gpus = count_gpus();
  return s;
}

void configure_quiet_host(const quiet_host_settings& s) {
  auto& h = host();
  std::lock_guard<std::mutex> lock{h.mu};
  apply_settings_locked(h, s);
  reconcile_locked(h); // freeze switched off: thaw at once
}

core_plan plan_cores(std::vector<int> cpus, int gpus, int timer_cores) {
  core_plan plan;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  cpus.erase(std::remove_if(cpus.begin(), cpus.end(), [](int c) { return c < 0; }), cpus.end());
  plan.rest = cpus;
  const long n = static_cast<long>(cpus.size());
  if (timer_cores <= 0) {
    plan.why = "[evaluator] timer_cores is 0";
    return plan;
  }
  if (gpus <= 0) {
    plan.why = "no GPU";
    return plan;
  }
  const long wanted = static_cast<long>(gpus) * timer_cores;
  const long keep = std::max(1L, n / 2);
  if (n - wanted < keep) {
    plan.why = std::to_string(gpus) + " GPU(s) x " + std::to_string(timer_cores)
               + " timer core(s) would leave " + std::to_string(std::max(0L, n - wanted)) + " of "
               + std::to_string(n) + " core(s) to the rest of kiln (at least "
               + std::to_string(keep) + " needed)";
    return plan;
  }
  plan.pinning = true;
  auto top = cpus.end();
  for (int g = 0; g < gpus; ++g) {
    std::vector<int> mine(top - timer_cores, top);
    top -= timer_cores;
    plan.timer.push_back(std::move(mine));
  }
  plan.rest.assign(cpus.begin(), top);
  return plan;
}

core_plan current_core_plan() {
  auto& h = host();
  std::lock_guard<std::mutex> lock{h.mu};
  ensure_configured_locked(h);
  return h.plan;
}

std::string freeze_method() {
  auto& h = host();
  std::lock_guard<std::mutex> lock{h.mu};
  ensure_configured_locked(h);
  if (!h.settings.freeze)
    return "off";
  choose_method_locked(h);
  switch (h.how) {
    case method::cgroup:
      return "cgroup";
    case method::signals:
      return "signals";
    default:
      return "off";
  }
}

void register_group(pid_t pgid, process_role role) {
  if (pgid <= 0)
    return;
  auto& h = host();
  std::lock_guard<std::mutex> lock{h.mu};
  auto& g = h.groups[pgid];
  g = group_entry{};
  g.role = role;
  // spawn_cores set its cores in the child already when a plan existed.
  g.confined_plan = h.configured && h.plan.pinning ? h.plan_gen : -1;
  if (!h.windows.empty()) {
    confine_untimed_locked(h);
    reconcile_locked(h);
  }
}

void unregister_group(pid_t pgid) {
  if (pgid <= 0)
    return;
  auto& h = host();
  // A timed group's last counters (its leader is a zombie by now, which /proc still shows) go
  // into the foreign-load books before it disappears.
  bool timed = false;
  {
    std::lock_guard<std::mutex> lock{h.mu};
    if (h.groups.count(pgid) == 0)
      return;
    timed = timed_locked(h).count(pgid) != 0;
  }
  if (timed) {
    std::lock_guard<std::mutex> lock{h.sample_mu};
    sample_locked_s(h, {});
  }
  std::lock_guard<std::mutex> lock{h.mu};
  auto it = h.groups.find(pgid);
  if (it == h.groups.end())
    return;
  thaw_locked(h, pgid, it->second);
  if (it->second.has_cgroup) {
    h.stale_cgroups.push_back(pgid);
    h.changed.notify_all();
    ensure_monitor_locked(h);
  }
  h.groups.erase(it);
}

double frozen_seconds(pid_t pgid) {
  auto& h = host();
  std::lock_guard<std::mutex> lock{h.mu};
  auto it = h.groups.find(pgid);
  if (it == h.groups.end())
    return 0;
  double s = it->second.frozen_total_s;
  if (it->second.frozen)
    s += seconds_between(it->second.since, clock_type::now());
  return s;
}

bool group_frozen(pid_t pgid) {
  auto& h = host();
  std::lock_guard<std::mutex> lock{h.mu};
  auto it = h.groups.find(pgid);
  return it != h.groups.end() && it->second.frozen;
}

std::vector<int> spawn_cores(process_role) {
  auto& h = host();
  std::lock_guard<std::mutex> lock{h.mu};
  if (!h.configured || !h.plan.pinning)
    return {};
  return h.plan.rest;
}

std::string foreign_load_note(const foreign_load_info& info) {
  const bool cpu = gpu_index(info.device) < 0;
  const double limit = cpu ? defaults::foreign_load_cpu_cores
                           : defaults::foreign_load_per_timer_core * std::max(1, info.timer_cores);
  // Shorter than a few clock ticks of /proc/stat, the figure is rounding, not load.
  if (info.seconds < 0.05 || info.other_cores < limit)
    return {};
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "host busy: other processes used %.1f of %d cores during the timing (load "
                "average %.1f); the timing may be slow",
                info.other_cores, info.host_cores, info.load_average);
  return buf;
}

quiet_window::quiet_window(std::vector<pid_t> pgids, std::string device)
    : state_(std::make_shared<state>()) {
  auto& h = host();
  state_->device = std::move(device);
  for (pid_t p : pgids)
    if (p > 0)
      state_->pgids.insert(p);
  {
    std::lock_guard<std::mutex> sample_lock{h.sample_mu};
    {
      std::lock_guard<std::mutex> lock{h.mu};
      ensure_configured_locked(h);
    }
    sample_locked_s(h, state_->pgids);
    state_->start_foreign_ticks = h.foreign_ticks;
    state_->start_sample = h.last_time;
    std::lock_guard<std::mutex> lock{h.mu};
    cores_ = window_cores(h.plan, state_->device);
    state_->timer_cores = static_cast<int>(cores_.size());
    state_->opened = clock_type::now();
    h.windows.push_back(state_);
    reconcile_locked(h);
    confine_untimed_locked(h);
    ensure_monitor_locked(h);
    h.changed.notify_all();
  }
  set_group_cores(state_->pgids, cores_);
}

quiet_window::~quiet_window() {
  close();
}

void quiet_window::add(pid_t pgid) {
  if (pgid <= 0)
    return;
  auto& h = host();
  {
    std::lock_guard<std::mutex> sample_lock{h.sample_mu};
    {
      std::lock_guard<std::mutex> lock{h.mu};
      if (!state_->open || state_->pgids.count(pgid) != 0)
        return;
    }
    sample_locked_s(h, {pgid});
    std::lock_guard<std::mutex> lock{h.mu};
    state_->pgids.insert(pgid);
    reconcile_locked(h);
  }
  set_group_cores({pgid}, cores_);
}

void quiet_window::close() {
  auto& h = host();
  std::set<pid_t> back_to_rest;
  std::vector<int> rest;
  {
    std::lock_guard<std::mutex> sample_lock{h.sample_mu};
    {
      std::lock_guard<std::mutex> lock{h.mu};
      if (!state_->open)
        return;
    }
    sample_locked_s(h, {});
    state_->final_load = load_since_s(h, *state_);
    std::lock_guard<std::mutex> lock{h.mu};
    state_->open = false;
    h.windows.erase(std::remove(h.windows.begin(), h.windows.end(), state_), h.windows.end());
    reconcile_locked(h);
    if (h.plan.pinning && !cores_.empty()) {
      const auto timed = timed_locked(h);
      for (pid_t p : state_->pgids)
        if (timed.count(p) == 0 && h.groups.count(p) != 0)
          back_to_rest.insert(p);
      rest = h.plan.rest;
    }
    if (state_->expired)
      spdlog::info("quiet host: the timing on {} that outlasted the freeze ended after {:.1f} s",
                   state_->device, seconds_between(state_->opened, clock_type::now()));
  }
  // A runner that outlives its timing must not keep a timer's cores.
  set_group_cores(back_to_rest, rest);
}

foreign_load_info quiet_window::foreign_load() const {
  auto& h = host();
  std::lock_guard<std::mutex> sample_lock{h.sample_mu};
  {
    std::lock_guard<std::mutex> lock{h.mu};
    if (!state_->open)
      return state_->final_load;
  }
  sample_locked_s(h, {});
  return load_since_s(h, *state_);
}

std::string quiet_window::note() const {
  auto text = foreign_load_note(foreign_load());
  if (expired()) {
    auto& h = host();
    double limit = 0;
    {
      std::lock_guard<std::mutex> lock{h.mu};
      limit = h.settings.max_freeze_s;
    }
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "the timing outlasted the quiet host's limit of %.0f s, so kiln's own builds "
                  "and runners ran beside the rest of it",
                  limit);
    text += (text.empty() ? "" : "; ") + std::string{buf};
  }
  return text;
}

bool quiet_window::expired() const {
  auto& h = host();
  std::lock_guard<std::mutex> lock{h.mu};
  return state_->expired;
}

stopped_tree::stopped_tree(pid_t leader) {
  if (leader <= 0)
    return;
  std::set<pid_t> done;
  // A process may fork between the scan and its stop: scan again until a pass finds nobody new
  // (everyone found is stopped, so the tree cannot grow behind the last pass).
  for (int pass = 0; pass < 8; ++pass) {
    std::map<pid_t, std::vector<pid_t>> children;
    std::map<pid_t, proc_entry> by_pid;
    for_each_process([&](const proc_entry& p) {
      if (p.state == 'Z' || p.state == 'X')
        return;
      by_pid[p.pid] = p;
      children[p.ppid].push_back(p.pid);
    });
    std::set<pid_t> tree;
    std::vector<pid_t> todo{leader};
    while (!todo.empty()) {
      pid_t p = todo.back();
      todo.pop_back();
      if (by_pid.count(p) == 0 || !tree.insert(p).second)
        continue;
      for (pid_t c : children[p])
        todo.push_back(c);
    }
    for (const auto& [pid, p] : by_pid)
      if (p.pgrp == leader)
        tree.insert(pid);
    bool found = false;
    for (pid_t pid : tree) {
      if (!done.insert(pid).second)
        continue;
      found = true;
      stop(pid, by_pid[pid].start);
    }
    if (!found)
      break;
  }
}

void stopped_tree::stop(pid_t pid, unsigned long long start) {
  // Through a pidfd, checked against the start time the scan saw: the pid cannot have been
  // reused for somebody else's process between the check and the signal.
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    if (errno == ENOSYS && ::kill(pid, SIGSTOP) == 0)
      pids_.push_back(pid);
    return;
  }
  proc_entry now;
  if (!parse_stat(read_small("/proc/" + std::to_string(pid) + "/stat"), now) || now.start != start
      || ::syscall(SYS_pidfd_send_signal, fd, SIGSTOP, nullptr, 0) != 0) {
    ::close(fd);
    return;
  }
  fds_.push_back(fd);
}

stopped_tree::~stopped_tree() {
  for (int fd : fds_) {
    ::syscall(SYS_pidfd_send_signal, fd, SIGCONT, nullptr, 0);
    ::close(fd);
  }
  for (pid_t pid : pids_)
    ::kill(pid, SIGCONT);
}

} // namespace kiln
