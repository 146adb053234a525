#pragma once

// What every search strategy does the same way: keeping a task's best result and its winners,
// and taking the final interleaved re-timing's figures over the search's own.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "config/defaults.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
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

/// Re-times a strategy's winners before its task reports, then calls `conclude(self)`; returns
/// false (and does nothing) when there is nothing to re-time or the run is being stopped (a user
/// who pressed Ctrl-C wants out, not more measurements). `Self` is a strategy actor whose state
/// has `task`, `cfg.retime_rounds`, `winners`, `result`, `dispatcher`, `stopping`, `retiming`.
template <class Self, class Conclude>
bool start_retime(Self self, const char* strategy, Conclude conclude) {
  auto& st = self->state;
  if (st.stopping || st.cfg.retime_rounds <= 0 || st.winners.empty())
    return false;
  st.retiming = true;
  auto job = retime_job_of(st.task, st.winners, st.cfg.retime_rounds);
  self->request(st.dispatcher, defaults::request_timeout, retime_atom::value, std::move(job))
      .then(
          [self, strategy, conclude](retime_result& r) {
            auto& st = self->state;
            std::string why;
            if (apply_retime(st.result, st.winners, r, why))
              spdlog::info("{} {}: re-timed {} candidates in {} rounds: best #{} {:.3f}x "
                           "(search: {:.3f}x)",
                           strategy, st.task.name, st.winners.size(), st.cfg.retime_rounds,
                           st.result.best_seq, st.result.best_speedup, st.result.search_speedup);
            else
              spdlog::warn("{} {}: final re-timing failed ({}); reporting the search's figures",
                           strategy, st.task.name, why);
            conclude(self);
          },
          [self, strategy, conclude](caf::error& err) {
            spdlog::warn("{} {}: final re-timing failed: {}", strategy, self->state.task.name,
                         render(err));
            conclude(self);
          });
  return true;
}

} // namespace kiln
