#include "gpu/device_lock.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "gpu/build_cache.hpp"

namespace kiln {

namespace {

namespace fs = std::filesystem;
using lock_clock = std::chrono::steady_clock;

constexpr const char* shared_lock_dir = "/run/lock";
/// What a record may take: anything longer is not one of ours.
constexpr size_t record_cap = 4096;

std::string errno_text(int e) {
  return std::strerror(e);
}

/// Printable ASCII only, and short: the file is writable by every user, and its text reaches
/// other users' terminals.
std::string clean(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c >= 0x20 && c < 0x7f && out.size() < 120)
      out += c;
  return out;
}

std::string read_small_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::string text;
  char buf[4096];
  while (in && text.size() < 65536) {
    in.read(buf, sizeof buf);
    text.append(buf, static_cast<size_t>(in.gcount()));
  }
  return text;
}

std::string boot_id() {
  std::string id = read_small_file("/proc/sys/kernel/random/boot_id");
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back())))
    id.pop_back();
  return id;
}

/// Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot; 0 when
/// unreadable. With the pid, it names one process: a reused pid starts later.
unsigned long long start_ticks(long pid) {
  auto text = read_small_file("/proc/" + std::to_string(pid) + "/stat");
  auto paren = text.rfind(')'); // the command name may hold spaces and parentheses
  if (paren == std::string::npos)
    return 0;
  std::istringstream fields{text.substr(paren + 1)};
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22)
      return std::strtoull(field.c_str(), nullptr, 10);
  return 0;
}

/// Seconds since the epoch at which a process that started `ticks` after boot started.
int64_t start_epoch(unsigned long long ticks) {
  if (ticks == 0)
    return 0;
  std::istringstream in{read_small_file("/proc/stat")};
  std::string key;
  long long btime = 0;
  while (in >> key) {
    if (key == "btime") {
      in >> btime;
      break;
    }
  }
  long hz = ::sysconf(_SC_CLK_TCK);
  if (btime <= 0 || hz <= 0)
    return 0;
  return btime + static_cast<int64_t>(ticks / static_cast<unsigned long long>(hz));
}

/// `kiln run` for a process started as `/usr/bin/kiln run --config ...`: the program's name
/// and its subcommand.
std::string command_of(long pid) {
  auto text = read_small_file("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> argv;
  size_t from = 0;
  while (from < text.size() && argv.size() < 2) {
    auto end = text.find('\0', from);
    if (end == std::string::npos)
      end = text.size();
    argv.push_back(text.substr(from, end - from));
    from = end + 1;
  }
  if (argv.empty())
    return {};
  std::string out = fs::path{argv[0]}.filename().string();
  if (argv.size() > 1 && !argv[1].empty() && argv[1][0] != '-')
    out += " " + argv[1];
  return clean(out);
}

std::string user_name(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr)
    return found->pw_name;
  return std::to_string(uid);
}

/// The owner of /proc/<pid>, where readable.
std::string user_of(long pid) {
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0)
    return {};
  return user_name(st.st_uid);
}

bool process_exists(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

/// What a holder writes into the lock file: `key=value` lines.
struct record {
  long pid = 0;
  unsigned long long ticks = 0;
  std::string boot;
  std::string user;
  std::string command;
  std::string device;
  int64_t started = 0;
};

std::string record_text(const std::string& device) {
  const long pid = ::getpid();
  const auto ticks = start_ticks(pid);
  std::ostringstream o;
  o << "kiln device lock\n"
    << "pid=" << pid << "\n"
    << "start_ticks=" << ticks << "\n"
    << "boot_id=" << boot_id() << "\n"
    << "user=" << user_name(::getuid()) << "\n"
    << "command=" << command_of(pid) << "\n"
    << "started=" << start_epoch(ticks) << "\n"
    << "device=" << device << "\n";
  return o.str();
}

record read_record(int fd) {
  record r;
  char buf[record_cap];
  ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (n <= 0)
    return r;
  std::istringstream in{std::string{buf, static_cast<size_t>(n)}};
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos)
      continue;
    auto key = line.substr(0, eq);
    auto value = clean(line.substr(eq + 1));
    if (key == "pid")
      r.pid = std::strtol(value.c_str(), nullptr, 10);
    else if (key == "start_ticks")
      r.ticks = std::strtoull(value.c_str(), nullptr, 10);
    else if (key == "boot_id")
      r.boot = value;
    else if (key == "user")
      r.user = value;
    else if (key == "command")
      r.command = value;
    else if (key == "device")
      r.device = value;
    else if (key == "started")
      r.started = std::strtoll(value.c_str(), nullptr, 10);
  }
  return r;
}

