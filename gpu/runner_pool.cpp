#include "gpu/runner_pool.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

#include <spdlog/spdlog.h>

#include "gpu/quiet_host.hpp"

namespace kiln {

namespace fs = std::filesystem;

runner_process::~runner_process() {
  if (child_.running())
    child_.kill();
  if (control_ >= 0)
    ::close(control_);
  if (owns_dir_ && !dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

bool runner_process::poll_control(int wait_ms) {
  if (control_ < 0)
    return false;
  pollfd pfd{control_, POLLIN, 0};
  int n = ::poll(&pfd, 1, wait_ms);
  if (n <= 0)
    return true; // nothing yet (or EINTR): still open as far as we know
  char buf[64];
  ssize_t got = ::recv(control_, buf, sizeof buf, MSG_DONTWAIT);
  if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
    return false;
  // The runner says nothing but "ready\n"; any byte from it means the import is done.
  if (got > 0)
    ready_ = true;
  return true;
}

bool runner_process::ready() {
  if (!ready_)
    poll_control(0);
  return ready_;
}

namespace {

/// MSG_NOSIGNAL: a runner that died meanwhile must not take the daemon with it (SIGPIPE). Its
/// ending is then what `wait` reports, with no result.
void send_all(int fd, const std::string& text) {
  size_t sent = 0;
  while (sent < text.size()) {
    ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n > 0)
      sent += static_cast<size_t>(n);
    else if (n < 0 && errno == EINTR)
      continue;
    else
      break;
  }
}

/// When the kernel queued the message that `m` received, on the outside clock: the runner's
/// send, however late the daemon got to read it (a starved daemon reads a burst of stamps at
/// once, which would make their calls look instant). The daemon's read time if no stamp came.
outside_clock::clock::time_point queued_at(msghdr& m) {
  timespec real{};
  ::clock_gettime(CLOCK_REALTIME, &real);
  const auto now = outside_clock::clock::now();
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS)
      continue;
    timespec sent{};
    std::memcpy(&sent, CMSG_DATA(c), sizeof sent);
    const auto ago = std::chrono::seconds{real.tv_sec - sent.tv_sec}
                     + std::chrono::nanoseconds{real.tv_nsec - sent.tv_nsec};
    // A realtime clock stepped back meanwhile: the read time is the better guess.
    if (ago.count() >= 0)
      return now - std::chrono::duration_cast<outside_clock::clock::duration>(ago);
  }
  return now;
}

} // namespace

process_result runner_process::run(const std::string& job_path, double timeout_s,
                                   double kill_grace_s,
                                   const std::function<std::string(const std::string&)>& gate,
                                   outside_clock* stamps) {
  send_all(control_, job_path + "\n");
  if (!gate) {
    ::close(control_);
    control_ = -1;
    return child_.wait(timeout_s, kill_grace_s);
  }
  // The runner says `trials` when its outputs are on disk and waits for `time`, `block` or
  // `stop`; after each block of a paired timing it says `block` and waits for `block` or `done`.
  // While it times, its stamps come the same way (gpu/outside_clock.hpp).
  std::string buffer;
  auto on_readable = [&]() -> bool {
    char buf[256];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    iovec iov{buf, sizeof buf};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    // One message a receive (a seqpacket socket): its stamp is that of the line(s) it holds.
    ssize_t got = ::recvmsg(control_, &m, MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
      return false;
    if (got < 0)
      return true;
    const auto arrived = queued_at(m);
    buffer.append(buf, static_cast<size_t>(got));
    for (size_t nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
      std::string message = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (stamps != nullptr && stamps->take(message, arrived))
        continue;
      if (message == "trials" || message == "block")
        send_all(control_, gate(message) + "\n");
    }
    return buffer.size() < 4096; // a runner that talks nonsense is no longer listened to
  };
  auto r = child_.wait(timeout_s, kill_grace_s, control_, on_readable);
  ::close(control_);
  control_ = -1;
  return r;
}

runner_pool::runner_pool(runner_launch launch, size_t size)
    : launch_(std::move(launch)), size_(size) {}

runner_pool::~runner_pool() {
  idle_.clear();
}

std::vector<pid_t> runner_pool::idle_pids() const {
  std::vector<pid_t> out;
  for (const auto& r : idle_)
    out.push_back(r->pid());
  return out;
}

std::unique_ptr<runner_process> runner_pool::spawn(bool warm, std::string& error) {
  std::unique_ptr<runner_process> r{new runner_process};
  r->warm_ = warm;
  std::error_code ec;
  for (;;) {
    auto dir =
        launch_.runners_dir + "/r" + std::to_string(counter_++) + "-" + std::to_string(::getpid());
    if (fs::create_directory(dir, ec)) {
      r->dir_ = dir;
      break;
    }
    if (ec) {
      error = "cannot create a runner folder in " + launch_.runners_dir + ": " + ec.message();
      return nullptr;
    }
  }
  fs::create_directories(r->dir_ + "/tmp", ec);

  // A socket, not a pipe: the runner answers "ready" on the same descriptor it reads its job
  // from, and its end is the runner's stdin, so nothing else has to survive execve. Seqpacket,
  // so that every write of the runner is a message the kernel stamps as it is sent
  // (SO_TIMESTAMPNS; a stream socket stamps nothing): the outside clock's stamps.
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    error = "cannot create the runner's control socket: " + std::string{std::strerror(errno)};
    return nullptr;
  }
  const int on = 1;
  if (::setsockopt(pair[0], SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) != 0)
    spdlog::warn("runner pool {}: no kernel stamps on the control socket ({}): the outside clock "
                 "reads the daemon's own, which a starved daemon makes late",
                 launch_.device, std::strerror(errno));
  r->control_ = pair[0];
  sandbox_policy policy = launch_.sandbox;
  policy.writable_dirs.push_back(r->dir_);
  policy.private_tmp = r->dir_ + "/tmp";
  process_options opts;
  opts.argv = {launch_.python, "-I", "-B", launch_.harness_path, "--serve"};
  // Where the sandbox mounts it, the folder is the runner's /tmp; elsewhere only TMPDIR says so.
  const std::string tmp = tmp_is_private(policy) ? "/tmp" : policy.private_tmp;
  opts.env = launch_.env ? launch_.env(r->dir_, tmp) : std::vector<std::string>{};
  opts.cwd = r->dir_;
  opts.stdout_path = r->stdout_path();
  opts.stderr_path = r->stderr_path();
  opts.stdin_fd = pair[1];
  opts.sandbox = &policy;
  opts.role = process_role::runner;
  r->child_ = start_process(opts);
  ::close(pair[1]);
  if (!r->child_.running()) {
    error = r->child_.error();
    return nullptr;
  }
  spdlog::debug("runner pool {}: started {} runner {} in {}", launch_.device,
                warm ? "a warm" : "a cold", r->pid(), r->dir_);
  return r;
}

