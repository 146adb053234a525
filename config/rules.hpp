#pragma once

// The evaluation's fixed rules: thresholds and limits that are not config keys (a user who
// changes them changes what a verdict means), kept beside config/defaults.hpp so that every
// number a verdict depends on is in one of the two. docs/evaluation.md explains each.

#include <cstddef>

namespace kiln::rules {

/// Speedups above this are physically suspicious for most tasks (KernelBench flags them too): a
/// note asks a human to look, the verdict stands.
inline constexpr double suspicious_speedup = 10.0;
/// How much of a runner's stdout/stderr a verdict carries.
inline constexpr size_t tail_bytes = 4000;
/// The facts runner only imports torch (and Triton); this is generous.
inline constexpr double facts_timeout_s = 300;
/// A health job allocates a few MB, runs one kernel and synchronizes; on a GPU a fresh process
/// also creates its CUDA context, which takes seconds, not minutes.
inline constexpr double health_timeout_s = 120;
/// Where the reference's output lies within the tolerance of zero (an all-zero output would
/// pass), the candidate's L2 error may be at most this share of the reference's spread around
/// its mean.
inline constexpr double low_signal_max_rel_l2 = 0.1;
/// A cached reference figure more than this share off the reference timed beside a candidate
/// is replaced by the new one (the cache is a hint; the speedup never uses it).
inline constexpr double reference_disagreement = 0.05;

/// The outside clock (gpu/outside_clock.hpp): steady batches must hold at least this share of
/// the parent's span of them (honest: the events sit inside the stamps, ~0.9-1.0)...
inline constexpr double outside_batch_share = 0.7;
/// ...and a candidate's per-call time that the parent saw but its samples leave out may exceed
/// the reference's by at most this share of its median sample, plus a slack: this much, and this
/// share of the reference's own (on a loaded 2-core host the two differ by up to ~0.25 ms).
inline constexpr double outside_unreported_share = 0.25;
inline constexpr double outside_unreported_slack_ms = 0.05;
inline constexpr double outside_unreported_slack_share = 0.5;

} // namespace kiln::rules
