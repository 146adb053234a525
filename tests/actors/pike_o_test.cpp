// PIKE-O on its own: the strategy actor is spawned directly against a scripted supervisor (it
// answers queries with programs derived from the request and records every request), a stand-in
// dispatcher (a program marked `# broken` is incorrect, any other is correct with a speedup that
// depends on its code only) and an archive that counts what it is sent.

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "actors/strategy_pike_o.hpp"
#include "messages/error.hpp"
#include "tests/actors/fixture.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const std::string broken_marker = "\n# broken";

/// One query as the scripted supervisor saw it.
struct query_entry {
  prompt_kind kind = prompt_kind::optimize;
  std::string role;
  std::string code;
  program_note current;
  std::vector<std::string> inspirations;
  verdict_status last = verdict_status::runtime_error;
  std::string reply;
};

/// What the stand-ins saw, and how the supervisor answers.
struct recorder {
  std::mutex m;
  // Script.
  int64_t refuse_after = -1; ///< queries granted before the budget refuses (-1: never)
  int64_t broken_every = 0;  ///< every n-th fresh program is broken (0: none)
  bool fixer_repairs = true; ///< a fix removes the marker
  bool pad_replies = false;  ///< replies vary in length, so they spread over complexity cells
  // Observations.
  std::vector<query_entry> queries;
  int64_t fresh = 0;
  int64_t progress = 0;
  int64_t eval_jobs = 0;
  int64_t retimes = 0;
  int64_t archived = 0;
  int64_t archived_evaluated = 0;
};

using rec_ptr = std::shared_ptr<recorder>;

caf::behavior fake_supervisor(caf::event_based_actor* self, rec_ptr rec, caf::actor observer) {
  return {
      [rec](ask_atom, const std::string& role,
            const agent_request& req) -> caf::result<agent_reply> {
        std::lock_guard<std::mutex> lock{rec->m};
        auto n = static_cast<int64_t>(rec->queries.size());
        if (rec->refuse_after >= 0 && n >= rec->refuse_after)
          return make_error(ec::budget_exhausted, "the test's budget is spent");
        agent_reply reply;
        if (req.kind == prompt_kind::fix || req.kind == prompt_kind::fix_correctness) {
          reply.code = req.code;
          if (rec->fixer_repairs)
            for (auto at = reply.code.find(broken_marker); at != std::string::npos;
                 at = reply.code.find(broken_marker))
              reply.code.erase(at, broken_marker.size());
          reply.code += "\n# fix v" + std::to_string(n);
        } else {
          reply.code = req.code + "\n# v" + std::to_string(n);
          if (rec->pad_replies) { // the parent's padding replaced by a new one
            auto at = reply.code.find("\n#pad ");
            if (at != std::string::npos)
              reply.code.erase(at, reply.code.find('\n', at + 1) - at);
            reply.code += "\n#pad " + std::string(static_cast<size_t>((n * 389) % 1500), 'x');
          }
          ++rec->fresh;
          if (rec->broken_every > 0 && rec->fresh % rec->broken_every == 0)
            reply.code += broken_marker;
        }
        query_entry e;
        e.kind = req.kind;
        e.role = role;
        e.code = req.code;
        e.current = req.current;
        for (const auto& i : req.inspirations)
          e.inspirations.push_back(i.code);
        e.last = req.last.status;
        e.reply = reply.code;
        rec->queries.push_back(std::move(e));
        return reply;
      },
      [rec](progress_atom, const task_progress&) {
        std::lock_guard<std::mutex> lock{rec->m};
        ++rec->progress;
      },
      [self, observer](done_atom, const task_result& r) {
        self->send(observer, done_atom::value, r);
      },
  };
}

verdict judge(const eval_job& job) {
  if (job.code.find(broken_marker) == std::string::npos)
    return fake_verdict(job);
  verdict v;
  v.status = verdict_status::incorrect;
  v.reason = "output differs (broken on purpose)";
  return v;
}

double speedup_of(const std::string& code) {
  eval_job probe;
  probe.code = code;
  return judge(probe).speedup;
}

