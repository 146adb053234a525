// PIKE-B's own rules (idea resizing, parent split) and the budgets that end a task's search:
// evaluations, a task's wall clock, the run's wall clock, and a stall.

#include <fstream>

#include <catch2/catch.hpp>

#include "actors/agent.hpp"
#include "actors/sqlite.hpp"
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
  plan.cfg.budget.wall_s_per_task = 1; // long enough for a first evaluation on a busy machine
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

TEST_CASE("a weighted role picks its profile from the query's seed alone") {
  std::vector<double> w = {0.8, 0.2};
  int strong = 0;
  for (uint64_t seed = 0; seed < 10000; ++seed) {
    auto i = pick_profile(w, seed, "optimizer");
    CHECK(i == pick_profile(w, seed, "optimizer")); // the same seed, the same profile
    strong += i == 1 ? 1 : 0;
  }
  CHECK(strong > 1700);
  CHECK(strong < 2300);
  CHECK(pick_profile({1.0}, 42, "x") == 0);
}

TEST_CASE_METHOD(actor_fixture,
                 "an ensemble role's queries go to both profiles; the archive says which") {
  auto out = fresh_dir("ensemble");
  auto plan = instant_plan(out, 40);
  plan.tasks = {bundled_task("1_MLP")};
  llm_profile_config strong;
  strong.name = "strong";
  strong.provider = "rules";
  plan.cfg.llm["strong"] = strong;
  auto& o = plan.cfg.agents.at("optimizer");
  o.llms = {"rules", "strong"};
  o.weights = {1.0, 1.0};
  auto s = run(*sys, std::move(plan));
  REQUIRE(s.tasks.size() == 1);
  sqlite::database db{out + "/archive.sqlite", sqlite::open_mode::read_only};
  auto st = db.prepare("SELECT COUNT(DISTINCT profile) FROM llm_calls WHERE role = 'optimizer'");
  REQUIRE(st.step());
  CHECK(st.column_int64(0) == 2);
}

TEST_CASE_METHOD(actor_fixture,
                 "with the rules provider and a fixed seed two runs send the same prompts") {
  auto prompts_of = [&](const std::string& name) {
    auto out = fresh_dir(name);
    auto plan = instant_plan(out, 25);
    plan.tasks = {bundled_task("2_ConvBnRelu")};
    plan.cfg.strategy.parallel_candidates = 1; // one ordering of events
    plan.cfg.strategy.phases = 10000;
    plan.cfg.run.seed = 11;
    run(*sys, std::move(plan));
    sqlite::database db{out + "/archive.sqlite", sqlite::open_mode::read_only};
    auto st = db.prepare("SELECT role, kind, prompt FROM llm_calls ORDER BY id");
    std::vector<std::string> out_prompts;
    while (st.step())
      out_prompts.push_back(st.column_text(0) + "|" + st.column_text(1) + "|" + st.column_text(2));
    return out_prompts;
  };
  auto a = prompts_of("determinism-a");
  auto b = prompts_of("determinism-b");
  REQUIRE(a.size() == 25);
  CHECK(a == b);
}

TEST_CASE_METHOD(actor_fixture,
                 "a reviewer role declared in the config reads every program first") {
  auto out = fresh_dir("reviewer");
  auto plan = instant_plan(out, 20);
  plan.tasks = {bundled_task("1_MLP")};
  agent_config reviewer;
  reviewer.name = "reviewer";
  reviewer.llm = "rules";
  plan.cfg.agents["reviewer"] = reviewer;
  plan.cfg.strategy.reviewer = "reviewer";
  plan.cfg.strategy.phases = 10000;
  auto s = run(*sys, std::move(plan));
  REQUIRE(s.tasks.size() == 1);
  CHECK(s.tasks[0].queries == 20); // reviews count against the budget
  sqlite::database db{out + "/archive.sqlite", sqlite::open_mode::read_only};
  auto count = [&](const std::string& sql) {
    auto st = db.prepare(sql);
    REQUIRE(st.step());
    return st.column_int64(0);
  };
  auto reviews =
      count("SELECT COUNT(*) FROM llm_calls WHERE role = 'reviewer' AND kind = 'review'");
  auto programs =
      count("SELECT COUNT(*) FROM llm_calls WHERE role <> 'reviewer' AND kind <> 'brainstorm'");
  CHECK(reviews > 0);
  CHECK(reviews >= programs - 1); // every program but perhaps the last, refused by the budget
}

TEST_CASE_METHOD(actor_fixture, "kind = pike-o runs PIKE-O under the supervisor's budgets") {
  auto plan = instant_plan(fresh_dir("pike-o-run"), 30);
  plan.tasks = {bundled_task("1_MLP"), bundled_task("3_Softmax")};
  plan.cfg.strategy.kind = "pike-o";
  plan.cfg.strategy.islands = 2;
  plan.cfg.strategy.iterations = 1000;
  plan.cfg.strategy.migration_interval = 5;
  auto s = run(*sys, std::move(plan));
  CHECK(s.strategy == "pike-o");
  REQUIRE(s.tasks.size() == 2);
  for (auto& t : s.tasks) {
    CHECK(t.queries == 30);
    CHECK(t.stop_reason == "budget");
    CHECK(t.evaluations > 0);
    CHECK(t.best_speedup >= 1.0);
  }
}

