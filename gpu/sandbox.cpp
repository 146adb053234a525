#include "gpu/sandbox.hpp"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "gpu/landlock.hpp"

namespace kiln {

namespace {

std::string errno_text(int err) {
  char buf[256];
  return strerror_r(err, buf, sizeof buf);
}

// Tries `flags` in a child that exits at once, after `then` when given (its errno, or 0): the
// only reliable way to learn whether this process may create those namespaces (capabilities,
// user-namespace sysctls, seccomp filters of a container and LSMs all have a say). `what` names
// the step `then` takes, for the error.
std::string try_clone(int flags, int (*then)() = nullptr, const char* what = "") {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return errno_text(errno);
  long pid = ::syscall(SYS_clone, static_cast<unsigned long>(flags | SIGCHLD), nullptr, nullptr,
                       nullptr, nullptr);
  if (pid < 0) {
    int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    return errno_text(err);
  }
  if (pid == 0) {
    int err = then != nullptr ? then() : 0;
    ssize_t ignored = ::write(report[1], &err, sizeof err);
    (void)ignored;
    ::_exit(0);
  }
  ::close(report[1]);
  int err = 0;
  ssize_t got = ::read(report[0], &err, sizeof err);
  ::close(report[0]);
  int status = 0;
  while (::waitpid(static_cast<pid_t>(pid), &status, 0) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof err))
    return "the probe child died";
  return err == 0 ? std::string{} : std::string{what} + ": " + errno_text(err);
}

// The mounts below run in the child between fork and exec: async-signal-safe calls only.

// Mounts made in the runner's namespace must never reach the host's (the root's propagation
// may be shared, as systemd sets it up).
int make_mounts_private() {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return errno;
  return 0;
}

// A PID namespace needs a /proc of its own: the CUDA driver looks itself up in /proc by the pid
// getpid() returns, which in the host's /proc is another process (measured on the H200 host:
// cudaGetDeviceCount fails with error 304 under `unshare -p -f` alone).
int mount_own_proc() {
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return errno;
  return 0;
}

// The runner's own folder as its /tmp: a bind mount, not a tmpfs, since extension builds put
// hundreds of megabytes there, which belong on the work folder's disk rather than in memory, and
// the folder goes with the runner's. Beneath it, the folders of the old /tmp that stay reachable
// by their paths: each opened first and bound back through /proc/self/fd once the new /tmp hides
// it (a bind's source must be a mount of this namespace, so none can be opened before the
// clone); `keep` become read-only, `writable` (beneath them) stay writable.
int mount_private_tmp(const char* source, const std::vector<std::string>& keep,
                      const std::vector<std::string>& writable) {
  constexpr size_t max = sandbox_plan::max_tmp_keeps;
  int fds[max];
  size_t opened = 0;
  const size_t wanted = keep.size() + writable.size();
  // By reference: a copy would allocate, which a forked child of a threaded parent may not.
  auto path_of = [&](size_t i) -> const std::string& {
    return i < keep.size() ? keep[i] : writable[i - keep.size()];
  };
  int err = wanted > max ? E2BIG : 0;
  for (; err == 0 && opened < wanted; ++opened) {
    fds[opened] = ::open(path_of(opened).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fds[opened] < 0) {
      err = errno;
      break;
    }
  }
  if (err == 0 && ::mount(source, "/tmp", nullptr, MS_BIND, nullptr) != 0)
    err = errno;
  for (size_t i = 0; i < opened; ++i) {
    if (err == 0) {
      // "/proc/self/fd/" and the descriptor's digits, without the allocator.
      char path[32] = "/proc/self/fd/";
      char digits[12];
      int n = 0;
      for (unsigned v = static_cast<unsigned>(fds[i]); n == 0 || v > 0; v /= 10)
        digits[n++] = static_cast<char>('0' + v % 10);
      size_t at = 14;
      while (n > 0)
        path[at++] = digits[--n];
      path[at] = '\0';
      const char* target = path_of(i).c_str();
      if (::mount(path, target, nullptr, MS_BIND | MS_REC, nullptr) != 0) {
        err = errno;
      } else if (i < keep.size()) {
        // A bind's own flags change by a remount; those the file system is mounted with must
        // be repeated, or the remount is refused.
        struct statvfs sv {};
        unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
        if (::statvfs(target, &sv) == 0) {
          flags |= (sv.f_flag & ST_NOSUID) ? MS_NOSUID : 0;
          flags |= (sv.f_flag & ST_NODEV) ? MS_NODEV : 0;
          flags |= (sv.f_flag & ST_NOEXEC) ? MS_NOEXEC : 0;
          flags |= (sv.f_flag & ST_NOATIME) ? MS_NOATIME : 0;
          flags |= (sv.f_flag & ST_NODIRATIME) ? MS_NODIRATIME : 0;
          flags |= (sv.f_flag & ST_RELATIME) ? MS_RELATIME : 0;
        }
        if (::mount(nullptr, target, nullptr, flags, nullptr) != 0)
          err = errno;
      }
    }
    ::close(fds[i]);
  }
  return err;
}

int mount_private_shm(const char* options) {
  if (::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, options) != 0)
    return errno;
  return 0;
}

