#include "gpu/outside_clock.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "config/rules.hpp"

namespace kiln {

namespace {

double ms_between(outside_clock::clock::time_point a, outside_clock::clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2)
    return *mid;
  return 0.5 * (*mid + *std::max_element(v.begin(), mid));
}

/// The value below which `share` of `v` lies (nearest rank).
double lower_quantile(std::vector<double> v, double share) {
  if (v.empty())
    return 0;
  auto at = v.begin() + static_cast<std::ptrdiff_t>(share * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), at, v.end());
  return *at;
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g ms", ms);
  return buf;
}

} // namespace

bool outside_clock::take(const std::string& line, clock::time_point now) {
  if (line == "p") {
    sampling_ = true;
    last_ = now;
  } else if (line == "c") {
    if (!sampling_) {
      ++malformed;
      return true;
    }
    call_ms.push_back(ms_between(last_, now));
    last_ = now;
  } else if (line == "s") {
    in_batch_ = true;
    batch_start_ = now;
  } else if (line.rfind("e ", 0) == 0) {
    char* end = nullptr;
    long calls = std::strtol(line.c_str() + 2, &end, 10);
    if (!in_batch_ || end == line.c_str() + 2 || *end != '\0' || calls <= 0 || calls > 1 << 20) {
      ++malformed;
      in_batch_ = false;
      return true;
    }
    batch_ms.emplace_back(ms_between(batch_start_, now), static_cast<int32_t>(calls));
    in_batch_ = false;
  } else if (line == "d") {
    if (batch_ms.empty())
      ++malformed;
    else
      batch_ms.pop_back();
  } else {
    return false;
  }
  return true;
}

double unreported_ms(const outside_clock& clock, const std::vector<double>& samples_ms) {
  if (clock.call_ms.empty() || clock.call_ms.size() != samples_ms.size())
    return -1;
  std::vector<double> gap(samples_ms.size());
  for (size_t k = 0; k < samples_ms.size(); ++k)
    gap[k] = clock.call_ms[k] - samples_ms[k];
  // The lower quartile, not the median: on a loaded host a runner is preempted between calls
  // in many of them, which adds to its unreported time whatever it is (reference or candidate),
  // while a sample the runner shortened is short in every call.
  return lower_quantile(std::move(gap), 0.25);
}

double batch_share(const outside_clock& clock, const std::vector<timing_block>& blocks) {
  double inside = 0;
  size_t k = 0;
  for (const auto& b : blocks)
    for (const auto& batch : b.batches) {
      if (k >= clock.batch_ms.size())
        return -1;
      inside += batch.first;
      ++k;
    }
  double outside = 0;
  for (const auto& batch : clock.batch_ms)
    outside += batch.first;
  if (k != clock.batch_ms.size() || outside <= 0)
    return -1;
  return inside / outside;
}

std::string outside_clock_problem(const outside_clock& clock, const std::vector<double>& samples_ms,
                                  const std::vector<timing_block>& blocks,
                                  const outside_clock* reference,
                                  const std::vector<double>* reference_samples_ms) {
  return check_outside_clock(clock, samples_ms, blocks, reference, reference_samples_ms).problem;
}

clock_check check_outside_clock(const outside_clock& clock, const std::vector<double>& samples_ms,
                                const std::vector<timing_block>& blocks,
                                const outside_clock* reference,
                                const std::vector<double>* reference_samples_ms) {
  const std::string lead = "timing disagrees with the parent's clock: ";
  auto certain = [](std::string why) { return clock_check{std::move(why), false}; };
  auto statistical = [](std::string why) { return clock_check{std::move(why), true}; };
  if (clock.malformed > 0)
    return certain(lead + "its timing loop's stamps came out of order");
  // Counts first: every sample and every batch was stamped as it was taken, so one the parent
  // never saw was made up, and one left out was dropped.
  if (clock.call_ms.size() != samples_ms.size())
    return certain(lead + "result.json holds " + std::to_string(samples_ms.size())
                   + " per-call samples, the parent saw " + std::to_string(clock.call_ms.size())
                   + " taken");
  std::vector<std::pair<double, int32_t>> batches;
  for (const auto& b : blocks)
    batches.insert(batches.end(), b.batches.begin(), b.batches.end());
  if (clock.batch_ms.size() != batches.size())
    return certain(lead + "result.json holds " + std::to_string(batches.size())
                   + " steady batches, the parent saw " + std::to_string(clock.batch_ms.size())
                   + " timed");
  double inside = 0;
  double outside = 0;
  for (size_t k = 0; k < batches.size(); ++k) {
    if (batches[k].second != clock.batch_ms[k].second)
      return certain(lead + "steady batch " + std::to_string(k + 1) + " claims "
                     + std::to_string(batches[k].second) + " calls, the runner said "
                     + std::to_string(clock.batch_ms[k].second) + " as it ran them");
    inside += batches[k].first;
    outside += clock.batch_ms[k].first;
  }
  // Sums, not a median of ratios: a late wake-up of the parent moves one batch's end and the
  // next one's start alike, and their sum not at all.
  if (outside > 0 && inside < rules::outside_batch_share * outside)
    return statistical(lead + "its steady batches add up to " + ms_text(inside)
                       + ", the parent timed " + ms_text(outside) + " between their stamps");
  if (reference != nullptr && reference_samples_ms != nullptr) {
    const double own = unreported_ms(clock, samples_ms);
    const double loop = unreported_ms(*reference, *reference_samples_ms);
    if (own >= 0 && loop >= 0) {
      const double sample = median(samples_ms);
      const double allowed = rules::outside_unreported_share * sample
                             + rules::outside_unreported_slack_ms
                             + rules::outside_unreported_slack_share * loop;
      if (own - loop > allowed)
        return statistical(lead + "per call the parent saw " + ms_text(own)
                           + " more than its samples hold (the reference's loop: " + ms_text(loop)
                           + "), against a median sample of " + ms_text(sample));
    }
  }
  return {};
}

} // namespace kiln