/// Whether the process a record names is still the one that wrote it.
bool record_alive(const record& r) {
  if (r.pid <= 0 || !process_exists(r.pid))
    return false;
  if (!r.boot.empty() && r.boot != boot_id())
    return false; // written before a reboot: a fallback folder outlives one
  const auto now = start_ticks(r.pid);
  return r.ticks == 0 || now == 0 || now == r.ticks;
}

/// What /proc/locks says of the flock on the file (`st_dev`, `st_ino`): the holder's pid, 0
/// when nobody holds it, -1 when someone does whose pid is not in our namespace; nullopt when
/// /proc/locks cannot be read.
std::optional<long> flock_holder_pid(dev_t dev, ino_t ino) {
  std::ifstream file{"/proc/locks"};
  if (!file)
    return std::nullopt;
  std::string line;
  while (std::getline(file, line)) {
    // `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`; waiters have `->` after the number.
    std::istringstream fields{line};
    std::string number, kind, advisory, access, pid, where;
    if (!(fields >> number >> kind >> advisory >> access >> pid >> where) || kind != "FLOCK")
      continue;
    unsigned major_no = 0, minor_no = 0;
    unsigned long long inode = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &major_no, &minor_no, &inode) != 3)
      continue;
    if (major_no == major(dev) && minor_no == minor(dev) && inode == ino) {
      long p = std::strtol(pid.c_str(), nullptr, 10);
      return p > 0 ? p : -1;
    }
  }
  return 0;
}

lock_holder holder_of(int fd) {
  lock_holder h;
  const record r = read_record(fd);
  struct stat st {};
  long live = ::fstat(fd, &st) == 0 ? flock_holder_pid(st.st_dev, st.st_ino).value_or(0) : 0;
  const bool recorded = r.pid > 0 && record_alive(r);
  if (recorded && (live <= 0 || live == r.pid)) {
    h.pid = r.pid;
    h.user = r.user;
    h.command = r.command;
    h.device = r.device;
    h.started = r.started;
    return h;
  }
  if (r.pid > 0 && !recorded)
    h.stale_pid = r.pid;
  if (live > 0) {
    h.pid = live;
    h.command = command_of(live);
    h.user = user_of(live);
    h.started = start_epoch(start_ticks(live));
  }
  return h;
}

std::string clock_text(int64_t epoch) {
  std::time_t t = static_cast<std::time_t>(epoch);
  std::time_t now = std::time(nullptr);
  std::tm then_tm{};
  std::tm now_tm{};
  ::localtime_r(&t, &then_tm);
  ::localtime_r(&now, &now_tm);
  char buf[32];
  const bool today = then_tm.tm_year == now_tm.tm_year && then_tm.tm_yday == now_tm.tm_yday;
  std::strftime(buf, sizeof buf, today ? "%H:%M" : "%b %d %H:%M", &then_tm);
  return buf;
}

std::string seconds_text(double s) {
  std::ostringstream o;
  o << s << " s";
  return o.str();
}

struct opened {
  int fd = -1;
  bool writable = false;
  int error = 0;
};

