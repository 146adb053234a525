#pragma once

// The dispatcher queues evaluations and hands each to an idle evaluator. Evaluators are kept by
// slot (one per device); the supervisor installs a fresh one in a slot after a crash, and a job
// whose evaluator died is put back at the front of the queue once.

#include <deque>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include "messages/actors.hpp"

namespace kiln {

struct dispatcher_state {
  static inline const char* name = "dispatcher";
  /// An evaluation, or (when `is_retime`) a final re-timing.
  struct pending {
    eval_job job;
    caf::typed_response_promise<verdict> promise;
    int requeued = 0;
    bool is_retime = false;
    retime_job retime;
    caf::typed_response_promise<retime_result> retime_promise;
  };
  struct slot {
    evaluator_actor handle;
    bool busy = false;
    bool retired = false; ///< its device failed a health check: it gets no more jobs
  };
  std::deque<pending> queue;
  std::vector<slot> slots;
  std::vector<caf::typed_response_promise<runner_facts>> facts_waiting;
  bool have_facts = false;
  runner_facts facts;
};

dispatcher_actor::behavior_type
dispatcher(dispatcher_actor::stateful_pointer<dispatcher_state> self, size_t slots);

} // namespace kiln