bool fs_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int probe_pid_mounts() {
  if (int err = make_mounts_private(); err != 0)
    return err;
  return mount_own_proc();
}

// The mounts of a runner's /tmp and /dev/shm, made over themselves: only the probe child's own
// view changes.
int probe_tmp_mounts() {
  if (int err = make_mounts_private(); err != 0)
    return err;
  if (int err = mount_private_tmp("/tmp", {}, {}); err != 0)
    return err;
  if (is_directory("/dev/shm"))
    return mount_private_shm("size=1m");
  return 0;
}

int probe_seccomp() {
  return install_seccomp_filter(false);
}

// Next to the running program (a build's bin/), else in the libexec folder of its prefix.
std::string find_launcher(std::string& error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    error = "cannot read /proc/self/exe: " + ec.message();
    return {};
  }
  const auto dir = exe.parent_path();
  for (const auto& candidate :
       {dir / "kiln-sandbox", dir / ".." / "libexec" / "kiln" / "kiln-sandbox"})
    if (::access(candidate.c_str(), X_OK) == 0)
      return fs::weakly_canonical(candidate, ec).string();
  error = "no kiln-sandbox next to " + exe.string() + " or in "
          + (dir / ".." / "libexec" / "kiln").lexically_normal().string();
  return {};
}

sandbox_support probe() {
  sandbox_support s;
  s.net_namespace_error = try_clone(CLONE_NEWNET);
  s.net_namespace = s.net_namespace_error.empty();
  s.pid_namespace_error =
      try_clone(CLONE_NEWPID | CLONE_NEWNS, probe_pid_mounts, "cannot mount a /proc of its own");
  s.pid_namespace = s.pid_namespace_error.empty();
  // The runner's mount namespace comes with its PID namespace (prepare_sandbox).
  s.private_tmp_error =
      s.pid_namespace
          ? try_clone(CLONE_NEWNS, probe_tmp_mounts, "cannot mount its own /tmp and /dev/shm")
          : "no mount namespace of its own (" + s.pid_namespace_error + ")";
  s.private_tmp = s.private_tmp_error.empty();
  s.seccomp_error = try_clone(0, probe_seccomp, "cannot install a seccomp filter");
  s.seccomp = s.seccomp_error.empty();
  s.launcher = find_launcher(s.launcher_error);
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, ll::create_ruleset_version);
  if (abi > 0) {
    s.landlock_abi = static_cast<int>(abi);
  } else {
    // ENOSYS: a kernel without Landlock; EOPNOTSUPP: built in but not enabled at boot (`lsm=`).
    s.landlock_error = errno == EOPNOTSUPP ? "disabled at boot" : errno_text(errno);
  }
  return s;
}

