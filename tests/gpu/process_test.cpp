#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpu/process.hpp"
#include "gpu/python.hpp"

namespace fs = std::filesystem;
using kiln::process_options;
using kiln::process_result;
using kiln::run_process;

namespace {

/// A fresh, empty folder for one test.
std::string scratch(const std::string& name) {
  fs::path dir = fs::path(KILN_TEST_TMP) / "process" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

process_options shell(const std::string& script, const std::string& dir) {
  process_options opts;
  opts.argv = {"/bin/sh", "-c", script};
  opts.env = {"PATH=/usr/bin:/bin"};
  opts.stdout_path = dir + "/out.txt";
  opts.stderr_path = dir + "/err.txt";
  opts.timeout_s = 30;
  opts.kill_grace_s = 1;
  return opts;
}

/// The first line `child` writes to `path`, once it is there: a bounded poll (30 s), for the
/// shell to have reached a point the test must not time before; "" if it never comes.
std::string first_line(const kiln::child_process& child, const std::string& path) {
  REQUIRE(child.running());
  for (int i = 0; i < 30000; ++i) {
    auto text = slurp(path);
    if (auto nl = text.find('\n'); nl != std::string::npos)
      return text.substr(0, nl);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return "";
}

/// Processes of group `pgid` that have not exited (zombies waiting for init do not count).
std::vector<int> live_members(int pgid) {
  std::vector<int> out;
  DIR* proc = opendir("/proc");
  REQUIRE(proc != nullptr);
  while (dirent* e = readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    std::string stat = slurp(std::string("/proc/") + e->d_name + "/stat");
    auto paren = stat.rfind(')');
    if (paren == std::string::npos)
      continue;
    char state = 0;
    int ppid = 0;
    int pgrp = 0;
    if (std::sscanf(stat.c_str() + paren + 1, " %c %d %d", &state, &ppid, &pgrp) == 3
        && pgrp == pgid && state != 'Z' && state != 'X')
      out.push_back(std::atoi(e->d_name));
  }
  closedir(proc);
  return out;
}

} // namespace

TEST_CASE("run_process captures the exit code", "[process]") {
  auto dir = scratch("exit");
  process_result r = run_process(shell("exit 3", dir));
  CHECK(r.started);
  CHECK(r.exit_code == 3);
  CHECK(r.signal == 0);
  CHECK_FALSE(r.timed_out);
  CHECK(r.error.empty());
  CHECK(r.wall_ms > 0);
}

TEST_CASE("run_process writes stdout and stderr to their files, truncating them", "[process]") {
  auto dir = scratch("streams");
  auto opts = shell("echo to-out; echo to-err >&2", dir);
  std::ofstream(opts.stdout_path) << "old content that is longer than the new one\n";
  process_result r = run_process(opts);
  REQUIRE(r.started);
  CHECK(r.exit_code == 0);
  CHECK(slurp(opts.stdout_path) == "to-out\n");
  CHECK(slurp(opts.stderr_path) == "to-err\n");
}

TEST_CASE("run_process can send both streams to one file", "[process]") {
  auto dir = scratch("one-file");
  auto opts = shell("echo a; echo b >&2; echo c", dir);
  opts.stderr_path = opts.stdout_path;
  REQUIRE(run_process(opts).exit_code == 0);
  CHECK(slurp(opts.stdout_path) == "a\nb\nc\n");
}

TEST_CASE("the child sees exactly the environment it was given", "[process]") {
  auto dir = scratch("env");
  process_options opts;
  opts.argv = {"env"}; // found on the parent's PATH: the child's env has no PATH at all
  opts.env = {"KILN_A=1", "KILN_B=two words"};
  opts.stdout_path = dir + "/out.txt";
  opts.stderr_path = dir + "/err.txt";
  process_result r = run_process(opts);
  REQUIRE(r.started);
  CHECK(r.exit_code == 0);
  std::istringstream lines(slurp(opts.stdout_path));
  std::vector<std::string> vars;
  for (std::string line; std::getline(lines, line);)
    vars.push_back(line);
  std::sort(vars.begin(), vars.end());
  CHECK(vars == std::vector<std::string>{"KILN_A=1", "KILN_B=two words"});
}

TEST_CASE("the child runs in the given directory with stdin closed off", "[process]") {
  auto dir = scratch("cwd");
  auto opts = shell("pwd; cat; echo end", dir);
  opts.cwd = dir;
  process_result r = run_process(opts);
  REQUIRE(r.exit_code == 0);
  // `cat` reads /dev/null and ends at once instead of waiting on the parent's stdin.
  CHECK(slurp(opts.stdout_path) == fs::canonical(dir).string() + "\nend\n");
}

TEST_CASE("the child gets no core dumps and the memory limit", "[process]") {
  auto dir = scratch("limits");
  auto opts = shell("ulimit -c; ulimit -v", dir);
  opts.memory_limit_bytes = 512L << 20;
  REQUIRE(run_process(opts).exit_code == 0);
  CHECK(slurp(opts.stdout_path) == "0\n524288\n"); // ulimit -v counts KiB
}

TEST_CASE("the child runs at the nice increment it was given", "[process]") {
  auto dir = scratch("nice");
  auto opts = shell("nice", dir); // coreutils' nice without a command prints the nice value
  REQUIRE(run_process(opts).exit_code == 0);
  const int base = std::stoi(slurp(opts.stdout_path));
  opts.nice = 7;
  REQUIRE(run_process(opts).exit_code == 0);
  CHECK(std::stoi(slurp(opts.stdout_path)) == std::min(base + 7, 19));
}

TEST_CASE("a timeout terminates the child within timeout plus grace", "[process]") {
  auto dir = scratch("timeout");
  auto opts = shell("sleep 100", dir);
  opts.timeout_s = 0.3;
  opts.kill_grace_s = 1;
  process_result r = run_process(opts);
  CHECK(r.started);
  CHECK(r.timed_out);
  CHECK((r.signal == SIGTERM || r.signal == SIGKILL));
  CHECK(r.wall_ms >= 300);
  CHECK(r.wall_ms < 300 + 1000 + 1500);
}

TEST_CASE("a child that ignores SIGTERM is killed after the grace period", "[process]") {
  auto dir = scratch("ignore-term");
  auto opts = shell("trap '' TERM; echo ready; sleep 100", dir);
  // The clock starts once the trap is set: a busy machine may not run the shell for a while.
  kiln::child_process child = kiln::start_process(opts);
  REQUIRE(first_line(child, opts.stdout_path) == "ready");
  process_result r = child.wait(0.2, 0.3);
  CHECK(r.timed_out);
  CHECK(r.signal == SIGKILL);
  CHECK(r.wall_ms >= 500);
  CHECK(r.wall_ms < 500 + 1500);
}

TEST_CASE("no process of the group survives a timeout", "[process]") {
  auto dir = scratch("grandchild-timeout");
  // $$ is the shell's pid, which is also the group id.
  auto opts = shell("echo $$; sleep 100 & sleep 100", dir);
  kiln::child_process child = kiln::start_process(opts);
  int pgid = std::atoi(first_line(child, opts.stdout_path).c_str());
  REQUIRE(pgid == child.pid());
  process_result r = child.wait(0.3, 1);
  REQUIRE(r.timed_out);
  CHECK(live_members(pgid).empty());
  errno = 0;
  bool gone = kill(-pgid, 0) != 0 && errno == ESRCH;
  CHECK((gone || live_members(pgid).empty())); // zombies may wait for init to reap them
}

TEST_CASE("no process of the group survives its leader's normal exit", "[process]") {
  auto dir = scratch("grandchild-exit");
  auto opts = shell("echo $$; sleep 100 & exit 0", dir);
  process_result r = run_process(opts);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.wall_ms < 5000);
  int pgid = std::atoi(slurp(opts.stdout_path).c_str());
  REQUIRE(pgid > 1);
  CHECK(live_members(pgid).empty());
}

TEST_CASE("a missing program is reported, not run", "[process]") {
  auto dir = scratch("missing");
  SECTION("a bare name not on PATH") {
    auto opts = shell("", dir);
    opts.argv = {"kiln-no-such-program", "--flag"};
    process_result r = run_process(opts);
    CHECK_FALSE(r.started);
    CHECK_THAT(r.error, Catch::Contains("kiln-no-such-program"));
    CHECK_THAT(r.error, Catch::Contains("not found"));
  }
  SECTION("an absolute path that does not exist") {
    auto opts = shell("", dir);
    opts.argv = {"/nonexistent/kiln-prog"};
    process_result r = run_process(opts);
    CHECK_FALSE(r.started);
    CHECK_THAT(r.error, Catch::Contains("/nonexistent/kiln-prog"));
    CHECK_THAT(r.error, Catch::Contains("No such file"));
  }
  SECTION("a working directory that does not exist") {
    auto opts = shell("true", dir);
    opts.cwd = dir + "/nowhere";
    process_result r = run_process(opts);
    CHECK_FALSE(r.started);
    CHECK_THAT(r.error, Catch::Contains("nowhere"));
  }
  SECTION("an output file that cannot be created") {
    auto opts = shell("true", dir);
    opts.stdout_path = dir + "/no/such/dir/out.txt";
    process_result r = run_process(opts);
    CHECK_FALSE(r.started);
    CHECK_THAT(r.error, Catch::Contains("stdout"));
  }
}

TEST_CASE("death by a signal reports the signal", "[process]") {
  auto dir = scratch("signal");
  process_result r = run_process(shell("kill -KILL $$", dir));
  CHECK(r.started);
  CHECK_FALSE(r.timed_out);
  CHECK(r.signal == SIGKILL);
  CHECK(r.exit_code == -1);
}

TEST_CASE("run_process works from several threads at once", "[process]") {
  auto dir = scratch("threads");
  constexpr int n = 4;
  std::vector<process_result> results(n);
  std::vector<process_options> opts;
  for (int i = 0; i < n; ++i) {
    std::string id = std::to_string(i);
    auto o = shell("echo thread-" + id + "; sleep 0.2; exit " + std::to_string(10 + i), dir);
    o.stdout_path = dir + "/out" + id + ".txt";
    o.stderr_path = dir + "/err" + id + ".txt";
    opts.push_back(o);
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] { results[i] = run_process(opts[i]); });
  for (auto& t : threads)
    t.join();
  for (int i = 0; i < n; ++i) {
    CHECK(results[i].started);
    CHECK(results[i].exit_code == 10 + i);
    CHECK(slurp(opts[i].stdout_path) == "thread-" + std::to_string(i) + "\n");
  }
}

