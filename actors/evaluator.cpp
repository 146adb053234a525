#include "actors/evaluator.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "messages/error.hpp"

namespace kiln {

uint64_t evaluation_seed(uint64_t run_seed, const std::string& candidate_id) {
  // FNV-1a over the id, then a splitmix64 finaliser with the run seed folded in.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : candidate_id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  uint64_t z = h ^ (run_seed + 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

evaluator_actor::behavior_type evaluator(evaluator_actor::stateful_pointer<evaluator_state> self,
                                         eval_settings settings, uint64_t seed) {
  self->state.seed = seed;
  self->state.engine = std::make_unique<evaluation_engine>(std::move(settings));
  return {
      [self](eval_atom, const eval_job& job) -> caf::result<verdict> {
        auto& st = self->state;
        // A device that failed its health check takes no more work: the dispatcher retires it
        // and sends the job to another device.
        if (auto problem = st.engine->check_health(); !problem.empty())
          return make_error(ec::device_unhealthy, problem);
        auto v = st.engine->evaluate(job, evaluation_seed(st.seed, job.candidate_id));
        ++st.evaluations;
        spdlog::info("evaluator {}: {} -> {} ({}) in {:.0f} ms", st.engine->settings().device,
                     job.candidate_id, to_string(v.status), v.reason, v.wall_ms);
        return v;
      },
      [self](retime_atom, const retime_job& job) -> caf::result<retime_result> {
        auto& st = self->state;
        if (auto problem = st.engine->check_health(); !problem.empty())
          return make_error(ec::device_unhealthy, problem);
        return st.engine->retime(job, evaluation_seed(st.seed, job.task.name + "#retime"));
      },
      [self](facts_atom) -> runner_facts { return self->state.engine->facts(); },
  };
}

evaluator_actor spawn_evaluator(caf::actor_system& sys, eval_settings settings, uint64_t seed) {
  return sys.spawn<caf::detached>(evaluator, std::move(settings), seed);
}

} // namespace kiln
