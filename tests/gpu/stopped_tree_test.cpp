// stopped_tree (gpu/quiet_host.hpp) on real processes: a leader of its own group and a grandchild
// that left the group for a session of its own are both stopped while it lives, and both run
// again once it is gone; a process outside the tree is never touched.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "gpu/quiet_host.hpp"

namespace {

char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

bool stopped(char s) {
  return s == 'T' || s == 't';
}

/// Waits (with a deadline, no sleep) until `pid`'s state is stopped or not, as wanted.
bool reaches(pid_t pid, bool want_stopped) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (stopped(state_of(pid)) == want_stopped)
      return true;
    sched_yield();
  }
  return false;
}

/// A process that waits for signals until it is killed.
[[noreturn]] void idle() {
  for (;;)
    pause();
}

} // namespace

TEST_CASE("a stopped tree holds the group and the descendants that left it", "[quiet_host]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t leader = fork();
  REQUIRE(leader >= 0);
  if (leader == 0) {
    setpgid(0, 0);
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      setsid(); // out of the leader's group: only the tree walk finds it
      idle();
    }
    (void)!write(fds[1], &grandchild, sizeof grandchild);
    idle();
  }
  close(fds[1]);
  pid_t grandchild = 0;
  REQUIRE(read(fds[0], &grandchild, sizeof grandchild) == static_cast<ssize_t>(sizeof grandchild));
  close(fds[0]);
  // Its group set (by the leader itself) before the tree is taken.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (getpgid(leader) != leader && std::chrono::steady_clock::now() < deadline)
    sched_yield();
  const pid_t bystander = fork();
  REQUIRE(bystander >= 0);
  if (bystander == 0)
    idle();

  {
    kiln::stopped_tree held{leader};
    CHECK(held.size() == 2);
    CHECK(reaches(leader, true));
    CHECK(reaches(grandchild, true));
    CHECK_FALSE(stopped(state_of(bystander)));
  }
  CHECK(reaches(leader, false));
  CHECK(reaches(grandchild, false));

  kill(grandchild, SIGKILL); // not our child: reaped by init
  kill(bystander, SIGKILL);
  kill(leader, SIGKILL);
  waitpid(bystander, nullptr, 0);
  waitpid(leader, nullptr, 0);
}

TEST_CASE("a stopped tree of nobody holds nothing", "[quiet_host]") {
  kiln::stopped_tree none{0};
  CHECK(none.size() == 0);
}