caf::behavior fake_dispatcher(caf::event_based_actor*, rec_ptr rec) {
  return {
      [rec](eval_atom, const eval_job& job) {
        std::lock_guard<std::mutex> lock{rec->m};
        ++rec->eval_jobs;
        return judge(job);
      },
      [rec](retime_atom, const retime_job& job) {
        {
          std::lock_guard<std::mutex> lock{rec->m};
          ++rec->retimes;
        }
        retime_result r;
        r.device = "cpu";
        r.reference = {1.1, 1.1, 1.1, 1.1, 10};
        for (const auto& code : job.codes) {
          double s = 0.9 * speedup_of(code);
          r.speedups.push_back(s);
          r.candidates.push_back({1.1 / s, 1.1 / s, 1.1 / s, 1.1 / s, 10});
        }
        return r;
      },
      [](facts_atom) {
        runner_facts f;
        f.device = "cpu";
        f.cpu_threads = 2;
        return f;
      },
      [](put_atom, int32_t, const evaluator_actor&) {},
      [](put_atom, const compiler_actor&) {},
  };
}

caf::behavior fake_archive(caf::event_based_actor* self, rec_ptr rec) {
  self->set_default_handler(caf::drop);
  return {
      [rec](put_atom, const candidate_record& c) {
        std::lock_guard<std::mutex> lock{rec->m};
        ++rec->archived;
        if (c.evaluated)
          ++rec->archived_evaluated;
      },
      [](flush_atom) { return ok_atom::value; },
  };
}

pike_o_settings small_settings() {
  pike_o_settings cfg;
  cfg.iterations = 30;
  cfg.islands = 2;
  cfg.population_size = 10;
  cfg.archive_size = 4;
  cfg.migration_interval = 10;
  cfg.parallel = 4;
  cfg.max_fix_attempts = 2;
  cfg.seed = 7;
  cfg.retime_rounds = 2;
  return cfg;
}

/// Runs one task to its end; `poke` gets the strategy right after it is spawned.
task_result run_pike_o(caf::actor_system& sys, const pike_o_settings& cfg, const rec_ptr& rec,
                       const std::function<void(strategy_actor)>& poke = {}) {
  caf::scoped_actor self{sys};
  auto sup = sys.spawn(fake_supervisor, rec, caf::actor_cast<caf::actor>(self));
  auto disp = sys.spawn(fake_dispatcher, rec);
  auto arch = sys.spawn(fake_archive, rec);
  auto strategy =
      sys.spawn(strategy_pike_o, bundled_task("1_MLP"), cfg, caf::actor_cast<supervisor_actor>(sup),
                caf::actor_cast<dispatcher_actor>(disp), caf::actor_cast<archive_actor>(arch));
  if (poke)
    poke(strategy);
  task_result out;
  bool got = false;
  self->receive(
      [&](done_atom, task_result& r) {
        out = std::move(r);
        got = true;
      },
      caf::after(std::chrono::seconds(30)) >> [] {});
  REQUIRE(got);
  // Everything the strategy archived was sent before its result: a flush behind it sees it all.
  self->request(arch, std::chrono::seconds(10), flush_atom::value)
      .receive([](ok_atom) {}, [](caf::error& err) { FAIL(caf::to_string(err)); });
  for (const auto& a : {sup, disp, arch})
    self->send_exit(a, caf::exit_reason::user_shutdown);
  return out;
}

bool has(const std::string& code, const std::string& what) {
  return code.find(what) != std::string::npos;
}

int64_t count_kind(const recorder& rec, prompt_kind k) {
  return std::count_if(rec.queries.begin(), rec.queries.end(),
                       [k](const query_entry& e) { return e.kind == k; });
}

} // namespace

