#include "actors/archive.hpp"

#include <chrono>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/spawn_options.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "messages/error.hpp"

namespace kiln {

namespace {

// Bump when a table or column changes meaning; docs/archive.md lists the history.
constexpr const char* schema_version = "2";

// A write that waits on another connection's lock (a `kiln report` checkpointing the WAL, say)
// gives up after this long and is logged as a failed write.
constexpr int busy_timeout_ms = 5000;

// After this many failures in a row (a full disk fails every event), only every
// `failure_log_every`-th one is logged.
constexpr int64_t failures_logged_in_full = 10;
constexpr int64_t failure_log_every = 1000;

// `meta` is created first and alone: its version must be checked before anything else is
// created in a file that may come from another kiln.
constexpr const char* meta_sql = R"sql(
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
)sql";

constexpr const char* schema_sql = R"sql(
CREATE TABLE IF NOT EXISTS llm_calls (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  ts               REAL NOT NULL,
  task             TEXT NOT NULL,
  role             TEXT NOT NULL,
  kind             TEXT NOT NULL,
  profile          TEXT NOT NULL,
  model            TEXT NOT NULL,
  prompt           TEXT NOT NULL,
  system           TEXT NOT NULL,
  reply            TEXT NOT NULL,
  input_tokens     INTEGER NOT NULL,
  output_tokens    INTEGER NOT NULL,
  reasoning_tokens INTEGER NOT NULL,
  cost_usd         REAL NOT NULL,
  latency_ms       REAL NOT NULL,
  error            TEXT
);
CREATE INDEX IF NOT EXISTS llm_calls_by_task ON llm_calls (task);

CREATE TABLE IF NOT EXISTS candidates (
  task         TEXT NOT NULL,
  seq          INTEGER NOT NULL,
  parent       INTEGER,
  role         TEXT NOT NULL,
  phase        INTEGER NOT NULL,
  attempt      INTEGER NOT NULL,
  idea         TEXT NOT NULL,
  code         TEXT NOT NULL,
  created_ts   REAL NOT NULL,
  status       TEXT,
  reason       TEXT,
  verdict_code TEXT,
  speedup      REAL,
  runtime_ms   REAL,
  reference_ms REAL,
  p10_ms       REAL,
  p90_ms       REAL,
  n            INTEGER,
  max_abs_diff TEXT,
  max_rel_diff TEXT,
  stdout_tail  TEXT,
  stderr_tail  TEXT,
  eval_wall_ms REAL,
  device       TEXT,
  evaluated_ts REAL,
  PRIMARY KEY (task, seq)
);

CREATE TABLE IF NOT EXISTS budget_events (
  id     INTEGER PRIMARY KEY AUTOINCREMENT,
  ts     REAL NOT NULL,
  task   TEXT NOT NULL,
  role   TEXT NOT NULL,
  kind   TEXT NOT NULL,
  used   INTEGER NOT NULL,
  limit_ INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS budget_events_by_task ON budget_events (task);

CREATE TABLE IF NOT EXISTS tasks (
  task            TEXT PRIMARY KEY,
  queries         INTEGER NOT NULL,
  evaluations     INTEGER NOT NULL,
  correct         INTEGER NOT NULL,
  found           INTEGER NOT NULL,
  best_speedup    REAL NOT NULL,
  best_runtime_ms REAL NOT NULL,
  reference_ms    REAL NOT NULL,
  best_seq        INTEGER NOT NULL,
  stop_reason     TEXT NOT NULL,
  ended_ts        REAL NOT NULL,
  retimed         INTEGER NOT NULL DEFAULT 0,
  search_speedup  REAL NOT NULL DEFAULT 1
);
)sql";

constexpr const char* insert_llm_call_sql = R"sql(
INSERT INTO llm_calls (ts, task, role, kind, profile, model, prompt, system, reply,
                       input_tokens, output_tokens, reasoning_tokens, cost_usd, latency_ms, error)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
)sql";

// The candidate's own columns. A verdict that arrived first already made the row; then only
// these columns change and the verdict stays.
constexpr const char* upsert_candidate_sql = R"sql(
INSERT INTO candidates (task, seq, parent, role, phase, attempt, idea, code, created_ts)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (task, seq) DO UPDATE SET
  parent = excluded.parent, role = excluded.role, phase = excluded.phase,
  attempt = excluded.attempt, idea = excluded.idea, code = excluded.code
)sql";

