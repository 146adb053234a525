#pragma once

// The supervisor owns a run. It is a registry of workers: it spawns the LLM gateways, the
// agent roles, the evaluators and the dispatcher, monitors each, restarts a crashed worker
// with growing backoff, and takes the run down if a core component (archive, dispatcher) dies
// or a worker keeps crashing. It owns the query budget: every query passes through it and is
// granted or refused before it is sent. It runs the tasks' strategies, at most
// `parallel_tasks` at once, and answers the `run` request with the summary when all have ended.
//
//   idle ──run──> running ──all tasks ended──> flushing archive ──> done (summary delivered)
//                    │
//                    └──stop──> stopping: no new queries or tasks, strategies finish what is
//                               in flight, then the same way out (summary marked interrupted)

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/budget.hpp"
#include "config/config.hpp"
#include "config/defaults.hpp"
#include "gpu/compile.hpp"
#include "gpu/evaluate.hpp"
#include "messages/actors.hpp"

namespace kiln {

/// Everything a run needs, resolved and checked before any actor starts.
struct run_plan {
  config cfg;
  std::vector<task_spec> tasks;
  /// One evaluator per entry (one per device).
  std::vector<eval_settings> evaluators;
  /// One compile worker per entry; none means candidates build in the GPU stage.
  std::vector<compile_settings> compilers;
  /// Role templates read at start: role name -> (prompt kind, or "" for all kinds -> text);
  /// absent means the built-in templates.
  std::map<std::string, std::map<std::string, std::string>> templates;
  /// Called on every progress report and when a task ends (in the supervisor's context:
  /// keep it quick).
  std::function<void(const task_progress&, bool task_ended)> on_progress;
  /// How crashed workers come back: first backoff (doubling up to `restart_backoff_max`), and
  /// how many crashes within `restart_window` take the run down.
  std::chrono::milliseconds restart_backoff_min = defaults::restart_backoff_min;
  std::chrono::milliseconds restart_backoff_max = defaults::restart_backoff_max;
  std::chrono::seconds restart_window = defaults::restart_window;
  int64_t max_restarts = defaults::max_restarts;
  /// Test seam: builds the evaluator of a slot instead of a real one.
  std::function<evaluator_actor(caf::actor_system&, size_t)> make_evaluator;
};

struct supervisor_state {
  static inline const char* name = "supervisor";

  struct worker {
    std::string name;     ///< `llm:<profile>`, `agent:<role>`, `evaluator:<i>`
    caf::actor handle;    ///< empty while restarting
    int64_t restarts = 0; ///< within the current window
    std::chrono::steady_clock::time_point window_start;
    std::chrono::milliseconds backoff{0};
  };
  struct waiting_ask {
    agent_request req;
    caf::typed_response_promise<agent_reply> promise;
    double reserved_usd = 0; ///< held in the budget until the query settles
  };

  run_plan plan;
  archive_actor archive;
  dispatcher_actor dispatcher;
  std::map<std::string, worker> workers;
  std::map<caf::actor_addr, std::string> worker_by_addr;
  std::map<std::string, std::vector<waiting_ask>> waiting; ///< role -> asks held during restart
  struct parked_ask {
    std::string role;
    agent_request req;
    caf::typed_response_promise<agent_reply> promise;
  };
  /// Asks that the dollar budget refused only for what queries in flight have reserved; asked
  /// again, in order, whenever a query settles.
  std::vector<parked_ask> parked;

  query_budget budget{0};
  bool out_of_time = false; ///< [budget] wall_s_total has passed
  llm_totals totals;
  std::map<std::string, llm_totals> task_totals; ///< per task

  std::deque<size_t> todo; ///< indexes into plan.tasks not yet started
  std::map<caf::actor_addr, std::string> strategy_by_addr;
  std::map<std::string, strategy_actor> running;
  std::map<std::string, task_result> results;
  std::map<std::string, task_progress> progress;

  bool started = false;
  bool stopping = false;
  bool finishing = false;
  std::string fatal; ///< why the run was taken down, empty if it was not
  caf::typed_response_promise<run_summary> run_promise;

  /// Whatever ended the supervisor, nothing it started outlives it: detached workers (the
  /// archive, evaluators) would otherwise keep the actor system from shutting down.
  ~supervisor_state();
};

supervisor_actor::behavior_type
supervisor(supervisor_actor::stateful_pointer<supervisor_state> self, run_plan plan,
           archive_actor archive);

/// Checks the plan (providers, role templates, python), opens the archive at
/// `<out>/archive.sqlite`, and spawns the supervisor. Throws std::runtime_error with a
/// message for the user when something is wrong; nothing is left running then.
supervisor_actor spawn_supervisor(caf::actor_system& sys, run_plan plan);

} // namespace kiln
