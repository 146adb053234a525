#pragma once

// The compile stage ahead of the GPU: a candidate is imported once in a fresh runner that sees
// no GPU, so that its load_inline / cpp_extension builds land in the shared build cache
// (build_cache.hpp) and the GPU runner only loads them. A compiler actor owns one engine and
// runs it on its own thread; several engines may run in parallel (one per compile worker).

#include <cstdint>
#include <string>
#include <vector>

#include "config/defaults.hpp"
#include "gpu/evaluate.hpp"
#include "messages/eval.hpp"

namespace kiln {

struct compile_settings {
  std::string python;    ///< interpreter (already resolved by find_python)
  std::string work_dir;  ///< scratch space of the compile runners
  std::string cache_dir; ///< the shared build cache (resolve_cache_dir)
  /// TORCH_CUDA_ARCH_LIST the builds target, e.g. `9.0` (the GPUs' capability); empty for
  /// CPU-only devices. It is part of every CUDA build's key: GPU runners must use the same.
  std::string arch_list;
  double timeout_s = defaults::compile_timeout_s; ///< `[evaluator] compile_timeout_s`
  int threads = 1;                                ///< torch threads of a compile runner
  bool keep_scratch = false;
};

/// What the compile stage found out about one candidate.
struct compile_outcome {
  /// A build failed (or the stage crashed or hung twice): the candidate's verdict is `status`
  /// (compile_error) with `reason` and the tails, and it never reaches a GPU.
  bool failed = false;
  verdict_status status = verdict_status::compile_error;
  std::string reason;
  std::string stdout_tail;
  std::string stderr_tail;
  double wall_ms = 0; ///< the whole stage, retries included
  int attempts = 0;   ///< runner starts (2 after a crash or hang)
  int builds = 0;     ///< load_inline / load calls seen at import
  int hits = 0;       ///< of which came from the cache
  int pch_builds = 0; ///< builds compiled with a precompiled header
  bool cached = true; ///< every build was a hit (also when there were none)
  /// The import failed for another reason (e.g. it needs a GPU at import time): not a verdict,
  /// the GPU stage decides. Empty when the import worked.
  std::string import_error;
  /// Keys of precompiled headers that builds of this candidate asked for; build them with
  /// compile_engine::build_pch when a worker is idle, and later builds of those flags use them.
  std::vector<std::string> pch_wanted;
  /// The stage could not run at all (e.g. the interpreter cannot start); not a verdict.
  std::string problem;
};

/// How a precompiled header build went.
struct pch_outcome {
  bool ok = false;
  std::string state; ///< built | exists | busy (another worker builds it) | failed
  std::string error;
  double wall_ms = 0;
};

class compile_engine {
public:
  /// Validates `settings` and creates the cache's folders; throws std::invalid_argument or
  /// std::runtime_error with the reason when they are unusable.
  explicit compile_engine(compile_settings settings);
  ~compile_engine();
  compile_engine(const compile_engine&) = delete;
  compile_engine& operator=(const compile_engine&) = delete;

  /// Runs the compile stage for `job` (its candidate code; the task is not needed): retries
  /// once when the runner crashed or timed out. Never throws.
  compile_outcome compile(const eval_job& job);

  /// Builds the precompiled header that a compile asked for (compile_outcome::pch_wanted).
  /// Takes about a minute and 2 GB; returns at once when it exists or another worker builds
  /// it. Never throws.
  pch_outcome build_pch(const std::string& key);

  const compile_settings& settings() const { return settings_; }

private:
  compile_settings settings_;
  eval_settings runner_settings_;
  std::string harness_path_;
  uint64_t counter_ = 0;
};

/// Copies a compile stage's cost into `v` (compile_ms, compile_cached) and, when it failed,
/// its verdict (status, reason, tails).
void apply_compile_outcome(const compile_outcome& c, verdict& v);

} // namespace kiln
