// The archive actor against real SQLite files: every record lands with its fields, a verdict
// joins its candidate, the file is WAL and closes cleanly, failures are loud but not fatal.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "actors/archive.hpp"
#include "actors/sqlite.hpp"
#include "messages/register.hpp"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

constexpr auto reply_timeout = std::chrono::seconds(30);

/// A fresh database path of its own for each test: the folder exists, old files are gone.
std::string fresh_path(const std::string& name) {
  auto dir = fs::path{KILN_TEST_TMP} / "archive";
  fs::create_directories(dir);
  auto file = dir / (name + ".sqlite");
  for (const char* suffix : {"", "-wal", "-shm"})
    fs::remove(file.string() + suffix);
  return file.string();
}

caf::actor_system_config& configure(caf::actor_system_config& cfg) {
  add_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  return cfg;
}

/// An actor system with a blocking actor that sends the events and waits for replies.
struct archive_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{configure(cfg)};
  caf::scoped_actor self{sys};

  /// Returns once everything sent before is committed.
  void flush(const archive_actor& a) {
    bool ok = false;
    self->request(a, reply_timeout, flush_atom::value)
        .receive([&](ok_atom) { ok = true; },
                 [&](caf::error& err) { FAIL("flush failed: " << sys.render(err)); });
    REQUIRE(ok);
  }

  /// Stops the archive as a shutdown does and waits until it is gone.
  void stop(const archive_actor& a) {
    self->monitor(a);
    self->send_exit(a, caf::exit_reason::user_shutdown);
    bool down = false;
    self->receive([&](const caf::down_msg&) { down = true; },
                  caf::after(reply_timeout) >> [] { FAIL("the archive did not stop"); });
    REQUIRE(down);
  }
};

int64_t count_rows(sqlite::database& db, const std::string& table) {
  auto st = db.prepare("SELECT count(*) FROM " + table);
  REQUIRE(st.step());
  return st.column_int64(0);
}

llm_call_record sample_call(int i = 0) {
  llm_call_record r;
  r.request.task = "1_MLP";
  r.request.role = "optimizer";
  r.request.kind = prompt_kind::fix;
  r.request.system = "you are fast";
  r.request.prompt = "make it faster #" + std::to_string(i);
  r.reply.text = "```python\nclass ModelNew: pass\n```";
  r.reply.profile = "main";
  r.reply.model = "m-large";
  r.reply.input_tokens = 1200;
  r.reply.output_tokens = 340;
  r.reply.reasoning_tokens = 56;
  r.reply.cost_usd = 0.0125;
  r.reply.latency_ms = 812.5;
  return r;
}

candidate_record sample_candidate() {
  candidate_record c;
  c.task = "1_MLP";
  c.seq = 7;
  c.parent = 3;
  c.role = "error_fixer";
  c.phase = 2;
  c.attempt = 1;
  c.idea = "fuse the two linears";
  c.code = "class ModelNew(nn.Module): ...";
  return c;
}

verdict sample_correct_verdict() {
  verdict v;
  v.status = verdict_status::correct;
  v.reason = "correct, 1.50x";
  v.code = "ok";
  v.stdout_tail = "out";
  v.stderr_tail = "err";
  v.max_abs_diff = {0.001, 0.5};
  v.max_rel_diff = {0.002};
  v.candidate = timing_stats{2.0, 1.8, 2.4, 2.1, 120};
  v.reference = timing_stats{3.0, 2.9, 3.3, 3.05, 80};
  v.speedup = 1.5;
  v.wall_ms = 4321;
  v.device = "cuda:1";
  return v;
}

} // namespace

TEST_CASE_METHOD(archive_fixture, "an LLM call lands with every field", "[archive]") {
  auto path = fresh_path("llm_call");
  auto a = spawn_archive(sys, path);
  auto failed = sample_call();
  failed.error = "timeout after 600 s";
  self->send(a, put_atom::value, sample_call());
  self->send(a, put_atom::value, failed);
  flush(a);

  sqlite::database db{path, sqlite::open_mode::read_only};
  auto st = db.prepare("SELECT ts, task, role, kind, profile, model, prompt, system, reply, "
                       "input_tokens, output_tokens, reasoning_tokens, cost_usd, latency_ms, "
                       "error FROM llm_calls ORDER BY id");
  REQUIRE(st.step());
  CHECK(st.column_double(0) > 1.6e9);
  CHECK(st.column_text(1) == "1_MLP");
  CHECK(st.column_text(2) == "optimizer");
  CHECK(st.column_text(3) == "fix");
  CHECK(st.column_text(4) == "main");
  CHECK(st.column_text(5) == "m-large");
  CHECK(st.column_text(6) == "make it faster #0");
  CHECK(st.column_text(7) == "you are fast");
  CHECK(st.column_text(8) == "```python\nclass ModelNew: pass\n```");
  CHECK(st.column_int64(9) == 1200);
  CHECK(st.column_int64(10) == 340);
  CHECK(st.column_int64(11) == 56);
  CHECK(st.column_double(12) == Approx(0.0125));
  CHECK(st.column_double(13) == Approx(812.5));
  CHECK(st.column_is_null(14));
  REQUIRE(st.step());
  CHECK(st.column_text(14) == "timeout after 600 s");
  CHECK_FALSE(st.step());
}

