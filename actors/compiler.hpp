#pragma once

// A compile worker: imports candidates with no GPU visible so that their extension builds land
// in the shared cache before a GPU is held (gpu/compile.hpp). Compiles block on child processes
// for up to minutes, so each worker runs detached, on a thread of its own.

#include <memory>
#include <vector>

#include <caf/fwd.hpp>

#include "gpu/compile.hpp"
#include "messages/actors.hpp"

namespace kiln {

struct compiler_state {
  static inline const char* name = "compiler";
  std::unique_ptr<compile_engine> engine;
};

compiler_actor::behavior_type compiler(compiler_actor::stateful_pointer<compiler_state> self,
                                       compile_settings settings);

/// Spawns a detached compile worker; throws std::runtime_error when its settings are unusable.
compiler_actor spawn_compiler(caf::actor_system& sys, compile_settings settings);

/// The compile settings that go with an evaluator's: same interpreter and cache, builds for
/// `capability` (the device's compute capability, e.g. `9.0`; empty for the CPU).
compile_settings compile_settings_for(const eval_settings& s, const std::string& capability);

/// How many compile workers `[evaluator] compile_workers` asks for on this host (0 = half the
/// cores, at least 1).
size_t compile_worker_count(const evaluator_config& cfg);

/// Spawns `compile_worker_count` workers for the evaluators of `s`.
std::vector<compiler_actor> make_compilers(caf::actor_system& sys, const eval_settings& s,
                                           const std::string& capability);

} // namespace kiln
