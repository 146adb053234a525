#include "gpu/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "gpu/quiet_host.hpp"
#include "gpu/sandbox.hpp"

// How a child runs (see process.hpp for the contract):
//
//   parent: resolve argv[0] on PATH, open the files, build argv/envp arrays,
//           prepare the sandbox (Landlock ruleset, limits, identity)  (may allocate)
//   fork (glibc's _Fork), or clone(CLONE_NEWPID | CLONE_NEWNET) for a sandboxed child
//   child:  signals to default, setpgid, PDEATHSIG, rlimits, mounts of the sandbox,
//           stdio, chdir, close every other fd            (async-signal-safe calls only)
//           unsandboxed: execve the program
//           sandboxed: execve kiln-sandbox with the program's environment, which (with a new
//           PID namespace) stays as its init and forks the program, applies Landlock, the
//           identity and seccomp, and execs it (gpu/sandbox_launcher.cpp)
//           on failure: write {stage, errno} to a CLOEXEC pipe and _exit
//   init:   reaps everything until the program exits, writes its status to a second pipe
//           and exits; the kernel then kills whatever else is left in the namespace
//   parent: read the pipe: EOF means execve succeeded, a record means it failed;
//           wait on a pidfd (or poll waitid) until exit or timeout;
//           timeout: SIGTERM to the group, grace, then SIGKILL to the group;
//           always SIGKILL the group before reaping the leader, then wait for stragglers.
//
// Why an init at all: the init of a PID namespace ignores every signal it has no handler for,
// even SIGSEGV it sends itself and SIGTERM from the parent. Python as init would survive
// `os.kill(os.getpid(), SIGSEGV)` and a timeout's SIGTERM; as the init's child it dies of them
// as anywhere else, and the init passes the status on. Why a launcher: a fork of kiln keeps
// kiln's environment and memory (its API keys) readable at /proc/1/environ and /proc/1/mem of
// the namespace.
//
// Everything lives on the caller's stack or in the child_process, so concurrent starts from
// several threads are safe.

namespace kiln {

namespace {

using clock_type = std::chrono::steady_clock;

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r (g++ defines _GNU_SOURCE): unlike strerror it is safe across threads.
  return strerror_r(err, buf, sizeof buf);
}

/// Owns a file descriptor.
class unique_fd {
public:
  explicit unique_fd(int fd = -1) : fd_(fd) {}
  ~unique_fd() { reset(); }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other)
      reset(other.release());
    return *this;
  }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_;
};

// Descriptors we hand to the child must not be 0, 1 or 2 (possible when the daemon closed its
// stdio), or the child's dup2 onto the standard descriptors would clobber them.
int raise_fd(int fd) {
  if (fd < 0 || fd > 2)
    return fd;
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  ::close(fd);
  errno = saved;
  return high;
}