TEST_CASE("pike_o_cell bins code length and edit distance", "[pike-o]") {
  pike_o_settings cfg; // 10 bins, complexity then diversity
  std::string ref(100, 'x');
  SECTION("complexity covers [0, 2 x the reference's length)") {
    CHECK(pike_o_cell(cfg, "", 100, {}) == std::vector<int32_t>{0, 0});
    CHECK(pike_o_cell(cfg, std::string(19, 'a'), 100, {})[0] == 0);
    CHECK(pike_o_cell(cfg, std::string(20, 'a'), 100, {})[0] == 1);
    CHECK(pike_o_cell(cfg, ref, 100, {})[0] == 5);
    CHECK(pike_o_cell(cfg, std::string(199, 'a'), 100, {})[0] == 9);
    CHECK(pike_o_cell(cfg, std::string(5000, 'a'), 100, {})[0] == 9);
    CHECK(pike_o_cell(cfg, "abc", 0, {})[0] == 9); // no reference length: clamped, no crash
  }
  SECTION("diversity is the mean normalised edit distance to the neighbours") {
    std::string a = "aaaaaaaaaa", half = "aaaaabbbbb", other = "bbbbbbbbbb";
    CHECK(pike_o_cell(cfg, a, 100, {&a})[1] == 0);
    CHECK(pike_o_cell(cfg, a, 100, {&half})[1] == 5);
    CHECK(pike_o_cell(cfg, a, 100, {&other})[1] == 9); // 1.0 lands in the last bin
    CHECK(pike_o_cell(cfg, a, 100, {&a, &other})[1] == 5);
    CHECK(pike_o_cell(cfg, a, 100, {&a, nullptr, &other})[1] == 5);
    std::string empty;
    CHECK(pike_o_cell(cfg, empty, 100, {&empty})[1] == 0);
    CHECK(pike_o_cell(cfg, "kitten", 100, {})[1] == 0);
    std::string s1 = "kitten", s2 = "sitting"; // distance 3 over 7
    CHECK(pike_o_cell(cfg, s1, 100, {&s2})[1] == 4);
  }
  SECTION("only the first 2000 characters are compared") {
    std::string x = std::string(2000, 'a') + std::string(3000, 'b');
    std::string y = std::string(2000, 'a') + std::string(3000, 'c');
    CHECK(pike_o_cell(cfg, x, 100, {&y})[1] == 0);
  }
  SECTION("the dimensions and bins follow the settings") {
    cfg.feature_dimensions = {"diversity"};
    cfg.feature_bins = 4;
    std::string a = "aaaa", b = "abbb";
    CHECK(pike_o_cell(cfg, a, 100, {&b}) == std::vector<int32_t>{3});
    cfg.feature_dimensions = {"complexity", "diversity", "unknown"};
    CHECK(pike_o_cell(cfg, a, 2, {&b}) == std::vector<int32_t>{3, 3, 0});
  }
}

TEST_CASE_METHOD(actor_fixture, "pike-o runs its iterations over two islands", "[pike-o]") {
  auto rec = std::make_shared<recorder>();
  auto cfg = small_settings();
  auto r = run_pike_o(*sys, cfg, rec);
  std::lock_guard<std::mutex> lock{rec->m};
  CHECK(r.task == "1_MLP");
  CHECK(r.stop_reason == "iterations");
  CHECK(r.evaluations == 30);
  CHECK(r.correct == 30);
  CHECK(r.best_speedup >= 1.0);
  CHECK_FALSE(r.best_code.empty());
  CHECK(r.retimed);
  CHECK(r.search_speedup >= 1.0);
  CHECK(rec->retimes == 1);
  CHECK(rec->eval_jobs == 30);
  CHECK(rec->archived == 60); // each candidate, then its verdict
  CHECK(rec->archived_evaluated == 30);
  CHECK(rec->progress == 30);
  REQUIRE(rec->queries.size() == 30);
  auto source = bundled_task("1_MLP").source;
  for (const auto& q : rec->queries) {
    CHECK(q.kind == prompt_kind::crossover);
    CHECK(q.role == "optimizer");
    CHECK(q.current.code == q.code);
    CHECK(static_cast<int64_t>(q.inspirations.size()) <= cfg.top_programs + cfg.inspirations);
    for (const auto& i : q.inspirations) {
      CHECK(i != q.code); // the parent is not its own inspiration
      CHECK(i != source); // nor is the reference
    }
    if (q.code != source) // a correct parent carries its measurements
      CHECK(q.current.speedup == Approx(speedup_of(q.code)));
  }
  // Once any island has a correct program, some crossover prompt shows other programs.
  CHECK(std::any_of(rec->queries.begin(), rec->queries.end(),
                    [](const query_entry& q) { return !q.inspirations.empty(); }));
}

