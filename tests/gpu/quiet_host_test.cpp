#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpu/process.hpp"
#include "gpu/quiet_host.hpp"
#include "quiet_probe.hpp"

namespace fs = std::filesystem;
using namespace quiet_probe;
using kiln::child_process;
using kiln::process_role;
using kiln::quiet_window;

namespace {

std::string scratch(const std::string& name) {
  fs::path dir = fs::path(KILN_TEST_TMP) / "quiet" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

/// A busy loop in a group of its own, started and registered as kiln starts every child.
child_process busy(process_role role, const std::string& script = "while :; do :; done") {
  kiln::process_options o;
  o.argv = {"/bin/sh", "-c", script};
  o.env = {"PATH=/usr/bin:/bin"};
  o.timeout_s = 0;
  o.role = role;
  auto c = kiln::start_process(o);
  REQUIRE(c.running());
  return c;
}

/// Freezing on, no pinning (the machine's cores do not matter), by cgroups where this host has
/// them and kiln may (`cgroup`), else by signals.
void configure_plain(bool cgroup, double max_freeze_s = kiln::defaults::quiet_max_freeze_s) {
  kiln::quiet_host_settings s;
  s.freeze = true;
  s.timer_cores = 0;
  s.gpus = 0;
  s.max_freeze_s = max_freeze_s;
  s.allow_cgroup = cgroup;
  kiln::configure_quiet_host(s);
  const auto how = kiln::freeze_method();
  INFO("freezing by " << how);
  CHECK((how == "signals" || (cgroup && how == "cgroup")));
}

/// Both ways of freezing, one after the other (the cgroup one is the signal one again on a
/// host without a cgroup v2 of kiln's own).
bool by_cgroup() {
  return GENERATE(true, false);
}

bool frozen_now(const child_process& c) {
  return within(20, [&] { return group_is_frozen(c.pid()); });
}

bool thawed_now(const child_process& c) {
  return within(20, [&] { return group_is_thawed(c.pid()); }) && advances(c.pid());
}

std::vector<int> cores_of(int tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(tid, sizeof set, &set) != 0)
    return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set))
      out.push_back(c);
  return out;
}

/// Every thread of every member of the group runs on exactly `cores`.
bool group_on(int pgid, const std::vector<int>& cores) {
  auto m = members(pgid);
  if (m.empty())
    return false;
  for (int pid : m)
    for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task"))
      if (cores_of(std::stoi(e.path().filename().string())) != cores)
        return false;
  return true;
}

} // namespace

TEST_CASE("quiet host: timer cores come from the top of kiln's cores, one disjoint set per GPU") {
  std::vector<int> sixteen;
  for (int c = 15; c >= 0; --c)
    sixteen.push_back(c);
  auto p = kiln::plan_cores(sixteen, 2, 2);
  REQUIRE(p.pinning);
  REQUIRE(p.timer.size() == 2);
  CHECK(p.timer[0] == std::vector<int>{14, 15});
  CHECK(p.timer[1] == std::vector<int>{12, 13});
  CHECK(p.rest == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});

  // A mask with holes (taskset, a cpuset): only the allowed cores, from the top.
  p = kiln::plan_cores({9, 3, 5, 1, 7, 11}, 1, 2);
  REQUIRE(p.pinning);
  CHECK(p.timer[0] == std::vector<int>{9, 11});
  CHECK(p.rest == std::vector<int>{1, 3, 5, 7});

  // Two cores, one GPU, one timer core: the rest keeps one, half of two.
  p = kiln::plan_cores({0, 1}, 1, 1);
  REQUIRE(p.pinning);
  CHECK(p.timer[0] == std::vector<int>{1});
  CHECK(p.rest == std::vector<int>{0});
}