// The verdict's columns. The candidate columns are bound too, so that a verdict whose
// candidate was never recorded still makes a whole row; an existing row keeps them.
constexpr const char* upsert_verdict_sql = R"sql(
INSERT INTO candidates (task, seq, parent, role, phase, attempt, idea, code, created_ts,
                        status, reason, speedup, runtime_ms, reference_ms, p10_ms, p90_ms, n,
                        max_abs_diff, max_rel_diff, stdout_tail, stderr_tail, eval_wall_ms,
                        device, evaluated_ts, verdict_code)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
        ?20, ?21, ?22, ?23, ?24, ?25)
ON CONFLICT (task, seq) DO UPDATE SET
  status = excluded.status, reason = excluded.reason, speedup = excluded.speedup,
  runtime_ms = excluded.runtime_ms, reference_ms = excluded.reference_ms,
  p10_ms = excluded.p10_ms, p90_ms = excluded.p90_ms, n = excluded.n,
  max_abs_diff = excluded.max_abs_diff, max_rel_diff = excluded.max_rel_diff,
  stdout_tail = excluded.stdout_tail, stderr_tail = excluded.stderr_tail,
  eval_wall_ms = excluded.eval_wall_ms, device = excluded.device,
  evaluated_ts = excluded.evaluated_ts, verdict_code = excluded.verdict_code
)sql";

constexpr const char* insert_budget_event_sql = R"sql(
INSERT INTO budget_events (ts, task, role, kind, used, limit_)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
)sql";

constexpr const char* upsert_task_sql = R"sql(
INSERT INTO tasks (task, queries, evaluations, correct, found, best_speedup, best_runtime_ms,
                   reference_ms, best_seq, stop_reason, ended_ts, retimed, search_speedup)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
ON CONFLICT (task) DO UPDATE SET
  queries = excluded.queries, evaluations = excluded.evaluations, correct = excluded.correct,
  found = excluded.found, best_speedup = excluded.best_speedup,
  best_runtime_ms = excluded.best_runtime_ms, reference_ms = excluded.reference_ms,
  best_seq = excluded.best_seq, stop_reason = excluded.stop_reason, ended_ts = excluded.ended_ts,
  retimed = excluded.retimed, search_speedup = excluded.search_speedup
)sql";

/// Wall-clock time as Unix seconds with a fraction: what `datetime(ts, 'unixepoch')` reads.
double unix_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

/// A JSON array of numbers. JSON has no NaN or infinity, so those are written as null (the
/// verdict's reason says what went wrong with the output).
std::string json_array(const std::vector<double>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i > 0)
      out += ",";
    out += std::isfinite(xs[i]) ? fmt::format("{}", xs[i]) : "null";
  }
  out += "]";
  return out;
}

/// Binds parameters 1..9, the columns every candidate row has.
void bind_candidate_columns(sqlite::statement& st, const candidate_record& x, double now) {
  st.bind_text(1, x.task);
  st.bind_int64(2, x.seq);
  // A negative parent means "none"; NULL keeps joins on parent honest.
  if (x.parent < 0)
    st.bind_null(3);
  else
    st.bind_int64(3, x.parent);
  st.bind_text(4, x.role);
  st.bind_int64(5, x.phase);
  st.bind_int64(6, x.attempt);
  st.bind_text(7, x.idea);
  st.bind_text(8, x.code);
  st.bind_double(9, now);
}

/// Runs one write; a failure is logged and counted, and the actor keeps going: losing one row
/// is better than losing the run.
template <class F> void guarded(archive_state& st, const char* table, F&& write) {
  try {
    if (!st.db.is_open())
      throw std::runtime_error("the archive is not open");
    write();
    ++st.written;
    if (st.failing_since > 0) {
      spdlog::info("archive: writes to {} succeed again after {} failures", st.path,
                   st.failing_since);
      st.failing_since = 0;
    }
  } catch (const std::exception& e) {
    ++st.failed;
    ++st.failing_since;
    if (st.failing_since <= failures_logged_in_full || st.failing_since % failure_log_every == 0)
      spdlog::error("archive: cannot write to table {} of {} ({} failed in a row): {}", table,
                    st.path, st.failing_since, e.what());
    if (st.failing_since == failures_logged_in_full)
      spdlog::error("archive: further write errors are logged once every {}", failure_log_every);
  }
}

} // namespace

