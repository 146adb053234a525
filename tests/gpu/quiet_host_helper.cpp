// A kiln-like process for quiet_host_test.cpp: it starts two busy process groups (each a shell
// and a busy subshell of it) through kiln's process API, opens a quiet window over the first,
// says "<pgid1> <pgid2>" and, once the second group is frozen, "frozen", then waits to be
// SIGKILLed. `signals` as its argument: freeze by signals even where cgroups would do. What it
// leaves frozen behind is the test's to see.

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu/process.hpp"
#include "gpu/quiet_host.hpp"
#include "quiet_probe.hpp"

int main(int argc, char** argv) {
  kiln::quiet_host_settings s;
  s.allow_cgroup = argc < 2 || std::string{argv[1]} != "signals";
  s.freeze = true;
  s.timer_cores = 0;
  s.gpus = 0;
  kiln::configure_quiet_host(s);
  std::vector<kiln::child_process> kids;
  for (int i = 0; i < 2; ++i) {
    kiln::process_options o;
    o.argv = {"/bin/sh", "-c", "(while :; do :; done) & while :; do :; done"};
    o.env = {"PATH=/usr/bin:/bin"};
    o.timeout_s = 0;
    o.role = kiln::process_role::compile;
    kids.push_back(kiln::start_process(o));
    if (!kids.back().running())
      return 2;
  }
  // The subshells first: a group stopped before its shell forked would have no grandchild.
  for (auto& k : kids)
    if (!quiet_probe::within(10, [&] { return quiet_probe::members(k.pid()).size() >= 2; }))
      return 3;
  std::printf("%d %d\n", kids[0].pid(), kids[1].pid());
  std::fflush(stdout);
  kiln::quiet_window window{{kids[0].pid()}, "cpu"};
  if (!quiet_probe::within(10, [&] { return quiet_probe::group_is_frozen(kids[1].pid(), 2); }))
    return 4;
  std::printf("frozen %s\n", kiln::freeze_method().c_str());
  std::fflush(stdout);
  for (;;)
    ::pause();
}
