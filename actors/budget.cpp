#include "actors/budget.hpp"

#include <algorithm>
#include <cstdio>

namespace kiln {

namespace {

std::string usd(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "$%.4f", x);
  return buf;
}

} // namespace

query_grant query_budget::take(const std::string& task, double reserve_usd) {
  auto& n = used_[task];
  auto& d = usd_[task];
  query_grant g;
  g.limit = per_task_;
  g.used = n;
  if (n >= per_task_) {
    g.granted = false;
    g.reason =
        task + " used " + std::to_string(n) + " of " + std::to_string(per_task_) + " queries";
    return g;
  }
  // A small tolerance: a reservation that exactly fills the cap must not fail by rounding.
  constexpr double slack = 1e-12;
  if (usd_per_task_ > 0 && d.spent + d.reserved + reserve_usd > usd_per_task_ + slack) {
    g.granted = false;
    g.reason = task + " would pass usd_per_task " + usd(usd_per_task_) + " (spent " + usd(d.spent)
               + ", in flight up to " + usd(d.reserved) + ", this query up to " + usd(reserve_usd)
               + ")";
    g.wait = d.reserved > 0 && d.spent + reserve_usd <= usd_per_task_ + slack
             && (usd_total_ <= 0 || spent_total_ + reserve_usd <= usd_total_ + slack);
    return g;
  }
  if (usd_total_ > 0 && spent_total_ + reserved_total_ + reserve_usd > usd_total_ + slack) {
    g.granted = false;
    g.reason = "the run would pass usd_total " + usd(usd_total_) + " (spent " + usd(spent_total_)
               + ", in flight up to " + usd(reserved_total_) + ", this query up to "
               + usd(reserve_usd) + ")";
    g.wait = reserved_total_ > 0 && spent_total_ + reserve_usd <= usd_total_ + slack;
    return g;
  }
  ++n;
  ++total_;
  d.reserved += reserve_usd;
  reserved_total_ += reserve_usd;
  g.granted = true;
  g.used = n;
  return g;
}

void query_budget::settle(const std::string& task, double reserved_usd, double cost_usd) {
  auto& d = usd_[task];
  d.reserved = std::max(0.0, d.reserved - reserved_usd);
  reserved_total_ = std::max(0.0, reserved_total_ - reserved_usd);
  d.spent += cost_usd;
  spent_total_ += cost_usd;
}

int64_t query_budget::used(const std::string& task) const {
  auto i = used_.find(task);
  return i == used_.end() ? 0 : i->second;
}

double query_budget::spent(const std::string& task) const {
  auto i = usd_.find(task);
  return i == usd_.end() ? 0 : i->second.spent;
}

} // namespace kiln
