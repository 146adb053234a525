// kiln-sandbox: the program a sandboxed runner starts as (docs/security.md). kiln's child makes
// the namespaces and mounts, then execs this with the runner's own, built environment, so that
// nothing of kiln's memory (its environment, its keys, its heap) is left in any process of the
// sandbox, the PID namespace's init included. It then either stays as that init and forks the
// runner's program, or, without a PID namespace of its own, becomes the program:
//
//   kiln-sandbox --report FD [--init FD] [--landlock FD --proc-rights N [--shm-rights N]]
//                [--uid N --gid N] [--seccomp] [--perf] [--parent PID] -- PATH ARGV0 ARGS...
//
// --report: where a failure before the program's execve is written ({stage, errno}, as kiln's
// own child writes it); --init: stay as init and write how the program ended there.

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>

#include "gpu/confine.hpp"

extern char** environ;

namespace {

struct report {
  int stage = 0;
  int error = 0;
};

struct init_status {
  int exited = 0;
  int code = 0;
};

int report_fd = -1;

[[noreturn]] void fail(kiln::sandbox_stage stage, int err) {
  report r{static_cast<int>(stage), err};
  if (report_fd >= 0) {
    ssize_t ignored = ::write(report_fd, &r, sizeof r);
    (void)ignored;
  }
  ::_exit(127);
}

bool number(const char* text, long long& out) {
  if (text == nullptr || *text == '\0')
    return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(text, &end, 10);
  return errno == 0 && *end == '\0';
}

[[noreturn]] void become_program(const kiln::confinement& c, char** program) {
  kiln::sandbox_stage stage = kiln::sandbox_stage::launcher;
  if (int err = kiln::confine_self(c, stage); err != 0)
    fail(stage, err);
  ::execve(program[0], program + 1, environ);
  fail(kiln::sandbox_stage::launcher, errno);
}

void close_all_but(int keep) {
  if (keep > 0)
    ::syscall(SYS_close_range, 0U, static_cast<unsigned>(keep - 1), 0U);
  ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0U, 0U);
}

// The init of the runner's PID namespace: the init of a namespace ignores every signal it has
// no handler for, so the program runs as its child, where SIGTERM and SIGSEGV work as anywhere.
[[noreturn]] void run_init(const kiln::confinement& c, char** program, int status_fd) {
  pid_t child = ::fork();
  if (child < 0)
    fail(kiln::sandbox_stage::launcher, errno);
  if (child == 0) {
    ::close(status_fd);
    become_program(c, program);
  }
  // Only the status pipe stays: the report pipe must reach EOF when the program's execve closes
  // the last copy, and the stdio files are the program's.
  close_all_but(status_fd);
  int status = 0;
  for (;;) {
    int st = 0;
    pid_t done = ::waitpid(-1, &st, 0);
    if (done == child) {
      status = st;
      break;
    }
    if (done < 0 && errno != EINTR)
      ::_exit(127);
    // an orphan re-parented to the init: reaped, nothing else to do
  }
  init_status out;
  if (WIFEXITED(status)) {
    out.exited = 1;
    out.code = WEXITSTATUS(status);
  } else {
    out.code = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  }
  ssize_t ignored = ::write(status_fd, &out, sizeof out);
  (void)ignored;
  ::_exit(out.exited ? out.code : 128 + out.code);
}

} // namespace

int main(int argc, char** argv) {
  kiln::confinement c;
  int status_fd = -1;
  int i = 1;
  bool args_ok = true;
  for (; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--") == 0) {
      ++i;
      break;
    }
    long long v = 0;
    if (std::strcmp(a, "--seccomp") == 0) {
      c.seccomp = true;
      continue;
    }
    if (std::strcmp(a, "--perf") == 0) {
      c.allow_perf = true;
      continue;
    }
    if (i + 1 >= argc || !number(argv[i + 1], v)) {
      args_ok = false;
      break;
    }
    ++i;
    if (std::strcmp(a, "--report") == 0) {
      report_fd = static_cast<int>(v);
    } else if (std::strcmp(a, "--init") == 0) {
      status_fd = static_cast<int>(v);
    } else if (std::strcmp(a, "--landlock") == 0) {
      c.landlock_fd = static_cast<int>(v);
    } else if (std::strcmp(a, "--proc-rights") == 0) {
      c.proc_self_rights = static_cast<uint64_t>(v);
    } else if (std::strcmp(a, "--shm-rights") == 0) {
      c.private_shm = true;
      c.shm_rights = static_cast<uint64_t>(v);
    } else if (std::strcmp(a, "--uid") == 0) {
      c.drop_identity = true;
      c.uid = static_cast<uid_t>(v);
    } else if (std::strcmp(a, "--gid") == 0) {
      c.gid = static_cast<gid_t>(v);
    } else if (std::strcmp(a, "--parent") == 0) {
      c.parent = static_cast<pid_t>(v);
    } else {
      args_ok = false;
      break;
    }
  }
  // The report pipe must close when the program execs, as kiln's own copy of it did.
  if (report_fd >= 0)
    ::fcntl(report_fd, F_SETFD, FD_CLOEXEC);
  if (!args_ok || i + 1 >= argc) // PATH and ARGV0 at least
    fail(kiln::sandbox_stage::launcher, EINVAL);
  if (c.landlock_fd >= 0)
    ::fcntl(c.landlock_fd, F_SETFD, FD_CLOEXEC);
  char** program = argv + i;
  if (status_fd >= 0) {
    ::fcntl(status_fd, F_SETFD, FD_CLOEXEC);
    // The program's parent is this init, pid 1 of the namespace.
    c.parent = 1;
    run_init(c, program, status_fd);
  }
  become_program(c, program);
}
