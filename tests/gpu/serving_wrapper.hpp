#pragma once

// Stand-in interpreters for tests that must step into a pooled runner's life: a shell script
// that kiln starts as its Python, which reads the job line itself, does what the test needs
// with the job, then hands over to the real harness.

#include <filesystem>
#include <fstream>
#include <string>

#include "gpu/python.hpp"

namespace kiln_test {

/// Writes an executable interpreter at `path`. Every start first runs `prologue` (shell). Runners
/// started outside the pool (the facts runner's) go straight to Python; a pooled runner reads its
/// job's path into `$job`, runs `body` (shell), then the harness's own serve mode for that job,
/// which keeps the control socket for the gate, where an evaluation's timing waits for the parent's
/// go. Such runners read their job line at once, so tests start them cold (`pool_size = 0`).
inline void write_serving_wrapper(const std::string& path, const std::string& body,
                                  const std::string& prologue = "") {
  const auto python = kiln::find_python("");
  {
    std::ofstream w{path};
    // The job in one read: it is one message of a seqpacket socket, and `read` reads a byte at a
    // time (the rest of the message is then lost).
    w << "#!/bin/sh\n"
      << prologue << "[ \"$4\" = --serve ] || exec " << python << " \"$@\"\n"
      << "job=$(dd bs=65536 count=1 2>/dev/null)\n"
      << body << "exec " << python << " \"$1\" \"$2\" -c "
      << "'import os, runpy, sys; h = runpy.run_path(sys.argv[1]); "
         "sys.exit(h[\"_main\"](sys.argv[1:], os.dup(0)))' \"$3\" \"$job\"\n";
  }
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

} // namespace kiln_test
