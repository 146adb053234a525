#include "gpu/timing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

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

namespace kiln {

std::vector<std::vector<double>> per_call_blocks(const std::vector<double>& samples_ms,
                                                 const std::vector<timing_block>& blocks) {
  if (blocks.empty())
    return {samples_ms};
  std::vector<std::vector<double>> out;
  size_t at = 0;
  for (const auto& b : blocks) {
    auto n = std::min(samples_ms.size() - at, static_cast<size_t>(std::max(b.n, 0)));
    out.emplace_back(samples_ms.begin() + static_cast<std::ptrdiff_t>(at),
                     samples_ms.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  return out;
}

std::vector<std::vector<double>> steady_blocks(const std::vector<timing_block>& blocks) {
  std::vector<std::vector<double>> out;
  for (const auto& b : blocks) {
    std::vector<double> values;
    for (const auto& [ms, calls] : b.batches) {
      const double v = (ms - b.flush_ms) / std::max(calls, 1);
      if (std::isfinite(v) && v > 0)
        values.push_back(v);
    }
    out.push_back(std::move(values));
  }
  return out;
}

std::vector<double> pooled(const std::vector<std::vector<double>>& blocks) {
  std::vector<double> out;
  for (const auto& b : blocks)
    out.insert(out.end(), b.begin(), b.end());
  return out;
}

namespace {

double median_of(std::vector<double>& xs) {
  std::sort(xs.begin(), xs.end());
  return quantile_sorted(xs, 0.5);
}

/// One stratified resample of `blocks`, pooled, into `out`.
void resample(const std::vector<std::vector<double>>& blocks, std::mt19937_64& rng,
              std::vector<double>& out) {
  out.clear();
  for (const auto& b : blocks) {
    if (b.empty())
      continue;
    std::uniform_int_distribution<size_t> pick{0, b.size() - 1};
    for (size_t i = 0; i < b.size(); ++i)
      out.push_back(b[pick(rng)]);
  }
}

} // namespace

ratio_interval paired_ratio(const std::vector<std::vector<double>>& reference,
                            const std::vector<std::vector<double>>& candidate, uint64_t seed,
                            int resamples) {
  ratio_interval out;
  auto ref = pooled(reference);
  auto cand = pooled(candidate);
  if (ref.empty() || cand.empty())
    return out;
  const double c = median_of(cand);
  if (!(c > 0))
    return out;
  out.ratio = median_of(ref) / c;
  std::mt19937_64 rng{seed};
  std::vector<double> ratios;
  std::vector<double> a;
  std::vector<double> b;
  for (int i = 0; i < resamples; ++i) {
    resample(reference, rng, a);
    resample(candidate, rng, b);
    const double mb = median_of(b);
    if (mb > 0)
      ratios.push_back(median_of(a) / mb);
  }
  if (ratios.empty()) {
    out.lo = out.hi = out.ratio;
    return out;
  }
  std::sort(ratios.begin(), ratios.end());
  out.lo = quantile_sorted(ratios, 0.025);
  out.hi = quantile_sorted(ratios, 0.975);
  return out;
}

} // namespace kiln