TEST_CASE_METHOD(archive_fixture, "a candidate and then its verdict make one row with both",
                 "[archive]") {
  auto path = fresh_path("candidate_then_verdict");
  auto a = spawn_archive(sys, path);
  auto c = sample_candidate();
  self->send(a, put_atom::value, c);
  flush(a);
  {
    sqlite::database db{path, sqlite::open_mode::read_only};
    auto st = db.prepare("SELECT status, evaluated_ts, parent FROM candidates");
    REQUIRE(st.step());
    CHECK(st.column_is_null(0)); // not evaluated yet
    CHECK(st.column_is_null(1));
    CHECK(st.column_int64(2) == 3);
  }
  c.evaluated = true;
  c.result = sample_correct_verdict();
  self->send(a, put_atom::value, c);
  flush(a);

  sqlite::database db{path, sqlite::open_mode::read_only};
  CHECK(count_rows(db, "candidates") == 1);
  auto st = db.prepare("SELECT task, seq, parent, role, phase, attempt, idea, code, created_ts, "
                       "status, reason, speedup, runtime_ms, reference_ms, p10_ms, p90_ms, n, "
                       "max_abs_diff, max_rel_diff, stdout_tail, stderr_tail, eval_wall_ms, "
                       "device, evaluated_ts, verdict_code FROM candidates");
  REQUIRE(st.step());
  CHECK(st.column_text(0) == "1_MLP");
  CHECK(st.column_int64(1) == 7);
  CHECK(st.column_int64(2) == 3);
  CHECK(st.column_text(3) == "error_fixer");
  CHECK(st.column_int64(4) == 2);
  CHECK(st.column_int64(5) == 1);
  CHECK(st.column_text(6) == "fuse the two linears");
  CHECK(st.column_text(7) == "class ModelNew(nn.Module): ...");
  CHECK(st.column_double(8) > 1.6e9);
  CHECK(st.column_text(9) == "correct");
  CHECK(st.column_text(10) == "correct, 1.50x");
  CHECK(st.column_double(11) == Approx(1.5));
  CHECK(st.column_double(12) == Approx(2.0));
  CHECK(st.column_double(13) == Approx(3.0));
  CHECK(st.column_double(14) == Approx(1.8));
  CHECK(st.column_double(15) == Approx(2.4));
  CHECK(st.column_int64(16) == 120);
  CHECK(st.column_text(17) == "[0.001,0.5]");
  CHECK(st.column_text(18) == "[0.002]");
  CHECK(st.column_text(19) == "out");
  CHECK(st.column_text(20) == "err");
  CHECK(st.column_double(21) == Approx(4321));
  CHECK(st.column_text(22) == "cuda:1");
  CHECK(st.column_double(23) >= st.column_double(8));
  CHECK(st.column_text(24) == "ok");
}