uint64_t handled_fs_rights(int abi) {
  uint64_t rights = ll::fs_read_rights | ll::fs_write_file | ll::fs_remove_dir | ll::fs_remove_file
                    | ll::fs_make_char | ll::fs_make_dir | ll::fs_make_reg | ll::fs_make_sock
                    | ll::fs_make_fifo | ll::fs_make_block | ll::fs_make_sym;
  if (abi >= 2)
    rights |= ll::fs_refer;
  if (abi >= 3)
    rights |= ll::fs_truncate;
  return rights;
}

/// Allows `rights` beneath `path` (a folder) or on it (a file: only file rights are valid).
bool allow_path(int ruleset, const std::string& path, uint64_t rights, int abi,
                std::string& error) {
  int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) {
    error = "sandbox: cannot open the runner's path '" + path + "': " + errno_text(errno);
    return false;
  }
  rights &= handled_fs_rights(abi);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
    rights &=
        ll::fs_execute | ll::fs_read_file | ll::fs_write_file | (abi >= 3 ? ll::fs_truncate : 0);
  ll::path_beneath_attr attr{rights, fd};
  long rc = ::syscall(SYS_landlock_add_rule, ruleset, ll::rule_path_beneath, &attr, 0);
  int err = errno;
  ::close(fd);
  if (rc != 0) {
    error = "sandbox: landlock rule for '" + path + "': " + errno_text(err);
    return false;
  }
  return true;
}

/// Device files a runner opens for writing: /dev/null (subprocess' DEVNULL, shells) and, on a
/// GPU host, the NVIDIA files that CUDA opens O_RDWR.
/// What every runner reads besides kiln's own folders: programs, libraries and their data, the
/// system's configuration, devices and the kernel's views. Not /home, /root, /tmp, /var, /srv,
/// /mnt, /media or /run (other users' files, the host's sockets), unless kiln names a folder
/// there (sandbox_policy::keep_in_tmp, read_paths).
const char* const system_read_paths[] = {"/usr",
                                         "/bin",
                                         "/sbin",
                                         "/lib",
                                         "/lib32",
                                         "/lib64",
                                         "/libx32",
                                         "/etc",
                                         "/opt",
                                         "/sys",
                                         "/dev",
                                         "/proc",
                                         "/run/nvidia-persistenced"};

/// Read rules for the system's folders, kiln's folders the policy names, and `program`.
bool allow_reads(int fd, const sandbox_policy& policy, const std::string& program, int abi,
                 std::string& error) {
  std::vector<std::string> paths{std::begin(system_read_paths), std::end(system_read_paths)};
  paths.insert(paths.end(), policy.keep_in_tmp.begin(), policy.keep_in_tmp.end());
  paths.insert(paths.end(), policy.read_paths.begin(), policy.read_paths.end());
  if (!program.empty())
    paths.push_back(program);
  for (const auto& path : paths) {
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0)
      continue; // a folder this machine does not have
    if (!allow_path(fd, path, ll::fs_read_rights, abi, error))
      return false;
  }
  return true;
}

