#pragma once

// The per-task query budget. It behaves like a semaphore without release: ask before spending,
// get a grant or a refusal, never overdraw. Only the supervisor owns one, so every decision is
// taken in one actor's turn and concurrent requests cannot race past the limit.
//
// What counts: every LLM query a strategy asks for, brainstorm and error fixes included. A
// query refused here is never sent. A query that the gateway retries after a transient failure
// still counts once.
//
// Dollars: a query reserves what it could cost at most (its prompt estimate at the input price
// plus max_tokens at the output price) before it is sent, and settles at what the provider
// billed once it is answered (or at nothing when it failed). A query is refused when its
// reservation would take the spent and reserved dollars of its task or of the run past
// `usd_per_task` or `usd_total`; so however many queries run at once, the caps hold.

#include <cstdint>
#include <map>
#include <string>

#include "messages/run.hpp"

namespace kiln {

class query_budget {
public:
  /// `usd_total` and `usd_per_task` of 0 mean no dollar cap.
  explicit query_budget(int64_t per_task, double usd_total = 0, double usd_per_task = 0)
      : per_task_(per_task), usd_total_(usd_total), usd_per_task_(usd_per_task) {}

  /// Spends one query of `task`, reserving `reserve_usd`, if the limits allow it. A refusal
  /// that only the reservations of queries in flight cause says `wait`: the caller may ask
  /// again once one of them settles.
  query_grant take(const std::string& task, double reserve_usd = 0);

  /// Turns a reservation into what the query cost (0 when it failed).
  void settle(const std::string& task, double reserved_usd, double cost_usd);

  /// Queries granted to `task` so far.
  int64_t used(const std::string& task) const;
  /// Dollars `task` has spent (settled) so far.
  double spent(const std::string& task) const;
  double spent_total() const { return spent_total_; }
  double reserved_total() const { return reserved_total_; }

  int64_t per_task() const { return per_task_; }

  /// Total of all grants.
  int64_t total() const { return total_; }

private:
  struct dollars {
    double spent = 0;
    double reserved = 0;
  };
  int64_t per_task_;
  double usd_total_;
  double usd_per_task_;
  int64_t total_ = 0;
  double spent_total_ = 0;
  double reserved_total_ = 0;
  std::map<std::string, int64_t> used_;
  std::map<std::string, dollars> usd_;
};

} // namespace kiln