void runner_pool::discard(std::unique_ptr<runner_process> r, const char* why) {
  auto pid = r->pid();
  auto end = r->child_.kill();
  std::string how = end.signal != 0 ? "signal " + std::to_string(end.signal)
                                    : "exit code " + std::to_string(end.exit_code);
  spdlog::warn("runner pool {}: discarding runner {}: {} ({})", launch_.device, pid, why, how);
}

void runner_pool::wait_quiet() {
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now()
                  + std::chrono::duration_cast<clock::duration>(
                      std::chrono::duration<double>(std::max(0.0, launch_.ready_timeout_s)));
  // Time a runner spends frozen by the quiet host while another is timed does not count.
  std::map<pid_t, double> frozen_at_start;
  for (const auto& r : idle_)
    frozen_at_start[r->pid()] = frozen_seconds(r->pid());
  double frozen_extra = 0;
  for (;;) {
    for (const auto& r : idle_)
      if (auto it = frozen_at_start.find(r->pid()); it != frozen_at_start.end())
        frozen_extra = std::max(frozen_extra, frozen_seconds(r->pid()) - it->second);
    std::vector<pollfd> waiting;
    for (auto it = idle_.begin(); it != idle_.end();) {
      auto& r = *it;
      if (!r->ready() && !r->poll_control(0)) {
        auto dead = std::move(r);
        it = idle_.erase(it);
        discard(std::move(dead), "died while importing");
        continue;
      }
      if (!r->ready_)
        waiting.push_back({r->control_, POLLIN, 0});
      ++it;
    }
    if (waiting.empty())
      return;
    auto left = std::chrono::duration<double, std::milli>(deadline - clock::now()).count()
                + frozen_extra * 1000;
    if (left <= 0) {
      for (auto it = idle_.begin(); it != idle_.end();) {
        if ((*it)->ready_) {
          ++it;
          continue;
        }
        auto slow = std::move(*it);
        it = idle_.erase(it);
        discard(std::move(slow), "not ready in time");
      }
      return;
    }
    // Wakes when a runner says ready or closes its socket (exits); the loop sorts out which.
    ::poll(waiting.data(), waiting.size(), static_cast<int>(std::min(left + 1, 60000.0)));
  }
}

std::unique_ptr<runner_process> runner_pool::take(std::string& error) {
  if (launch_.quiet_before_jobs)
    wait_quiet();
  std::unique_ptr<runner_process> r;
  while (!idle_.empty() && !r) {
    auto next = std::move(idle_.front());
    idle_.pop_front();
    if (next->child_.alive() && next->poll_control(0))
      r = std::move(next);
    else
      discard(std::move(next), "died while idle");
  }
  if (!r)
    r = spawn(false, error);
  if (launch_.refill_on_take)
    refill();
  return r;
}

void runner_pool::refill() {
  while (idle_.size() < size_) {
    std::string error;
    auto r = spawn(true, error);
    if (!r) {
      // The next take() starts one cold and reports the error with the job.
      spdlog::warn("runner pool {}: cannot start a runner: {}", launch_.device, error);
      return;
    }
    idle_.push_back(std::move(r));
  }
}

} // namespace kiln