/// Opens (creating when missing) a lock file without following a link another user may have
/// planted there, and without blocking on a FIFO. Never O_CREAT on an existing file: with
/// fs.protected_regular, that fails in a sticky folder for a file another user owns.
opened open_lock_file(const std::string& path, bool shared) {
  constexpr int flags = O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK;
  for (int attempt = 0; attempt < 8; ++attempt) {
    opened o;
    o.writable = true;
    o.fd = ::open(path.c_str(), O_RDWR | flags);
    if (o.fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS)) {
      o.writable = false;
      o.fd = ::open(path.c_str(), O_RDONLY | flags); // flock needs no write access
    }
    if (o.fd < 0 && errno == ENOENT) {
      o.writable = true;
      o.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | flags, 0666);
      if (o.fd < 0 && errno == EEXIST)
        continue; // another process created it meanwhile: open theirs
      if (o.fd >= 0 && shared)
        ::fchmod(o.fd, 0666); // past the umask: the next holder, of any user, writes its record
    }
    if (o.fd < 0) {
      o.error = errno;
      return o;
    }
    struct stat st {};
    if (::fstat(o.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(o.fd);
      return {-1, false, EINVAL};
    }
    if (st.st_nlink != 1)
      o.writable = false; // a hard link to someone's file: lock it, never write into it
    return o;
  }
  return {-1, false, EAGAIN};
}

/// Whether `path` still names the file open as `fd` (nobody removed or replaced it).
bool still_named(int fd, const std::string& path) {
  struct stat a {};
  struct stat b {};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev
         && a.st_ino == b.st_ino;
}

std::string fallback_dir(const std::string& cache_dir) {
  std::string base = cache_dir;
  if (base.empty()) {
    try {
      base = resolve_cache_dir("");
    } catch (const std::exception&) {
      return {};
    }
  }
  return base + "/device-locks";
}

void say_waiting(const std::string& text) {
  std::fprintf(stderr, "kiln: %s\n", text.c_str());
  std::fflush(stderr);
  spdlog::info("device lock: {}", text);
}

/// Waits at most `timeout` for the watched file to be closed by anyone (how a holder lets go,
/// also when it dies), or just for `timeout` without a watch.
void wait_for_close(int watch_fd, lock_clock::duration timeout) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  ms = std::max<long long>(1, std::min<long long>(ms, 1000)); // and look again each second
  struct pollfd p {};
  p.fd = watch_fd;
  p.events = POLLIN;
  if (watch_fd < 0) {
    ::poll(nullptr, 0, static_cast<int>(ms));
    return;
  }
  if (::poll(&p, 1, static_cast<int>(ms)) > 0) {
    char buf[4096];
    while (::read(watch_fd, buf, sizeof buf) > 0) {
    }
  }
}

std::mutex& claims_mutex() {
  static std::mutex m;
  return m;
}

/// The claims this process holds, by lock file: a second claim of one device shares the
/// first (a second flock of the same file from this process would wait on itself).
std::map<std::string, std::weak_ptr<device_claim::state>>& held_claims() {
  static std::map<std::string, std::weak_ptr<device_claim::state>> m;
  return m;
}

} // namespace

struct device_claim::state {
  int fd = -1;
  bool writable = false;
  std::string path;
  std::string device;
  ~state() {
    if (fd < 0)
      return;
    // A claim may outlive the logger (a command that shut spdlog down before its claims went):
    // the default logger is then gone, and logging through it would crash on the way out.
    auto* log = spdlog::default_logger_raw();
    if (writable && ::ftruncate(fd, 0) != 0 && log != nullptr)
      log->debug("device lock: cannot clear {}: {}", path, errno_text(errno));
    ::close(fd); // lets go of the flock
    if (log != nullptr)
      log->debug("device lock: {} let go of {}", device, path);
  }
};

bool device_claim::held() const {
  return state_ && state_->fd >= 0;
}

const std::string& device_claim::path() const {
  static const std::string none;
  return state_ ? state_->path : none;
}

const std::string& device_claim::device() const {
  static const std::string none;
  return state_ ? state_->device : none;
}

