#pragma once

// PIKE-O: island evolution with a MAP-Elites grid and an elite archive, after PIKE's OpenEvolve
// fork (the PIKE paper, arXiv 2511.16964; docs/strategies.md).
//
//   seed: the reference is the first program of every island (never a parent once others exist)
//   iteration: pick an island (round robin) and a parent from it:
//                r < exploration             -> a random program of the island
//                r < exploration+exploitation -> a random program of the elite archive
//                otherwise                    -> a random program of all
//              ask the optimizer for a child: `improve` (mutation template) or `crossover` (the
//              parent plus the island's top programs and inspirations with their runtimes)
//              evaluate it; while it failed and fixes are left, ask the error fixer and evaluate
//              the repair (the error-fixing loop lives inside the iteration)
//              the child (the last attempt) joins the parent's island: it takes its MAP-Elites
//              cell if the cell is empty or it is fitter; the population keeps
//              `population_size` programs, dropping first those that lost their cell, then the
//              worst; the archive keeps the best `archive_size` correct programs
//   every `migration_interval` finished iterations, each island sends the best
//   ceil(migration_rate x its size) programs to the next island (a ring)
//   done when the query budget refuses, `iterations` have run, a budget stop arrives, or a stop
//
// Fitness is the measured speedup (0 for a failed program). Features: `complexity` (code length,
// binned over [0, 2 x the reference's length)), `diversity` (mean normalised edit distance to a
// sample of the island's programs), each in `feature_bins` bins.

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "messages/actors.hpp"

namespace kiln {

struct pike_o_settings {
  int64_t iterations = 300; ///< evolution steps (each one query plus its fixes)
  int64_t islands = 3;
  int64_t population_size = 25; ///< programs kept over all islands
  int64_t archive_size = 12;    ///< the elite set exploitation samples from
  int64_t migration_interval = 50;
  double migration_rate = 0.1;
  double exploration_ratio = 0.2;
  double exploitation_ratio = 0.7; ///< the rest of 1 is `random`
  int64_t parallel = 20;           ///< iterations in flight
  int64_t max_fix_attempts = 5;    ///< error-fix rounds inside an iteration
  int64_t feature_bins = 10;
  std::vector<std::string> feature_dimensions = {"complexity", "diversity"};
  int64_t top_programs = 3;                ///< shown in a crossover prompt
  int64_t inspirations = 2;                ///< further programs shown in a crossover prompt
  std::string template_kind = "crossover"; ///< "crossover" or "mutation"
  int64_t query_limit = 0; ///< for progress reports only; the supervisor enforces it
  uint64_t seed = 1;
  std::string optimizer = "optimizer";
  std::string error_fixer = "error_fixer";
  int64_t retime_rounds = 3;
  int64_t retime_top = 3;
  int64_t evaluations_limit = 0; ///< 0 = no cap
  double wall_s = 0;             ///< 0 = none
};

/// A program of the population.
struct pike_o_program {
  int64_t seq = 0; ///< 0 is the reference
  std::string code;
  double fitness = 0; ///< speedup, 0 when it failed
  double runtime_ms = 0;
  int32_t island = 0;
  std::vector<int32_t> cell; ///< its MAP-Elites coordinates
};

struct strategy_pike_o_state {
  static inline const char* name = "pike-o";
  task_spec task;
  pike_o_settings cfg;
  supervisor_actor supervisor;
  dispatcher_actor dispatcher;
  archive_actor archive;
  runner_facts facts;
  std::mt19937_64 rng;

  std::vector<pike_o_program> programs; ///< the population, all islands
  std::vector<int64_t> elite;           ///< seqs of the archive, best first
  /// Per island: MAP-Elites cell -> seq of its occupant.
  std::vector<std::map<std::vector<int32_t>, int64_t>> grids;
  int64_t next_seq = 1;
  int64_t started = 0;  ///< iterations started
  int64_t finished = 0; ///< iterations finished
  int64_t in_flight = 0;
  int32_t next_island = 0;
  int64_t evaluations_started = 0;
  bool budget_spent = false;
  bool stopping = false;
  bool done = false;
  bool retiming = false;
  std::string stop_reason;
  std::vector<candidate_record> winners; ///< for the final re-timing
  task_result result;
  task_progress progress;
};

strategy_actor::behavior_type
strategy_pike_o(strategy_actor::stateful_pointer<strategy_pike_o_state> self, task_spec task,
                pike_o_settings cfg, supervisor_actor supervisor, dispatcher_actor dispatcher,
                archive_actor archive);

/// The MAP-Elites coordinates of `code` for `cfg.feature_dimensions` (exposed for tests).
std::vector<int32_t> pike_o_cell(const pike_o_settings& cfg, const std::string& code,
                                 size_t reference_length,
                                 const std::vector<const std::string*>& neighbours);

} // namespace kiln
