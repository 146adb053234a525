#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "messages/eval.hpp"

namespace kiln {

/// Median, p10, p90, mean and n of raw per-call samples (milliseconds). The statistics are
/// computed here, in the parent, from the samples the runner reports.
timing_stats summarize(std::vector<double> samples_ms);

/// Half-width of a distribution-free ~95% confidence interval of the median, relative to the
/// median (order statistics); 1.0 when there are too few samples to tell.
double median_ci_rel(std::vector<double> samples_ms);

/// The statistics of one thing timed in several rounds (separate processes): the median of the
/// per-round medians, so one disturbed round cannot move it; p10, p90 and mean of all samples
/// pooled; n the total. Rounds without samples are skipped.
timing_stats combine_rounds(const std::vector<std::vector<double>>& rounds_ms);

/// One block of a runner's timing (result.json `blocks`): its per-call samples are the next `n`
/// of the runner's samples; its steady-state batches are (milliseconds, calls) pairs, each
/// framed like the flush alone, whose median time `flush_ms` comes off each batch.
struct timing_block {
  int32_t n = 0;
  std::vector<std::pair<double, int32_t>> batches;
  double flush_ms = 0;
};

/// The per-call samples split by block (one block of all of them when `blocks` is empty).
std::vector<std::vector<double>> per_call_blocks(const std::vector<double>& samples_ms,
                                                 const std::vector<timing_block>& blocks);

/// The steady-state figure of each batch, block by block: (batch - flush) / calls, in ms.
/// A batch no longer than the flush alone (noise on a call far shorter than the flush) gives
/// nothing.
std::vector<std::vector<double>> steady_blocks(const std::vector<timing_block>& blocks);

/// Every value of `blocks` in one list.
std::vector<double> pooled(const std::vector<std::vector<double>>& blocks);

/// A ratio of two medians with a ~95 % confidence interval.
struct ratio_interval {
  double ratio = 0;
  double lo = 0;
  double hi = 0;
};

/// median(reference) / median(candidate) over the pooled values of each, with a stratified
/// bootstrap interval: each resample draws every block's values again from that block (with
/// replacement), so a block that ran under other conditions keeps its weight. Deterministic
/// for a given `seed`. Zeros when either side has no values.
ratio_interval paired_ratio(const std::vector<std::vector<double>>& reference,
                            const std::vector<std::vector<double>>& candidate, uint64_t seed,
                            int resamples = 1000);

/// The order in which round `round` (0-based) times `entities` things: forward in even rounds,
/// backward in odd ones, so that a slow drift of the device (clocks, temperature) favours no
/// position on average.
std::vector<size_t> interleaved_order(size_t entities, int round);

} // namespace kiln
