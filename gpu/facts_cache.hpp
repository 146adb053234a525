#pragma once

// The CPU runners' facts, kept on disk between kiln processes. Asking a runner costs a Python
// start with a torch import, on a two-core machine beside the pool's own imports; `kiln eval`
// paid it on every call. An entry names what the facts depend on, each path with its stat
// (modification time, size, inode): the interpreter, the torch package, and every folder
// imports search, where installing or removing any package changes the folder. An entry whose
// stamps all still match is used; any difference, or anything unreadable, means asking the
// runner again. Only the CPU: a GPU's facts come from the driver and the device (MIG, clocks,
// driver updates), which no file stamp tells.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "messages/eval.hpp"

namespace kiln {

/// The host as CPU facts see it, on one line: the CPU model, the CPUs online, the memory.
std::string cpu_host_identity();

/// What a path looks like now, as one line: `<mtime ns> <size> <inode>`, or `missing`, or
/// `unreadable <why>` (which never matches a stored stamp).
std::string path_stamp(const std::string& path);

/// The facts stored under `identity` in `dir`, if their stamps still hold. `identity` is all
/// that chose the runner and its settings (interpreter path, device, threads, harness, host),
/// on one line.
std::optional<runner_facts> load_facts(const std::string& dir, const std::string& identity);

/// How recent a stamped change may be for an entry to be stored (git's "racily clean" rule).
constexpr double racy_window_s = 2;

/// Stores `facts` with `stamps` (each path with its stat when the runner began), atomically
/// (temporary + rename), but only where the entry can be trusted: every path still has the stamp
/// the runner saw (nothing changed while it read the facts), none was modified in the last
/// `racy_window_s` (a change within the same timestamp tick would not show), and every value fits
/// on its line. Failures are logged, never thrown: the cache only saves time.
void store_facts(const std::string& dir, const std::string& identity, const runner_facts& facts,
                 const std::vector<std::pair<std::string, std::string>>& stamps);

} // namespace kiln
