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

} // namespace kiln
