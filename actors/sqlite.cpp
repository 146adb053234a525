#include "actors/sqlite.hpp"

#include <stdexcept>
#include <utility>

#include <sqlite3.h>

namespace kiln::sqlite {

namespace {

// SQL in an error message is for a human to recognise the statement: whitespace runs become
// one space (statements are written over several lines) and a long one is cut, so that one
// failure is one line of log.
constexpr size_t max_sql_in_message = 300;

std::string shorten(std::string_view sql) {
  std::string out;
  bool space = false;
  for (char c : sql) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (out.size() >= max_sql_in_message) {
      out += "...";
      break;
    }
    if (space)
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

[[noreturn]] void throw_error(std::string_view what, std::string_view sql) {
  std::string msg = "sqlite: ";
  msg += what;
  if (!sql.empty()) {
    msg += " (in `";
    msg += shorten(sql);
    msg += "`)";
  }
  throw std::runtime_error(msg);
}

} // namespace

// -- statement ------------------------------------------------------------------------------

statement::statement(sqlite3* db, std::string_view sql) {
  if (db == nullptr)
    throw_error("prepare on a closed database", sql);
  const char* tail = nullptr;
  auto rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, &tail);
  if (rc != SQLITE_OK) {
    // On failure SQLite leaves stmt_ null, but be explicit: nothing to finalize.
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    throw_error(sqlite3_errmsg(db), sql);
  }
  if (stmt_ == nullptr)
    throw_error("no statement in the SQL text", sql);
}

statement::statement(statement&& other) noexcept : stmt_(std::exchange(other.stmt_, nullptr)) {}

statement& statement::operator=(statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

statement::~statement() {
  sqlite3_finalize(stmt_);
}

void statement::fail(int rc, std::string_view what) const {
  std::string msg{what};
  if (!msg.empty())
    msg += ": ";
  // The connection's message is more specific than the code's generic text ("UNIQUE
  // constraint failed: t.k" rather than "constraint failed").
  auto db = stmt_ != nullptr ? sqlite3_db_handle(stmt_) : nullptr;
  bool same = db != nullptr && (sqlite3_extended_errcode(db) & 0xff) == (rc & 0xff);
  msg += same ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  throw_error(msg, stmt_ != nullptr ? sqlite3_sql(stmt_) : "");
}

void statement::check_bind(int rc, int index) const {
  if (rc != SQLITE_OK)
    fail(rc, "cannot bind parameter " + std::to_string(index));
}

void statement::bind_int64(int index, int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_, index, value), index);
}

void statement::bind_double(int index, double value) {
  check_bind(sqlite3_bind_double(stmt_, index, value), index);
}

void statement::bind_text(int index, std::string_view value) {
  // SQLITE_TRANSIENT: SQLite copies the text, so the caller's buffer may go away at once.
  check_bind(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
}

void statement::bind_null(int index) {
  check_bind(sqlite3_bind_null(stmt_, index), index);
}

void statement::clear_bindings() {
  sqlite3_clear_bindings(stmt_);
}

bool statement::step() {
  if (stmt_ == nullptr)
    throw_error("step on an empty statement", "");
  auto rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW)
    return true;
  if (rc == SQLITE_DONE)
    return false;
  fail(rc, "");
}

void statement::run() {
  try {
    while (step()) {
    }
  } catch (...) {
    reset();
    throw;
  }
  reset();
}

void statement::reset() noexcept {
  // The return value repeats the last step's error, which that step has already reported.
  sqlite3_reset(stmt_);
}

int statement::column_count() const {
  return sqlite3_column_count(stmt_);
}

bool statement::column_is_null(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

int64_t statement::column_int64(int index) const {
  return sqlite3_column_int64(stmt_, index);
}

double statement::column_double(int index) const {
  return sqlite3_column_double(stmt_, index);
}

std::string statement::column_text(int index) const {
  auto p = sqlite3_column_text(stmt_, index);
  if (p == nullptr)
    return {};
  // Ask for the size after the text: the conversion to text may change it.
  auto n = sqlite3_column_bytes(stmt_, index);
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
}

std::string statement::sql() const {
  auto s = stmt_ != nullptr ? sqlite3_sql(stmt_) : nullptr;
  return s != nullptr ? s : "";
}

// -- database -------------------------------------------------------------------------------

database::database(const std::string& path, open_mode mode) : path_(path) {
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  switch (mode) {
    case open_mode::read_write_create:
      break;
    case open_mode::read_write:
      flags = SQLITE_OPEN_READWRITE;
      break;
    case open_mode::read_only:
      flags = SQLITE_OPEN_READONLY;
      break;
  }
  auto rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // SQLite hands back a connection even on failure, for the message; it must still be closed.
    std::string reason = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw std::runtime_error("sqlite: cannot open " + path + ": " + reason);
  }
  // Extended codes tell SQLITE_IOERR_WRITE from SQLITE_IOERR_FSYNC in messages.
  sqlite3_extended_result_codes(db_, 1);
}

database::database(database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

database& database::operator=(database&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

database::~database() {
  close();
}

void database::close() noexcept {
  // close_v2 defers the real close until the last statement is finalized, so a statement that
  // outlives its database is not a use-after-free.
  sqlite3_close_v2(db_);
  db_ = nullptr;
}

void database::exec(std::string_view sql) {
  if (db_ == nullptr)
    throw_error("exec on a closed database", sql);
  // sqlite3_exec wants a NUL-terminated string.
  std::string text{sql};
  char* err = nullptr;
  auto rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw_error(msg, sql);
  }
}

statement database::prepare(std::string_view sql) {
  return statement{db_, sql};
}

std::string database::query_text(std::string_view sql) {
  auto stmt = prepare(sql);
  if (!stmt.step())
    return {};
  return stmt.column_text(0);
}

void database::busy_timeout(int ms) {
  if (db_ != nullptr)
    sqlite3_busy_timeout(db_, ms);
}

bool database::read_only() const {
  return db_ != nullptr && sqlite3_db_readonly(db_, "main") == 1;
}

int64_t database::last_insert_rowid() const {
  return db_ != nullptr ? sqlite3_last_insert_rowid(db_) : 0;
}

int64_t database::changes() const {
  return db_ != nullptr ? sqlite3_changes(db_) : 0;
}

} // namespace kiln::sqlite