std::vector<std::string> device_files() {
  std::vector<std::string> out = {"/dev/null"};
  if (DIR* dev = ::opendir("/dev")) {
    while (dirent* e = ::readdir(dev))
      if (std::strncmp(e->d_name, "nvidia", 6) == 0)
        out.push_back(std::string{"/dev/"} + e->d_name);
    ::closedir(dev);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int create_ruleset(const sandbox_support& support, bool deny_tcp, std::string& error) {
  int abi = support.landlock_abi;
  ll::ruleset_attr attr{};
  attr.handled_access_fs = handled_fs_rights(abi);
  size_t size = sizeof attr.handled_access_fs;
  if (deny_tcp && abi >= 4) {
    // Handled with no rule that allows them: every TCP bind and connect is refused.
    attr.handled_access_net = ll::net_bind_tcp | ll::net_connect_tcp;
    size = offsetof(ll::ruleset_attr, scoped);
  }
  if (abi >= 6) {
    // Signals to processes outside the sandbox (the daemon, other runners) and abstract unix
    // sockets of others are refused.
    attr.scoped = ll::scope_abstract_unix_socket | ll::scope_signal;
    size = sizeof attr;
  }
  long fd = ::syscall(SYS_landlock_create_ruleset, &attr, size, 0U);
  if (fd < 0) {
    error = "sandbox: landlock_create_ruleset: " + errno_text(errno);
    return -1;
  }
  return static_cast<int>(fd);
}

} // namespace

sandbox_mode parse_sandbox_mode(const std::string& text) {
  if (text == "auto")
    return sandbox_mode::automatic;
  if (text == "required")
    return sandbox_mode::required;
  if (text == "off")
    return sandbox_mode::off;
  throw std::invalid_argument("unknown sandbox mode '" + text
                              + "' (expected \"auto\", \"required\" or \"off\")");
}

const char* to_string(sandbox_mode mode) {
  switch (mode) {
    case sandbox_mode::automatic:
      return "auto";
    case sandbox_mode::required:
      return "required";
    case sandbox_mode::off:
      return "off";
  }
  return "?";
}

std::string sandbox_support::description() const {
  std::string net = "network: ";
  if (net_namespace)
    net += "own namespace";
  else if (landlock_abi >= 4)
    net += "TCP denied by landlock (new namespace: " + net_namespace_error + ")";
  else
    net += "not isolated (new namespace: " + net_namespace_error + "; landlock "
           + (landlock_abi > 0 ? "ABI " + std::to_string(landlock_abi) + " < 4" : landlock_error)
           + ")";
  std::string pids = "pids: ";
  pids += pid_namespace ? "own namespace and /proc"
                        : "shared, descendants may outlive a runner (new namespace: "
                              + pid_namespace_error + ")";
  std::string tmp = "tmp: ";
  tmp += private_tmp ? "private (own /tmp and /dev/shm)"
                     : "TMPDIR only, /tmp and /dev/shm are the host's (" + private_tmp_error + ")";
  std::string files = "files: ";
  files += landlock_abi > 0 ? "landlock ABI " + std::to_string(landlock_abi)
                                  + " (reads: the system's folders and kiln's; writes: only the "
                                    "runner's own folders)"
                            : "not isolated (landlock: " + landlock_error + ")";
  std::string calls = "syscalls: ";
  calls += seccomp ? "seccomp filter" : "not filtered (" + seccomp_error + ")";
  std::string launch = launcher.empty() ? "; launcher: missing (" + launcher_error + ")" : "";
  return net + "; " + pids + "; " + tmp + "; " + files + "; " + calls + launch;
}

std::string sandbox_support::missing() const {
  std::vector<std::string> parts;
  if (!net_namespace && landlock_abi < 4)
    parts.push_back("network isolation (new network namespace: " + net_namespace_error
                    + "; landlock network rules need ABI 4, have "
                    + (landlock_abi > 0 ? std::to_string(landlock_abi) : landlock_error) + ")");
  if (!pid_namespace)
    parts.push_back("a new PID namespace (" + pid_namespace_error + ")");
  if (!private_tmp)
    parts.push_back("a private /tmp and /dev/shm (" + private_tmp_error + ")");
  if (landlock_abi == 0)
    parts.push_back("landlock (" + landlock_error + ")");
  if (!seccomp)
    parts.push_back("a seccomp filter (" + seccomp_error + ")");
  if (launcher.empty())
    parts.push_back("the launcher kiln-sandbox (" + launcher_error + ")");
  std::string out;
  for (const auto& p : parts)
    out += (out.empty() ? "" : "; ") + p;
  return out;
}

const sandbox_support& probe_sandbox() {
  static const sandbox_support support = probe();
  return support;
}

namespace {

// A folder to keep that is /tmp itself or holds it (a work folder of `/tmp`) cannot be bound
// back beneath a private /tmp.
bool keeps_all_of_tmp(const sandbox_policy& policy) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto host_tmp = fs::canonical("/tmp", ec);
  if (ec)
    return false;
  for (const auto& path : policy.keep_in_tmp) {
    if (path.empty())
      continue;
    auto real = fs::weakly_canonical(path, ec);
    auto rel = ec ? fs::path{} : host_tmp.lexically_relative(real);
    if (!rel.empty() && rel.native().rfind("..", 0) != 0)
      return true;
  }
  return false;
}

} // namespace