// O_CLOEXEC always: children that other threads fork at the same moment must not keep our files.
unique_fd open_high(const std::string& path, int flags) {
  return unique_fd(raise_fd(::open(path.c_str(), flags | O_CLOEXEC, 0644)));
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string current_dir() {
  std::string buf(PATH_MAX, '\0');
  if (::getcwd(buf.data(), buf.size()) == nullptr)
    return ".";
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

// The child may chdir before execve, so a relative program path is made absolute against the
// parent's directory, and a bare name is looked up on the parent's PATH (the child's environment
// is the caller's business and need not have one).
std::optional<std::string> resolve_program(const std::string& name, std::string& error) {
  if (name.empty()) {
    error = "empty program name";
    return std::nullopt;
  }
  if (name.find('/') != std::string::npos)
    return name.front() == '/' ? name : current_dir() + "/" + name;
  auto found = find_on_path(name);
  if (!found.empty())
    return found.front();
  const char* env_path = ::getenv("PATH");
  error = "cannot start '" + name + "': not found on PATH (" + (env_path ? env_path : "") + ")";
  return std::nullopt;
}

/// The steps of the child before execve; one of them travels back through the report pipe
/// (sandbox_stage values above 20 too).
enum class child_stage : int {
  process_group = 1,
  stdio,
  chdir,
  limits,
  exec,
  fork,
};

std::string describe_stage(int stage) {
  if (stage >= static_cast<int>(sandbox_stage::oom_score))
    return describe(static_cast<sandbox_stage>(stage));
  switch (static_cast<child_stage>(stage)) {
    case child_stage::process_group:
      return "setpgid";
    case child_stage::stdio:
      return "redirecting stdin/stdout/stderr";
    case child_stage::chdir:
      return "chdir";
    case child_stage::limits:
      return "setrlimit";
    case child_stage::exec:
      return "execve";
    case child_stage::fork:
      return "fork in the new PID namespace";
  }
  return "starting";
}

struct child_report {
  int stage = 0;
  int error = 0;
};

/// How the program ended, as the init of its PID namespace saw it.
struct init_status {
  int exited = 0; ///< 1: `code` is the exit code; 0: `code` is the signal
  int code = 0;
};

/// Everything the child needs, prepared before fork: after fork only async-signal-safe calls
/// are allowed (another thread may have held the malloc lock at the moment of fork).
struct child_plan {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  int in_fd = -1;
  int out_fd = -1;
  int err_fd = -1;
  int report_fd = -1;
  pid_t parent = 0;
  int parent_pidfd = -1; ///< to see whether the parent died before PDEATHSIG was armed
  bool limit_memory = false;
  struct rlimit memory {};
  int nice = 0;
  bool confine = false; ///< set the CPU affinity to `cores` (the cores no timer uses)
  cpu_set_t cores{};
  int max_fd = 1024;
  const sandbox_plan* sandbox = nullptr;
  bool init = false;  ///< the launcher stays as init of the new PID namespace
  int status_fd = -1; ///< init: where the program's status goes
  /// The launcher (gpu/sandbox_launcher.cpp) and its arguments, for a sandboxed child: execve
  /// of it, with the program's environment, replaces kiln's memory before anything else runs.
  const char* launcher = nullptr;
  char* const* launcher_argv = nullptr;
  /// The launcher opened before fork: the child's own /tmp (mounted before the exec) hides a
  /// launcher that lies beneath the host's, as a kiln built in /tmp does.
  int launcher_fd = -1;
};

/// Where the launcher finds what kiln's child passes on: fixed numbers, so that its arguments
/// can be written before fork.
constexpr int launcher_report_fd = 3;
constexpr int launcher_status_fd = 4;
constexpr int launcher_landlock_fd = 5;
/// The launcher's own file, executed through its descriptor (close-on-exec: gone once it runs).
constexpr int launcher_exec_fd = 6;

[[noreturn]] void child_fail(const child_plan& plan, int stage, int error) {
  child_report report{stage, error};
  ssize_t ignored = ::write(plan.report_fd, &report, sizeof report);
  (void)ignored;
  ::_exit(127);
}

[[noreturn]] void child_fail(const child_plan& plan, child_stage stage) {
  child_fail(plan, static_cast<int>(stage), errno);
}

void close_range_from(unsigned first, unsigned last, int max_fd) {
  if (first > last)
    return;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, first, last, 0) == 0)
    return;
#endif
  // Kernels before 5.9: close one by one up to the limit measured before fork.
  for (unsigned fd = first; fd <= last && fd < static_cast<unsigned>(max_fd); ++fd)
    ::close(static_cast<int>(fd));
}

/// A new process sharing nothing but what fork shares, skipping the atfork handlers. Used
/// where glibc's fork would be wrong: with namespace flags, and inside the init.
pid_t raw_clone(int flags) {
  return static_cast<pid_t>(::syscall(SYS_clone, static_cast<unsigned long>(flags | SIGCHLD),
                                      nullptr, nullptr, nullptr, nullptr));
}

