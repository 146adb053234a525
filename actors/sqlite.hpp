#pragma once

// A small RAII wrapper over the SQLite C API: one owned connection, prepared statements that
// bind by index and read columns, and failures as std::runtime_error carrying SQLite's message
// and the SQL that failed. The C header stays out of this one so that users do not inherit it.

#include <cstdint>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::sqlite {

/// How a database file is opened.
enum class open_mode {
  read_write_create, ///< create the file when missing (the archive)
  read_write,        ///< the file must exist
  read_only,         ///< readers such as `kiln report` and tests
};

/// One prepared statement. Bind, step until it returns false, reset, and bind again.
/// Movable, not copyable; finalizes itself. It must not outlive its database.
class statement {
public:
  statement() = default;
  statement(sqlite3* db, std::string_view sql);
  statement(statement&& other) noexcept;
  statement& operator=(statement&& other) noexcept;
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;
  ~statement();

  // Parameters are numbered from 1, as in SQLite.
  void bind_int64(int index, int64_t value);
  void bind_double(int index, double value);
  void bind_text(int index, std::string_view value);
  void bind_null(int index);
  /// Sets every parameter back to NULL.
  void clear_bindings();

  /// Runs the statement one step: true when a row is ready, false when it is done.
  bool step();
  /// Steps until done and resets, so that an autocommit write is committed on return (SQLite
  /// only promises the commit once the statement is reset). Resets even when a step throws.
  void run();
  /// Makes the statement ready to run again; bindings stay. Never throws: a failed step has
  /// already thrown its own error.
  void reset() noexcept;

  // Columns are numbered from 0.
  int column_count() const;
  bool column_is_null(int index) const;
  int64_t column_int64(int index) const;
  double column_double(int index) const;
  std::string column_text(int index) const;

  /// The SQL text the statement was prepared from.
  std::string sql() const;
  sqlite3_stmt* handle() const { return stmt_; }
  explicit operator bool() const { return stmt_ != nullptr; }

private:
  [[noreturn]] void fail(int rc, std::string_view what) const;
  void check_bind(int rc, int index) const;

  sqlite3_stmt* stmt_ = nullptr;
};

/// One open connection. Movable, not copyable; closes itself (statements first).
class database {
public:
  database() = default;
  /// Opens (or creates) the file. Throws with the path and SQLite's reason when it cannot.
  explicit database(const std::string& path, open_mode mode = open_mode::read_write_create);
  database(database&& other) noexcept;
  database& operator=(database&& other) noexcept;
  database(const database&) = delete;
  database& operator=(const database&) = delete;
  ~database();

  /// Runs one or more statements that take no parameters; rows they return are dropped.
  void exec(std::string_view sql);
  statement prepare(std::string_view sql);
  /// Runs a query that returns one value and gives it as text (empty for NULL or no row);
  /// meant for PRAGMAs and small checks.
  std::string query_text(std::string_view sql);

  /// How long a write waits for another connection's lock before it fails with SQLITE_BUSY.
  void busy_timeout(int ms);
  int64_t last_insert_rowid() const;
  /// Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t changes() const;

  /// Closes the connection; a no-op when already closed. Statements that are still alive keep
  /// the handle until they are finalized (sqlite3_close_v2), so the order of destruction does
  /// not matter for safety.
  void close() noexcept;
  bool is_open() const { return db_ != nullptr; }
  /// True when SQLite opened the file read-only (it falls back to that silently when the file
  /// exists but cannot be written).
  bool read_only() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

} // namespace kiln::sqlite
