#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/agent.hpp"
#include "messages/eval.hpp"
#include "messages/llm.hpp"

namespace kiln {

/// The answer of the budget owner to a request to spend one LLM query.
struct query_grant {
  bool granted = false;
  int64_t used = 0; ///< queries granted for the task so far, this one included
  int64_t limit = 0;
  std::string reason; ///< why it was refused
  /// Refused only for dollars that queries in flight have reserved: it may fit once they settle.
  bool wait = false;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, query_grant& x) {
  return f(caf::meta::type_name("query_grant"), x.granted, x.used, x.limit, x.reason, x.wait);
}

/// A budget decision, as the archive keeps it.
struct budget_event {
  std::string task;
  std::string role;
  std::string kind; ///< `grant` or `refuse`
  int64_t used = 0;
  int64_t limit = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, budget_event& x) {
  return f(caf::meta::type_name("budget_event"), x.task, x.role, x.kind, x.used, x.limit);
}

/// One LLM call as the transcript keeps it.
struct llm_call_record {
  llm_request request;
  llm_reply reply;
  std::string error; ///< empty on success
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, llm_call_record& x) {
  return f(caf::meta::type_name("llm_call_record"), x.request, x.reply, x.error);
}

/// A candidate and, once evaluated, its verdict.
struct candidate_record {
  std::string task;
  int64_t seq = 0;     ///< per task, from 1; 0 is the reference
  int64_t parent = -1; ///< seq of the parent, -1 for none
  std::string role;    ///< the role that wrote it
  int32_t phase = 0;
  int32_t attempt = 0; ///< 0 for a fresh candidate, n for the n-th fix
  std::string idea;
  std::string code;
  bool evaluated = false;
  verdict result;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, candidate_record& x) {
  return f(caf::meta::type_name("candidate_record"), x.task, x.seq, x.parent, x.role, x.phase,
           x.attempt, x.idea, x.code, x.evaluated, x.result);
}

/// How a task's search stands, sent by its strategy as it goes.
struct task_progress {
  std::string task;
  int64_t queries = 0;
  int64_t query_limit = 0;
  int64_t evaluations = 0;
  int64_t correct = 0;
  double best_speedup = 1.0;
  int32_t phase = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, task_progress& x) {
  return f(caf::meta::type_name("task_progress"), x.task, x.queries, x.query_limit, x.evaluations,
           x.correct, x.best_speedup, x.phase);
}

/// Totals of LLM use over a run or a task.
struct llm_totals {
  int64_t queries = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, llm_totals& x) {
  return f(caf::meta::type_name("llm_totals"), x.queries, x.input_tokens, x.output_tokens,
           x.cost_usd);
}

/// The outcome of one task's search.
struct task_result {
  std::string task;
  int64_t queries = 0;
  int64_t evaluations = 0;
  int64_t correct = 0;
  bool found = false;        ///< a correct candidate faster than nothing was found
  double best_speedup = 1.0; ///< at least 1.0: the reference is always available
  double best_runtime_ms = 0;
  double reference_ms = 0;
  std::string best_code;
  int64_t best_seq = 0;
  std::string stop_reason; ///< budget, phases, stopped, error: ...
  /// The figures above come from the final interleaved re-timing (not the search's own).
  bool retimed = false;
  /// The best speedup as the search measured it, before re-timing.
  double search_speedup = 1.0;
  llm_totals llm; ///< the task's answered LLM queries, their tokens and dollars
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, task_result& x) {
  return f(caf::meta::type_name("task_result"), x.task, x.queries, x.evaluations, x.correct,
           x.found, x.best_speedup, x.best_runtime_ms, x.reference_ms, x.best_code, x.best_seq,
           x.stop_reason, x.retimed, x.search_speedup, x.llm);
}

/// What a finished (or stopped) run hands back to whoever started it.
struct run_summary {
  std::string strategy;
  bool interrupted = false;
  llm_totals llm;
  std::vector<task_result> tasks;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, run_summary& x) {
  return f(caf::meta::type_name("run_summary"), x.strategy, x.interrupted, x.llm, x.tasks);
}

} // namespace kiln