[[noreturn]] void exec_program(const child_plan& plan) {
  if (::dup2(plan.in_fd, 0) < 0 || ::dup2(plan.out_fd, 1) < 0 || ::dup2(plan.err_fd, 2) < 0)
    child_fail(plan, child_stage::stdio);
  if (plan.cwd != nullptr && ::chdir(plan.cwd) != 0)
    child_fail(plan, child_stage::chdir);
  // Descriptors inherited from other threads of the daemon (sockets, other children's pipes)
  // and the init's status pipe must not leak; only the report pipe stays until execve closes
  // it (CLOEXEC).
  auto report = static_cast<unsigned>(plan.report_fd);
  close_range_from(3, report - 1, plan.max_fd);
  close_range_from(report + 1, ~0U, plan.max_fd);
  ::execve(plan.path, plan.argv, plan.envp);
  child_fail(plan, child_stage::exec);
}

// Only stdio and the descriptors the launcher is told of survive: moved out of the way first
// (every source may sit on a target number), then onto their numbers, then all else closed.
[[noreturn]] void exec_launcher(const child_plan& plan) {
  if (::dup2(plan.in_fd, 0) < 0 || ::dup2(plan.out_fd, 1) < 0 || ::dup2(plan.err_fd, 2) < 0)
    child_fail(plan, child_stage::stdio);
  if (plan.cwd != nullptr && ::chdir(plan.cwd) != 0)
    child_fail(plan, child_stage::chdir);
  const int landlock = plan.sandbox != nullptr ? plan.sandbox->landlock_fd : -1;
  int report = ::fcntl(plan.report_fd, F_DUPFD, 16);
  int status = plan.init ? ::fcntl(plan.status_fd, F_DUPFD, 16) : -1;
  int rules = landlock >= 0 ? ::fcntl(landlock, F_DUPFD, 16) : -1;
  int program = plan.launcher_fd >= 0 ? ::fcntl(plan.launcher_fd, F_DUPFD, 16) : -1;
  if (report < 0 || (plan.init && status < 0) || (landlock >= 0 && rules < 0)
      || (plan.launcher_fd >= 0 && program < 0))
    child_fail(plan, child_stage::stdio);
  if (::dup2(report, launcher_report_fd) < 0
      || (status >= 0 && ::dup2(status, launcher_status_fd) < 0)
      || (rules >= 0 && ::dup2(rules, launcher_landlock_fd) < 0)
      || (program >= 0 && ::dup3(program, launcher_exec_fd, O_CLOEXEC) < 0))
    child_fail(plan, child_stage::stdio);
  close_range_from(launcher_exec_fd + 1, ~0U, plan.max_fd);
  if (!plan.init)
    ::close(launcher_status_fd);
  if (landlock < 0)
    ::close(launcher_landlock_fd);
  if (program >= 0)
    ::syscall(SYS_execveat, launcher_exec_fd, "", plan.launcher_argv, plan.envp, AT_EMPTY_PATH);
  if (program < 0 || errno == ENOSYS) // kernels before 3.19: by its name
    ::execve(plan.launcher, plan.launcher_argv, plan.envp);
  child_report failed{static_cast<int>(sandbox_stage::launcher), errno};
  ssize_t ignored = ::write(launcher_report_fd, &failed, sizeof failed);
  (void)ignored;
  ::_exit(127);
}

bool parent_gone(const child_plan& plan) {
  if (!plan.init)
    return ::getppid() != plan.parent;
  // In a new PID namespace getppid() is 0; the parent's pidfd turns readable when it exits.
  if (plan.parent_pidfd < 0)
    return false;
  pollfd pfd{plan.parent_pidfd, POLLIN, 0};
  return ::poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) != 0;
}