bool tmp_is_private(const sandbox_policy& policy) {
  return policy.mode != sandbox_mode::off && !policy.private_tmp.empty()
         && probe_sandbox().private_tmp && !keeps_all_of_tmp(policy);
}

sandbox_plan::~sandbox_plan() {
  if (landlock_fd >= 0)
    ::close(landlock_fd);
}

sandbox_plan::sandbox_plan(sandbox_plan&& other) noexcept {
  *this = std::move(other);
}

sandbox_plan& sandbox_plan::operator=(sandbox_plan&& other) noexcept {
  if (this == &other)
    return *this;
  if (landlock_fd >= 0)
    ::close(landlock_fd);
  tmp_keeps = std::move(other.tmp_keeps);
  tmp_writable = std::move(other.tmp_writable);
  clone_flags = other.clone_flags;
  landlock_fd = std::exchange(other.landlock_fd, -1);
  proc_self_rights = other.proc_self_rights;
  tmp_source = std::move(other.tmp_source);
  private_shm = other.private_shm;
  shm_options = std::move(other.shm_options);
  shm_rights = other.shm_rights;
  limit_memory = other.limit_memory;
  memory = other.memory;
  limit_files = other.limit_files;
  files = other.files;
  lower_oom_priority = other.lower_oom_priority;
  drop_identity = other.drop_identity;
  uid = other.uid;
  gid = other.gid;
  seccomp = other.seccomp;
  allow_perf = other.allow_perf;
  launcher = std::move(other.launcher);
  return *this;
}

bool sandbox_plan::new_pid_namespace() const {
  return (clone_flags & CLONE_NEWPID) != 0;
}

namespace {

// The folders of `policy.keep_in_tmp` that lie beneath the host's /tmp, which the private /tmp
// would hide, and the writable folders beneath those: the child binds them back over their
// paths (mount_private_tmp), whose mount points are made now inside the runner's tmp folder.
bool keep_tmp_paths(const sandbox_policy& policy, sandbox_plan& plan, std::string& error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto host_tmp = fs::canonical("/tmp", ec);
  if (ec)
    return true;
  auto beneath = [](const fs::path& p, const fs::path& dir) {
    auto rel = p.lexically_relative(dir);
    return !rel.empty() && rel.native().rfind("..", 0) != 0;
  };
  auto beneath_tmp = [&](const std::string& path, fs::path& real) {
    if (path.empty())
      return false;
    real = fs::weakly_canonical(path, ec);
    return !ec && fs::is_directory(real, ec) && real != host_tmp && beneath(real, host_tmp);
  };
  std::vector<fs::path> keep;
  fs::path real;
  for (const auto& path : policy.keep_in_tmp)
    if (beneath_tmp(path, real))
      keep.push_back(real);
  std::sort(keep.begin(), keep.end());
  std::vector<fs::path> kept;
  for (const auto& k : keep)
    // Nested in one already kept: the recursive bind of that one shows it.
    if (kept.empty() || !beneath(k, kept.back()))
      kept.push_back(k);
  std::vector<fs::path> writable;
  for (const auto& path : policy.writable_dirs)
    if (beneath_tmp(path, real) && std::any_of(kept.begin(), kept.end(), [&](const fs::path& k) {
          return beneath(real, k);
        }))
      writable.push_back(real);
  if (kept.size() + writable.size() > sandbox_plan::max_tmp_keeps) {
    error = "sandbox: more than " + std::to_string(sandbox_plan::max_tmp_keeps)
            + " folders to keep beneath /tmp";
    return false;
  }
  for (const auto& k : kept) {
    const auto rel = k.lexically_relative(host_tmp);
    fs::create_directories(fs::path{plan.tmp_source} / rel, ec);
    if (ec) {
      error = "sandbox: cannot make " + (fs::path{plan.tmp_source} / rel).string() + ": "
              + ec.message();
      return false;
    }
    plan.tmp_keeps.push_back((fs::path{"/tmp"} / rel).string());
  }
  for (const auto& w : writable)
    plan.tmp_writable.push_back((fs::path{"/tmp"} / w.lexically_relative(host_tmp)).string());
  return true;
}

} // namespace

