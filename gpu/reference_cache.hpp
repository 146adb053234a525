#pragma once

// Reference timings kept across evaluations, engines and runs. A task's reference is timed once
// per (task source, device model, software, timing settings, harness code); every later
// evaluation with the same key reuses that measurement instead of spending device time on it.
// Memory first, then `<cache_dir>/reference/<digest>.json`.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "messages/eval.hpp"

namespace kiln {

/// Everything a reference timing depends on. Two timings with equal keys are interchangeable;
/// anything that could change the number belongs here.
struct reference_key {
  std::string task_source;
  std::string device_name; ///< the model, not the index: two H200s share timings
  std::string capability;
  std::string torch_version;
  std::string python_version;
  std::string settings; ///< timing_settings_text(...)
  std::string harness;  ///< the harness's source (timing loops included)

  /// Whether the software is known; an incomplete key is never written to or read from disk.
  bool complete() const;
  /// 16 hex digits naming the entry.
  std::string digest() const;
};

/// The timing-relevant settings as one canonical line: warm-up, sample limits, time cap, CI
/// target, CPU threads, evaluation mode (`kiln`/`pike`) and torch.compile mode.
std::string timing_settings_text(const evaluator_config& cfg, int threads,
                                 const std::string& compile_mode);

/// The harness files' sources, as they go into reference_key::harness.
std::string harness_identity();

/// 16 hex digits of a 64-bit FNV-1a of `text`: stable across builds and processes, for names on
/// disk (not a defence against anyone).
std::string stable_digest(std::string_view text);

/// Writes `text` to `path` through a temporary and a rename, so that other engines and
/// processes never read half a file; creates the folder. Empty, or why it failed.
std::string write_atomically(const std::string& path, const std::string& text);

class reference_cache {
public:
  /// `configured` is `[evaluator] cache_dir`, resolved as the build cache resolves it
  /// (gpu/build_cache.hpp); where it cannot be placed, timings live in memory only.
  explicit reference_cache(const std::string& configured);

  std::optional<timing_stats> find(const reference_key& key);
  /// Remembers `stats`; writes the file atomically (temporary + rename), so engines of other
  /// devices or processes never read half an entry. A write failure is logged, not thrown.
  void store(const reference_key& key, const timing_stats& stats);

  /// `<cache_dir>/reference`, or empty.
  const std::string& dir() const { return dir_; }

private:
  std::string dir_;
  std::map<std::string, timing_stats> memory_;
};

} // namespace kiln
