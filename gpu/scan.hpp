#pragma once

// The static scan of a candidate's source, run by the parent before any runner starts. It reads
// the text only (a small Python tokenizer, no interpreter), so nothing of the candidate runs.
// It is a tripwire, not a proof: Python can build any name at run time, which is why the harness
// repeats the important checks while the candidate runs (docs/evaluation.md).

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// One thing the scan found.
struct scan_finding {
  std::string rule; ///< e.g. `patches torch.cuda.Event.elapsed_time`
  int line = 0;     ///< 1-based line in the candidate

  /// `static scan: <rule> (line N)`, the verdict's reason.
  std::string text() const;
};

struct scan_result {
  /// Integrity rules broken: each one makes the verdict `rejected`.
  std::vector<scan_finding> rejections;
  /// Observations that do not change the verdict (reduced precision, side streams, ...), one
  /// per kind, already worded for the verdict's notes.
  std::vector<std::string> notes;
};

/// Scans a candidate's Python source. Never throws on malformed Python: the runner reports
/// syntax errors better.
scan_result scan_candidate(std::string_view source);

} // namespace kiln
