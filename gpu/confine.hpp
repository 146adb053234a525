#pragma once

// The last steps of a sandboxed runner, taken by the launcher (gpu/sandbox_launcher.cpp) in the
// process that then execs the runner's program: Landlock, an unprivileged identity and a seccomp
// filter. They run after execve of the launcher, so nothing of kiln's memory is left in the
// process that takes them (docs/security.md).

#include <sys/types.h>

#include <cstdint>

namespace kiln {

/// The steps a sandboxed child takes, in order, from kiln's fork to the runner's execve; a
/// failure names one of them (the numbers travel through the report pipe).
enum class sandbox_stage : int {
  oom_score = 20,
  limits,
  no_new_privs,
  landlock,
  proc_mount,
  tmp_mount,
  shm_mount,
  launcher, ///< execve of the launcher, or its arguments
  identity, ///< setgroups / setresgid / setresuid
  seccomp,
  parent_gone, ///< the daemon died while the runner was starting
};
const char* describe(sandbox_stage stage);

struct confinement {
  int landlock_fd = -1;          ///< ruleset to enforce, -1 for none
  uint64_t proc_self_rights = 0; ///< granted beneath this process's own /proc entry
  bool private_shm = false;      ///< /dev/shm is a tmpfs of this runner's own
  uint64_t shm_rights = 0;       ///< granted beneath it
  bool drop_identity = false;
  uid_t uid = 0;
  gid_t gid = 0;
  bool seccomp = false;
  bool allow_perf = false; ///< perf_event_open passes the filter (profiling)
  pid_t parent = 0;        ///< who must still be the parent after the identity changes
};

/// Applies `c` to the calling process: Landlock (with the rules only it can name), no new
/// privileges, the identity, the seccomp filter. Returns 0 or an errno with `stage` set.
int confine_self(const confinement& c, sandbox_stage& stage);

/// Installs only the seccomp filter (for the probe); 0 or an errno.
int install_seccomp_filter(bool allow_perf);

} // namespace kiln
