// The host-wide device lock between kiln processes: real processes (fork) that hold a device's
// lock while the test's own claim waits, gives up, or gets it once the holder lets go or dies.
// The processes meet over pipes; the only timing in here is the deadline of a claim that must
// give up.

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "gpu/device_lock.hpp"
#include "gpu/devices.hpp"

namespace fs = std::filesystem;

namespace {

kiln::device_info gpu(const std::string& id, const std::string& uuid) {
  kiln::device_info d;
  d.id = id;
  d.uuid = uuid;
  return d;
}

const kiln::device_info gpu_a = gpu("cuda:0", "GPU-0a0a0a0a-0000-4000-8000-00000000000a");

std::string lock_dir(const std::string& name) {
  auto dir = std::string{KILN_TEST_TMP} + "/device-lock/" + name + "-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

kiln::device_lock_options options(const std::string& dir, double wait_s) {
  kiln::device_lock_options o;
  o.dir = dir;
  o.wait_s = wait_s;
  o.on_wait = [](const std::string&) {};
  return o;
}

/// Another process that claims `d` under `name` (its own name for the device), says so on a
/// pipe and holds it until told to let go (or killed); it then exits.
struct holder_process {
  pid_t pid = -1;
  int told = -1; ///< write a byte: let go
  int said = -1; ///< reads 'h' once it holds the lock, then 'r' once it let go

  holder_process(const kiln::device_info& d, const std::string& dir) {
    int up[2];
    int down[2];
    REQUIRE(::pipe(up) == 0);
    REQUIRE(::pipe(down) == 0);
    std::fflush(nullptr); // the child's log lines must not repeat what the parent buffered
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(up[0]);
      ::close(down[1]);
      int code = 0;
      try {
        auto claim = kiln::claim_device(d, options(dir, 0));
        char c = claim.held() ? 'h' : 'x';
        code = ::write(up[1], &c, 1) == 1 ? 0 : 3;
        if (::read(down[0], &c, 1) < 0)
          code = 4;
        claim.release();
        c = 'r';
        if (::write(up[1], &c, 1) != 1)
          code = 3;
      } catch (...) {
        code = 2;
      }
      ::_exit(code);
    }
    ::close(up[1]);
    ::close(down[0]);
    said = up[0];
    told = down[1];
  }
  ~holder_process() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    ::close(told);
    ::close(said);
  }
  char next() {
    char c = 0;
    return ::read(said, &c, 1) == 1 ? c : 0;
  }
  void let_go() {
    char c = 'g';
    CHECK(::write(told, &c, 1) == 1);
  }
  void kill_it() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

std::string message_of(const kiln::device_info& d, const kiln::device_lock_options& o) {
  try {
    kiln::claim_device(d, o);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

/// hour:minute local time, `days_ago` days before today.
int64_t today_at(int hour, int minute, int days_ago = 0) {
  std::time_t now = std::time(nullptr);
  std::tm t{};
  ::localtime_r(&now, &t);
  t.tm_mday -= days_ago;
  t.tm_isdst = -1;
  t.tm_hour = hour;
  t.tm_min = minute;
  t.tm_sec = 0;
  return static_cast<int64_t>(std::mktime(&t));
}

} // namespace

TEST_CASE("lock files are named by what every process calls the device", "[device_lock]") {
  CHECK(kiln::device_lock_file(gpu_a) == "kiln-gpu-0a0a0a0a-0000-4000-8000-00000000000a.lock");
  CHECK(kiln::device_lock_file(gpu("cuda:3", "MIG-GPU-9e8d35e3/1/0"))
        == "kiln-mig-gpu-9e8d35e3_1_0.lock");
  auto by_bus = gpu("cuda:1", "");
  by_bus.pci_bus_id = "0000:3B:00.0";
  CHECK(kiln::device_lock_file(by_bus) == "kiln-pci-0000_3b_00_0.lock");
  CHECK(kiln::device_lock_file(gpu("cpu", "")) == "kiln-cpu.lock");
  // The same GPU under another name (another process's mask) has the same file.
  CHECK(kiln::device_lock_file(gpu("cuda:1", gpu_a.uuid)) == kiln::device_lock_file(gpu_a));
}

TEST_CASE("the lock folder: the environment's, else /run/lock, else the cache's", "[device_lock]") {
  ::setenv(kiln::device_lock_dir_env, "/some/shared/locks", 1);
  CHECK(kiln::device_lock_dir("/cache") == "/some/shared/locks");
  ::unsetenv(kiln::device_lock_dir_env);
  auto dir = kiln::device_lock_dir("/cache");
  if (::access("/run/lock", W_OK | X_OK) == 0)
    CHECK(dir == "/run/lock");
  else
    CHECK(dir == "/cache/device-locks");
}

TEST_CASE("a held device: the next claim names the holder's pid and gives up at its deadline",
          "[device_lock]") {
  auto dir = lock_dir("timeout");
  holder_process other{gpu_a, dir};
  REQUIRE(other.next() == 'h');
  const std::string held = "cuda:0 is held by pid " + std::to_string(other.pid) + " (";
  CHECK_THAT(message_of(gpu_a, options(dir, 0)),
             Catch::StartsWith(held)
                 && Catch::EndsWith("; not waiting ([evaluator] device_lock_wait_s = 0)"));

  std::string waiting;
  auto o = options(dir, 0.2);
  o.on_wait = [&](const std::string& text) { waiting += text + "\n"; };
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THAT(message_of(gpu_a, o),
             Catch::StartsWith(held)
                 && Catch::EndsWith("; gave up after 0.2 s ([evaluator] device_lock_wait_s)"));
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(200));
  // Said once, while it waited, with the same holder.
  CHECK_THAT(waiting, Catch::StartsWith(held)
                          && Catch::EndsWith("; waiting up to 0.2 s for it ([evaluator] "
                                             "device_lock_wait_s)\n"));
  CHECK(waiting.find('\n') == waiting.size() - 1);

  // What anyone can ask without taking the lock: the holder's record.
  auto h = kiln::device_lock_holder(gpu_a, dir);
  REQUIRE(h);
  CHECK(h->pid == other.pid);
  CHECK(h->device == "cuda:0");
  CHECK(h->started > 0);
  CHECK_FALSE(h->command.empty());
}

TEST_CASE("a waiting claim gets the device once the holder lets go", "[device_lock]") {
  auto dir = lock_dir("handover");
  holder_process other{gpu_a, dir};
  REQUIRE(other.next() == 'h');
  auto o = options(dir, 600);
  int told = 0;
  o.on_wait = [&](const std::string& text) {
    CHECK_THAT(text, Catch::StartsWith("cuda:0 is held by pid " + std::to_string(other.pid)));
    ++told;
    other.let_go(); // only now: the claim is already waiting
  };
  auto claim = kiln::claim_device(gpu_a, o);
  CHECK(claim.held());
  CHECK(told == 1);
  CHECK(other.next() == 'r');
  auto h = kiln::device_lock_holder(gpu_a, dir);
  REQUIRE(h);
  CHECK(h->pid == ::getpid());
  claim.release();
  CHECK_FALSE(kiln::device_lock_holder(gpu_a, dir));
}

TEST_CASE("a killed holder's lock is freed by the kernel", "[device_lock]") {
  auto dir = lock_dir("killed");
  holder_process other{gpu_a, dir};
  REQUIRE(other.next() == 'h');
  auto o = options(dir, 600);
  o.on_wait = [&](const std::string&) { other.kill_it(); };
  auto claim = kiln::claim_device(gpu_a, o);
  CHECK(claim.held());
  CHECK(other.pid == -1); // it was killed while the claim waited
  claim.release();
  // The dead holder's lock is gone; nothing else is needed to take it again.
  holder_process next{gpu_a, dir};
  CHECK(next.next() == 'h');
}

TEST_CASE("a holder that cannot write its record is named, the old record shown as stale",
          "[device_lock]") {
  auto dir = lock_dir("stale");
  const auto path = dir + "/" + kiln::device_lock_file(gpu_a);
  pid_t gone = ::fork();
  REQUIRE(gone >= 0);
  if (gone == 0)
    ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  std::ofstream{path} << "kiln device lock\npid=" << gone << "\ncommand=kiln run\n";
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  holder_process other{gpu_a, dir}; // opens it read-only: flock still works
  REQUIRE(other.next() == 'h');
  auto h = kiln::device_lock_holder(gpu_a, dir);
  REQUIRE(h);
  CHECK(h->pid == other.pid); // from the kernel's list of locks, not the file
  if (::geteuid() != 0) {     // root writes into a read-only file
    CHECK(h->stale_pid == gone);
    CHECK(h->command != "kiln run");
  }
}

TEST_CASE("claims of one device in one process share its lock", "[device_lock]") {
  auto dir = lock_dir("shared");
  auto first = kiln::claim_device(gpu_a, options(dir, 0));
  auto second = kiln::claim_device(gpu_a, options(dir, 0)); // would wait on itself otherwise
  CHECK(second.held());
  CHECK(second.path() == first.path());
  first.release();
  CHECK(kiln::device_lock_holder(gpu_a, dir)->pid == ::getpid());
  second.release();
  CHECK_FALSE(kiln::device_lock_holder(gpu_a, dir));
}

TEST_CASE("claim_devices takes all or none", "[device_lock]") {
  const char* fakes = "GPU-0a0a0a0a-0000-4000-8000-00000000000a,"
                      "GPU-0b0b0b0b-0000-4000-8000-00000000000b";
  ::setenv(kiln::test_fake_gpus_env, fakes, 1);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  auto dir = lock_dir("all");
  const auto first = *kiln::find_device("cuda:0");
  const auto second = *kiln::find_device("cuda:1");
  holder_process other{second, dir};
  REQUIRE(other.next() == 'h');
  CHECK_THROWS_WITH(kiln::claim_devices({"cuda:1", "cuda:0"}, options(dir, 0)),
                    Catch::StartsWith("cuda:1 is held by pid " + std::to_string(other.pid)));
  // cuda:0 comes first by lock file, and was let go when cuda:1 could not be had.
  CHECK_FALSE(kiln::device_lock_holder(first, dir));
  CHECK_THROWS_WITH(kiln::claim_devices({"cuda:7"}, options(dir, 0)), "device cuda:7 not found");
  other.let_go();
  CHECK(other.next() == 'r');
  auto both = kiln::claim_devices({"cuda:1", "cuda:0"}, options(dir, 0));
  REQUIRE(both.size() == 2);
  CHECK(both[0].device() == "cuda:0");
  CHECK(both[1].held());
  ::unsetenv(kiln::test_fake_gpus_env);
}

TEST_CASE("a lock file that is a link is never followed", "[device_lock]") {
  auto dir = lock_dir("link");
  const auto target = dir + "/precious.txt";
  std::ofstream{target} << "keep me\n";
  fs::create_symlink(target, dir + "/" + kiln::device_lock_file(gpu_a));
  auto claim = kiln::claim_device(gpu_a, options(dir, 0));
  CHECK_FALSE(claim.held()); // kiln goes on without the lock, and says so
  std::ifstream in{target};
  std::string text{std::istreambuf_iterator<char>{in}, {}};
  CHECK(text == "keep me\n");
}

TEST_CASE("the holder is described as a user reads it", "[device_lock]") {
  kiln::lock_holder h;
  h.pid = 1234;
  h.command = "kiln run";
  h.started = today_at(10, 2);
  CHECK(kiln::describe_holder("cuda:0", h)
        == "cuda:0 is held by pid 1234 (kiln run, started 10:02)");
  h.user = "someone-else-than-this-test";
  h.device = "cuda:1";
  CHECK(kiln::describe_holder("cuda:0", h)
        == "cuda:0 is held by pid 1234 (kiln run of someone-else-than-this-test, started 10:02, as "
           "its cuda:1)");
  h.device = "cuda:0";
  h.started = today_at(10, 2, 3);
  CHECK_THAT(kiln::describe_holder("cuda:0", h),
             Catch::EndsWith(" 10:02)") && !Catch::EndsWith("started 10:02)"));
  kiln::lock_holder unknown;
  unknown.stale_pid = 99;
  CHECK(kiln::describe_holder("cpu", unknown)
        == "cpu is held by another process (the lock file names pid 99, which has ended)");
  CHECK(kiln::describe_holder("cpu", kiln::lock_holder{}) == "cpu is held by another process");
}
