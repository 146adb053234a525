#pragma once

// The per-task query budget. It behaves like a semaphore without release: ask before spending,
// get a grant or a refusal, never overdraw. Only the supervisor owns one, so every decision is
// taken in one actor's turn and concurrent requests cannot race past the limit.
//
// What counts: every LLM query a strategy asks for, brainstorm and error fixes included. A
// query refused here is never sent. A query that the gateway retries after a transient failure
// still counts once.

#include <cstdint>
#include <map>
#include <string>

#include "messages/run.hpp"

namespace kiln {

class query_budget {
public:
  explicit query_budget(int64_t per_task) : per_task_(per_task) {}

  /// Spends one query of `task` if any is left.
  query_grant take(const std::string& task);

  /// Queries granted to `task` so far.
  int64_t used(const std::string& task) const;

  int64_t per_task() const { return per_task_; }

  /// Total of all grants.
  int64_t total() const { return total_; }

private:
  int64_t per_task_;
  int64_t total_ = 0;
  std::map<std::string, int64_t> used_;
};

} // namespace kiln