std::string archive_schema_version() {
  return schema_version;
}

sqlite::database open_archive(const std::string& path) {
  sqlite::database db;
  try {
    db = sqlite::database{path};
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string{"archive: "} + e.what());
  }
  try {
    // SQLite falls back to read-only when the file exists but cannot be written; every event
    // would then fail, so refuse now.
    if (db.read_only())
      throw std::runtime_error("the file is read-only");
    db.busy_timeout(busy_timeout_ms);
    // WAL: a commit is an append, readers (kiln report) never block the writer. NORMAL: a
    // commit survives the process dying; only an OS crash can lose the last few.
    auto mode = db.query_text("PRAGMA journal_mode=WAL");
    if (mode != "wal")
      spdlog::warn("archive: {} stays in journal mode '{}' (no WAL on this file system?); "
                   "every commit will be slower",
                   path, mode);
    db.exec("PRAGMA synchronous=NORMAL");
    db.exec(meta_sql);
    auto version = db.query_text("SELECT value FROM meta WHERE key = 'schema_version'");
    if (!version.empty() && version != schema_version)
      throw std::runtime_error(
          fmt::format("it has schema version {}, this kiln writes {}", version, schema_version));
    db.exec(schema_sql);
    // Archives written before verdicts had codes lack the column; the rows they hold keep NULL.
    if (db.query_text("SELECT COUNT(*) FROM pragma_table_info('candidates') "
                      "WHERE name = 'verdict_code'")
        == "0")
      db.exec("ALTER TABLE candidates ADD COLUMN verdict_code TEXT");
    auto meta = db.prepare("INSERT OR IGNORE INTO meta (key, value) VALUES (?1, ?2)");
    meta.bind_text(1, "schema_version");
    meta.bind_text(2, schema_version);
    meta.run();
    meta.bind_text(1, "created_ts");
    meta.bind_text(2, fmt::format("{:.3f}", unix_now()));
    meta.run();
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("archive: cannot use {}: {}", path, e.what()));
  }
  return db;
}

// -- archive_state --------------------------------------------------------------------------

archive_state::~archive_state() {
  close();
}

void archive_state::open(const std::string& file) {
  path = file;
  db = open_archive(file);
  try {
    insert_llm_call = db.prepare(insert_llm_call_sql);
    upsert_candidate = db.prepare(upsert_candidate_sql);
    upsert_verdict = db.prepare(upsert_verdict_sql);
    insert_budget_event = db.prepare(insert_budget_event_sql);
    upsert_task = db.prepare(upsert_task_sql);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("archive: cannot use {}: {}", path, e.what()));
  }
}

void archive_state::close() noexcept {
  if (!db.is_open())
    return;
  // Statements first: a checkpoint cannot truncate the WAL while one of them holds a read.
  insert_llm_call = {};
  upsert_candidate = {};
  upsert_verdict = {};
  insert_budget_event = {};
  upsert_task = {};
  try {
    // Fold the WAL into the main file so that the archive is one self-contained file once kiln
    // is gone (copying only archive.sqlite then loses nothing).
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  } catch (const std::exception& e) {
    spdlog::warn("archive: checkpoint of {} failed, the WAL file stays beside it: {}", path,
                 e.what());
  }
  db.close();
  spdlog::info("archive: closed {} ({} events written, {} failed)", path, written, failed);
}

void archive_state::put(const llm_call_record& x) {
  guarded(*this, "llm_calls", [&] {
    auto& st = insert_llm_call;
    st.bind_double(1, unix_now());
    st.bind_text(2, x.request.task);
    st.bind_text(3, x.request.role);
    st.bind_text(4, to_string(x.request.kind));
    st.bind_text(5, x.reply.profile);
    st.bind_text(6, x.reply.model);
    st.bind_text(7, x.request.prompt);
    st.bind_text(8, x.request.system);
    st.bind_text(9, x.reply.text);
    st.bind_int64(10, x.reply.input_tokens);
    st.bind_int64(11, x.reply.output_tokens);
    st.bind_int64(12, x.reply.reasoning_tokens);
    st.bind_double(13, x.reply.cost_usd);
    st.bind_double(14, x.reply.latency_ms);
    // NULL on success, so that `WHERE error IS NOT NULL` finds the failures.
    if (x.error.empty())
      st.bind_null(15);
    else
      st.bind_text(15, x.error);
    st.run();
  });
}

