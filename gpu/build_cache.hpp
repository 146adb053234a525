#pragma once

// The shared build cache (docs/evaluation.md, "The build cache"): where it lives, what it holds,
// and how kiln publishes into it. Runners read it but never write it: each builds into a staging
// folder of its own, and kiln publishes the entries it can verify once the runner has ended.
//
//   <cache>/ext/<key>/         a built extension: the library, meta.json, manifest.json (the
//                              build's inputs; <key> is the sha256 of its canonical text), sources
//   <cache>/pch/<flagskey>/    torch/extension.h{,.gch}: a precompiled header per flag set
//   <cache>/pch/requests/      flag sets that want a precompiled header (compile_engine)
//   <cache>/triton/<arch>/     Triton's own cache groups, per device arch (`sm90`, `cpu`)
//   <cache>/locks/             <3 hex digits>.lock: files runners open read-only and flock, one
//                              per stripe of keys; pch-<key>.lock, held by kiln while it builds
//   <cache>/tmp/               kiln's staging for atomic renames into ext/, pch/ and triton/
//
// A runner's staging folder (`stage/` in its own folder) mirrors it:
//
//   stage/ext/<key>/  stage/pch/<flagskey>/  stage/pch-requests/<flagskey>.json
//   stage/triton/<arch>/<group>/
//
// Publishing takes regular files only (no links, devices, FIFOs, folders where files belong, or
// files with a second hard link), within size limits, copies them into `<cache>/tmp` and renames
// the entry into place if no entry of that name exists: the first publisher wins, an entry is
// never replaced. An extension's key is recomputed from its manifest. A rejected entry is logged
// and dropped with the runner's folder.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// `[evaluator] cache_dir` as an absolute path: `configured` when not empty, else
/// `$XDG_CACHE_HOME/kiln` (when that is an absolute path), else `$HOME/.cache/kiln`. Throws
/// std::runtime_error when none of them can be used.
std::string resolve_cache_dir(const std::string& configured);

/// Creates the cache's folders and lock files; throws std::runtime_error naming the folder when
/// it cannot, or when the cache is not writable.
void prepare_cache_dir(const std::string& dir);

/// prepare_cache_dir once per folder and process; false (logged) when it failed.
bool prepare_cache_dir_once(const std::string& dir);

/// Removes entries of `<cache>/tmp` older than `max_age`: what publishers killed mid-publish
/// left behind. Returns how many it removed.
size_t sweep_cache_tmp(const std::string& dir, std::chrono::seconds max_age);

/// The lock file kiln holds while a runner builds precompiled header `key`.
std::string pch_lock_path(const std::string& cache, const std::string& key);

/// sha256 of `data`, as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

/// The canonical text of a JSON document as kiln_build.py writes a manifest (Python's
/// `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`): keys sorted, no
/// spaces, UTF-8 as it is. Integers only, no duplicate keys; else empty with `error`.
std::string canonical_json(std::string_view json, std::string& error);

/// An extension's cache key from its manifest: the sha256 of the manifest's canonical text.
/// Empty with `error` when the text is no manifest (`v` is not kiln_build.py's version, no
/// `kind` or `args.name`).
std::string manifest_key(std::string_view manifest, std::string& error);

/// What one runner may publish at most, and how large its files may be.
namespace staging_limits {
inline constexpr int64_t manifest_bytes = 64LL << 20; ///< the sources of load_inline are in it
inline constexpr int64_t meta_bytes = 64LL << 10;
inline constexpr int64_t source_bytes = 64LL << 20; ///< main.cpp, cuda.cu: copies for people
inline constexpr int64_t ext_entry_bytes = 2LL << 30;
inline constexpr int ext_entries = 64;
inline constexpr int64_t pch_bytes = 4LL << 30; ///< torch/extension.h.gch is about 0.7 GB
inline constexpr int64_t header_bytes = 1LL << 20;
inline constexpr int64_t request_bytes = 64LL << 10;
inline constexpr int requests = 64;
inline constexpr int64_t triton_group_bytes = 256LL << 20;
inline constexpr int triton_group_files = 64;
inline constexpr int triton_groups = 1024;
inline constexpr int64_t triton_bytes = 2LL << 30;
} // namespace staging_limits

/// What publishing a runner's staging folder did.
struct staging_report {
  int published = 0; ///< entries now in the cache
  int existing = 0;  ///< entries the cache had already: theirs stays
  int skipped = 0;   ///< entries kiln does not share (Triton groups with host code)
  int rejected = 0;
  std::vector<std::string> problems; ///< one line per rejected entry
  /// The entries looked at (`ext/<key>`, ...): a later call with this report skips them.
  std::set<std::string> handled;
};

/// Publishes what a runner left in its staging folder `stage`: extensions, precompiled-header
/// requests and Triton groups (not precompiled headers: publish_pch). After the runner, and
/// everything it started, has ended, or while it waits at its gate (its files are copied, so a
/// change made meanwhile gains it nothing it could not stage anyway). A missing `stage`
/// publishes nothing. Never throws.
staging_report publish_staged(const std::string& stage, const std::string& cache);
/// The same, adding to `report` and skipping the entries it has handled already.
void publish_staged(const std::string& stage, const std::string& cache, staging_report& report);

/// Publishes the precompiled header `key` (and nothing else) that a pch runner built in
/// `stage/pch/<key>/`. Never throws.
staging_report publish_pch(const std::string& stage, const std::string& cache,
                           const std::string& key);

} // namespace kiln