namespace {

// A uid and gid that no account, group or running process uses, from a fixed range so that
// the same host always picks the same one.
bool unused_id(uid_t& uid) {
  for (uid_t id = 64000; id < 65000; ++id) {
    if (::getpwuid(id) != nullptr || ::getgrgid(id) != nullptr)
      continue;
    bool running = false;
    if (DIR* proc = ::opendir("/proc")) {
      while (dirent* e = ::readdir(proc)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
          continue;
        struct stat st {};
        if (::stat((std::string{"/proc/"} + e->d_name).c_str(), &st) == 0 && st.st_uid == id) {
          running = true;
          break;
        }
      }
      ::closedir(proc);
    }
    if (!running) {
      uid = id;
      return true;
    }
  }
  return false;
}

runner_identity find_identity(const std::string& user) {
  runner_identity id;
  if (::geteuid() != 0) {
    id.why_not = "kiln runs as uid " + std::to_string(::geteuid())
                 + ", not as root: runners keep its identity";
    return id;
  }
  std::string name = user.empty() ? "kiln-runner" : user;
  if (const passwd* pw = ::getpwnam(name.c_str()); pw != nullptr) {
    if (pw->pw_uid == 0) {
      id.why_not = "the account " + name + " is root";
      return id;
    }
    id.available = true;
    id.uid = pw->pw_uid;
    id.gid = pw->pw_gid;
    id.name = name + " (uid " + std::to_string(id.uid) + ")";
    return id;
  }
  uid_t free_id = 0;
  if (!unused_id(free_id)) {
    id.why_not = "no account " + name + " and no unused uid in 64000-64999";
    return id;
  }
  id.available = true;
  id.uid = free_id;
  id.gid = static_cast<gid_t>(free_id);
  id.name = "uid " + std::to_string(free_id) + " (no account " + name + ")";
  return id;
}

bool may(const struct stat& st, uid_t uid, gid_t gid, mode_t owner_bits) {
  // owner_bits: S_IRUSR | S_IWUSR | S_IXUSR combinations; the group's and others' are shifted.
  if (st.st_uid == uid)
    return (st.st_mode & owner_bits) == owner_bits;
  if (st.st_gid == gid)
    return (st.st_mode & (owner_bits >> 3)) == (owner_bits >> 3);
  return (st.st_mode & (owner_bits >> 6)) == (owner_bits >> 6);
}

} // namespace

const runner_identity& identity_for(const std::string& user) {
  static std::mutex lock;
  // A deque: the references handed out stay valid as later users are added.
  static std::deque<std::pair<std::string, runner_identity>> known;
  std::lock_guard<std::mutex> guard{lock};
  for (const auto& [name, id] : known)
    if (name == user)
      return id;
  known.emplace_back(user, find_identity(user));
  return known.back().second;
}

std::string blocked_for(const std::string& path, uid_t uid, gid_t gid, bool write) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(path, ec);
  if (ec || real.empty())
    return path;
  fs::path walk;
  for (auto part = real.begin(); part != real.end(); ++part) {
    walk /= *part;
    struct stat st {};
    if (::stat(walk.c_str(), &st) != 0)
      return walk.string();
    const bool last = std::next(part) == real.end();
    mode_t need = 0;
    if (!last)
      need = S_IXUSR;
    else if (S_ISDIR(st.st_mode))
      need = S_IRUSR | S_IXUSR | (write ? S_IWUSR : 0);
    else
      need = S_IRUSR | (write ? S_IWUSR : 0);
    if (!may(st, uid, gid, need))
      return walk.string();
  }
  return {};
}