[[noreturn]] void child_main(const child_plan& plan) {
  // Ignored signals and the blocked mask survive execve; the daemon's choices (SIGPIPE ignored,
  // signals blocked in worker threads) must not leak into the runner, or SIGTERM might not land.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig)
    ::sigaction(sig, &dfl, nullptr); // fails harmlessly for SIGKILL, SIGSTOP, libc-internal ones
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  if (::setpgid(0, 0) != 0)
    child_fail(plan, child_stage::process_group);
  // Before anything can start a thread or a process: all of them inherit it. A failure (a core
  // gone offline) leaves the daemon's cores, which only costs quiet.
  if (plan.confine)
    ::sched_setaffinity(0, sizeof plan.cores, &plan.cores);
  // Dies with the thread that forked it: callers fork from threads that live as long as the
  // children they own (run_process blocks its thread; the runner pool belongs to the engine's
  // thread). If the parent died before prctl, nobody would send the signal: check right after.
  // As init of a PID namespace, its death takes every process of the namespace with it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent_gone(plan))
    ::_exit(127);

  struct rlimit no_core {};
  if (::setrlimit(RLIMIT_CORE, &no_core) != 0)
    child_fail(plan, child_stage::limits);
  if (plan.limit_memory && ::setrlimit(RLIMIT_AS, &plan.memory) != 0)
    child_fail(plan, child_stage::limits);
  if (plan.nice > 0) {
    errno = 0;
    if (::nice(plan.nice) == -1 && errno != 0)
      child_fail(plan, child_stage::limits);
  }
  if (plan.sandbox != nullptr) {
    sandbox_stage stage = sandbox_stage::oom_score;
    if (int err = apply_sandbox(*plan.sandbox, stage); err != 0)
      child_fail(plan, static_cast<int>(stage), err);
  }
  if (plan.launcher != nullptr)
    exec_launcher(plan);
  exec_program(plan);
}

/// Waits until the leader has exited, without reaping it (so its pid, which is also the group
/// id, cannot be reused while we still signal the group). Returns false at the deadline.
bool wait_exited(pid_t pid, int pidfd, std::optional<clock_type::time_point> deadline,
                 int watch_fd = -1, const std::function<bool()>* on_readable = nullptr) {
  long nap_ns = 1'000'000;
  // Time the group spends frozen while another runner is timed is not its own: it moves the
  // deadline, as the parent's time at the gate does.
  double frozen_seen = frozen_seconds(pid);
  for (;;) {
    siginfo_t info{};
    int rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && info.si_pid == pid)
      return true;
    if (rc != 0 && errno == ECHILD)
      return true; // already reaped behind our back (SIGCHLD set to SIG_IGN): it is gone
    int wait_ms = -1;
    if (deadline) {
      if (double frozen = frozen_seconds(pid); frozen > frozen_seen) {
        *deadline += std::chrono::duration_cast<clock_type::duration>(
            std::chrono::duration<double>(frozen - frozen_seen));
        frozen_seen = frozen;
      }
      auto left = *deadline - clock_type::now();
      if (left <= clock_type::duration::zero())
        return false;
      double ms = std::ceil(std::chrono::duration<double, std::milli>(left).count());
      wait_ms = static_cast<int>(std::min(ms, static_cast<double>(INT_MAX)));
    }
    if (pidfd >= 0 || watch_fd >= 0) {
      // The pidfd becomes readable when the process exits: no polling loop, no wakeups. Without
      // one, a watched descriptor is polled with the nap below as the limit.
      pollfd pfds[2];
      nfds_t n = 0;
      if (pidfd >= 0)
        pfds[n++] = {pidfd, POLLIN, 0};
      if (watch_fd >= 0)
        pfds[n++] = {watch_fd, POLLIN, 0};
      int limit = wait_ms;
      if (pidfd < 0) { // nothing tells of the exit: wake up after a nap to look again
        const int nap_ms = static_cast<int>(nap_ns / 1'000'000);
        limit = wait_ms < 0 ? nap_ms : std::min(nap_ms, wait_ms);
      }
      int ready = ::poll(pfds, n, limit); // EINTR or a wakeup: check again above
      if (ready > 0 && watch_fd >= 0 && (pfds[n - 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        // The time the parent spends answering (comparing outputs, waiting for the device) is
        // not the child's: it moves the deadline.
        const auto asked = clock_type::now();
        if (on_readable == nullptr || !*on_readable || !(*on_readable)())
          watch_fd = -1;
        if (deadline)
          *deadline += clock_type::now() - asked;
      }
      if (pidfd < 0)
        nap_ns = std::min<long>(nap_ns * 2, 20'000'000);
      continue;
    }
    long ns = nap_ns;
    if (wait_ms >= 0)
      ns = std::min<long>(ns, static_cast<long>(wait_ms) * 1'000'000);
    timespec ts{0, ns};
    ::nanosleep(&ts, nullptr);
    nap_ns = std::min<long>(nap_ns * 2, 20'000'000);
  }
}

// A member of the group that has not exited yet (zombies are harmless: they hold no resources
// and init reaps them).
bool group_has_live_member(pid_t pgid) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr)
    return false;
  bool found = false;
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
      continue;
    std::string stat_path = std::string("/proc/") + entry->d_name + "/stat";
    int fd = ::open(stat_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    char buf[512];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0)
      continue;
    buf[n] = '\0';
    // Format: pid (comm) state ppid pgrp ...; comm may contain anything, so parse after the
    // last ')'.
    const char* close_paren = std::strrchr(buf, ')');
    if (close_paren == nullptr)
      continue;
    char state = 0;
    int ppid = 0;
    int pgrp = 0;
    if (std::sscanf(close_paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3)
      continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') {
      found = true;
      break;
    }
  }
  ::closedir(proc);
  return found;
}