TEST_CASE_METHOD(actor_fixture, "the mutation template sends improve with the parent alone",
                 "[pike-o]") {
  auto rec = std::make_shared<recorder>();
  auto cfg = small_settings();
  cfg.template_kind = "mutation";
  cfg.iterations = 8;
  auto r = run_pike_o(*sys, cfg, rec);
  std::lock_guard<std::mutex> lock{rec->m};
  CHECK(r.stop_reason == "iterations");
  REQUIRE(rec->queries.size() == 8);
  for (const auto& q : rec->queries) {
    CHECK(q.kind == prompt_kind::improve);
    CHECK(q.inspirations.empty());
  }
}

TEST_CASE_METHOD(actor_fixture, "exploitation draws parents from the best archive_size programs",
                 "[pike-o]") {
  auto rec = std::make_shared<recorder>();
  auto cfg = small_settings();
  cfg.islands = 1;
  cfg.parallel = 1;
  cfg.exploration_ratio = 0;
  cfg.exploitation_ratio = 1;
  cfg.archive_size = 4;
  cfg.population_size = 6; // the cap removes programs, never elites
  auto r = run_pike_o(*sys, cfg, rec);
  std::lock_guard<std::mutex> lock{rec->m};
  CHECK(r.stop_reason == "iterations");
  auto source = bundled_task("1_MLP").source;
  REQUIRE(rec->queries.size() == 30);
  CHECK(rec->queries[0].code == source);
  std::set<std::string> parents;
  for (size_t k = 1; k < rec->queries.size(); ++k) {
    const auto& parent = rec->queries[k].code;
    parents.insert(parent);
    std::vector<double> earlier;
    bool known = false;
    for (size_t j = 0; j < k; ++j) {
      earlier.push_back(speedup_of(rec->queries[j].reply));
      known = known || rec->queries[j].reply == parent;
    }
    REQUIRE(known); // the reference is no parent once a correct program exists
    auto ps = speedup_of(parent);
    auto better = std::count_if(earlier.begin(), earlier.end(), [ps](double s) { return s > ps; });
    CHECK(better < cfg.archive_size);
  }
  CHECK(parents.size() > 1);
}

TEST_CASE_METHOD(actor_fixture, "the error fixer repairs a broken child inside its iteration",
                 "[pike-o]") {
  auto rec = std::make_shared<recorder>();
  rec->broken_every = 3;
  auto cfg = small_settings();
  cfg.iterations = 20;
  cfg.parallel = 2;
  auto r = run_pike_o(*sys, cfg, rec);
  std::lock_guard<std::mutex> lock{rec->m};
  CHECK(r.stop_reason == "iterations");
  // The broken programs give wrong outputs: PIKE's correctness-fix prompt, never the other.
  CHECK(count_kind(*rec, prompt_kind::fix) == 0);
  auto fixes = count_kind(*rec, prompt_kind::fix_correctness);
  auto broken = rec->fresh / 3;
  CHECK(rec->fresh == 20);
  CHECK(fixes == broken); // each repaired at the first attempt
  CHECK(r.evaluations == 20 + fixes);
  CHECK(r.correct == 20);
  std::set<std::string> repaired;
  for (const auto& q : rec->queries) {
    if (q.kind == prompt_kind::fix_correctness) {
      CHECK(q.role == "error_fixer");
      CHECK(has(q.code, broken_marker));
      CHECK(q.last == verdict_status::incorrect);
      repaired.insert(q.reply);
    } else {
      CHECK_FALSE(has(q.code, broken_marker)); // failed programs are never parents
    }
  }
  // A repaired child joined the population: it shows up as a parent or an inspiration.
  bool used = false;
  for (const auto& q : rec->queries) {
    used = used || repaired.count(q.code) > 0;
    for (const auto& i : q.inspirations)
      used = used || repaired.count(i) > 0;
  }
  CHECK(used);
}

