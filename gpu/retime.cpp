// The final re-timing of a task's winners (see evaluate.hpp).

#include "gpu/evaluate.hpp"

namespace kiln {

retime_result evaluation_engine::retime(const retime_job& job, uint64_t) {
  retime_result r;
  r.device = settings_.device;
  r.candidates.resize(job.candidate_ids.size());
  r.speedups.resize(job.candidate_ids.size());
  r.error = "re-timing is not implemented yet";
  return r;
}

} // namespace kiln
