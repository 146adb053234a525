#pragma once

// Runner isolation (docs/evaluation.md, "Isolation"): what a runner may reach besides its own
// scratch folder. A policy says what is wanted; `prepare_sandbox` turns it, in the parent, into
// a plan that the child applies between fork and exec with async-signal-safe calls only.
//
//   network  a new network namespace (no interfaces up, no routes); else Landlock denies TCP
//            bind/connect (ABI >= 4); else not isolated
//   pids     the runner starts as the init of a new PID namespace: when it ends, the kernel
//            kills every process it left behind, even ones that left its process group
//   files    Landlock handles only the write-type rights, allowed beneath the writable folders
//            and on /dev/null and the NVIDIA device files; reads, exec and ioctls stay free
//   limits   no core files, a bounded number of open files, an address-space limit if asked,
//            and the OOM killer's first pick

#include <string>
#include <vector>

#include <sys/resource.h>

#include <cstdint>

namespace kiln {

enum class sandbox_mode {
  automatic, ///< `auto`: apply what the machine permits, log once what it does not
  required,  ///< refuse to start a runner without every isolation feature
  off,       ///< only the process group, death with the parent and no core files
};

/// `auto` | `required` | `off`; throws std::invalid_argument naming the bad value.
sandbox_mode parse_sandbox_mode(const std::string& text);
const char* to_string(sandbox_mode mode);

struct sandbox_policy {
  sandbox_mode mode = sandbox_mode::off;
  /// Folders (existing, absolute) beneath which the runner may create, write and remove files.
  std::vector<std::string> writable_dirs;
  /// RLIMIT_AS of the runner when > 0 (never for CUDA runners: the driver reserves far more
  /// address space than it uses).
  long memory_limit_bytes = 0;
};

/// What this machine permits, probed once per process by trying each feature in a throwaway
/// child.
struct sandbox_support {
  bool net_namespace = false;
  std::string net_namespace_error; ///< why not, e.g. `Operation not permitted`
  bool pid_namespace = false;
  std::string pid_namespace_error;
  int landlock_abi = 0; ///< 0 when Landlock is unavailable
  std::string landlock_error;

  /// One line for people, e.g. `network: own namespace; pids: own namespace; files: landlock
  /// ABI 7 (writes only to scratch and cache)`, or what is missing and why.
  std::string description() const;
  /// What `required` would miss, `; `-separated; empty when everything is there.
  std::string missing() const;
};

const sandbox_support& probe_sandbox();

/// A policy made concrete for one child: decided and opened in the parent, applied in the
/// child. Move-only (owns the Landlock ruleset).
class sandbox_plan {
public:
  sandbox_plan() = default;
  ~sandbox_plan();
  sandbox_plan(const sandbox_plan&) = delete;
  sandbox_plan& operator=(const sandbox_plan&) = delete;
  sandbox_plan(sandbox_plan&& other) noexcept;
  sandbox_plan& operator=(sandbox_plan&& other) noexcept;

  int clone_flags = 0;           ///< CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWNS as permitted
  int landlock_fd = -1;          ///< ruleset to enforce, -1 for none
  uint64_t proc_self_rights = 0; ///< granted beneath the runner's own /proc entry
  bool limit_memory = false;
  struct rlimit memory {};
  bool limit_files = false;
  struct rlimit files {};
  bool lower_oom_priority = false;

  bool new_pid_namespace() const;
};

/// Builds the plan for `policy` on this machine. In `required` mode, or when a writable folder
/// cannot be opened, returns false with `error` saying what is missing.
bool prepare_sandbox(const sandbox_policy& policy, sandbox_plan& plan, std::string& error);

/// The steps a child takes, in order; a failure names one of them.
enum class sandbox_stage : int {
  oom_score = 20,
  limits,
  no_new_privs,
  landlock,
  proc_mount,
};
const char* describe(sandbox_stage stage);

/// In the child, after fork (async-signal-safe): OOM priority, limits, the namespace's own
/// /proc. Returns 0, or an errno with `stage` set to the step that failed.
int apply_sandbox(const sandbox_plan& plan, sandbox_stage& stage);

/// In the process that execs, right before execve (async-signal-safe): the Landlock rules.
/// Separate from apply_sandbox because, inside a PID namespace, that process is the init's
/// child and only it can name its own /proc entry.
int apply_file_rules(const sandbox_plan& plan, sandbox_stage& stage);

} // namespace kiln