namespace {

// The runner's identity for `policy`: available, and able to reach what the runner reads and
// writes; the folders it writes become its own. False with `why` when it cannot take it.
bool take_identity(const sandbox_policy& policy, const std::string& program, sandbox_plan& plan,
                   std::string& why) {
  const runner_identity id = identity_for(policy.user);
  if (!id.available) {
    why = id.why_not;
    return false;
  }
  std::vector<std::string> own = policy.writable_dirs;
  if (!policy.private_tmp.empty())
    own.push_back(policy.private_tmp);
  for (const auto& dir : own)
    if (::chown(dir.c_str(), id.uid, id.gid) != 0) {
      why = "cannot give " + dir + " to " + id.name + ": " + errno_text(errno);
      return false;
    }
  auto check = [&](const std::string& path, bool write) {
    if (path.empty() || !fs_exists(path))
      return true;
    if (auto blocked = blocked_for(path, id.uid, id.gid, write); !blocked.empty()) {
      why = id.name + " cannot " + (write ? "write " : "reach ") + path + " (" + blocked
            + " is closed to it)";
      return false;
    }
    return true;
  };
  for (const auto& dir : own)
    if (!check(dir, true))
      return false;
  if (!check(program, false))
    return false;
  for (const auto& path : policy.read_paths)
    if (!check(path, false))
      return false;
  plan.drop_identity = true;
  plan.uid = id.uid;
  plan.gid = id.gid;
  return true;
}

} // namespace

