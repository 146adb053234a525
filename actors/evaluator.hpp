#pragma once

// The evaluator of one device. It alone times work on its device, one evaluation at a time, so
// two measurements never disturb each other. Evaluations block on child processes, so it runs
// detached, on a thread of its own, never on the cooperative scheduler.

#include <cstdint>
#include <memory>

#include <caf/fwd.hpp>

#include "gpu/evaluate.hpp"
#include "messages/actors.hpp"

namespace kiln {

struct evaluator_state {
  static inline const char* name = "evaluator";
  std::unique_ptr<evaluation_engine> engine;
  uint64_t seed = 0;
  int64_t evaluations = 0;
};

evaluator_actor::behavior_type evaluator(evaluator_actor::stateful_pointer<evaluator_state> self,
                                         eval_settings settings, uint64_t seed);

/// Spawns a detached evaluator.
evaluator_actor spawn_evaluator(caf::actor_system& sys, eval_settings settings, uint64_t seed);

/// The evaluation seed of a candidate: a function of the run's seed and the candidate's id only,
/// so that the inputs a candidate is judged on do not depend on scheduling.
uint64_t evaluation_seed(uint64_t run_seed, const std::string& candidate_id);

} // namespace kiln
