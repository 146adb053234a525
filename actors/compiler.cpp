#include "actors/compiler.hpp"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace kiln {

namespace {

/// Starts the build of each wanted precompiled header once per process, on a thread of its own:
/// it takes about a minute, and the worker that asked must stay free for the next candidate.
/// Builds after it use the header; builds before it do not wait for it.
void build_headers_later(caf::actor_system& sys, const compile_settings& settings,
                         const std::vector<std::string>& keys) {
  static std::mutex mutex;
  static std::set<std::string> started;
  for (const auto& key : keys) {
    {
      std::lock_guard<std::mutex> guard{mutex};
      if (!started.insert(key).second)
        continue;
    }
    sys.spawn<caf::detached>([settings, key](caf::event_based_actor* self) {
      try {
        compile_engine engine{settings};
        auto r = engine.build_pch(key);
        spdlog::info("compiler: precompiled header {}: {} in {:.0f} ms {}", key, r.state, r.wall_ms,
                     r.error);
      } catch (const std::exception& e) {
        spdlog::warn("compiler: precompiled header {}: {}", key, e.what());
      }
      self->quit();
    });
  }
}

} // namespace

compiler_actor::behavior_type compiler(compiler_actor::stateful_pointer<compiler_state> self,
                                       compile_settings settings) {
  self->state.engine = std::make_unique<compile_engine>(std::move(settings));
  return {
      [self](compile_atom, const eval_job& job) -> compile_report {
        auto& engine = *self->state.engine;
        auto c = engine.compile(job);
        compile_report r;
        r.wall_ms = c.wall_ms;
        r.cached = c.cached;
        r.builds = c.builds - c.hits;
        if (c.failed) {
          r.ok = false;
          r.failure.device = "compiler";
          apply_compile_outcome(c, r.failure);
        } else if (!c.problem.empty()) {
          spdlog::warn("compiler: {}: {}; the GPU stage builds it", job.candidate_id, c.problem);
        }
        if (!c.pch_wanted.empty())
          build_headers_later(self->home_system(), engine.settings(), c.pch_wanted);
        spdlog::info("compiler: {} -> {} in {:.0f} ms ({} builds, {} cached)", job.candidate_id,
                     c.failed ? "compile_error" : "ok", c.wall_ms, c.builds, c.hits);
        return r;
      },
  };
}

compiler_actor spawn_compiler(caf::actor_system& sys, compile_settings settings) {
  // Constructed here first so that unusable settings fail the caller, not a detached thread.
  compile_engine probe{settings};
  return sys.spawn<caf::detached>(compiler, std::move(settings));
}

compile_settings compile_settings_for(const eval_settings& s, const std::string& capability) {
  compile_settings c;
  c.python = s.python;
  c.work_dir = (std::filesystem::path{s.work_dir} / "compile").string();
  c.cache_dir = s.cache_dir;
  c.arch_list = capability;
  c.timeout_s = s.cfg.compile_timeout_s;
  c.keep_scratch = s.keep_scratch;
  return c;
}

size_t compile_worker_count(const evaluator_config& cfg) {
  if (cfg.compile_workers > 0)
    return static_cast<size_t>(cfg.compile_workers);
  return std::max(1u, std::thread::hardware_concurrency() / 2);
}

std::vector<compiler_actor> make_compilers(caf::actor_system& sys, const eval_settings& s,
                                           const std::string& capability) {
  std::vector<compiler_actor> out;
  auto settings = compile_settings_for(s, capability);
  for (size_t i = 0; i < compile_worker_count(s.cfg); ++i)
    out.push_back(spawn_compiler(sys, settings));
  return out;
}

} // namespace kiln
