#pragma once

// The judgements of evaluate() that need more than one look: per-trial comparisons with the trial
// named in the reason, the diagnosis of a NaN output, the re-check of a borderline mismatch on
// more seeds, and the verdict codes and causes of the static scan and the harness's violations.
// Every reason says what was seen and, where kiln can tell, its likely cause (docs/evaluation.md,
// "Verdict codes").

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpu/compare.hpp"
#include "gpu/file_bytes.hpp"
#include "gpu/runner.hpp"

namespace kiln {

/// The comparisons of a candidate's trial outputs with the reference's.
struct trial_comparisons {
  output_comparison all; ///< merged: worst differences, the first failure
  int failed_trial = -1; ///< the first trial that failed, -1 when none did
  /// Every trial that failed did so by a borderline mismatch (output_comparison::borderline).
  bool borderline_only = false;
  std::string reason; ///< the first failure's reason, prefixed with its trial and seed
};

/// Compares `<dir>/out_<k>.pt` with `reference[k]` for every seed. The candidate's file names
/// are kiln's, never taken from the runner's report. Throws when a file cannot be read.
trial_comparisons compare_trial_files(const std::vector<file_bytes>& reference,
                                      const std::string& dir, const std::vector<uint64_t>& seeds,
                                      tolerance tol);

/// Every verdict code kiln gives, in the order of docs/evaluation.md's table.
const std::vector<std::string>& verdict_codes();

/// The most bytes a candidate's outputs file may have: twice the reference's and a megabyte.
/// Right outputs are as large as the reference's; a larger file cannot pass, and reading a
/// sparse terabyte a candidate left behind must not stall the daemon.
size_t outputs_cap(const file_bytes& reference);

/// A fresh random token per runner; result.json must echo it (see the harness).
std::string fresh_nonce();

/// `trial 2 of 3 (input seed 123)`.
std::string trial_name(size_t k, size_t count, uint64_t seed);

/// The verdict code of a static scan finding's rule (`scan_patch`, `scan_harness`, ...).
std::string scan_code(const std::string& rule);
/// Why the scan refuses what that code names, in a few words for the verdict's reason.
std::string scan_cause(const std::string& code);

/// The code of a violation the harness reported, and the cause to append to its text.
std::pair<std::string, std::string> violation_code(const std::string& violation);

/// The trial bookkeeping of a candidate runner against the reference's and the seeds asked:
/// count, seeds, output structure, mutated inputs. Empty reason when all is in order.
/// Why a runner's timing cannot be used (no samples, a sample or steady-state batch not finite
/// or not positive, more time in calls than the process lived, as a patched clock or event
/// would show); empty when it can. Phrased to follow "runner ".
std::string timing_problem(const runner_report& r);

runner_failure judge_runs(const runner_report& cand, const runner_report& ref,
                          const std::vector<uint64_t>& seeds);

/// The first output of `cand` that shares storage with an input where `ref`'s does not, or -1.
int32_t new_alias(const trial_record& cand, const trial_record& ref);
/// The reason for an output that shares storage with an input.
std::string alias_text(int32_t output, const std::string& where);
/// The usual causes of a mutated input, appended to its reason.
std::string mutation_cause();

/// The code and reason of a NaN output, after running the candidate's trials once more without
/// kiln's NaN fill of freed memory (`job` as it ran, untimed now): NaN that goes away without the
/// fill is memory the candidate never wrote (`uninitialized_memory`); NaN that stays is computed
/// (`nan_output`). The caller holds the device shared.
std::pair<std::string, std::string> diagnose_nan(const runner_context& ctx, runner_job job,
                                                 const std::vector<file_bytes>& reference,
                                                 const trial_comparisons& seen, double timeout_s,
                                                 const std::string& device);

/// What the re-check of a borderline mismatch on more seeds found.
struct more_seeds {
  /// Set when a trial failed beyond the borderline allowance (or a runner failed): the verdict.
  runner_failure failure;
  int borderline = 0; ///< trials with a borderline mismatch
};

/// Runs the reference and then the candidate (both untimed, fresh runners) on `seeds` and
/// compares every trial. The reference's outputs are read into memory and deleted before the
/// candidate starts, as in the evaluation. The caller holds the device shared.
more_seeds check_more_seeds(const runner_context& ctx, runner_job ref_job, runner_job cand_job,
                            const std::vector<uint64_t>& seeds, double timeout_s, tolerance tol);

} // namespace kiln