TEST_CASE_METHOD(actor_fixture, "a fixer that cannot repair gets max_fix_attempts tries",
                 "[pike-o]") {
  auto rec = std::make_shared<recorder>();
  rec->broken_every = 2;
  rec->fixer_repairs = false;
  auto cfg = small_settings();
  cfg.iterations = 10;
  cfg.parallel = 1;
  cfg.max_fix_attempts = 3;
  auto r = run_pike_o(*sys, cfg, rec);
  std::lock_guard<std::mutex> lock{rec->m};
  CHECK(r.stop_reason == "iterations");
  CHECK(rec->fresh == 10);
  CHECK(count_kind(*rec, prompt_kind::fix_correctness) == 5 * 3);
  CHECK(r.evaluations == 10 + 15);
  CHECK(r.correct == 5);
  for (const auto& q : rec->queries)
    if (q.kind != prompt_kind::fix_correctness)
      CHECK_FALSE(has(q.code, broken_marker));
}

TEST_CASE_METHOD(actor_fixture, "a refused query ends pike-o with budget and re-timed winners",
                 "[pike-o]") {
  auto rec = std::make_shared<recorder>();
  rec->refuse_after = 7;
  auto cfg = small_settings();
  cfg.iterations = 100;
  cfg.parallel = 3;
  auto r = run_pike_o(*sys, cfg, rec);
  std::lock_guard<std::mutex> lock{rec->m};
  CHECK(r.stop_reason == "budget");
  CHECK(r.evaluations == 7);
  CHECK(r.retimed);
  CHECK(rec->queries.size() == 7);
}

TEST_CASE_METHOD(actor_fixture, "evaluations_limit, wall_s and a stop end pike-o", "[pike-o]") {
  auto rec = std::make_shared<recorder>();
  auto cfg = small_settings();
  SECTION("evaluations") {
    cfg.iterations = 100;
    cfg.evaluations_limit = 5;
    auto r = run_pike_o(*sys, cfg, rec);
    CHECK(r.stop_reason == "budget: evaluations");
    CHECK(r.evaluations == 5);
    CHECK(r.retimed);
  }
  SECTION("wall clock") {
    cfg.iterations = 1000000000;
    cfg.wall_s = 1; // long enough for a first winner on a busy machine
    auto t0 = std::chrono::steady_clock::now();
    auto r = run_pike_o(*sys, cfg, rec);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(r.stop_reason == "wall clock");
    CHECK(r.evaluations > 0);
    CHECK(r.retimed);
    CHECK(took < 30);
  }
  SECTION("a budget stop from outside") {
    cfg.iterations = 1000000000;
    auto r = run_pike_o(*sys, cfg, rec, [](strategy_actor s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      caf::anon_send(s, stop_atom::value, std::string{"budget: dollars"});
    });
    CHECK(r.stop_reason == "budget: dollars");
    CHECK(r.retimed);
  }
  SECTION("a plain stop does not re-time") {
    cfg.iterations = 1000000000;
    auto r = run_pike_o(*sys, cfg, rec, [](strategy_actor s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      caf::anon_send(s, stop_atom::value);
    });
    CHECK(r.stop_reason == "stopped");
    CHECK_FALSE(r.retimed);
    std::lock_guard<std::mutex> lock{rec->m};
    CHECK(rec->retimes == 0);
  }
}

