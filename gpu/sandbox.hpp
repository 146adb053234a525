#pragma once

// Runner isolation (docs/evaluation.md, "Isolation"): what a runner may reach besides its own
// scratch folder. A policy says what is wanted; `prepare_sandbox` turns it, in the parent, into
// a plan that the child applies between fork and exec with async-signal-safe calls only.
//
//   network  a new network namespace (no interfaces up, no routes); else Landlock denies TCP
//            bind/connect (ABI >= 4); else not isolated
//   pids     the runner starts as the init of a new PID namespace: when it ends, the kernel
//            kills every process it left behind, even ones that left its process group
//   tmp      with a mount namespace, the runner's own folder is bind-mounted over /tmp and a
//            size-limited tmpfs over /dev/shm (mounts private: nothing propagates to the host);
//            else /tmp and /dev/shm stay the host's and only TMPDIR is the runner's
//   files    Landlock: writes only beneath the writable folders, the private /tmp and /dev/shm,
//            /dev/null and the NVIDIA device files; reads and exec only of the system's folders
//            (/usr, /etc, /opt, /dev, /proc, /sys...), the folders kiln keeps (keep_in_tmp,
//            read_paths: its work folder, the build cache, the interpreter's prefix), the
//            writable ones and the program; never /home, /root, the host's /tmp, /var or /run
//   identity when kiln runs as root: an unprivileged user of its own (`kiln-runner`, else an
//            unused uid), owner of the runner's folders and nothing else
//   syscalls a seccomp filter (gpu/confine.cpp): no ptrace, mounts, modules, keyrings, BPF,
//            perf events, new namespaces, io_uring, and sockets of no family but AF_UNIX
//   limits   no core files, a bounded number of open files, an address-space limit if asked,
//            and the OOM killer's first pick
//
// Every sandboxed runner starts as an execve of kiln-sandbox (gpu/sandbox_launcher.cpp), never
// as a fork of kiln that keeps kiln's memory: the identity, Landlock and seccomp are applied
// there.

#include <string>
#include <vector>

#include <sys/resource.h>

#include <cstdint>

#include "gpu/confine.hpp"

namespace kiln {

enum class sandbox_mode {
  automatic, ///< `auto`: apply what the machine permits, log once what it does not
  required,  ///< refuse to start a runner without every isolation feature
  off,       ///< only the process group, death with the parent and no core files
};

/// Size of a runner's own /dev/shm (a tmpfs): POSIX semaphores and shared memory of one process
/// tree, not a data store.
constexpr long default_shm_bytes = 1L << 30;

/// `auto` | `required` | `off`; throws std::invalid_argument naming the bad value.
sandbox_mode parse_sandbox_mode(const std::string& text);
const char* to_string(sandbox_mode mode);

struct sandbox_policy {
  sandbox_mode mode = sandbox_mode::off;
  /// Folders (existing, absolute) beneath which the runner may create, write and remove files.
  std::vector<std::string> writable_dirs;
  /// A folder (existing, absolute, empty, the runner's own) that becomes the runner's /tmp where
  /// the machine permits a mount namespace (tmp_is_private); writable in any case. Empty: /tmp
  /// stays the host's and so does /dev/shm.
  std::string private_tmp;
  /// Size limit of the runner's own /dev/shm, when it gets one.
  long shm_bytes = default_shm_bytes;
  /// Folders the runner must still reach by their own names (kiln's work folder, the build
  /// cache, the interpreter's prefix): readable under Landlock wherever they are, and, when its
  /// /tmp is private, those beneath the host's /tmp are bind-mounted back into the runner's.
  std::vector<std::string> keep_in_tmp;
  /// RLIMIT_AS of the runner when > 0 (never for CUDA runners: the driver reserves far more
  /// address space than it uses).
  long memory_limit_bytes = 0;
  /// The account runners run as when kiln is root; missing, an unused uid stands in.
  std::string user = "kiln-runner";
  /// Folders and files the runner reads (the interpreter, the harness, kiln's work folder):
  /// with a new identity, each must be reachable by it.
  std::vector<std::string> read_paths;
};

/// Who runners run as: `kiln-runner` (or the policy's user) where kiln is root and the account
/// exists, an unused uid where it does not; none where kiln is not root.
struct runner_identity {
  bool available = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;    ///< `kiln-runner (uid 998)`, `uid 64000 (no account kiln-runner)`
  std::string why_not; ///< when not available
};
const runner_identity& identity_for(const std::string& user);

/// The first folder on the way to `path` (or `path` itself) that `uid`/`gid` may not search,
/// read (or, with `write`, write), by the permission bits; empty when there is none.
std::string blocked_for(const std::string& path, uid_t uid, gid_t gid, bool write);

/// What this machine permits, probed once per process by trying each feature in a throwaway
/// child.
struct sandbox_support {
  bool net_namespace = false;
  std::string net_namespace_error; ///< why not, e.g. `Operation not permitted`
  bool pid_namespace = false;
  std::string pid_namespace_error;
  int landlock_abi = 0; ///< 0 when Landlock is unavailable
  std::string landlock_error;
  /// A private /tmp and /dev/shm can be mounted in the runner's mount namespace.
  bool private_tmp = false;
  std::string private_tmp_error;
  bool seccomp = false;
  std::string seccomp_error;
  /// The launcher every sandboxed runner starts as; empty when it is missing.
  std::string launcher;
  std::string launcher_error;

