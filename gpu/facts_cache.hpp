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

/// Stores `facts` with the current stamps of `stamp_paths`, atomically (temporary + rename).
/// Facts whose text could not be read back the same (a newline in a value) are not stored.
/// Failures are logged, never thrown: the cache only saves time.
void store_facts(const std::string& dir, const std::string& identity, const runner_facts& facts,
                 const std::vector<std::string>& stamp_paths);

} // namespace kiln
