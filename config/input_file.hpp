#pragma once

// Reading what a user (or an LLM) hands kiln: configs, tasks, candidates, manifests. Each must be
// a regular file of bounded size; a FIFO would block kiln forever, /dev/zero would read until
// memory runs out, a directory reads as nothing. One line names the file and what is wrong.

#include <cstddef>
#include <stdexcept>
#include <string>

namespace kiln {

/// Default caps (bytes). A candidate is one Python file an LLM wrote; a task may carry data.
inline constexpr size_t max_config_bytes = size_t{1} << 20;
inline constexpr size_t max_candidate_bytes = size_t{1} << 20;
inline constexpr size_t max_task_bytes = size_t{16} << 20;
inline constexpr size_t max_manifest_bytes = size_t{16} << 20;

struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The bytes of the regular file `path`, opened without blocking (O_NONBLOCK, then fstat
/// before the first read) and read up to `max_bytes`. Throws input_error: "cannot read <what>
/// <path>: <errno text>" for a missing or unreadable file, "<what> <path> is a FIFO, not a
/// regular file" (a directory, socket, device) and "<what> <path> has N bytes, more than ..."
/// (also when a file grows past the cap while being read).
std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes);

} // namespace kiln
