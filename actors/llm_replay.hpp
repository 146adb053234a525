#pragma once

// The `replay` provider: answers recorded in an earlier run's archive, matched by the exact
// user prompt (the system prompt is the profile's and may differ), for deterministic re-runs
// and tests. The same prompt asked again gets the next
// recorded answer to it, in the order they were recorded.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "messages/llm.hpp"

namespace kiln::llm {

class replay_store {
public:
  /// Loads every successful call of `archive_path` (an archive.sqlite). Throws
  /// std::runtime_error naming the file when it cannot be read.
  explicit replay_store(const std::string& archive_path);

  /// The next recorded reply to this prompt, or nothing.
  std::optional<llm_reply> next(const std::string& prompt);

  size_t size() const { return total_; }

  /// A short name of a prompt for messages (FNV-1a 64 of it).
  static uint64_t key(const std::string& prompt);

private:
  std::map<std::string, std::deque<llm_reply>> answers_; ///< by prompt
  size_t total_ = 0;
};

} // namespace kiln::llm
