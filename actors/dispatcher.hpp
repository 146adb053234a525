#pragma once

// The dispatcher queues evaluations and hands each to an idle evaluator. A candidate that builds
// extensions first goes through a compile worker (CPU only, no GPU visible), so that a GPU is
// never held while compiling and the build lands in the shared cache; compilers work ahead of
// the evaluators. Evaluators are kept by slot (one per device); the supervisor installs a fresh
// one in a slot after a crash, a job whose evaluator died is put back at the front of the queue
// once, and a device that fails its health check is retired. Jobs of many tasks take turns
// (actors/fair_queue.hpp).

#include "actors/fair_queue.hpp"
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
    compile_report compile; ///< what the compile stage did, when it ran
    bool is_retime = false;
    retime_job retime;
    caf::typed_response_promise<retime_result> retime_promise;
  };
  struct slot {
    evaluator_actor handle;
    bool busy = false;
    bool retired = false; ///< its device failed a health check: it gets no more jobs
  };
  struct worker {
    compiler_actor handle;
    bool busy = false;
  };
  /// Jobs waiting for a compiler; after it they join `queue`, the device stage's. Both serve
  /// the tasks in turn.
  fair_queue<pending> compile_queue;
  std::vector<worker> compilers;
  fair_queue<pending> queue;
  std::vector<slot> slots;
  std::vector<caf::typed_response_promise<runner_facts>> facts_waiting;
  bool have_facts = false;
  runner_facts facts;
};

/// Whether a candidate's source suggests it builds C++/CUDA extensions, so it goes through a
/// compiler before the GPU.
bool builds_extensions(const std::string& code);

dispatcher_actor::behavior_type
dispatcher(dispatcher_actor::stateful_pointer<dispatcher_state> self, size_t slots);

} // namespace kiln