void archive_state::put(const candidate_record& x) {
  if (!x.evaluated) {
    guarded(*this, "candidates", [&] {
      bind_candidate_columns(upsert_candidate, x, unix_now());
      upsert_candidate.run();
    });
    return;
  }
  guarded(*this, "candidates", [&] {
    auto& st = upsert_verdict;
    auto now = unix_now();
    bind_candidate_columns(st, x, now);
    const auto& v = x.result;
    st.bind_text(10, to_string(v.status));
    st.bind_text(11, v.reason);
    // Timings exist only for a correct candidate; the zeros of the others would read as
    // measurements, so they stay NULL.
    if (v.status == verdict_status::correct) {
      st.bind_double(12, v.speedup);
      st.bind_double(13, v.candidate.median_ms);
      st.bind_double(14, v.reference.median_ms);
      st.bind_double(15, v.candidate.p10_ms);
      st.bind_double(16, v.candidate.p90_ms);
      st.bind_int64(17, v.candidate.n);
    } else {
      for (int i = 12; i <= 17; ++i)
        st.bind_null(i);
    }
    st.bind_text(18, json_array(v.max_abs_diff));
    st.bind_text(19, json_array(v.max_rel_diff));
    st.bind_text(20, v.stdout_tail);
    st.bind_text(21, v.stderr_tail);
    st.bind_double(22, v.wall_ms);
    st.bind_text(23, v.device);
    st.bind_double(24, now);
    if (v.code.empty())
      st.bind_null(25);
    else
      st.bind_text(25, v.code);
    st.run();
  });
}

void archive_state::put(const budget_event& x) {
  guarded(*this, "budget_events", [&] {
    auto& st = insert_budget_event;
    st.bind_double(1, unix_now());
    st.bind_text(2, x.task);
    st.bind_text(3, x.role);
    st.bind_text(4, x.kind);
    st.bind_int64(5, x.used);
    st.bind_int64(6, x.limit);
    st.run();
  });
}

void archive_state::put(const task_result& x) {
  guarded(*this, "tasks", [&] {
    auto& st = upsert_task;
    st.bind_text(1, x.task);
    st.bind_int64(2, x.queries);
    st.bind_int64(3, x.evaluations);
    st.bind_int64(4, x.correct);
    st.bind_int64(5, x.found ? 1 : 0);
    st.bind_double(6, x.best_speedup);
    st.bind_double(7, x.best_runtime_ms);
    st.bind_double(8, x.reference_ms);
    st.bind_int64(9, x.best_seq);
    st.bind_text(10, x.stop_reason);
    st.bind_double(11, unix_now());
    st.bind_int64(12, x.retimed ? 1 : 0);
    st.bind_double(13, x.search_speedup);
    st.run();
  });
}

// -- behaviour ------------------------------------------------------------------------------

archive_actor::behavior_type archive(archive_actor::stateful_pointer<archive_state> self,
                                     std::string path) {
  try {
    self->state.open(path);
    spdlog::info("archive: writing {}", path);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    self->quit(make_error(ec::io_error, std::string{e.what()}));
  }
  // No exit handler: the default one quits on any non-normal exit, and the state's destructor
  // (run on every exit path) checkpoints and closes the file.
  return {
      [self](put_atom, const llm_call_record& x) { self->state.put(x); },
      [self](put_atom, const candidate_record& x) { self->state.put(x); },
      [self](put_atom, const budget_event& x) { self->state.put(x); },
      [self](put_atom, const task_result& x) { self->state.put(x); },
      // Every write commits before its handler returns and the mailbox is handled in order, so
      // reaching this message means everything sent before it is on disk.
      [](flush_atom) { return ok_atom::value; },
  };
}

archive_actor spawn_archive(caf::actor_system& sys, const std::string& path) {
  // Open once here, on the caller's thread, so that a bad path fails `kiln run` at once with the
  // reason instead of producing an actor that dies later. The actor opens its own connection.
  open_archive(path).close();
  return sys.spawn<caf::detached>(archive, path);
}

} // namespace kiln