// SIGKILL is delivered asynchronously and the grandchildren belong to init, so they cannot be
// reaped here: wait (bounded) until none of them is still running.
void wait_group_gone(pid_t pgid) {
  if (::kill(-pgid, 0) != 0)
    return; // ESRCH: nothing left, the usual case
  auto deadline = clock_type::now() + std::chrono::seconds(2);
  while (group_has_live_member(pgid) && clock_type::now() < deadline) {
    ::kill(-pgid, SIGKILL);
    timespec ts{0, 2'000'000};
    ::nanosleep(&ts, nullptr);
  }
}

clock_type::time_point after(clock_type::time_point start, double seconds) {
  // Clamped so that absurd values do not overflow the clock's representation.
  double s = std::clamp(seconds, 0.0, 1e9);
  return start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
}

} // namespace

child_process::~child_process() {
  if (running())
    kill();
  if (status_fd_ >= 0)
    ::close(status_fd_);
}

child_process::child_process(child_process&& other) noexcept {
  *this = std::move(other);
}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this == &other)
    return *this;
  if (running())
    kill();
  if (status_fd_ >= 0)
    ::close(status_fd_);
  pid_ = std::exchange(other.pid_, -1);
  pidfd_ = std::exchange(other.pidfd_, -1);
  status_fd_ = std::exchange(other.status_fd_, -1);
  error_ = std::move(other.error_);
  return *this;
}

bool child_process::alive() const {
  if (!running())
    return false;
  siginfo_t info{};
  int rc = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  return rc == 0 && info.si_pid != pid_;
}

process_result child_process::wait(double timeout_s, double kill_grace_s) {
  return wait(timeout_s, kill_grace_s, -1, {});
}

process_result child_process::wait(double timeout_s, double kill_grace_s, int watch_fd,
                                   const std::function<bool()>& on_readable) {
  auto start = clock_type::now();
  if (!running()) {
    process_result res;
    res.error = error_.empty() ? "no process to wait for" : error_;
    return res;
  }
  std::optional<clock_type::time_point> deadline;
  if (timeout_s > 0)
    deadline = after(start, timeout_s);
  bool timed_out = false;
  if (!wait_exited(pid_, pidfd_, deadline, watch_fd, &on_readable)) {
    timed_out = true;
    ::kill(-pid_, SIGTERM);
    wait_exited(pid_, pidfd_, after(clock_type::now(), kill_grace_s));
  }
  return finish(timed_out, start);
}

