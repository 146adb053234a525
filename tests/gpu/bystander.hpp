#pragma once

// A busy loop that kiln counts as one of its compile workers: the quiet host must freeze it
// while something is timed and let it run again after (retime_test.cpp, evaluate_test.cpp).

#include "gpu/process.hpp"
#include "gpu/quiet_host.hpp"

namespace kiln_test {

/// Quiet-host settings without timer cores (CI has two cores), then the bystander, started.
inline kiln::child_process start_bystander_build() {
  kiln::quiet_host_settings q;
  q.gpus = 0;
  kiln::configure_quiet_host(q);
  kiln::process_options o;
  o.argv = {"/bin/sh", "-c", "while :; do :; done"};
  o.env = {"PATH=/usr/bin:/bin"};
  o.timeout_s = 0;
  o.role = kiln::process_role::compile;
  return kiln::start_process(o);
}

} // namespace kiln_test
