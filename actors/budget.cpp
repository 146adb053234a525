#include "actors/budget.hpp"

namespace kiln {

query_grant query_budget::take(const std::string& task) {
  auto& n = used_[task];
  query_grant g;
  g.limit = per_task_;
  if (n >= per_task_) {
    g.granted = false;
    g.used = n;
    return g;
  }
  ++n;
  ++total_;
  g.granted = true;
  g.used = n;
  return g;
}

int64_t query_budget::used(const std::string& task) const {
  auto i = used_.find(task);
  return i == used_.end() ? 0 : i->second;
}

} // namespace kiln