process_result child_process::kill() {
  return finish(false, clock_type::now());
}

process_result child_process::finish(bool timed_out, clock_type::time_point since) {
  process_result res;
  res.started = true;
  res.timed_out = timed_out;
  // Out of the quiet host's books before the kill and the reaping: after the reaping its pid
  // (the group id) may belong to someone else, who must never be stopped or continued.
  unregister_group(pid_);
  // Whether the leader exited by itself or not, nothing of its group may outlive the call. The
  // leader is still unreaped here, which keeps the group id from being reused by someone else.
  ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t reaped;
  while ((reaped = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  if (reaped == pid_) {
    if (WIFEXITED(status))
      res.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      res.signal = WTERMSIG(status);
  } else {
    res.error = "exit status lost: " + errno_text(errno);
  }
  // The init's own status is 128 + signal at best; its report says what the program did. No
  // report means the init itself was killed (timeout, daemon), and its status is the truth.
  if (status_fd_ >= 0) {
    init_status st;
    if (::read(status_fd_, &st, sizeof st) == static_cast<ssize_t>(sizeof st)) {
      res.exit_code = st.exited ? st.code : -1;
      res.signal = st.exited ? 0 : st.code;
    }
    ::close(status_fd_);
    status_fd_ = -1;
  }
  wait_group_gone(pid_);
  if (pidfd_ >= 0)
    ::close(pidfd_);
  pidfd_ = -1;
  pid_ = -1;
  res.wall_ms = std::chrono::duration<double, std::milli>(clock_type::now() - since).count();
  return res;
}

child_process start_process(const process_options& opts) {
  child_process child;
  std::string& error = child.error_;
  if (opts.argv.empty()) {
    error = "cannot start a process without argv";
    return child;
  }
  const std::string& name = opts.argv.front();
  auto path = resolve_program(name, error);
  if (!path)
    return child;

  std::vector<char*> argv;
  argv.reserve(opts.argv.size() + 1);
  for (const auto& arg : opts.argv)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(opts.env.size() + 1);
  for (const auto& var : opts.env)
    envp.push_back(const_cast<char*>(var.c_str()));
  envp.push_back(nullptr);

  sandbox_plan sandbox;
  if (opts.sandbox != nullptr && !prepare_sandbox(*opts.sandbox, sandbox, error, *path)) {
    error = "cannot start '" + name + "': " + error;
    return child;
  }

  auto open_output = [&](const std::string& file, const char* what, unique_fd& fd) {
    fd = file.empty() ? open_high("/dev/null", O_WRONLY)
                      : open_high(file, O_WRONLY | O_CREAT | O_TRUNC);
    if (fd.get() < 0)
      error = "cannot open " + std::string(what) + " file '" + file + "': " + errno_text(errno);
    return fd.get() >= 0;
  };
  unique_fd in_fd = opts.stdin_fd >= 0 ? unique_fd(::fcntl(opts.stdin_fd, F_DUPFD_CLOEXEC, 3))
                                       : open_high("/dev/null", O_RDONLY);
  if (in_fd.get() < 0) {
    error = "cannot open stdin: " + errno_text(errno);
    return child;
  }
  unique_fd out_fd;
  unique_fd err_fd;
  if (!open_output(opts.stdout_path, "stdout", out_fd))
    return child;
  // One file for both streams: share the descriptor, or the two truncated opens would
  // overwrite each other from offset 0.
  bool shared_output = !opts.stdout_path.empty() && opts.stderr_path == opts.stdout_path;
  if (!shared_output && !open_output(opts.stderr_path, "stderr", err_fd))
    return child;

  auto make_pipe = [&](unique_fd& read_end, unique_fd& write_end) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      error = "cannot start '" + name + "': pipe: " + errno_text(errno);
      return false;
    }
    read_end.reset(raise_fd(fds[0]));
    write_end.reset(raise_fd(fds[1]));
    if (read_end.get() < 0 || write_end.get() < 0) {
      error = "cannot start '" + name + "': pipe: " + errno_text(errno);
      return false;
    }
    return true;
  };
  unique_fd report_read;
  unique_fd report_write;
  if (!make_pipe(report_read, report_write))
    return child;
  const bool init = sandbox.new_pid_namespace();
  unique_fd status_read;
  unique_fd status_write;
  if (init) {
    if (!make_pipe(status_read, status_write))
      return child;
    ::fcntl(status_read.get(), F_SETFL, O_NONBLOCK);
  }
  unique_fd parent_pidfd;
#ifdef SYS_pidfd_open
  if (init)
    parent_pidfd.reset(raise_fd(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0))));
