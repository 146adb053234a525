// The outside clock's judgement (gpu/outside_clock.hpp) from stamps at chosen moments: which
// disagreements are beyond doubt (counts, order) and which are durations that a stalled host
// can produce too (the evaluator measures those once more before it rejects).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "gpu/outside_clock.hpp"

using kiln::outside_clock;
using kiln::timing_block;

namespace {

using ms = std::chrono::duration<double, std::milli>;

/// A runner's loop as the parent sees it: per-call samples of `sample_ms` that each took
/// `interval_ms` between their stamps, then one steady batch of `calls` calls that took
/// `batch_outside_ms` between `s` and `e`.
struct loop {
  outside_clock clock;
  outside_clock::clock::time_point now{};

  void at(const std::string& line, double after_ms) {
    now += std::chrono::duration_cast<outside_clock::clock::duration>(ms{after_ms});
    REQUIRE(clock.take(line, now));
  }

  loop(int samples, double interval_ms, int calls, double batch_outside_ms) {
    at("p", 0);
    for (int k = 0; k < samples; ++k)
      at("c", interval_ms);
    at("s", 1);
    at("e " + std::to_string(calls), batch_outside_ms);
  }
};

std::vector<timing_block> one_batch(double inside_ms, int calls) {
  timing_block b;
  b.n = 0;
  b.batches.emplace_back(inside_ms, calls);
  return {b};
}

} // namespace

TEST_CASE("an honest loop agrees with the parent's clock", "[outside_clock]") {
  loop ref{20, 0.16, 100, 10.0};
  loop cand{20, 0.17, 100, 10.0};
  const std::vector<double> samples(20, 0.07);
  auto check =
      kiln::check_outside_clock(cand.clock, samples, one_batch(9.5, 100), &ref.clock, &samples);
  CHECK(check.problem.empty());
  CHECK_FALSE(check.statistical);
}

TEST_CASE("counts and claims the parent never saw are beyond doubt", "[outside_clock]") {
  loop cand{20, 0.17, 100, 10.0};
  SECTION("a sample more than were stamped") {
    const std::vector<double> samples(21, 0.07);
    auto check = kiln::check_outside_clock(cand.clock, samples, one_batch(9.5, 100));
    CHECK_THAT(check.problem, Catch::Contains("21 per-call samples, the parent saw 20"));
    CHECK_FALSE(check.statistical);
  }
  SECTION("a batch claiming more calls than the runner said as it ran them") {
    const std::vector<double> samples(20, 0.07);
    auto check = kiln::check_outside_clock(cand.clock, samples, one_batch(9.5, 200));
    CHECK_THAT(check.problem, Catch::Contains("claims 200 calls, the runner said 100"));
    CHECK_FALSE(check.statistical);
  }
  SECTION("stamps out of order") {
    outside_clock clock;
    CHECK(clock.take("c", outside_clock::clock::now()));
    auto check = kiln::check_outside_clock(clock, {}, {});
    CHECK_THAT(check.problem, Catch::Contains("out of order"));
    CHECK_FALSE(check.statistical);
  }
}

TEST_CASE("durations that disagree are statistical", "[outside_clock]") {
  const std::vector<double> samples(20, 0.07);
  SECTION("halved steady batches") {
    loop cand{20, 0.17, 100, 10.0};
    auto check = kiln::check_outside_clock(cand.clock, samples, one_batch(5.0, 100));
    CHECK_THAT(check.problem, Catch::Contains("steady batches add up to 5 ms"));
    CHECK(check.statistical);
  }
  SECTION("per-call time the samples leave out, far beyond the reference's loop") {
    loop ref{20, 0.16, 100, 10.0};
    loop cand{20, 0.64, 100, 10.0}; // 0.57 ms unreported against the reference's 0.09
    auto check =
        kiln::check_outside_clock(cand.clock, samples, one_batch(9.5, 100), &ref.clock, &samples);
    CHECK_THAT(check.problem, Catch::Contains("per call the parent saw 0.57 ms more"));
    CHECK(check.statistical);
    // Without the reference's loop there is nothing to compare the unreported time with.
    CHECK(kiln::check_outside_clock(cand.clock, samples, one_batch(9.5, 100)).problem.empty());
  }
}

TEST_CASE("a reference preempted between many of its calls does not hide a halved sample",
          "[outside_clock]") {
  // The reference's loop as a loaded host leaves it: 0.09 ms of its own per call, and 2 ms more
  // in three calls of five (another process ran between them).
  outside_clock ref;
  auto now = outside_clock::clock::now();
  REQUIRE(ref.take("p", now));
  for (int k = 0; k < 20; ++k) {
    now += std::chrono::duration_cast<outside_clock::clock::duration>(
        ms{4.09 + (k % 5 < 3 ? 2.0 : 0.0)});
    REQUIRE(ref.take("c", now));
  }
  const std::vector<double> ref_samples(20, 4.0);
  CHECK(kiln::unreported_ms(ref, ref_samples) == Approx(0.09).margin(1e-6));
  // A candidate whose calls take 4 ms and which reports 2 ms for each.
  loop cand{20, 4.1, 100, 10.0};
  const std::vector<double> halved(20, 2.0);
  auto check =
      kiln::check_outside_clock(cand.clock, halved, one_batch(9.5, 100), &ref, &ref_samples);
  CHECK_THAT(check.problem, Catch::Contains("per call the parent saw 2.1 ms more"));
  CHECK(check.statistical);
}
