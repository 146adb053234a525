#pragma once

// Shared pieces of the actor tests: an actor system, a run plan on the bundled tasks with the
// offline rules provider, and a stand-in evaluator that answers at once or holds jobs until
// released (a test double: the real evaluator is tested in tests/gpu).

#include <filesystem>
#include <fstream>
#include <sstream>

#include <caf/all.hpp>

#include "actors/supervisor.hpp"
#include "messages/register.hpp"

namespace kiln::test {

inline std::string read_text(const std::string& path) {
  std::ifstream in{path};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline task_spec bundled_task(const std::string& name) {
  auto path = std::string{KILN_SOURCE_DIR} + "/tests/tasks/cpu/" + name + ".py";
  return {name, path, read_text(path)};
}

/// A fresh, empty directory under the build's test-tmp folder.
inline std::string fresh_dir(const std::string& name) {
  auto dir = std::filesystem::path{KILN_TEST_TMP} / "actors" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

/// The plan of a small offline run: three roles on one rules profile.
inline run_plan small_plan(const std::string& out, int64_t queries) {
  run_plan plan;
  llm_profile_config profile;
  profile.name = "rules";
  profile.provider = "rules";
  plan.cfg.llm["rules"] = profile;
  for (auto role : {"brainstormer", "optimizer", "error_fixer"}) {
    agent_config a;
    a.name = role;
    a.llm = "rules";
    a.max_attempts = 1;
    plan.cfg.agents[role] = a;
  }
  plan.cfg.run.out = out;
  plan.cfg.budget.queries_per_task = queries;
  plan.cfg.strategy.max_ideas = 3;
  plan.cfg.strategy.phases = 2;
  plan.cfg.strategy.parents = 2;
  plan.cfg.strategy.parallel_candidates = 3;
  plan.evaluators.resize(1);
  return plan;
}

using release_atom = caf::atom_constant<caf::atom("release")>;
using held_atom = caf::atom_constant<caf::atom("held")>;

/// A correct verdict whose speedup depends on the code only, so runs are reproducible.
inline verdict fake_verdict(const eval_job& job) {
  verdict v;
  v.status = verdict_status::correct;
  v.reason = "stand-in";
  auto h = std::hash<std::string>{}(job.code);
  v.speedup = 1.0 + static_cast<double>(h % 50) / 100.0;
  v.reference = {1.0, 1.0, 1.0, 1.0, 10};
  v.candidate = {1.0 / v.speedup, 1.0 / v.speedup, 1.0 / v.speedup, 1.0 / v.speedup, 10};
  v.device = "cpu";
  return v;
}

struct fake_evaluator_state {
  bool hold = false;
  caf::actor observer;
  std::vector<std::pair<eval_job, caf::response_promise>> held;
  int64_t jobs = 0;
  int64_t retimes = 0;
};

/// Answers evaluations at once, or (with `hold`) keeps them until a `release` arrives and
/// tells `observer` about each held job.
inline caf::behavior fake_evaluator(caf::stateful_actor<fake_evaluator_state>* self, bool hold,
                                    caf::actor observer) {
  self->state.hold = hold;
  self->state.observer = observer;
  return {
      [self](eval_atom, const eval_job& job) -> caf::result<verdict> {
        auto& st = self->state;
        ++st.jobs;
        if (!st.hold)
          return fake_verdict(job);
        auto rp = self->make_response_promise();
        st.held.emplace_back(job, rp);
        if (st.observer)
          self->send(st.observer, held_atom::value, job.candidate_id);
        return caf::delegated<verdict>{};
      },
      // Re-timing finds every candidate 10 % slower than the search did, against a reference at
      // 1.1 ms, so a test can tell re-timed figures from the search's.
      [self](retime_atom, const retime_job& job) {
        ++self->state.retimes;
        retime_result r;
        r.device = "cpu";
        r.reference = {1.1, 1.1, 1.1, 1.1, 10};
        for (const auto& code : job.codes) {
          eval_job probe;
          probe.code = code;
          double s = 0.9 * fake_verdict(probe).speedup;
          r.speedups.push_back(s);
          r.candidates.push_back({1.1 / s, 1.1 / s, 1.1 / s, 1.1 / s, 10});
        }
        return r;
      },
      [](facts_atom) {
        runner_facts f;
        f.device = "cpu";
        f.torch_version = "1.13.0";
        f.cpu_threads = 2;
        return f;
      },
      [self](release_atom) {
        auto& st = self->state;
        st.hold = false;
        for (auto& [job, rp] : st.held)
          rp.deliver(fake_verdict(job));
        st.held.clear();
      },
  };
}

struct actor_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  actor_fixture() {
    add_message_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

} // namespace kiln::test