bool prepare_sandbox(const sandbox_policy& policy, sandbox_plan& plan, std::string& error,
                     const std::string& program) {
  plan = sandbox_plan{};
  if (policy.mode == sandbox_mode::off)
    return true;
  const auto& support = probe_sandbox();
  if (policy.mode == sandbox_mode::required) {
    if (auto missing = support.missing(); !missing.empty()) {
      error = "sandbox = \"required\", but this machine does not permit " + missing;
      return false;
    }
  } else if (auto missing = support.missing(); !missing.empty()) {
    static std::once_flag logged;
    std::call_once(logged, [&] {
      spdlog::warn("sandbox: runners start without {} ({})", missing, support.description());
    });
  }

  if (support.net_namespace)
    plan.clone_flags |= CLONE_NEWNET;
  if (support.pid_namespace)
    plan.clone_flags |= CLONE_NEWPID | CLONE_NEWNS;
  if (tmp_is_private(policy)) {
    plan.tmp_source = policy.private_tmp;
    if (!keep_tmp_paths(policy, plan, error))
      return false;
    plan.private_shm = is_directory("/dev/shm");
    plan.shm_options = "mode=1777,size=" + std::to_string(std::max(1L << 20, policy.shm_bytes));
  }

  if (support.landlock_abi > 0) {
    int fd = create_ruleset(support, !support.net_namespace, error);
    if (fd < 0)
      return false;
    plan.landlock_fd = fd;
    plan.proc_self_rights = ll::fs_write_file | (support.landlock_abi >= 3 ? ll::fs_truncate : 0);
    // Device nodes are handled but never allowed: a runner with CAP_MKNOD could otherwise
    // make one for a disk in its own folder and write the disk through it.
    const uint64_t rights =
        handled_fs_rights(support.landlock_abi) & ~(ll::fs_make_char | ll::fs_make_block);
    for (const auto& dir : policy.writable_dirs)
      if (!allow_path(fd, dir, rights, support.landlock_abi, error))
        return false;
    if (!allow_reads(fd, policy, program, support.landlock_abi, error))
      return false;
    // A rule of its own: Landlock matches the inodes along a path, and beneath the bind mount
    // /tmp the walk goes from the folder (the mount's root) to /, never through the runner's
    // folder that holds it.
    if (!policy.private_tmp.empty()
        && !allow_path(fd, policy.private_tmp, rights, support.landlock_abi, error))
      return false;
    for (const auto& file : device_files())
      if (!allow_path(fd, file, ll::fs_write_file | ll::fs_truncate, support.landlock_abi, error))
        return false;
    // POSIX semaphores and shared memory live there: Python's multiprocessing (used by
    // torch.compile's worker pool) cannot create a lock without it. A private one is mounted
    // after fork, so its rule is added then (apply_file_rules); else the host's is writable.
    plan.shm_rights = rights;
    if (!plan.private_shm) {
      std::string ignored;
      allow_path(fd, "/dev/shm", rights, support.landlock_abi, ignored);
    }
  }

  if (policy.memory_limit_bytes > 0) {
    struct rlimit current {};
    ::getrlimit(RLIMIT_AS, &current);
    auto wanted = static_cast<rlim_t>(policy.memory_limit_bytes);
    plan.limit_memory = true;
    plan.memory.rlim_cur =
        current.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, current.rlim_max);
    plan.memory.rlim_max = plan.memory.rlim_cur;
  }
  // Enough for ninja, nvcc and Triton; bounded so that a leaking candidate fails on its own
  // instead of exhausting the host's file table.
  struct rlimit nofile {};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    constexpr rlim_t cap = 16384;
    rlim_t hard = nofile.rlim_max == RLIM_INFINITY ? cap : std::min(cap, nofile.rlim_max);
    plan.limit_files = true;
    plan.files.rlim_cur = std::min(nofile.rlim_cur, hard);
    plan.files.rlim_max = hard;
  }
  plan.lower_oom_priority = true;
  plan.seccomp = support.seccomp;
  plan.launcher = support.launcher;
  if (plan.launcher.empty()) {
    // Without it, the runner would start as a fork of kiln, with kiln's memory.
    error = "sandbox: " + support.launcher_error + " (build it, or set sandbox = \"off\")";
    return false;
  }
  std::string why;
  if (!take_identity(policy, program, plan, why)) {
    if (policy.mode == sandbox_mode::required) {
      error = "sandbox = \"required\", but runners cannot run as an unprivileged user: " + why;
      return false;
    }
    static std::mutex lock;
    static std::vector<std::string> said;
    std::lock_guard<std::mutex> guard{lock};
    if (std::find(said.begin(), said.end(), why) == said.end()) {
      said.push_back(why);
      spdlog::warn("sandbox: runners keep kiln's identity: {}", why);
    }
  }
  return true;
}

int apply_sandbox(const sandbox_plan& plan, sandbox_stage& stage) {
  if (plan.lower_oom_priority) {
    // Under memory pressure the kernel should kill a runner, never the daemon. Best effort:
    // some containers make the file read-only.
    int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t ignored = ::write(fd, "1000", 4);
      (void)ignored;
      ::close(fd);
    }
  }
  stage = sandbox_stage::limits;
  if (plan.limit_memory && ::setrlimit(RLIMIT_AS, &plan.memory) != 0)
    return errno;
  if (plan.limit_files && ::setrlimit(RLIMIT_NOFILE, &plan.files) != 0)
    return errno;
  // Before Landlock, which forbids mounts.
  if ((plan.clone_flags & CLONE_NEWNS) == 0)
    return 0;
  stage = sandbox_stage::proc_mount;
  if (int err = make_mounts_private(); err != 0)
    return err;
  stage = sandbox_stage::tmp_mount;
  if (!plan.tmp_source.empty())
    if (int err = mount_private_tmp(plan.tmp_source.c_str(), plan.tmp_keeps, plan.tmp_writable);
        err != 0)
      return err;
  stage = sandbox_stage::shm_mount;
  if (plan.private_shm)
    if (int err = mount_private_shm(plan.shm_options.c_str()); err != 0)
      return err;
  stage = sandbox_stage::proc_mount;
  return mount_own_proc();
}

} // namespace kiln