std::string describe_holder(const std::string& device, const lock_holder& h) {
  std::string out = device + " is held by ";
  if (h.pid <= 0) {
    out += "another process";
    if (h.stale_pid > 0)
      out += " (the lock file names pid " + std::to_string(h.stale_pid) + ", which has ended)";
    return out;
  }
  out += "pid " + std::to_string(h.pid);
  std::vector<std::string> parts;
  std::string what = h.command;
  if (!h.user.empty() && h.user != user_name(::getuid()))
    what += (what.empty() ? "user " : " of ") + h.user;
  if (!what.empty())
    parts.push_back(what);
  if (h.started > 0)
    parts.push_back("started " + clock_text(h.started));
  if (!h.device.empty() && h.device != device)
    parts.push_back("as its " + h.device);
  if (!parts.empty()) {
    out += " (";
    for (size_t i = 0; i < parts.size(); ++i)
      out += (i ? ", " : "") + parts[i];
    out += ")";
  }
  return out;
}

std::string device_lock_dir(const std::string& cache_dir) {
  if (const char* env = std::getenv(device_lock_dir_env); env != nullptr && *env != '\0')
    return env;
  struct stat st {};
  if (::stat(shared_lock_dir, &st) == 0 && S_ISDIR(st.st_mode)
      && ::access(shared_lock_dir, W_OK | X_OK) == 0)
    return shared_lock_dir;
  return fallback_dir(cache_dir);
}

std::string device_lock_file(const device_info& d) {
  if (d.id == "cpu")
    return "kiln-cpu.lock";
  auto name = [](std::string kind, const std::string& id) {
    for (char c : id)
      kind += std::isalnum(static_cast<unsigned char>(c)) || c == '-'
                  ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                  : '_';
    return kind + ".lock";
  };
  if (d.uuid.rfind("GPU-", 0) == 0)
    return name("kiln-gpu-", d.uuid.substr(4));
  if (d.uuid.rfind("MIG-", 0) == 0)
    return name("kiln-mig-", d.uuid.substr(4));
  if (!d.pci_bus_id.empty())
    return name("kiln-pci-", d.pci_bus_id);
  // Nothing that names the device for other processes: the best left is its host index.
  return name("kiln-index-",
              std::to_string(d.physical_index >= 0 ? d.physical_index : -1) + "-" + d.id);
}

std::optional<lock_holder> device_lock_holder(const device_info& d, const std::string& dir) {
  const auto path = dir + "/" + device_lock_file(d);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return std::nullopt;
  std::optional<lock_holder> out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if (auto pid = flock_holder_pid(st.st_dev, st.st_ino)) {
      if (*pid != 0)
        out = holder_of(fd);
    } else if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      out = holder_of(fd); // no /proc/locks to read: asked the lock itself
    }
  }
  ::close(fd);
  return out;
}

