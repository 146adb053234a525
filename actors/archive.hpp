#pragma once

// The archive: every LLM call, candidate, verdict, budget decision and task outcome of a run,
// in one SQLite file (`archive.sqlite`). Each event is committed when it arrives, so a run that
// is killed leaves everything it saw on disk. docs/archive.md describes the schema.

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/sqlite.hpp"
#include "messages/actors.hpp"

namespace kiln {

/// The version written to `meta.schema_version`; an archive with another version is refused
/// rather than written in a shape its readers do not expect.
std::string archive_schema_version();

/// Opens (creating when missing) an archive file, switches it to WAL and creates the schema.
/// Throws std::runtime_error naming the path and the reason. Readers such as `kiln report` can
/// use it too; the archive actor uses it for its own connection.
sqlite::database open_archive(const std::string& path);

/// The archive actor's state: its connection and the statements it reuses for every event.
/// The destructor (run when the actor exits, for whatever reason) checkpoints the WAL and
/// closes the file, so that a SIGINT-driven shutdown leaves one consistent file.
struct archive_state {
  static inline const char* name = "archive";

  std::string path;
  sqlite::database db;
  // Prepared once; rebound for every event.
  sqlite::statement insert_llm_call;
  sqlite::statement upsert_candidate; ///< the candidate's own columns
  sqlite::statement upsert_verdict;   ///< the verdict's columns of the same (task, seq)
  sqlite::statement insert_budget_event;
  sqlite::statement upsert_task;

  int64_t written = 0;       ///< events committed since the actor started
  int64_t failed = 0;        ///< events that could not be written
  int64_t failing_since = 0; ///< consecutive failures, to keep a full disk from flooding the log

  archive_state() = default;
  archive_state(const archive_state&) = delete;
  archive_state& operator=(const archive_state&) = delete;
  ~archive_state();

  /// Opens the file and prepares the statements; throws like `open_archive`.
  void open(const std::string& file);

  // Each writes one event and commits it; a failure is logged and counted, never thrown.
  void put(const llm_call_record& x);
  void put(const candidate_record& x);
  void put(const budget_event& x);
  void put(const task_result& x);

  /// Closes the file after a WAL checkpoint; safe to call twice.
  void close() noexcept;
};

/// The archive's behaviour. Opens `path` itself; when that fails it logs and quits with
/// `ec::io_error` (spawn_archive checks the path first, so that is a rare race).
archive_actor::behavior_type archive(archive_actor::stateful_pointer<archive_state> self,
                                     std::string path);

/// Spawns the archive as a detached actor (SQLite blocks on disk I/O, which must not hold a
/// scheduler thread). Opens the file first and throws std::runtime_error with the path and the
/// reason when it cannot be opened or created, so that `kiln run` fails before it starts.
archive_actor spawn_archive(caf::actor_system& sys, const std::string& path);

} // namespace kiln