  /// One line for people, e.g. `network: own namespace; pids: own namespace and /proc; tmp:
  /// private (own /tmp and /dev/shm); files: landlock ABI 7 (writes only to the runner's own
  /// folders)`, or what is missing and why.
  std::string description() const;
  /// What `required` would miss, `; `-separated; empty when everything is there.
  std::string missing() const;
};

const sandbox_support& probe_sandbox();

/// Whether a runner started with `policy` on this machine gets its own /tmp (and /dev/shm), so
/// that its TMPDIR is /tmp; false: its TMPDIR must be `policy.private_tmp` by its real path.
bool tmp_is_private(const sandbox_policy& policy);

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
  /// Bind-mounted over /tmp in the child's mount namespace; empty for none.
  std::string tmp_source;
  /// Folders beneath the host's /tmp (sandbox_policy::keep_in_tmp): opened before that mount
  /// and bound back over their paths after it, read-only. Beneath the writable /tmp, Landlock
  /// would let the runner write them; the mount's flag does not.
  std::vector<std::string> tmp_keeps;
  /// The writable folders beneath those, bound back writable over the read-only ones.
  std::vector<std::string> tmp_writable;
  static constexpr size_t max_tmp_keeps = 16; ///< of both together
  /// A tmpfs of its own over /dev/shm (`shm_options`), writable with `shm_rights`.
  bool private_shm = false;
  std::string shm_options;
  uint64_t shm_rights = 0;
  bool limit_memory = false;
  struct rlimit memory {};
  bool limit_files = false;
  struct rlimit files {};
  bool lower_oom_priority = false;
  /// What the launcher applies in the process that execs the runner's program.
  bool drop_identity = false;
  uid_t uid = 0;
  gid_t gid = 0;
  bool seccomp = false;
  bool allow_perf = false;
  std::string launcher;

  bool new_pid_namespace() const;
};

/// Builds the plan for `policy` on this machine, for a child that runs `program`. In `required`
/// mode, or when a writable folder cannot be opened, returns false with `error` saying what is
/// missing. With a new identity, the writable folders and the private /tmp become its own.
bool prepare_sandbox(const sandbox_policy& policy, sandbox_plan& plan, std::string& error,
                     const std::string& program = {});

/// In the child, after fork (async-signal-safe): OOM priority, limits, and in its own mount
/// namespace private mounts, the runner's /tmp and /dev/shm and its own /proc. Returns 0, or an
/// errno with `stage` set to the step that failed.
int apply_sandbox(const sandbox_plan& plan, sandbox_stage& stage);

} // namespace kiln
