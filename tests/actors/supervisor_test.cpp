// The supervisor's protocol: budgets under concurrency, restarts after crashes, a complete run,
// and a clean stop with work in flight.

#include <catch2/catch.hpp>

#include <filesystem>

#include <sqlite3.h>

#include "fixture.hpp"
#include "messages/error.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr auto wait = std::chrono::seconds(60);

int64_t count_rows(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  auto n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

run_plan plan_with_fake(const std::string& out, int64_t queries, bool hold = false,
                        caf::actor observer = {}) {
  auto plan = small_plan(out, queries);
  plan.make_evaluator = [hold, observer](caf::actor_system& sys, size_t) {
    return caf::actor_cast<evaluator_actor>(sys.spawn(fake_evaluator, hold, observer));
  };
  return plan;
}

} // namespace

TEST_CASE_METHOD(actor_fixture, "the query budget is never exceeded under concurrent requests") {
  auto out = fresh_dir("budget");
  auto sup = spawn_supervisor(*sys, plan_with_fake(out, 25));
  caf::scoped_actor self{*sys};
  // Eight actors race 20 grant requests each for the same task; each reports its grants.
  constexpr int racers = 8;
  constexpr int per_racer = 20;
  for (int r = 0; r < racers; ++r) {
    sys->spawn([sup, observer = caf::actor{self}](caf::event_based_actor* racer) {
      auto granted = std::make_shared<int>(0);
      auto answered = std::make_shared<int>(0);
      for (int i = 0; i < per_racer; ++i)
        racer->request(sup, wait, grant_atom::value, std::string{"t"}, std::string{"optimizer"})
            .then([=](const query_grant& g) {
              *granted += g.granted ? 1 : 0;
              if (++*answered == per_racer)
                racer->send(observer, *granted);
            });
    });
  }
  int total = 0;
  for (int r = 0; r < racers; ++r)
    self->receive([&](int granted) { total += granted; });
  CHECK(total == 25);
  // Asks through the supervisor draw on the same budget: all of it is spent already.
  agent_request req;
  req.task.name = "t";
  self->request(sup, wait, ask_atom::value, std::string{"optimizer"}, req)
      .receive([](agent_reply&) { FAIL("a query was granted beyond the budget"); },
               [](caf::error& err) { CHECK(is(err, ec::budget_exhausted)); });
  self->send_exit(sup, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(actor_fixture, "concurrent asks get exactly the budget's worth of replies") {
  auto out = fresh_dir("asks");
  auto sup = spawn_supervisor(*sys, plan_with_fake(out, 7));
  caf::scoped_actor self{*sys};
  agent_request req;
  req.task = bundled_task("1_MLP");
  req.kind = prompt_kind::brainstorm;
  for (int i = 0; i < 30; ++i)
    self->send(sup, ask_atom::value, std::string{"brainstormer"}, req);
  int replies = 0;
  int refusals = 0;
  for (int i = 0; i < 30; ++i)
    self->receive([&](agent_reply&) { ++replies; },
                  [&](caf::error& err) {
                    CHECK(is(err, ec::budget_exhausted));
                    ++refusals;
                  });
  CHECK(replies == 7);
  CHECK(refusals == 23);
  self->send_exit(sup, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(actor_fixture, "a crashed agent is restarted and answers again") {
  auto out = fresh_dir("restart");
  auto sup = spawn_supervisor(*sys, plan_with_fake(out, 100));
  caf::scoped_actor self{*sys};
  caf::actor before;
  self->request(sup, wait, get_atom::value, std::string{"agent:optimizer"})
      .receive([&](caf::actor& a) { before = a; },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  REQUIRE(before);
  self->monitor(before);
  self->send_exit(before, caf::exit_reason::kill);
  self->receive([&](caf::down_msg& dm) { CHECK(dm.source == before.address()); });
  // Asked while the role is down or restarting, the request is held and answered by the new one.
  agent_request req;
  req.task = bundled_task("1_MLP");
  req.kind = prompt_kind::optimize;
  req.idea = "inference_mode";
  self->request(sup, wait, ask_atom::value, std::string{"optimizer"}, req)
      .receive([](agent_reply& r) { CHECK(!r.raw.empty()); },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  self->request(sup, wait, get_atom::value, std::string{"agent:optimizer"})
      .receive([&](caf::actor& a) { CHECK(a != before); },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  self->send_exit(sup, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(actor_fixture, "a worker that keeps crashing takes the run down") {
  auto out = fresh_dir("crashloop");
  caf::scoped_actor self{*sys};
  // Evaluations are held, so the run stays busy while the error fixer is killed again and again.
  auto plan = plan_with_fake(out, 100, true, caf::actor{self});
  plan.tasks = {bundled_task("1_MLP")};
  plan.restart_backoff_min = std::chrono::milliseconds(0);
  plan.max_restarts = 3;
  auto sup = spawn_supervisor(*sys, std::move(plan));
  self->send(sup, run_atom::value);
  caf::actor evaluator;
  self->receive([&](held_atom, const std::string&) {
    evaluator = caf::actor_cast<caf::actor>(self->current_sender());
  });
  caf::actor previous;
  for (int kill = 1; kill <= 4; ++kill) {
    caf::actor current;
    // Until the supervisor has seen the crash it still names the dead actor, and until the
    // restart it names none; with no backoff both are brief.
    for (int tries = 0; (!current || current == previous) && tries < 100000; ++tries)
      self->request(sup, wait, get_atom::value, std::string{"agent:error_fixer"})
          .receive([&](caf::actor& a) { current = a; }, [&](caf::error&) { current = nullptr; });
    REQUIRE(current);
    REQUIRE(current != previous);
    previous = current;
    self->monitor(current);
    self->send_exit(current, caf::exit_reason::kill);
    bool down = false;
    while (!down)
      self->receive([&](caf::down_msg&) { down = true; }, [](held_atom, const std::string&) {});
  }
  // The fourth crash within the window is one too many: the run stops with an error naming the
  // worker, once the work in flight is done.
  self->send(evaluator, release_atom::value);
  bool answered = false;
  while (!answered)
    self->receive([&](run_summary&) { FAIL("the run ended normally"); },
                  [&](caf::error& err) {
                    CHECK(is(err, ec::stopped));
                    CHECK(render(err).find("agent:error_fixer crashed 4 times")
                          != std::string::npos);
                    answered = true;
                  },
                  [](held_atom, const std::string&) {});
  self->send_exit(sup, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(actor_fixture, "a run ends within budget and the archive holds every event") {
  auto out = fresh_dir("run");
  auto plan = plan_with_fake(out, 9);
  plan.tasks = {bundled_task("1_MLP"), bundled_task("2_ConvBnRelu")};
  std::vector<task_progress> seen;
  auto sup = spawn_supervisor(*sys, std::move(plan));
  caf::scoped_actor self{*sys};
  run_summary summary;
  self->request(sup, wait, run_atom::value)
      .receive([&](run_summary& s) { summary = std::move(s); },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  REQUIRE(summary.tasks.size() == 2);
  CHECK_FALSE(summary.interrupted);
  CHECK(summary.strategy == "pike-b");
  for (auto& t : summary.tasks) {
    CHECK(t.queries <= 9);
    CHECK(t.queries > 0);
    CHECK(t.evaluations > 0);
    CHECK(t.found);
    CHECK(t.best_speedup >= 1.0);
    CHECK_FALSE(t.best_code.empty());
    // The reported figures are the final re-timing's (the stand-in's are 10 % slower).
    CHECK(t.retimed);
    CHECK(t.reference_ms == Approx(1.1));
    CHECK(t.best_speedup == Approx(std::max(1.0, 0.9 * t.search_speedup)));
  }
  CHECK(summary.llm.queries == summary.tasks[0].queries + summary.tasks[1].queries);
  self->send_exit(sup, caf::exit_reason::user_shutdown);
  auto db = out + "/archive.sqlite";
  CHECK(count_rows(db, "SELECT COUNT(*) FROM llm_calls") == summary.llm.queries);
  CHECK(count_rows(db, "SELECT COUNT(*) FROM candidates WHERE status IS NOT NULL")
        == summary.tasks[0].evaluations + summary.tasks[1].evaluations);
  CHECK(count_rows(db, "SELECT COUNT(*) FROM budget_events WHERE kind = 'grant'")
        == summary.llm.queries);
  CHECK(count_rows(db, "SELECT COUNT(*) FROM tasks") == 2);
  CHECK(count_rows(db, "SELECT COUNT(*) FROM tasks WHERE retimed = 1") == 2);
}

TEST_CASE_METHOD(actor_fixture,
                 "a stop lets in-flight work finish and reports an interrupted run") {
  auto out = fresh_dir("stop");
  caf::scoped_actor self{*sys};
  auto plan = plan_with_fake(out, 50, true, caf::actor{self});
  plan.tasks = {bundled_task("1_MLP"), bundled_task("3_Softmax")};
  plan.cfg.run.parallel_tasks = 1; // the second task must never start
  auto sup = spawn_supervisor(*sys, std::move(plan));
  self->send(sup, run_atom::value);
  // The first evaluation is held by the stand-in: work is in flight now.
  caf::actor evaluator;
  self->receive([&](held_atom, const std::string& id) {
    CHECK(id.rfind("1_MLP#", 0) == 0);
    evaluator = caf::actor_cast<caf::actor>(self->current_sender());
  });
  self->send(sup, stop_atom::value);
  self->send(evaluator, release_atom::value);
  run_summary summary;
  bool got = false;
  while (!got)
    self->receive(
        [&](run_summary& s) {
          summary = std::move(s);
          got = true;
        },
        [&](held_atom, const std::string&) {}, // jobs queued before the stop
        [&](caf::error& err) { FAIL(caf::to_string(err)); });
  CHECK(summary.interrupted);
  REQUIRE(summary.tasks.size() == 2);
  CHECK(summary.tasks[0].stop_reason == "stopped");
  CHECK(summary.tasks[0].evaluations >= 1);
  CHECK_FALSE(summary.tasks[0].retimed); // a stopped run does not start re-timing
  CHECK(summary.tasks[1].stop_reason == "not started");
  CHECK(summary.tasks[1].queries == 0);
  self->send_exit(sup, caf::exit_reason::user_shutdown);
  // The archive was flushed before the answer: the held candidate's verdict is in it.
  CHECK(count_rows(out + "/archive.sqlite",
                   "SELECT COUNT(*) FROM candidates WHERE task = '1_MLP' AND status IS NOT NULL")
        == summary.tasks[0].evaluations);
}
