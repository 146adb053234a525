// PIKE-B's own rules (idea resizing, parent split) and the budgets that end a task's search:
// evaluations, a task's wall clock, the run's wall clock, and a stall.

#include <catch2/catch.hpp>

#include "actors/strategy_pike_b.hpp"
#include "tests/actors/fixture.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr auto wait = std::chrono::seconds(120);

run_plan instant_plan(const std::string& out, int64_t queries) {
  auto plan = small_plan(out, queries);
  plan.make_evaluator = [](caf::actor_system& sys, size_t) {
    return caf::actor_cast<evaluator_actor>(sys.spawn(fake_evaluator, false, caf::actor{}));
  };
  return plan;
}

run_summary run(caf::actor_system& sys, run_plan plan) {
  auto sup = spawn_supervisor(sys, std::move(plan));
  caf::scoped_actor self{sys};
  run_summary summary;
  self->request(sup, wait, run_atom::value)
      .receive([&](run_summary& s) { summary = std::move(s); },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  self->send_exit(sup, caf::exit_reason::user_shutdown);
  return summary;
}

} // namespace

TEST_CASE("ideas are cut to the branches or repeated in contiguous bins, as PIKE does") {
  std::vector<std::string> three = {"a", "b", "c"};
  CHECK(resize_ideas(three, 10)
        == std::vector<std::string>{"a", "a", "a", "a", "b", "b", "b", "c", "c", "c"});
  CHECK(resize_ideas(three, 2) == std::vector<std::string>{"a", "b"});
  CHECK(resize_ideas(three, 3) == three);
  CHECK(resize_ideas({}, 10).empty());
}

TEST_CASE("improve queries are split over the parents, earlier parents first") {
  CHECK(split_queries(10, 4) == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(split_queries(10, 3) == std::vector<int64_t>{4, 3, 3});
  CHECK(split_queries(10, 1) == std::vector<int64_t>{10});
  CHECK(split_queries(2, 4) == std::vector<int64_t>{1, 1, 0, 0});
}

TEST_CASE_METHOD(actor_fixture, "evaluations_per_task ends the search at its count") {
  auto plan = instant_plan(fresh_dir("budget-evals"), 1000);
  plan.tasks = {bundled_task("1_MLP")};
  plan.cfg.strategy.phases = 1000;
  plan.cfg.budget.evaluations_per_task = 7;
  auto s = run(*sys, std::move(plan));
  REQUIRE(s.tasks.size() == 1);
  CHECK(s.tasks[0].evaluations == 7);
  CHECK(s.tasks[0].stop_reason == "budget: evaluations");
  CHECK(s.tasks[0].retimed); // a spent budget still re-times the winners
  CHECK_FALSE(s.interrupted);
}

TEST_CASE_METHOD(actor_fixture, "wall_s_per_task ends a search that would go on") {
  auto plan = instant_plan(fresh_dir("budget-wall-task"), 1000000);
  plan.tasks = {bundled_task("1_MLP")};
  plan.cfg.strategy.phases = 10000;
  plan.cfg.budget.wall_s_per_task = 0.5;
  auto t0 = std::chrono::steady_clock::now();
  auto s = run(*sys, std::move(plan));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(s.tasks.size() == 1);
  CHECK(s.tasks[0].stop_reason == "wall clock");
  CHECK(s.tasks[0].evaluations > 0);
  CHECK(took < 30);
  CHECK_FALSE(s.interrupted);
}

TEST_CASE_METHOD(actor_fixture, "wall_s_total winds the run down; tasks not started say so") {
  auto plan = instant_plan(fresh_dir("budget-wall-run"), 1000000);
  plan.tasks = {bundled_task("1_MLP"), bundled_task("2_ConvBnRelu")};
  plan.cfg.run.parallel_tasks = 1;
  plan.cfg.strategy.phases = 10000;
  plan.cfg.budget.wall_s_total = 0.5;
  auto s = run(*sys, std::move(plan));
  REQUIRE(s.tasks.size() == 2);
  CHECK(s.tasks[0].stop_reason == "wall clock");
  CHECK(s.tasks[1].stop_reason == "not started (wall clock)");
  CHECK(s.tasks[1].best_speedup == 1.0);
  CHECK_FALSE(s.interrupted);
}

TEST_CASE_METHOD(actor_fixture, "stall_phases ends a search that stopped improving") {
  auto plan = instant_plan(fresh_dir("budget-stall"), 1000000);
  plan.tasks = {bundled_task("1_MLP")};
  plan.cfg.strategy.phases = 10000;
  plan.cfg.strategy.stall_phases = 3;
  auto s = run(*sys, std::move(plan));
  REQUIRE(s.tasks.size() == 1);
  CHECK(s.tasks[0].stop_reason == "stalled");
}
