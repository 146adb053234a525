#pragma once

// What a process of a quiet-host test is doing, read from /proc (shared by quiet_host_test.cpp
// and the kiln-like helper program it kills).

#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace quiet_probe {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct stat_line {
  bool ok = false;
  char state = 0;
  int pgrp = 0;
  unsigned long long ticks = 0; ///< utime + stime
};

inline stat_line read_stat(int pid) {
  stat_line out;
  auto text = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto paren = text.rfind(')');
  if (paren == std::string::npos)
    return out;
  int ppid = 0;
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(text.c_str() + paren + 1, " %c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                  &out.state, &ppid, &out.pgrp, &utime, &stime)
      != 5)
    return out;
  out.ok = true;
  out.ticks = utime + stime;
  return out;
}

/// Stopped by a signal, or in a frozen cgroup v2 (the other way kiln freezes).
inline bool is_frozen(int pid) {
  auto st = read_stat(pid);
  if (!st.ok)
    return false;
  if (st.state == 'T' || st.state == 't')
    return true;
  auto groups = slurp("/proc/" + std::to_string(pid) + "/cgroup");
  auto at = groups.find("0::");
  if (at == std::string::npos)
    return false;
  auto end = groups.find('\n', at);
  auto rel = groups.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
  if (rel.find("kiln-quiet-") == std::string::npos)
    return false;
  for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    auto events = slurp(std::string(mount) + rel + "/cgroup.events");
    if (!events.empty())
      return events.find("frozen 1") != std::string::npos;
  }
  return false;
}

/// Live (not zombie) members of process group `pgid`.
inline std::vector<int> members(int pgid) {
  std::vector<int> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr)
    return out;
  while (dirent* e = readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    int pid = std::atoi(e->d_name);
    auto st = read_stat(pid);
    if (st.ok && st.pgrp == pgid && st.state != 'Z' && st.state != 'X')
      out.push_back(pid);
  }
  closedir(proc);
  return out;
}

/// Polls `done` until it holds or `seconds` have passed; whether it held.
inline bool within(double seconds, const std::function<bool()>& done) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

/// Every live member of the group frozen (and at least `at_least` of them).
inline bool group_is_frozen(int pgid, size_t at_least = 1) {
  auto m = members(pgid);
  if (m.size() < at_least)
    return false;
  for (int pid : m)
    if (!is_frozen(pid))
      return false;
  return true;
}

/// No live member of the group frozen.
inline bool group_is_thawed(int pgid) {
  for (int pid : members(pgid))
    if (is_frozen(pid))
      return false;
  return true;
}

/// The process uses the CPU: its ticks grow within `seconds` (generous: a loaded CI host with
/// two cores may give a busy loop little time, and the wait ends at the first tick).
inline bool advances(int pid, double seconds = 20) {
  auto first = read_stat(pid);
  if (!first.ok)
    return false;
  return within(seconds, [&] {
    auto now = read_stat(pid);
    return now.ok && now.ticks > first.ticks;
  });
}

} // namespace quiet_probe