TEST_CASE_METHOD(archive_fixture, "an archive from before verdict codes gets the column",
                 "[archive]") {
  auto path = fresh_path("old_schema");
  {
    // The candidates table as kiln wrote it before codes existed.
    sqlite::database old{path};
    old.exec("CREATE TABLE candidates (task TEXT NOT NULL, seq INTEGER NOT NULL, parent INTEGER, "
             "role TEXT NOT NULL, phase INTEGER NOT NULL, attempt INTEGER NOT NULL, idea TEXT NOT "
             "NULL, code TEXT NOT NULL, created_ts REAL NOT NULL, status TEXT, reason TEXT, "
             "speedup REAL, runtime_ms REAL, reference_ms REAL, p10_ms REAL, p90_ms REAL, n "
             "INTEGER, max_abs_diff TEXT, max_rel_diff TEXT, stdout_tail TEXT, stderr_tail TEXT, "
             "eval_wall_ms REAL, device TEXT, evaluated_ts REAL, PRIMARY KEY (task, seq))");
    old.exec("INSERT INTO candidates (task, seq, role, phase, attempt, idea, code, created_ts, "
             "status) VALUES ('1_MLP', 1, 'optimizer', 1, 0, '', 'x', 1.0, 'correct')");
  }
  auto a = spawn_archive(sys, path);
  auto c = sample_candidate();
  c.evaluated = true;
  c.result = sample_correct_verdict();
  self->send(a, put_atom::value, c);
  flush(a);

  sqlite::database db{path, sqlite::open_mode::read_only};
  auto st = db.prepare("SELECT seq, status, verdict_code FROM candidates ORDER BY seq");
  REQUIRE(st.step());
  CHECK(st.column_int64(0) == 1);
  CHECK(st.column_is_null(2)); // the old row knows no code
  REQUIRE(st.step());
  CHECK(st.column_int64(0) == 7);
  CHECK(st.column_text(2) == "ok");
}

TEST_CASE_METHOD(archive_fixture, "a verdict without its candidate still makes a whole row",
                 "[archive]") {
  auto path = fresh_path("verdict_first");
  auto a = spawn_archive(sys, path);
  auto c = sample_candidate();
  c.parent = -1;
  c.evaluated = true;
  c.result.status = verdict_status::incorrect;
  c.result.reason = "output 0 differs";
  c.result.max_abs_diff = {std::numeric_limits<double>::quiet_NaN(), 2.5};
  c.result.speedup = 0;
  self->send(a, put_atom::value, c);
  // The candidate record arriving late must not wipe the verdict.
  c.evaluated = false;
  c.idea = "a later idea";
  self->send(a, put_atom::value, c);
  flush(a);

  sqlite::database db{path, sqlite::open_mode::read_only};
  auto st = db.prepare("SELECT parent, idea, code, status, reason, speedup, runtime_ms, n, "
                       "max_abs_diff FROM candidates");
  REQUIRE(st.step());
  CHECK(st.column_is_null(0)); // no parent
  CHECK(st.column_text(1) == "a later idea");
  CHECK(st.column_text(2) == "class ModelNew(nn.Module): ...");
  CHECK(st.column_text(3) == "incorrect");
  CHECK(st.column_text(4) == "output 0 differs");
  // Timings of a candidate that is not correct are absent, not zero.
  CHECK(st.column_is_null(5));
  CHECK(st.column_is_null(6));
  CHECK(st.column_is_null(7));
  CHECK(st.column_text(8) == "[null,2.5]");
  CHECK_FALSE(st.step());
}

TEST_CASE_METHOD(archive_fixture, "budget events keep their order", "[archive]") {
  auto path = fresh_path("budget");
  auto a = spawn_archive(sys, path);
  for (int i = 1; i <= 5; ++i)
    self->send(a, put_atom::value,
               budget_event{"2_Conv", "optimizer", i <= 4 ? "grant" : "refuse", std::min(i, 4), 4});
  flush(a);

  sqlite::database db{path, sqlite::open_mode::read_only};
  auto st = db.prepare("SELECT ts, task, role, kind, used, limit_ FROM budget_events ORDER BY id");
  double last_ts = 0;
  for (int i = 1; i <= 5; ++i) {
    REQUIRE(st.step());
    CHECK(st.column_double(0) >= last_ts);
    last_ts = st.column_double(0);
    CHECK(st.column_text(1) == "2_Conv");
    CHECK(st.column_text(2) == "optimizer");
    CHECK(st.column_text(3) == (i <= 4 ? "grant" : "refuse"));
    CHECK(st.column_int64(4) == std::min(i, 4));
    CHECK(st.column_int64(5) == 4);
  }
  CHECK_FALSE(st.step());
}

