#include "gpu/timing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln {

namespace {

// Quantile of sorted samples by linear interpolation between order statistics (numpy's default),
// so that p10/p90 move smoothly with the data instead of jumping between samples.
double quantile_sorted(const std::vector<double>& xs, double q) {
  if (xs.empty())
    return 0;
  double pos = q * static_cast<double>(xs.size() - 1);
  auto lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, xs.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return xs[lo] + frac * (xs[hi] - xs[lo]);
}

} // namespace

timing_stats summarize(std::vector<double> samples_ms) {
  timing_stats out;
  if (samples_ms.empty())
    return out;
  std::sort(samples_ms.begin(), samples_ms.end());
  out.n = static_cast<int32_t>(samples_ms.size());
  out.median_ms = quantile_sorted(samples_ms, 0.5);
  out.p10_ms = quantile_sorted(samples_ms, 0.1);
  out.p90_ms = quantile_sorted(samples_ms, 0.9);
  out.mean_ms = std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0)
                / static_cast<double>(samples_ms.size());
  return out;
}

double median_ci_rel(std::vector<double> samples_ms) {
  // Below six samples the ~95% order-statistic interval would need ranks outside the sample.
  size_t n = samples_ms.size();
  if (n < 6)
    return 1.0;
  std::sort(samples_ms.begin(), samples_ms.end());
  // The rank of the median is Binomial(n, 1/2): mean n/2, standard deviation sqrt(n)/2, so
  // n/2 -+ 1.96 * sqrt(n)/2 brackets it with ~95% probability whatever the distribution.
  double half = 0.98 * std::sqrt(static_cast<double>(n));
  double mid = static_cast<double>(n) / 2;
  auto lo_rank = static_cast<long>(std::floor(mid - half)); // 1-based ranks
  auto hi_rank = static_cast<long>(std::ceil(mid + half));
  lo_rank = std::clamp<long>(lo_rank, 1, static_cast<long>(n));
  hi_rank = std::clamp<long>(hi_rank, 1, static_cast<long>(n));
  double width = samples_ms[hi_rank - 1] - samples_ms[lo_rank - 1];
  double median = quantile_sorted(samples_ms, 0.5);
  if (!(median > 0))
    return width == 0 ? 0.0 : 1.0; // times are positive; anything else cannot be trusted
  return width / 2 / median;
}

timing_stats combine_rounds(const std::vector<std::vector<double>>& rounds_ms) {
  std::vector<double> pooled;
  std::vector<double> medians;
  for (const auto& r : rounds_ms) {
    if (r.empty())
      continue;
    pooled.insert(pooled.end(), r.begin(), r.end());
    medians.push_back(summarize(r).median_ms);
  }
  timing_stats out = summarize(pooled);
  if (!medians.empty())
    out.median_ms = summarize(medians).median_ms;
  return out;
}

std::vector<size_t> interleaved_order(size_t entities, int round) {
  std::vector<size_t> order(entities);
  std::iota(order.begin(), order.end(), size_t{0});
  if (round % 2 != 0)
    std::reverse(order.begin(), order.end());
  return order;
}

} // namespace kiln
