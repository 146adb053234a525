#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "gpu/timing.hpp"

namespace {

/// Deterministic noisy samples around 1 ms (a small LCG; no dependence on the platform's rand).
std::vector<double> noisy_samples(size_t n) {
  std::vector<double> out;
  uint64_t state = 12345;
  for (size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    double u = static_cast<double>(state >> 11) / static_cast<double>(1ULL << 53);
    out.push_back(1.0 + 0.2 * u);
  }
  return out;
}

} // namespace

TEST_CASE("summarize gives median, p10, p90, mean and n", "[timing]") {
  // 1..10 shuffled: quantiles interpolate between order statistics.
  kiln::timing_stats s = kiln::summarize({7, 3, 10, 1, 5, 9, 2, 8, 4, 6});
  CHECK(s.n == 10);
  CHECK(s.median_ms == Approx(5.5));
  CHECK(s.p10_ms == Approx(1.9));
  CHECK(s.p90_ms == Approx(9.1));
  CHECK(s.mean_ms == Approx(5.5));
}

TEST_CASE("summarize takes the middle value for an odd count", "[timing]") {
  kiln::timing_stats s = kiln::summarize({3, 1, 2});
  CHECK(s.n == 3);
  CHECK(s.median_ms == Approx(2));
  CHECK(s.p10_ms == Approx(1.2));
  CHECK(s.p90_ms == Approx(2.8));
  CHECK(s.mean_ms == Approx(2));
}

TEST_CASE("summarize of nothing is all zeros", "[timing]") {
  kiln::timing_stats s = kiln::summarize({});
  CHECK(s.n == 0);
  CHECK(s.median_ms == 0);
  CHECK(s.p10_ms == 0);
  CHECK(s.p90_ms == 0);
  CHECK(s.mean_ms == 0);
}

TEST_CASE("median_ci_rel cannot tell with fewer than six samples", "[timing]") {
  CHECK(kiln::median_ci_rel({}) == 1.0);
  CHECK(kiln::median_ci_rel({1, 1, 1, 1, 1}) == 1.0);
  CHECK(kiln::median_ci_rel({1, 1, 1, 1, 1, 1}) == 0.0);
}

TEST_CASE("median_ci_rel shrinks as samples accumulate", "[timing]") {
  double ci20 = kiln::median_ci_rel(noisy_samples(20));
  double ci200 = kiln::median_ci_rel(noisy_samples(200));
  double ci2000 = kiln::median_ci_rel(noisy_samples(2000));
  CHECK(ci20 > ci200);
  CHECK(ci200 > ci2000);
  CHECK(ci2000 > 0);
  CHECK(ci2000 < 0.01); // uniform over 20% of the median: the CI is about 0.2 * 2 / sqrt(n)
}

TEST_CASE("median_ci_rel uses the order statistics around the median", "[timing]") {
  // n = 100: ranks 50 -+ 9.8, widened to whole ranks 40 and 60 (1-based) of 1..100.
  std::vector<double> xs;
  for (int i = 100; i >= 1; --i)
    xs.push_back(i);
  CHECK(kiln::median_ci_rel(xs) == Approx((60.0 - 40.0) / 2 / 50.5));
}

TEST_CASE("combine_rounds takes the median of the round medians", "[timing]") {
  // Round medians 2, 10 and 3: one disturbed round cannot move the figure past the others.
  kiln::timing_stats s = kiln::combine_rounds({{1, 2, 3}, {9, 10, 11}, {3, 3, 3}});
  CHECK(s.median_ms == Approx(3));
  CHECK(s.n == 9);
  CHECK(s.mean_ms == Approx(45.0 / 9));
  // p10 and p90 come from all samples pooled: 1 2 3 3 3 3 9 10 11.
  CHECK(s.p10_ms == Approx(1.8));
  CHECK(s.p90_ms == Approx(10.2));
}

TEST_CASE("combine_rounds skips rounds without samples", "[timing]") {
  kiln::timing_stats s = kiln::combine_rounds({{}, {4, 6}, {}});
  CHECK(s.n == 2);
  CHECK(s.median_ms == Approx(5));
  CHECK(kiln::combine_rounds({}).n == 0);
  CHECK(kiln::combine_rounds({{}, {}}).median_ms == 0);
}

TEST_CASE("interleaved_order alternates direction between rounds", "[timing]") {
  using order = std::vector<size_t>;
  CHECK(kiln::interleaved_order(3, 0) == order{0, 1, 2});
  CHECK(kiln::interleaved_order(3, 1) == order{2, 1, 0});
  CHECK(kiln::interleaved_order(3, 2) == order{0, 1, 2});
  CHECK(kiln::interleaved_order(1, 1) == order{0});
  CHECK(kiln::interleaved_order(0, 0).empty());
}