TEST_CASE_METHOD(actor_fixture, "pike-o with the same seed asks the same questions", "[pike-o]") {
  auto cfg = small_settings();
  cfg.islands = 3;
  cfg.parallel = 1;
  cfg.iterations = 25;
  cfg.migration_interval = 5;
  auto once = [&](uint64_t seed) {
    auto rec = std::make_shared<recorder>();
    rec->broken_every = 4;
    cfg.seed = seed;
    run_pike_o(*sys, cfg, rec);
    std::lock_guard<std::mutex> lock{rec->m};
    std::vector<std::tuple<prompt_kind, std::string, std::vector<std::string>>> out;
    for (const auto& q : rec->queries)
      out.emplace_back(q.kind, q.code, q.inspirations);
    return out;
  };
  auto a = once(11);
  auto b = once(11);
  auto c = once(12);
  REQUIRE(a.size() > 25); // fixes included
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE_METHOD(actor_fixture, "migration brings programs born on island 0 to island 1",
                 "[pike-o]") {
  // One iteration at a time, alternating islands (0, 1, 0, ...); parents come from the
  // iteration's own island and prompts show only that island's top programs, so an island-0
  // program can only reach an island-1 prompt by migrating.
  auto cfg = small_settings();
  cfg.islands = 2;
  cfg.parallel = 1;
  cfg.iterations = 30;
  cfg.population_size = 40;
  cfg.exploration_ratio = 1;
  cfg.exploitation_ratio = 0;
  cfg.inspirations = 0;
  cfg.top_programs = 3;
  auto crossings = [&](int64_t interval) {
    auto rec = std::make_shared<recorder>();
    cfg.migration_interval = interval;
    run_pike_o(*sys, cfg, rec);
    std::lock_guard<std::mutex> lock{rec->m};
    REQUIRE(rec->queries.size() == 30);
    std::set<std::string> island0;
    std::vector<size_t> out; // island-1 iterations whose prompt shows an island-0 program
    for (size_t k = 0; k < rec->queries.size(); ++k) {
      const auto& q = rec->queries[k];
      if (k % 2 == 0) {
        island0.insert(q.reply);
        continue;
      }
      bool crossed = island0.count(q.code) > 0;
      for (const auto& i : q.inspirations)
        crossed = crossed || island0.count(i) > 0;
      if (crossed)
        out.push_back(k);
    }
    return out;
  };
  CHECK(crossings(1000).empty());
  auto with = crossings(5);
  REQUIRE_FALSE(with.empty());
  CHECK(with.front() >= 5); // not before the first migration
}

TEST_CASE_METHOD(actor_fixture,
                 "crossover inspirations beyond the top programs come from the nearest other "
                 "MAP-Elites cells, one per cell",
                 "[pike-o]") {
  auto rec = std::make_shared<recorder>();
  rec->pad_replies = true;
  auto cfg = small_settings();
  cfg.islands = 1;
  cfg.parallel = 1; // each query sees every earlier program judged: the test can rebuild the grid
  cfg.iterations = 40;
  cfg.population_size = 1000;
  cfg.feature_dimensions = {"complexity"};
  cfg.feature_bins = 20;
  cfg.top_programs = 1;
  cfg.inspirations = 2;
  auto r = run_pike_o(*sys, cfg, rec);
  std::lock_guard<std::mutex> lock{rec->m};
  CHECK(r.correct == 40);
  const auto source = bundled_task("1_MLP").source;
  auto cell_of = [&](const std::string& code) {
    return pike_o_cell(cfg, code, source.size(), {}).at(0);
  };
  int64_t diverse_shown = 0;
  int64_t left_out_checked = 0;
  for (size_t k = 0; k < rec->queries.size(); ++k) {
    const auto& q = rec->queries[k];
    // The grid as the strategy had it: the best of every earlier reply per cell.
    std::map<int32_t, double> best;
    for (size_t j = 0; j < k; ++j) {
      auto c = cell_of(rec->queries[j].reply);
      best[c] = std::max(best[c], speedup_of(rec->queries[j].reply));
    }
    if (q.inspirations.size() <= 1)
      continue;
    std::set<int32_t> excluded{cell_of(q.code), cell_of(q.inspirations[0])};
    std::set<int32_t> used;
    int32_t farthest = -1;
    size_t i = 1;
    // Holders of distinct other cells first ...
    for (; i < q.inspirations.size(); ++i) {
      auto c = cell_of(q.inspirations[i]);
      if (excluded.count(c) > 0 || used.count(c) > 0
          || speedup_of(q.inspirations[i]) != Approx(best[c]))
        break;
      used.insert(c);
      farthest = std::max(farthest, std::abs(c - cell_of(q.code)));
      ++diverse_shown;
    }
    // ... nearest first: no occupied cell left out was nearer to the parent than one shown ...
    for (const auto& [c, s] : best)
      if (excluded.count(c) == 0 && used.count(c) == 0) {
        CHECK(std::abs(c - cell_of(q.code)) >= farthest);
        ++left_out_checked;
      }
    // ... and only when none is left, others from the population.
    if (i < q.inspirations.size()) {
      size_t left = 0;
      for (const auto& [c, s] : best)
        left += excluded.count(c) == 0 && used.count(c) == 0 ? 1 : 0;
      CHECK(left == 0);
    }
  }
  CHECK(diverse_shown > 20);
  CHECK(left_out_checked > 20);
}