TEST_CASE("tail_of_file returns the end of a file", "[process]") {
  auto dir = scratch("tail");
  std::string path = dir + "/f.txt";
  std::ofstream(path) << "0123456789";
  CHECK(kiln::tail_of_file(path, 4) == "6789");
  CHECK(kiln::tail_of_file(path, 100) == "0123456789");
  CHECK(kiln::tail_of_file(dir + "/missing.txt", 10).empty());
  // "é" is two bytes (C3 A9): a cut inside it starts at the next whole character.
  std::ofstream(path) << "ab\xC3\xA9xy";
  CHECK(kiln::tail_of_file(path, 3) == "xy");
  CHECK(kiln::tail_of_file(path, 4) == "\xC3\xA9xy");
}

TEST_CASE("find_python picks an interpreter that imports torch", "[python]") {
  std::string py = kiln::find_python("");
  CHECK_FALSE(py.empty());
  // Whatever it found must really import torch (on Debian: /usr/bin/python3, not pyenv's).
  auto dir = scratch("python");
  process_options opts;
  opts.argv = {py, "-c", "import torch"};
  opts.env = {"PATH=/usr/bin:/bin", "HOME=/tmp"};
  opts.stdout_path = dir + "/out.txt";
  opts.stderr_path = dir + "/err.txt";
  opts.timeout_s = 60;
  CHECK(run_process(opts).exit_code == 0);
  CHECK(kiln::find_python("") == py); // cached
  // A configured interpreter that works is taken as given.
  CHECK(kiln::find_python(py) == py);
}