device_claim claim_device(const device_info& d, const device_lock_options& o) {
  std::lock_guard<std::mutex> guard{claims_mutex()};
  const auto started = lock_clock::now();
  const double wait_s = std::max(0.0, o.wait_s);
  const auto deadline =
      started
      + std::chrono::duration_cast<lock_clock::duration>(std::chrono::duration<double>(wait_s));
  auto on_wait = o.on_wait ? o.on_wait : say_waiting;

  const auto fallback = fallback_dir(o.cache_dir);
  std::vector<std::string> dirs{o.dir.empty() ? device_lock_dir(o.cache_dir) : o.dir};
  if (o.dir.empty() && !fallback.empty() && dirs.front() != fallback)
    dirs.push_back(fallback);

  device_claim claim;
  std::string path;
  bool shared = false;
  opened f;
  std::string problems;
  for (const auto& dir : dirs) {
    path = dir + "/" + device_lock_file(d);
    shared = dir != fallback;
    if (auto it = held_claims().find(path); it != held_claims().end())
      if (auto held = it->second.lock()) {
        claim.state_ = held;
        return claim;
      }
    std::error_code ec;
    fs::create_directories(dir, ec);
    // Shared folders get files every user can write a record into; the per-user fallback not.
    f = open_lock_file(path, shared);
    if (f.fd >= 0)
      break;
    problems += (problems.empty() ? "" : "; ") + path + ": " + errno_text(f.error);
  }
  if (f.fd < 0) {
    spdlog::warn("device lock: cannot lock {} ({}): other kiln processes on this host are not "
                 "kept off it",
                 d.id, problems);
    return claim;
  }
  if (!shared)
    spdlog::warn("device lock: {} is locked in {}, which keeps off only this user's kiln "
                 "processes ({} cannot hold the lock files; set {} to a folder every user can "
                 "write)",
                 d.id, path, shared_lock_dir, device_lock_dir_env);

  // Watched before the first try: a close between a failed try and the wait is not missed.
  int watch = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (watch >= 0
      && ::inotify_add_watch(watch, path.c_str(), IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_ATTRIB)
             < 0) {
    ::close(watch);
    watch = -1;
  }
  long told = -1;
  for (;;) {
    if (::flock(f.fd, LOCK_EX | LOCK_NB) == 0) {
      if (still_named(f.fd, path))
        break;
      // Removed or replaced while we opened it: what others lock now is the file of that name.
      ::close(f.fd);
      f = open_lock_file(path, shared);
      if (f.fd < 0)
        break;
      continue;
    }
    if (errno == EINTR)
      continue;
    if (errno != EWOULDBLOCK) {
      spdlog::warn("device lock: cannot lock {} ({}: {}): other kiln processes on this host are "
                   "not kept off it",
                   d.id, path, errno_text(errno));
      ::close(f.fd);
      f.fd = -1;
      break;
    }
    const auto holder = holder_of(f.fd);
    const auto text = describe_holder(d.id, holder);
    const auto now = lock_clock::now();
    if (now >= deadline) {
      if (watch >= 0)
        ::close(watch);
      ::close(f.fd);
      throw std::runtime_error(
          text
          + (wait_s > 0
                 ? "; gave up after " + seconds_text(wait_s) + " ([evaluator] device_lock_wait_s)"
                 : std::string{"; not waiting ([evaluator] device_lock_wait_s = 0)"}));
    }
    if (holder.pid != told) {
      told = holder.pid;
      on_wait(text + "; waiting up to " + seconds_text(wait_s)
              + " for it ([evaluator] device_lock_wait_s)");
    }
    wait_for_close(watch, deadline - now);
  }
  if (watch >= 0)
    ::close(watch);
  if (f.fd < 0)
    return claim;

  auto st = std::make_shared<device_claim::state>();
  st->fd = f.fd;
  st->writable = f.writable;
  st->path = path;
  st->device = d.id;
  if (f.writable) {
    const auto text = record_text(d.id);
    if (::pwrite(f.fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())
        || ::ftruncate(f.fd, static_cast<off_t>(text.size())) != 0)
      spdlog::debug("device lock: cannot write the record into {}: {}", path, errno_text(errno));
  }
  const double waited = std::chrono::duration<double>(lock_clock::now() - started).count();
  if (told >= 0)
    spdlog::info("device lock: {} held ({}), after waiting {:.1f} s", d.id, path, waited);
  else
    spdlog::info("device lock: {} held ({})", d.id, path);
  held_claims()[path] = st;
  claim.state_ = std::move(st);
  return claim;
}

std::vector<device_claim> claim_devices(const std::vector<std::string>& ids,
                                        const device_lock_options& o) {
  std::vector<device_info> devices;
  for (const auto& id : ids) {
    auto d = find_device(id);
    if (!d)
      throw std::runtime_error("device " + id + " not found");
    devices.push_back(*d);
  }
  std::sort(devices.begin(), devices.end(), [](const device_info& a, const device_info& b) {
    return device_lock_file(a) < device_lock_file(b);
  });
  const auto deadline = lock_clock::now()
                        + std::chrono::duration_cast<lock_clock::duration>(
                            std::chrono::duration<double>(std::max(0.0, o.wait_s)));
  std::vector<device_claim> out;
  for (const auto& d : devices) {
    auto each = o;
    each.wait_s =
        std::max(0.0, std::chrono::duration<double>(deadline - lock_clock::now()).count());
    out.push_back(claim_device(d, each)); // a throw lets go of those taken so far
  }
  return out;
}

} // namespace kiln