TEST_CASE_METHOD(archive_fixture, "a task result is upserted", "[archive]") {
  auto path = fresh_path("task_result");
  auto a = spawn_archive(sys, path);
  task_result r;
  r.task = "1_MLP";
  r.queries = 10;
  r.evaluations = 12;
  r.correct = 3;
  r.found = false;
  r.stop_reason = "stopped";
  self->send(a, put_atom::value, r);
  // A later result of the same task (a resumed run) replaces the first.
  r.queries = 40;
  r.evaluations = 44;
  r.correct = 12;
  r.found = true;
  r.best_speedup = 1.4;
  r.best_runtime_ms = 0.02;
  r.reference_ms = 0.028;
  r.best_seq = 31;
  r.best_code = "class ModelNew: ...";
  r.stop_reason = "budget";
  self->send(a, put_atom::value, r);
  flush(a);

  sqlite::database db{path, sqlite::open_mode::read_only};
  CHECK(count_rows(db, "tasks") == 1);
  auto st = db.prepare("SELECT task, queries, evaluations, correct, found, best_speedup, "
                       "best_runtime_ms, reference_ms, best_seq, stop_reason, ended_ts "
                       "FROM tasks");
  REQUIRE(st.step());
  CHECK(st.column_text(0) == "1_MLP");
  CHECK(st.column_int64(1) == 40);
  CHECK(st.column_int64(2) == 44);
  CHECK(st.column_int64(3) == 12);
  CHECK(st.column_int64(4) == 1);
  CHECK(st.column_double(5) == Approx(1.4));
  CHECK(st.column_double(6) == Approx(0.02));
  CHECK(st.column_double(7) == Approx(0.028));
  CHECK(st.column_int64(8) == 31);
  CHECK(st.column_text(9) == "budget");
  CHECK(st.column_double(10) > 1.6e9);
}

TEST_CASE_METHOD(archive_fixture, "the file is in WAL mode and says its schema version",
                 "[archive]") {
  auto path = fresh_path("wal");
  auto a = spawn_archive(sys, path);
  flush(a);
  sqlite::database db{path, sqlite::open_mode::read_only};
  CHECK(db.query_text("PRAGMA journal_mode") == "wal");
  CHECK(db.query_text("SELECT value FROM meta WHERE key = 'schema_version'")
        == archive_schema_version());
  CHECK(std::stod(db.query_text("SELECT value FROM meta WHERE key = 'created_ts'")) > 1.6e9);
}

TEST_CASE_METHOD(archive_fixture, "a stopped archive leaves one complete file", "[archive]") {
  auto path = fresh_path("stopped");
  auto a = spawn_archive(sys, path);
  self->send(a, put_atom::value, sample_call());
  self->send(a, put_atom::value, sample_candidate());
  self->send(a, put_atom::value, budget_event{"1_MLP", "optimizer", "grant", 1, 40});
  task_result r;
  r.task = "1_MLP";
  r.stop_reason = "stopped";
  self->send(a, put_atom::value, r);
  // No flush: the events sent before the exit are still handled first (mailbox order).
  stop(a);

  // The checkpoint on close folded the WAL into the main file.
  auto wal = path + "-wal";
  CHECK((!fs::exists(wal) || fs::file_size(wal) == 0));
  sqlite::database db{path, sqlite::open_mode::read_only};
  CHECK(count_rows(db, "llm_calls") == 1);
  CHECK(count_rows(db, "candidates") == 1);
  CHECK(count_rows(db, "budget_events") == 1);
  CHECK(count_rows(db, "tasks") == 1);
}

TEST_CASE_METHOD(archive_fixture, "an existing archive is appended to", "[archive]") {
  auto path = fresh_path("reopen");
  {
    auto a = spawn_archive(sys, path);
    self->send(a, put_atom::value, sample_call(1));
    stop(a);
  }
  auto created = [&] {
    sqlite::database db{path, sqlite::open_mode::read_only};
    return db.query_text("SELECT value FROM meta WHERE key = 'created_ts'");
  };
  auto first_created = created();
  auto a = spawn_archive(sys, path);
  self->send(a, put_atom::value, sample_call(2));
  flush(a);
  sqlite::database db{path, sqlite::open_mode::read_only};
  CHECK(count_rows(db, "llm_calls") == 2);
  CHECK(created() == first_created);
}

TEST_CASE_METHOD(archive_fixture, "an archive that cannot be opened throws with its path",
                 "[archive]") {
  // A regular file where a folder should be: unwritable for every user, root included.
  auto blocker = fresh_path("blocker");
  std::ofstream{blocker} << "not a folder";
  auto bad = blocker + "/archive.sqlite";
  CHECK_THROWS_WITH(spawn_archive(sys, bad), Catch::Contains(bad));

  // A file that is not SQLite is refused rather than overwritten.
  auto junk = fresh_path("junk");
  std::ofstream{junk} << std::string(4096, 'x');
  CHECK_THROWS_WITH(spawn_archive(sys, junk),
                    Catch::Contains(junk) && Catch::Contains("not a database"));
}