TEST_CASE("quiet host: pinning is off when the rest would keep fewer than half the cores, or "
          "nothing asks") {
  auto p = kiln::plan_cores({0, 1}, 1, 2);
  CHECK_FALSE(p.pinning);
  CHECK(p.rest == std::vector<int>{0, 1});
  CHECK(p.why.find("would leave 0 of 2 core(s)") != std::string::npos);
  p = kiln::plan_cores({0, 1, 2, 3, 4, 5, 6, 7}, 4, 2); // 8 for timers, none left
  CHECK_FALSE(p.pinning);
  p = kiln::plan_cores({0, 1, 2, 3, 4, 5, 6, 7}, 2, 2); // 4 of 8 left: half, enough
  CHECK(p.pinning);
  CHECK(kiln::plan_cores({0, 1, 2, 3}, 1, 0).why == "[evaluator] timer_cores is 0");
  CHECK(kiln::plan_cores({0, 1, 2, 3}, 0, 2).why == "no GPU");
  CHECK_FALSE(kiln::plan_cores({}, 1, 1).pinning);
}

TEST_CASE(
    "quiet host: a window freezes every other group kiln started and lets the timed one run") {
  configure_plain(by_cgroup());
  auto timed = busy(process_role::runner);
  auto build = busy(process_role::compile);
  auto other = busy(process_role::runner);
  REQUIRE(advances(build.pid()));
  {
    quiet_window w{{timed.pid()}, "cpu"};
    CHECK(kiln::group_frozen(build.pid()));
    CHECK(kiln::group_frozen(other.pid()));
    CHECK_FALSE(kiln::group_frozen(timed.pid()));
    CHECK(frozen_now(build));
    CHECK(frozen_now(other));
    CHECK(advances(timed.pid()));
    // One started meanwhile is frozen as soon as it is registered.
    auto late = busy(process_role::compile);
    CHECK(kiln::group_frozen(late.pid()));
    CHECK(frozen_now(late));
  }
  CHECK_FALSE(kiln::group_frozen(build.pid()));
  CHECK(thawed_now(build));
  CHECK(thawed_now(other));
  CHECK(kiln::frozen_seconds(build.pid()) > 0);
  CHECK(kiln::frozen_seconds(timed.pid()) == 0);
}

TEST_CASE(
    "quiet host: overlapping windows: a group is frozen while a window is open and none times it") {
  configure_plain(by_cgroup());
  auto a = busy(process_role::runner);
  auto b = busy(process_role::runner);
  auto c = busy(process_role::compile);
  auto w1 = std::make_unique<quiet_window>(std::vector<pid_t>{a.pid()}, "cuda:0");
  auto w2 = std::make_unique<quiet_window>(std::vector<pid_t>{b.pid()}, "cuda:1");
  CHECK(frozen_now(c));
  CHECK(advances(a.pid()));
  CHECK(advances(b.pid()));
  w1.reset(); // a is nobody's timing now, and w2 is still open
  CHECK(frozen_now(a));
  CHECK(advances(b.pid()));
  CHECK(group_is_frozen(c.pid()));
  // A group that joins a window runs again (a reference and a candidate timed alternately).
  w2->add(c.pid());
  CHECK(thawed_now(c));
  CHECK(group_is_frozen(a.pid()));
  w2->close();
  CHECK(thawed_now(a));
  CHECK(thawed_now(b));
  CHECK(thawed_now(c));
  w2.reset(); // closing twice is harmless
  CHECK(thawed_now(c));
}

TEST_CASE("quiet host: [evaluator] quiet_host = false freezes nothing") {
  kiln::quiet_host_settings s;
  s.freeze = false;
  s.timer_cores = 0;
  s.gpus = 0;
  kiln::configure_quiet_host(s);
  auto timed = busy(process_role::runner);
  auto build = busy(process_role::compile);
  quiet_window w{{timed.pid()}, "cpu"};
  CHECK_FALSE(kiln::group_frozen(build.pid()));
  CHECK(advances(build.pid()));
  CHECK(group_is_thawed(build.pid()));
}

TEST_CASE("quiet host: a window open past the limit thaws by itself and says so") {
  configure_plain(by_cgroup(), 0.2);
  auto timed = busy(process_role::runner);
  auto build = busy(process_role::compile);
  quiet_window w{{timed.pid()}, "cpu"};
  CHECK(kiln::group_frozen(build.pid()));
  REQUIRE(within(20, [&] { return w.expired(); }));
  CHECK_FALSE(kiln::group_frozen(build.pid()));
  CHECK(thawed_now(build));
  CHECK(w.note().find("outlasted the quiet host's limit of 0 s") != std::string::npos);
  // Another window opening meanwhile freezes again: only the expired one stopped counting.
  auto w2 = std::make_unique<quiet_window>(std::vector<pid_t>{timed.pid()}, "cpu");
  CHECK(frozen_now(build));
  w2.reset();
}

