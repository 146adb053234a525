#include "actors/strategy_common.hpp"

#include <algorithm>

namespace kiln {

void count_verdict(task_result& res, const candidate_record& rec) {
  ++res.evaluations;
  const auto& v = rec.result;
  if (v.status != verdict_status::correct)
    return;
  ++res.correct;
  if (res.reference_ms <= 0)
    res.reference_ms = v.reference.median_ms;
  if (v.speedup > res.best_speedup || (!res.found && v.speedup >= 1.0)) {
    res.found = true;
    res.best_speedup = std::max(1.0, v.speedup);
    res.best_runtime_ms = v.candidate.median_ms;
    res.best_code = rec.code;
    res.best_seq = rec.seq;
  }
}

void keep_winner(std::vector<candidate_record>& w, const candidate_record& rec, int64_t top) {
  auto faster = [](const candidate_record& a, const candidate_record& b) {
    return a.result.speedup > b.result.speedup;
  };
  w.insert(std::upper_bound(w.begin(), w.end(), rec, faster), rec);
  if (static_cast<int64_t>(w.size()) > std::max<int64_t>(1, top))
    w.pop_back();
}

retime_job retime_job_of(const task_spec& task, const std::vector<candidate_record>& winners,
                         int64_t rounds) {
  retime_job job;
  job.task = task;
  job.rounds = static_cast<int32_t>(rounds);
  for (const auto& w : winners) {
    job.candidate_ids.push_back(task.name + "#" + std::to_string(w.seq));
    job.codes.push_back(w.code);
  }
  return job;
}

bool apply_retime(task_result& res, const std::vector<candidate_record>& winners,
                  const retime_result& r, std::string& why) {
  if (!r.error.empty() || r.speedups.size() != winners.size()
      || r.candidates.size() != winners.size()) {
    why = r.error.empty() ? "malformed result" : r.error;
    return false;
  }
  size_t best = 0;
  for (size_t i = 1; i < r.speedups.size(); ++i)
    if (r.speedups[i] > r.speedups[best])
      best = i;
  res.retimed = true;
  res.reference_ms = r.reference.median_ms;
  res.found = r.speedups[best] >= 1.0;
  res.best_speedup = std::max(1.0, r.speedups[best]);
  res.best_runtime_ms = r.candidates[best].median_ms;
  res.best_code = winners[best].code;
  res.best_seq = winners[best].seq;
  return true;
}

} // namespace kiln
