#pragma once

// Output comparison in the parent, with libtorch: the candidate never judges itself.

#include <string>
#include <vector>

#include "gpu/file_bytes.hpp"
#include "messages/eval.hpp"

namespace kiln {

struct tolerance {
  double atol = 1e-2;
  double rtol = 1e-2;
};

struct output_comparison {
  bool ok = false;
  /// When not ok: `incorrect` for numerics, `rejected` for structure (count, shape, dtype) or
  /// a signal check failure.
  verdict_status status = verdict_status::incorrect;
  std::string reason;
  /// When not ok: the verdict code of the failure (`tolerance`, `nan_output`, `shape`, ...;
  /// docs/evaluation.md has the table).
  std::string code;
  /// When the failure is `tolerance`: how many values of the failing output lie outside, of
  /// how many, and the worst |c - r| as a multiple of what was allowed (atol + rtol |r|).
  int64_t outside = 0;
  int64_t values = 0;
  double worst_ratio = 0;
  std::vector<double> max_abs_diff; ///< per output
  std::vector<double> max_rel_diff;

  /// A `tolerance` failure by a handful of values just outside (at most borderline_count or
  /// borderline_fraction of the values, none beyond borderline_ratio times the allowed
  /// difference): rounding noise looks like this, and a verdict on it alone depends on the seeds.
  bool borderline() const;
};

/// What borderline() allows: values outside (at least this many, or this share of the
/// output's values), each within this multiple of atol + rtol |r|.
constexpr int64_t borderline_count = 4;
constexpr double borderline_fraction = 1e-4;
constexpr double borderline_ratio = 2.0;

/// Compares two outputs files written by the harness: its raw format (docs/evaluation.md,
/// "Outputs files") or a `torch.save` archive of a list or tuple of tensors. Checks count,
/// shape, dtype, NaN/Inf, allclose(atol, rtol) and a signal check so that a constant or
/// all-zero output can never pass where the tolerance would allow it.
/// Throws std::runtime_error when a file cannot be read.
output_comparison compare_outputs(const std::string& reference_file,
                                  const std::string& candidate_file, tolerance tol);

/// The same, over files already read: the evaluator reads the reference's outputs and removes
/// the files before the candidate runs, so they are out of its reach.
output_comparison compare_output_files(const file_bytes& reference, const file_bytes& candidate,
                                       tolerance tol);

/// Whether `f` is in the harness's raw format (else a torch.save archive, or not an outputs file).
bool is_raw_outputs(const file_bytes& f);

/// Folds the comparison of another trial into `acc` (worst differences, first failure wins).
void merge_comparison(output_comparison& acc, const output_comparison& next);

} // namespace kiln