TEST_CASE("find_python says what it tried", "[python]") {
  CHECK_THROWS_WITH(kiln::find_python("/nonexistent/python3"),
                    Catch::Contains("/nonexistent/python3"));
  // An interpreter that runs but has no torch.
  auto dir = scratch("fake-python");
  std::string fake = dir + "/python3";
  std::ofstream(fake)
      << "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n";
  fs::permissions(fake, fs::perms::owner_all);
  CHECK_THROWS_WITH(kiln::find_python(fake), Catch::Contains(fake)
                                                 && Catch::Contains("no torch module")
                                                 && Catch::Contains("No module named 'torch'"));
}

TEST_CASE("start_process returns at once; the child reads the stdin it was given", "[process]") {
  auto dir = scratch("stdin");
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  auto opts = shell("read -r line; echo \"got $line\"", dir);
  opts.stdin_fd = fds[0];
  kiln::child_process child = kiln::start_process(opts);
  close(fds[0]); // the child has its own copy
  REQUIRE(child.running());
  CHECK(child.alive()); // blocked on the pipe: start_process did not wait for it
  REQUIRE(write(fds[1], "hello\n", 6) == 6);
  close(fds[1]);
  process_result r = child.wait(30, 1);
  CHECK(r.started);
  CHECK(r.exit_code == 0);
  CHECK(slurp(opts.stdout_path) == "got hello\n");
  CHECK_FALSE(child.running());
}

TEST_CASE("a child_process that goes out of scope takes its group with it", "[process]") {
  auto dir = scratch("scope");
  auto opts = shell("echo $$; sleep 100 & sleep 100", dir);
  int pgid = 0;
  {
    kiln::child_process child = kiln::start_process(opts);
    pgid = std::atoi(first_line(child, opts.stdout_path).c_str());
    REQUIRE(pgid == child.pid());
    kiln::child_process moved = std::move(child);
    CHECK_FALSE(child.running());
    CHECK(moved.running());
  }
  CHECK(live_members(pgid).empty());
  CHECK(kill(pgid, 0) != 0); // reaped, not a zombie
}

TEST_CASE("a child that cannot start reports why without a process", "[process]") {
  auto dir = scratch("start-fail");
  auto opts = shell("true", dir);
  opts.cwd = dir + "/nowhere";
  kiln::child_process child = kiln::start_process(opts);
  CHECK_FALSE(child.running());
  CHECK_FALSE(child.alive());
  CHECK_THAT(child.error(), Catch::Contains("chdir") && Catch::Contains("nowhere"));
  process_result r = child.wait(1, 1);
  CHECK_FALSE(r.started);
  CHECK(r.error == child.error());
}
