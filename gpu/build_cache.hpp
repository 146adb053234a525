#pragma once

// Where the shared build cache lives and what it holds. Runners (kiln_build.py) write into it;
// the parent only resolves, creates and sweeps it.
//
//   <cache>/ext/<key>/         a built extension: the library, meta.json, its sources
//   <cache>/pch/<flagskey>/    torch/extension.h{,.gch}: a precompiled header per flag set
//   <cache>/pch/requests/      flag sets that want a precompiled header (compile_engine)
//   <cache>/triton/<arch>/     TRITON_CACHE_DIR of the runners, per device arch (`sm90`, `cpu`)
//   <cache>/inductor/<arch>/   TORCHINDUCTOR_CACHE_DIR likewise
//   <cache>/locks/             flock files: one builder per key at a time
//   <cache>/tmp/               staging for atomic renames into ext/ and pch/

#include <chrono>
#include <cstddef>
#include <string>

namespace kiln {

/// `[evaluator] cache_dir` as an absolute path: `configured` when not empty, else
/// `$XDG_CACHE_HOME/kiln` (when that is an absolute path), else `$HOME/.cache/kiln`. Throws
/// std::runtime_error when none of them can be used.
std::string resolve_cache_dir(const std::string& configured);

/// Creates the cache's folders; throws std::runtime_error naming the folder when it cannot, or
/// when the cache is not writable.
void prepare_cache_dir(const std::string& dir);

/// Removes entries of `<cache>/tmp` older than `max_age`: what builders killed mid-publish
/// left behind. Returns how many it removed.
size_t sweep_cache_tmp(const std::string& dir, std::chrono::seconds max_age);

} // namespace kiln