TEST_CASE("quiet host: a frozen group that died meanwhile is thawed and reaped without harm") {
  configure_plain(by_cgroup());
  auto timed = busy(process_role::runner);
  auto build = busy(process_role::compile);
  const pid_t gone = build.pid();
  {
    quiet_window w{{timed.pid()}, "cpu"};
    REQUIRE(frozen_now(build));
    REQUIRE(::kill(-gone, SIGKILL) == 0);
    REQUIRE(within(20, [&] { return members(gone).empty(); }));
    auto end = build.wait(5, 1);
    CHECK(end.signal == SIGKILL);
    CHECK_FALSE(kiln::group_frozen(gone));
  }
  CHECK(kiln::frozen_seconds(gone) == 0); // forgotten
  CHECK(advances(timed.pid()));
}

TEST_CASE("quiet host: time spent frozen does not count against a child's timeout") {
  configure_plain(by_cgroup());
  auto timed = busy(process_role::runner);
  kiln::process_options o;
  o.argv = {"/bin/sh", "-c", "while :; do :; done"};
  o.env = {"PATH=/usr/bin:/bin"};
  o.role = process_role::compile;
  auto build = kiln::start_process(o);
  REQUIRE(build.running());
  kiln::process_result end;
  {
    // Frozen for the whole of its 0.5 s timeout and longer: the wait must outlast the window.
    auto w = std::make_unique<quiet_window>(std::vector<pid_t>{timed.pid()}, "cpu");
    REQUIRE(frozen_now(build));
    std::thread closer{[&] {
      within(10, [&] { return kiln::frozen_seconds(build.pid()) > 0.8; });
      w.reset();
    }};
    end = build.wait(0.5, 1);
    closer.join();
  }
  CHECK(end.timed_out);
  CHECK(end.wall_ms > 1200); // 0.8 s frozen (less the moment before the wait) + 0.5 s of its own
}

TEST_CASE("quiet host: the timed runner runs on its GPU's timer cores, the rest of kiln's children "
          "off them") {
  kiln::quiet_host_settings s;
  s.freeze = true;
  s.timer_cores = 1;
  s.gpus = 1;
  kiln::configure_quiet_host(s);
  auto plan = kiln::current_core_plan();
  if (!plan.pinning) {
    WARN("not enough cores here to pin: " << plan.why);
    return;
  }
  // A child started now is confined at its start; the timed one moves to the timer's cores
  // while its window is open and back afterwards.
  auto timed = busy(process_role::runner, "(while :; do :; done) & while :; do :; done");
  auto build = busy(process_role::compile);
  REQUIRE(within(20, [&] { return members(timed.pid()).size() == 2; }));
  CHECK(group_on(build.pid(), plan.rest));
  CHECK(group_on(timed.pid(), plan.rest));
  {
    quiet_window w{{timed.pid()}, "cuda:0"};
    CHECK(w.cores() == plan.timer[0]);
    CHECK(group_on(timed.pid(), plan.timer[0]));
    CHECK(group_on(build.pid(), plan.rest));
  }
  CHECK(group_on(timed.pid(), plan.rest));
  // The CPU device has no timer cores of its own: its runner keeps the rest.
  quiet_window cpu{{timed.pid()}, "cpu"};
  CHECK(cpu.cores() == plan.rest);
  CHECK(group_on(timed.pid(), plan.rest));
}

