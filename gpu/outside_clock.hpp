#pragma once

// The outside clock (docs/evaluation.md, "The outside clock"): the parent's own timestamps of a
// runner's timing loop, taken as the runner's one-line stamps arrive on its control socket, so
// that figures a candidate rewrote inside its own process (the samples, the batches, the clock
// or the events they came from) disagree with a clock it cannot reach.
//
// A pooled, gated runner in kiln mode says `p` when a block's per-call sampling starts, `c`
// after each per-call sample, `s` before and `e <calls>` after each steady-state batch, and `d`
// when it threw the batch before away.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpu/timing.hpp"

namespace kiln {

struct outside_clock {
  using clock = std::chrono::steady_clock;

  /// Parent milliseconds from one stamp to the next `c`: one per per-call sample, in order.
  std::vector<double> call_ms;
  /// Parent milliseconds from `s` to `e`, and the calls `e` named: one per steady batch.
  std::vector<std::pair<double, int32_t>> batch_ms;
  /// Stamps out of order or unreadable (a `c` before any `p`, an `e` without its `s`).
  int32_t malformed = 0;

  /// Takes one line of the control socket; false when it is not a stamp.
  bool take(const std::string& line, clock::time_point now);
  bool empty() const { return call_ms.empty() && batch_ms.empty() && malformed == 0; }

private:
  bool sampling_ = false;
  clock::time_point last_{};
  bool in_batch_ = false;
  clock::time_point batch_start_{};
};

/// How much of a runner's time per call the parent saw but its samples do not hold (the lower
/// quartile over the calls of parent interval minus sample, ms); negative when it cannot tell.
double unreported_ms(const outside_clock& clock, const std::vector<double>& samples_ms);

/// The steady batches' own total over the parent's span of them (honest: a little below 1);
/// negative when the counts disagree or there are none.
double batch_share(const outside_clock& clock, const std::vector<timing_block>& blocks);

/// What the parent's clock says of a runner's timing: `problem` empty when it agrees.
/// `statistical` when the disagreement is one of durations (the steady batches' share of the
/// parent's span, the per-call time the samples leave out), which a host hiccup can cause too;
/// false when it is one of counts or order, which only a rewritten record can.
struct clock_check {
  std::string problem;
  bool statistical = false;
};

clock_check check_outside_clock(const outside_clock& clock, const std::vector<double>& samples_ms,
                                const std::vector<timing_block>& blocks,
                                const outside_clock* reference = nullptr,
                                const std::vector<double>* reference_samples_ms = nullptr);

/// check_outside_clock's problem alone.
/// Why a runner's reported timing cannot be true by the parent's clock; empty when it agrees.
/// `reference`, when given with its samples, is the trusted runner of the same loop (same
/// task, inputs, refresh and flush): its unreported time per call is the loop's own overhead,
/// which the candidate's may exceed by a little, never by a share of its calls.
std::string outside_clock_problem(const outside_clock& clock, const std::vector<double>& samples_ms,
                                  const std::vector<timing_block>& blocks,
                                  const outside_clock* reference = nullptr,
                                  const std::vector<double>* reference_samples_ms = nullptr);

} // namespace kiln