#endif

  child_plan plan;
  plan.path = path->c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = opts.cwd.empty() ? nullptr : opts.cwd.c_str();
  plan.in_fd = in_fd.get();
  plan.out_fd = out_fd.get();
  plan.err_fd = shared_output ? out_fd.get() : err_fd.get();
  plan.report_fd = report_write.get();
  plan.parent = ::getpid();
  plan.parent_pidfd = parent_pidfd.get();
  if (opts.memory_limit_bytes > 0) {
    struct rlimit current {};
    ::getrlimit(RLIMIT_AS, &current);
    auto wanted = static_cast<rlim_t>(opts.memory_limit_bytes);
    plan.limit_memory = true;
    plan.memory.rlim_max = current.rlim_max;
    plan.memory.rlim_cur =
        current.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, current.rlim_max);
  }
  plan.nice = opts.nice;
  if (auto cores = spawn_cores(opts.role); !cores.empty()) {
    plan.confine = true;
    CPU_ZERO(&plan.cores);
    for (int c : cores)
      if (c >= 0 && c < CPU_SETSIZE)
        CPU_SET(c, &plan.cores);
  }
  long open_max = ::sysconf(_SC_OPEN_MAX);
  plan.max_fd = static_cast<int>(std::clamp<long>(open_max, 1024, 65536));
  if (opts.sandbox != nullptr)
    plan.sandbox = &sandbox;
  plan.init = init;
  plan.status_fd = status_write.get();
  std::vector<std::string> launcher_args;
  std::vector<char*> launcher_argv;
  unique_fd launcher_file;
  if (!sandbox.launcher.empty()) {
    launcher_args = {sandbox.launcher, "--report", std::to_string(launcher_report_fd)};
    auto add = [&launcher_args](const char* flag, auto value) {
      launcher_args.push_back(flag);
      launcher_args.push_back(std::to_string(value));
    };
    if (init)
      add("--init", launcher_status_fd);
    if (sandbox.landlock_fd >= 0) {
      add("--landlock", launcher_landlock_fd);
      add("--proc-rights", sandbox.proc_self_rights);
      if (sandbox.private_shm)
        add("--shm-rights", sandbox.shm_rights);
    }
    if (sandbox.drop_identity) {
      add("--uid", sandbox.uid);
      add("--gid", sandbox.gid);
    }
    if (sandbox.seccomp)
      launcher_args.push_back("--seccomp");
    if (sandbox.allow_perf)
      launcher_args.push_back("--perf");
    if (!init)
      add("--parent", ::getpid());
    launcher_args.push_back("--");
    launcher_args.push_back(*path);
    for (const auto& arg : opts.argv)
      launcher_args.push_back(arg);
    for (auto& arg : launcher_args)
      launcher_argv.push_back(arg.data());
    launcher_argv.push_back(nullptr);
    plan.launcher = launcher_args.front().c_str();
    plan.launcher_argv = launcher_argv.data();
    launcher_file = open_high(sandbox.launcher, O_PATH);
    if (launcher_file.get() < 0) {
      error = "cannot start '" + name + "': cannot open the sandbox launcher " + sandbox.launcher
              + ": " + errno_text(errno);
      return child;
    }
    plan.launcher_fd = launcher_file.get();
  }

  pid_t pid = -1;
  if (sandbox.clone_flags != 0) {
    pid = raw_clone(sandbox.clone_flags);
  } else {
    // glibc's _Fork skips the atfork handlers, which libraries of the daemon install (OpenBLAS
    // shuts its thread pool down in one) and which are not async-signal-safe; the child only
    // makes system calls before execve, so it needs none of them.
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    pid = ::_Fork();
#else
    pid = ::fork();
#endif
  }
  if (pid < 0) {
    error = "cannot start '" + name + "': " + (sandbox.clone_flags ? "clone: " : "fork: ")
            + errno_text(errno);
    return child;
  }
  if (pid == 0)
    child_main(plan);

  report_write.reset();
  status_write.reset();
  child_report report;
  size_t got = 0;
  while (got < sizeof report) {
    ssize_t n =
        ::read(report_read.get(), reinterpret_cast<char*>(&report) + got, sizeof report - got);
    if (n > 0)
      got += static_cast<size_t>(n);
    else if (n == 0 || errno != EINTR)
      break;
  }
  if (got == sizeof report) {
    // The child failed before execve and has _exit-ed (or is about to): reap it.
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    error = "cannot start '" + name + "'";
    if (*path != name)
      error += " (" + *path + ")";
    error += ": " + describe_stage(report.stage);
    if (report.stage == static_cast<int>(child_stage::chdir))
      error += " '" + opts.cwd + "'";
    error += ": " + errno_text(report.error);
    return child;
  }

  // execve succeeded, so the child is its own group leader by now: the group id is its pid.
  child.pid_ = pid;
  child.status_fd_ = status_read.release();
  register_group(pid, opts.role);