TEST_CASE("quiet host: a kiln killed with its window open leaves nothing of its children stopped") {
  auto dir = scratch("killed");
  // As the subreaper, this process inherits the orphans, in the same session and another group:
  // the kernel's rule for orphaned stopped groups (SIGHUP and SIGCONT) then does not apply, and
  // only kiln's watchdog can thaw them.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  kiln::process_options o;
  o.argv = {KILN_QUIET_HELPER, by_cgroup() ? "auto" : "signals"};
  o.env = {"PATH=/usr/bin:/bin"};
  o.stdout_path = dir + "/out.txt";
  o.stderr_path = dir + "/err.txt";
  o.timeout_s = 0;
  auto helper = kiln::start_process(o);
  REQUIRE(helper.running());
  std::string said;
  REQUIRE(within(20, [&] {
    said = slurp(dir + "/out.txt");
    return said.find("frozen") != std::string::npos || !helper.alive();
  }));
  INFO("helper said: " << said << slurp(dir + "/err.txt"));
  int timed = 0, other = 0;
  REQUIRE(std::sscanf(said.c_str(), "%d %d", &timed, &other) == 2);
  REQUIRE(said.find("frozen") != std::string::npos);
  auto left = members(other);
  REQUIRE(left.size() == 2);
  for (int pid : left)
    CHECK(is_frozen(pid));

  helper.kill(); // SIGKILL
  // The shells die with their parent (PDEATHSIG); their busy subshells live on, not stopped.
  // The shells end as soon as they take their SIGKILL (a frozen one maybe only once thawed).
  CHECK(within(30, [&] {
    return group_is_thawed(other) && group_is_thawed(timed) && members(other).size() == 1
           && members(timed).size() == 1;
  }));
  std::vector<int> orphans = members(other);
  CHECK(orphans.size() == 1);
  for (int pid : orphans)
    CHECK(advances(pid, 20));

  ::kill(-timed, SIGKILL);
  ::kill(-other, SIGKILL);
  // Reap what came to us (shells, subshells, the watchdog), bounded.
  within(5, [&] {
    for (;;) {
      pid_t done = ::waitpid(-1, nullptr, WNOHANG);
      if (done > 0)
        continue;
      return done < 0 && errno == ECHILD;
    }
  });
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  CHECK(members(timed).empty());
  CHECK(members(other).empty());
}

TEST_CASE("quiet host: a busy process that is not kiln's shows in the window's foreign load") {
  configure_plain(by_cgroup());
  kiln::process_options o;
  o.argv = {"/bin/sh", "-c", "read x"}; // timed, idle: its own time is not foreign
  o.env = {"PATH=/usr/bin:/bin"};
  o.timeout_s = 0;
  o.role = process_role::runner;
  auto timed = kiln::start_process(o);
  REQUIRE(timed.running());
  quiet_window w{{timed.pid()}, "cuda:0"};
  pid_t stranger = ::fork();
  if (stranger == 0)
    for (;;) {
    }
  REQUIRE(stranger > 0);
  kiln::foreign_load_info load;
  const bool seen = within(8, [&] {
    load = w.foreign_load();
    return load.seconds > 1 && load.other_cores > 0.3;
  });
  ::kill(stranger, SIGKILL);
  ::waitpid(stranger, nullptr, 0);
  INFO("other cores " << load.other_cores << " over " << load.seconds << " s");
  CHECK(seen);
  CHECK(load.host_cores >= 1);
  CHECK(load.device == "cuda:0");
  w.close();
  const auto final_load = w.foreign_load();
  CHECK(final_load.seconds >= load.seconds);
  CHECK(w.foreign_load().seconds == final_load.seconds); // closed: no longer moves
}

TEST_CASE("quiet host: the foreign-load note speaks up past its threshold only") {
  kiln::foreign_load_info info;
  info.device = "cuda:0";
  info.seconds = 2;
  info.host_cores = 16;
  info.timer_cores = 2;
  info.load_average = 5.24;
  info.other_cores = 1.9;
  CHECK(kiln::foreign_load_note(info).empty());
  info.other_cores = 3.1;
  CHECK(kiln::foreign_load_note(info)
        == "host busy: other processes used 3.1 of 16 cores during the timing (load average "
           "5.2); the timing may be slow");
  info.timer_cores = 0; // not pinned: one core is enough to say so
  info.other_cores = 1.0;
  CHECK_FALSE(kiln::foreign_load_note(info).empty());
  info.device = "cpu";
  info.other_cores = 0.4;
  CHECK(kiln::foreign_load_note(info).empty());
  info.other_cores = 0.6;
  CHECK_FALSE(kiln::foreign_load_note(info).empty());
  info.seconds = 0;
  CHECK(kiln::foreign_load_note(info).empty());
}
