#pragma once

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

/// The order in which round `round` (0-based) times `entities` things: forward in even rounds,
/// backward in odd ones, so that a slow drift of the device (clocks, temperature) favours no
/// position on average.
std::vector<size_t> interleaved_order(size_t entities, int round);

} // namespace kiln