#ifdef SYS_pidfd_open
  child.pidfd_ = raise_fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#endif
  return child;
}

process_result run_process(const process_options& opts) {
  auto start = clock_type::now();
  child_process child = start_process(opts);
  process_result res;
  if (!child.running()) {
    res.error = child.error();
  } else {
    // The timeout counts from the call, as it always did, not from the end of the start.
    double left = 0;
    if (opts.timeout_s > 0)
      left = std::max(1e-3, opts.timeout_s
                                - std::chrono::duration<double>(clock_type::now() - start).count());
    res = child.wait(left, opts.kill_grace_s);
  }
  res.wall_ms = std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
  return res;
}

std::vector<std::string> find_on_path(const std::string& name) {
  std::vector<std::string> out;
  const char* env_path = ::getenv("PATH");
  std::string path = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos)
      end = path.size();
    std::string dir = path.substr(begin, end - begin);
    begin = end + 1;
    if (dir.empty() || dir.front() != '/')
      continue;
    std::string file = dir + "/" + name;
    if (is_executable_file(file))
      out.push_back(file);
  }
  return out;
}

std::string tail_of_file(const std::string& path, size_t max_bytes) {
  unique_fd fd = open_high(path, O_RDONLY);
  if (fd.get() < 0 || max_bytes == 0)
    return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return {};
  auto size = static_cast<size_t>(std::max<off_t>(st.st_size, 0));
  size_t offset = size > max_bytes ? size - max_bytes : 0;
  std::string out(std::min(size, max_bytes), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n =
        ::pread(fd.get(), out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
    if (n > 0)
      got += static_cast<size_t>(n);
    else if (n == 0 || errno != EINTR)
      break;
  }
  out.resize(got);
  // Cut mid-file: start at a whole UTF-8 character (continuation bytes are 10xxxxxx; a
  // character has at most three of them).
  if (offset > 0) {
    size_t skip = 0;
    while (skip < 3 && skip < out.size() && (static_cast<unsigned char>(out[skip]) & 0xC0) == 0x80)
      ++skip;
    out.erase(0, skip);
  }
  return out;
}

} // namespace kiln