TEST_CASE_METHOD(actor_fixture, "a template given for one prompt kind replaces only that kind's") {
  auto out = fresh_dir("kind-template");
  auto path = out + "/improve.txt";
  {
    std::ofstream f{path};
    f << "CUSTOM IMPROVE PROMPT\n### Reference program\n```python\n{{reference}}\n```\n"
         "### Current program\n```python\n{{code}}\n```\n";
  }
  auto plan = instant_plan(out, 20);
  plan.tasks = {bundled_task("1_MLP")};
  plan.cfg.strategy.phases = 10000;
  plan.cfg.agents.at("optimizer").template_paths["improve"] = path;
  for (auto& [name, role] : plan.cfg.agents)
    if (auto texts = load_role_templates(role); !texts.empty())
      plan.templates[name] = texts;
  run(*sys, std::move(plan));
  sqlite::database db{out + "/archive.sqlite", sqlite::open_mode::read_only};
  auto count = [&](const std::string& sql) {
    auto st = db.prepare(sql);
    REQUIRE(st.step());
    return st.column_int64(0);
  };
  CHECK(count("SELECT COUNT(*) FROM llm_calls WHERE kind = 'improve'") > 0);
  CHECK(count("SELECT COUNT(*) FROM llm_calls WHERE kind = 'improve' AND prompt NOT LIKE "
              "'CUSTOM IMPROVE PROMPT%'")
        == 0);
  CHECK(count("SELECT COUNT(*) FROM llm_calls WHERE kind = 'optimize' AND prompt LIKE "
              "'CUSTOM%'")
        == 0);
}

TEST_CASE_METHOD(actor_fixture, "a role's parser decides what its replies yield") {
  auto run_with = [&](const std::string& name, const std::string& parser) {
    auto out = fresh_dir(name);
    auto plan = instant_plan(out, 8);
    plan.tasks = {bundled_task("1_MLP")};
    plan.cfg.agents.at("optimizer").parser = parser;
    plan.cfg.agents.at("error_fixer").parser = parser;
    return run(*sys, std::move(plan));
  };
  // "text": the optimizer's answers are read as comments, never as programs.
  auto text = run_with("parser-text", "text");
  REQUIRE(text.tasks.size() == 1);
  CHECK(text.tasks[0].correct == 0);
  CHECK(text.tasks[0].evaluations > 0); // judged as replies without a program
  auto code = run_with("parser-code", "code");
  REQUIRE(code.tasks.size() == 1);
  CHECK(code.tasks[0].correct > 0);
}

namespace {

/// Fails every evaluation, alternately with a build error and with wrong outputs.
caf::behavior failing_evaluator(caf::stateful_actor<int64_t>* self) {
  return {
      [self](eval_atom, const eval_job&) {
        verdict v;
        v.device = "cpu";
        if (++self->state % 2 == 1) {
          v.status = verdict_status::compile_error;
          v.reason = "nvcc: error: identifier \"blockIdx\" is undefined";
          v.stderr_tail = "main.cu(3): error";
        } else {
          v.status = verdict_status::incorrect;
          v.reason = "output 0 differs";
          v.max_abs_diff = {0.75};
          v.max_rel_diff = {0.5};
        }
        return v;
      },
      [](retime_atom, const retime_job&) { return retime_result{}; },
      [](facts_atom) {
        runner_facts f;
        f.device = "cpu";
        f.cpu_threads = 2;
        return f;
      },
  };
}

} // namespace

TEST_CASE_METHOD(actor_fixture, "build errors and wrong outputs get PIKE's two fix prompts") {
  auto out = fresh_dir("fix-kinds");
  auto plan = small_plan(out, 12);
  plan.tasks = {bundled_task("1_MLP")};
  plan.cfg.agents.at("error_fixer").max_attempts = 2;
  plan.make_evaluator = [](caf::actor_system& sys, size_t) {
    return caf::actor_cast<evaluator_actor>(sys.spawn(failing_evaluator));
  };
  run(*sys, std::move(plan));
  sqlite::database db{out + "/archive.sqlite", sqlite::open_mode::read_only};
  auto count = [&](const std::string& sql) {
    auto st = db.prepare(sql);
    REQUIRE(st.step());
    return st.column_int64(0);
  };
  CHECK(count("SELECT COUNT(*) FROM llm_calls WHERE kind = 'fix'") > 0);
  CHECK(count("SELECT COUNT(*) FROM llm_calls WHERE kind = 'fix_correctness'") > 0);
  // The build error's prompt carries the tails; the wrong outputs' carries the differences.
  CHECK(count("SELECT COUNT(*) FROM llm_calls WHERE kind = 'fix' AND (prompt NOT LIKE "
              "'%status: compile_error%' OR prompt NOT LIKE '%main.cu(3): error%' OR prompt "
              "LIKE '%max abs diff%')")
        == 0);
  CHECK(count("SELECT COUNT(*) FROM llm_calls WHERE kind = 'fix_correctness' AND (prompt NOT "
              "LIKE '%status: incorrect%' OR prompt NOT LIKE '%output 0: max abs diff 0.75%')")
        == 0);
}

TEST_CASE("a role's fix template also serves wrong outputs unless they have their own") {
  auto dir = fresh_dir("fix-template");
  auto fix = dir + "/fix.txt";
  auto corr = dir + "/corr.txt";
  std::ofstream{fix} << "MY FIX {{code}}";
  std::ofstream{corr} << "MY CORRECTNESS FIX {{diffs}}";
  agent_config role;
  role.name = "error_fixer";
  role.template_paths["fix"] = fix;
  auto texts = load_role_templates(role);
  CHECK(texts.at("fix_correctness") == "MY FIX {{code}}");
  role.template_paths["fix_correctness"] = corr;
  texts = load_role_templates(role);
  CHECK(texts.at("fix") == "MY FIX {{code}}");
  CHECK(texts.at("fix_correctness") == "MY CORRECTNESS FIX {{diffs}}");
}
