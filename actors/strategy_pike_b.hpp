#pragma once

// PIKE-B, first version: a branching search seeded by a brainstorm and repaired by an error
// fixer (the PIKE paper, arXiv 2511.16964; docs/strategies.md).
//
//   facts ──> brainstorm ──> phase 0: one `optimize` per idea
//                               │  each candidate: query ─> evaluate ─┬─ correct: keep
//                               │                                     └─ failed: `fix` (≤
//                               max_attempts)
//                               v
//             phase k: `improve` the fastest correct candidates of phase k-1
//                      (the reference when phase k-1 found nothing correct)
//                               v
//             done when the phases are spent, the query budget refuses, or a stop arrives

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "messages/actors.hpp"

namespace kiln {

struct pike_b_settings {
  int64_t max_ideas = 10;
  int64_t phases = 30;
  int64_t parents = 4;
  int64_t parallel = 10;    ///< candidates in flight at once
  int64_t max_attempts = 5; ///< error-fix rounds per candidate
  int64_t query_limit = 0;  ///< for progress reports only; the supervisor enforces it
  uint64_t seed = 1;
  std::string brainstormer = "brainstormer";
  std::string optimizer = "optimizer";
  std::string error_fixer = "error_fixer";
  std::string reviewer; ///< checks each new program before its evaluation; empty: none
  /// Final re-timing of the best `retime_top` candidates in `retime_rounds` rounds (0 = off).
  int64_t retime_rounds = 3;
  int64_t retime_top = 3;
  int64_t stall_phases = 0;      ///< phases without improvement that end the task; 0 = never
  int64_t evaluations_limit = 0; ///< evaluations per task; 0 = no cap
  double wall_s = 0;             ///< wall clock of the task's search; 0 = none
};

/// PIKE's `resize_list`: `ideas` cut to `n`, or repeated in contiguous bins to fill `n` (3 ideas
/// for 10 branches give 4, 3 and 3 copies, in order).
std::vector<std::string> resize_ideas(const std::vector<std::string>& ideas, size_t n);

/// PIKE's parent choice for the next phase: the phase's correct candidates, fastest first, then
/// the reference (runtime infinity) to fill up to `parents`; `queries` improve queries split
/// over them as evenly as possible, earlier parents first (10 over 4: 3, 3, 2, 2). Returns the
/// number of queries per parent, in the order of `sorted_parents`.
std::vector<int64_t> split_queries(int64_t queries, size_t parents);

struct strategy_pike_b_state {
  static inline const char* name = "pike-b";

  /// One candidate on its way: a query, then an evaluation, then maybe fixes.
  struct work {
    prompt_kind kind = prompt_kind::optimize;
    std::string role;
    std::string idea;
    std::string code; ///< parent code for improve/fix
    verdict last;     ///< for fix
    int64_t parent = -1;
    int32_t attempt = 0;
  };

  task_spec task;
  pike_b_settings cfg;
  supervisor_actor supervisor;
  dispatcher_actor dispatcher;
  archive_actor archive;
  runner_facts facts;

  int32_t phase = -1;
  int64_t next_seq = 1;
  std::deque<work> queue;
  int64_t in_flight = 0;
  /// Correct candidates of the phase under way, and the parents chosen for the next one.
  std::vector<candidate_record> phase_correct;
  bool budget_spent = false;
  bool stopping = false;
  bool finished = false;
  bool retiming = false; ///< the final re-timing is under way
  int64_t evaluations_started = 0;
  int32_t stalled_phases = 0; ///< phases in a row without a faster correct candidate
  double phase_start_best = 1.0;
  std::string stop_reason;
  /// The fastest correct candidates so far, fastest first, at most `retime_top`.
  std::vector<candidate_record> winners;

  task_result result;
  task_progress progress;
};

strategy_actor::behavior_type
strategy_pike_b(strategy_actor::stateful_pointer<strategy_pike_b_state> self, task_spec task,
                pike_b_settings cfg, supervisor_actor supervisor, dispatcher_actor dispatcher,
                archive_actor archive);

} // namespace kiln
