#pragma once

// Output comparison in the parent, with libtorch: the candidate never judges itself.

#include <string>
#include <string_view>
#include <vector>

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
  std::vector<double> max_abs_diff; ///< per output
  std::vector<double> max_rel_diff;
};

/// Compares two output files written by the harness (`torch.save` of a list of tensors).
/// Checks count, shape, dtype, NaN/Inf, allclose(atol, rtol) and a signal check so that a
/// constant or all-zero output can never pass where the tolerance would allow it.
/// Throws std::runtime_error when a file cannot be read.
output_comparison compare_outputs(const std::string& reference_file,
                                  const std::string& candidate_file, tolerance tol);

/// The same, with the reference's outputs file already in memory (`reference_name` names it in
/// errors): the evaluator holds them there while the candidate runs, out of its reach.
output_comparison compare_output_bytes(std::string_view reference_bytes,
                                       const std::string& reference_name,
                                       const std::string& candidate_file, tolerance tol);

/// Folds the comparison of another trial into `acc` (worst differences, first failure wins).
void merge_comparison(output_comparison& acc, const output_comparison& next);

} // namespace kiln
