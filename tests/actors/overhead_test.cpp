// kiln's own overhead: many tasks searched at once with the offline rules provider (no network)
// and an evaluator stand-in that answers at once (a test double), so that what is left is
// kiln's orchestration: supervisor, strategies, agents, prompts, gateway, dispatcher, archive.
//
// The small case runs in CI and checks that every task ends within its budgets. The full case
// (`[.overhead]`, 100 tasks x 300 queries) is the benchmark that tools/bench-overhead runs.

#include <chrono>
#include <cstdio>

#include <sys/resource.h>

#include <catch2/catch.hpp>

#include "tests/actors/fixture.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

struct overhead {
  run_summary summary;
  double wall_s = 0;
  int64_t candidates = 0;
};

overhead run_many(caf::actor_system& sys, const std::string& name, int tasks, int64_t queries) {
  auto out = fresh_dir(name);
  auto plan = small_plan(out, queries);
  plan.make_evaluator = [](caf::actor_system& s, size_t) {
    return caf::actor_cast<evaluator_actor>(s.spawn(fake_evaluator, false, caf::actor{}));
  };
  // PIKE-B's defaults, with every task searching at once.
  plan.cfg.strategy.max_ideas = 10;
  plan.cfg.strategy.parents = 4;
  plan.cfg.strategy.phases = 10000;
  plan.cfg.strategy.parallel_candidates = 10;
  plan.cfg.run.parallel_tasks = tasks;
  plan.cfg.evaluator.retime_rounds = 0;
  const char* kinds[] = {"1_MLP", "2_ConvBnRelu", "3_Softmax", "4_LayerNorm"};
  for (int i = 0; i < tasks; ++i) {
    auto t = bundled_task(kinds[i % 4]);
    char id[16];
    std::snprintf(id, sizeof id, "%03d", i + 1);
    t.name = std::string{id} + t.name.substr(t.name.find('_'));
    plan.tasks.push_back(std::move(t));
  }
  auto t0 = std::chrono::steady_clock::now();
  auto sup = spawn_supervisor(sys, std::move(plan));
  caf::scoped_actor self{sys};
  overhead o;
  self->request(sup, std::chrono::seconds(3600), run_atom::value)
      .receive([&](run_summary& s) { o.summary = std::move(s); },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  self->send_exit(sup, caf::exit_reason::user_shutdown);
  for (auto& t : o.summary.tasks)
    o.candidates += t.evaluations;
  return o;
}

long max_rss_kb() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

} // namespace

TEST_CASE_METHOD(actor_fixture, "many tasks at once each end within their query budget") {
  auto o = run_many(*sys, "overhead-small", 12, 30);
  REQUIRE(o.summary.tasks.size() == 12);
  for (auto& t : o.summary.tasks) {
    CHECK(t.queries == 30);
    CHECK(t.stop_reason == "budget");
    CHECK(t.evaluations > 0);
  }
  CHECK(o.summary.llm.queries == 12 * 30);
}

TEST_CASE_METHOD(actor_fixture, "overhead: 100 tasks x 300 queries", "[.overhead]") {
  auto o = run_many(*sys, "overhead", 100, 300);
  REQUIRE(o.summary.tasks.size() == 100);
  for (auto& t : o.summary.tasks)
    CHECK(t.queries == 300);
  const double per_hour = static_cast<double>(o.candidates) / o.wall_s * 3600.0;
  std::printf("overhead: %zu tasks, %lld queries, %lld candidates evaluated in %.2f s wall: "
              "%.0f candidates/s, %.0f candidates/hour; peak RSS %.1f MiB\n",
              o.summary.tasks.size(), static_cast<long long>(o.summary.llm.queries),
              static_cast<long long>(o.candidates), o.wall_s,
              static_cast<double>(o.candidates) / o.wall_s, per_hour,
              static_cast<double>(max_rss_kb()) / 1024.0);
  std::fflush(stdout);
}