TEST_CASE_METHOD(archive_fixture, "an archive of another schema version is refused", "[archive]") {
  auto path = fresh_path("old_schema");
  {
    sqlite::database db{path};
    db.exec("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "INSERT INTO meta VALUES ('schema_version', '0');");
  }
  CHECK_THROWS_WITH(spawn_archive(sys, path),
                    Catch::Contains(path) && Catch::Contains("schema version 0"));
}

TEST_CASE_METHOD(archive_fixture, "a failed write is logged and the archive keeps going",
                 "[archive]") {
  auto path = fresh_path("write_error");
  auto a = spawn_archive(sys, path);
  flush(a);
  {
    // Pull a table out from under the archive's prepared statement.
    sqlite::database other{path};
    other.exec("DROP TABLE budget_events");
  }
  self->send(a, put_atom::value, budget_event{"1_MLP", "optimizer", "grant", 1, 40});
  self->send(a, put_atom::value, sample_call());
  flush(a); // the actor is alive: it answers
  sqlite::database db{path, sqlite::open_mode::read_only};
  CHECK(count_rows(db, "llm_calls") == 1);
}

TEST_CASE_METHOD(archive_fixture, "a thousand events then a flush", "[archive]") {
  auto path = fresh_path("thousand");
  auto a = spawn_archive(sys, path);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 250; ++i) {
    self->send(a, put_atom::value, sample_call(i));
    auto c = sample_candidate();
    c.seq = i;
    self->send(a, put_atom::value, c);
    c.evaluated = true;
    c.result = sample_correct_verdict();
    self->send(a, put_atom::value, c);
    self->send(a, put_atom::value, budget_event{"1_MLP", "optimizer", "grant", i + 1, 250});
  }
  flush(a);
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
  INFO("1000 events took " << elapsed.count() << " s");
  sqlite::database db{path, sqlite::open_mode::read_only};
  CHECK(count_rows(db, "llm_calls") == 250);
  CHECK(count_rows(db, "candidates") == 250);
  CHECK(count_rows(db, "budget_events") == 250);
  auto st = db.prepare("SELECT count(*) FROM candidates WHERE status = 'correct'");
  REQUIRE(st.step());
  CHECK(st.column_int64(0) == 250);
}

TEST_CASE("sqlite errors name the statement that failed", "[archive][sqlite]") {
  auto path = fresh_path("sqlite_errors");
  sqlite::database db{path};
  db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)");
  CHECK_THROWS_WITH(db.exec("SELEKT 1"),
                    Catch::Contains("SELEKT 1") && Catch::Contains("syntax error"));
  CHECK_THROWS_WITH(db.prepare("SELECT nope FROM t"), Catch::Contains("no such column"));
  auto ins = db.prepare("INSERT INTO t (k, v) VALUES (?1, ?2)");
  ins.bind_int64(1, 1);
  ins.bind_text(2, "one");
  ins.run();
  // The same key again: the statement is reset after the failure and usable afterwards.
  CHECK_THROWS_WITH(ins.run(), Catch::Contains("UNIQUE constraint failed")
                                   && Catch::Contains("INSERT INTO t"));
  ins.bind_int64(1, 2);
  ins.bind_null(2);
  ins.run();
  CHECK_THROWS_WITH(ins.bind_int64(3, 0), Catch::Contains("parameter 3"));
  auto sel = db.prepare("SELECT k, v, 0.5 FROM t ORDER BY k");
  REQUIRE(sel.step());
  CHECK(sel.column_count() == 3);
  CHECK(sel.column_text(1) == "one");
  CHECK(sel.column_double(2) == 0.5);
  REQUIRE(sel.step());
  CHECK(sel.column_int64(0) == 2);
  CHECK(sel.column_is_null(1));
  CHECK_FALSE(sel.step());
}

TEST_CASE("an archive nobody holds any more still closes its file", "[archive]") {
  auto path = fresh_path("dropped");
  {
    caf::actor_system_config cfg;
    caf::actor_system sys{configure(cfg)};
    auto a = spawn_archive(sys, path);
    caf::anon_send(a, put_atom::value, sample_call());
    // The handle goes out of scope, then the system: ~actor_system waits for the actor.
  }
  auto wal = path + "-wal";
  CHECK((!fs::exists(wal) || fs::file_size(wal) == 0));
  sqlite::database db{path, sqlite::open_mode::read_only};
  CHECK(count_rows(db, "llm_calls") == 1);
}
