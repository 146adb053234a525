#pragma once

// What every search strategy does the same way: keeping a task's best result and its winners,
// and taking the final interleaved re-timing's figures over the search's own.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/eval.hpp"
#include "messages/run.hpp"

namespace kiln {

/// Counts a judged candidate into `result` (evaluations, correct, the best so far).
void count_verdict(task_result& result, const candidate_record& rec);

/// Keeps `rec` among the `top` fastest correct candidates, fastest first.
void keep_winner(std::vector<candidate_record>& winners, const candidate_record& rec, int64_t top);

/// The re-timing job of `winners`.
retime_job retime_job_of(const task_spec& task, const std::vector<candidate_record>& winners,
                         int64_t rounds);

/// Takes the re-timed figures into `result`: they replace the search's, which chose the winners
/// among noisy numbers and so are biased upwards. Returns false (and says why) when the
/// re-timing is unusable; `result` keeps the search's figures then.
bool apply_retime(task_result& result, const std::vector<candidate_record>& winners,
                  const retime_result& r, std::string& why);

} // namespace kiln
