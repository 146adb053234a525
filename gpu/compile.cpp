// The compile stage (docs/evaluation.md, "Compilation ahead of the GPU"):
//
//   candidate.py ─> runner `compile` (CUDA_VISIBLE_DEVICES="", TORCH_CUDA_ARCH_LIST=<arch>)
//        imports the candidate; kiln_build.py routes every load_inline / load through the cache
//        (a hit loads from it; a miss builds into the runner's staging folder, and run_runner
//        publishes what it can verify once the runner has ended)
//   ─> no result (crash) or timeout ─> once more ─> still none: compile_error
//   ─> a build failed and the import with it: compile_error with the compiler's error line
//   ─> the import failed otherwise (needs a GPU?): no verdict, the GPU stage decides
//   ─> fine: wall time, builds, hits, precompiled headers wanted

#include "gpu/compile.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "config/secrets.hpp"
#include "gpu/build_cache.hpp"
#include "gpu/harness.hpp"
#include "gpu/process.hpp"
#include "gpu/runner.hpp"

namespace kiln {

namespace {

namespace fs = std::filesystem;

/// Staging entries older than this were left by a builder that died mid-publish.
constexpr std::chrono::hours stale_tmp_age{24};

std::atomic<uint64_t> engine_seq{0};

std::string ending_text(const process_result& p) {
  if (p.signal != 0) {
    const char* name = ::strsignal(p.signal);
    return "killed by signal " + std::to_string(p.signal)
           + (name ? std::string{" ("} + name + ")" : "");
  }
  return "exited with code " + std::to_string(p.exit_code) + " without a result";
}

bool valid_arch_list(const std::string& arch) {
  // TORCH_CUDA_ARCH_LIST: `9.0`, `8.0;9.0`, `9.0a`, `8.6+PTX`, separated by `;` or spaces.
  static const std::regex re{R"(^\d+\.\d+[a-z]?(\+PTX)?([; ]+\d+\.\d+[a-z]?(\+PTX)?)*$)"};
  return arch.empty() || std::regex_match(arch, re);
}

pch_outcome read_pch_result(const std::string& path) {
  pch_outcome out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::element pch;
  if (parser.load(path).get(doc) || doc["pch"].get(pch)) {
    out.error = "the pch runner left no pch result";
    return out;
  }
  std::string_view v;
  if (!pch["state"].get(v))
    out.state = std::string{v};
  if (!pch["error"].get(v))
    out.error = std::string{v};
  out.ok = out.error.empty() && out.state != "failed";
  return out;
}

} // namespace

compile_engine::compile_engine(compile_settings settings) : settings_(std::move(settings)) {
  if (settings_.python.empty())
    throw std::invalid_argument("compile stage: no python interpreter");
  if (settings_.work_dir.empty())
    throw std::invalid_argument("compile stage: empty work_dir");
  if (settings_.cache_dir.empty())
    throw std::invalid_argument("compile stage: empty cache_dir (see resolve_cache_dir)");
  if (!(settings_.timeout_s > 0))
    throw std::invalid_argument("compile stage: compile_timeout_s must be > 0");
  if (!valid_arch_list(settings_.arch_list))
    throw std::invalid_argument("compile stage: bad arch list '" + settings_.arch_list
                                + "' (expected TORCH_CUDA_ARCH_LIST syntax such as 9.0)");
  settings_.python = absolute_program(settings_.python);
  settings_.cache_dir = fs::absolute(settings_.cache_dir).lexically_normal().string();
  prepare_cache_dir(settings_.cache_dir);
  if (auto n = sweep_cache_tmp(settings_.cache_dir, stale_tmp_age); n > 0)
    spdlog::info("compile stage: removed {} stale entries of {}/tmp", n, settings_.cache_dir);
  // A folder of its own per engine: engines run in parallel threads, and each start re-checks
  // (and may rewrite) the harness files of its folder.
  auto work = fs::absolute(settings_.work_dir).lexically_normal()
              / ("compile" + std::to_string(engine_seq++) + "-" + std::to_string(::getpid()));
  runner_settings_.python = settings_.python;
  runner_settings_.work_dir = work.string();
  runner_settings_.device = "cpu";
  runner_settings_.cfg.cpu_threads = std::max(1, settings_.threads);
  runner_settings_.keep_scratch = settings_.keep_scratch;
  // Builds run beside timings (another device's, or this one's next candidate): at a lower
  // priority a busy host gives its CPUs to the timed process first, which launches the kernels.
  runner_settings_.nice = defaults::compile_nice;
  runner_settings_.cache_dir = settings_.cache_dir;
  harness_path_ = install_harness(runner_settings_.work_dir);
}

compile_engine::~compile_engine() {
  if (settings_.keep_scratch)
    return;
  std::error_code ignored;
  fs::remove_all(runner_settings_.work_dir, ignored);
}

compile_outcome compile_engine::compile(const eval_job& job) {
  auto t0 = steady::now();
  compile_outcome out;
  scratch_guard guard;
  guard.keep = settings_.keep_scratch;
  try {
    // No GPU is visible: a compile never holds one, and CUDA code cannot run by accident.
    runner_context ctx{
        runner_settings_, harness_path_, {}, "", "cpu", std::max(1, settings_.threads)};
    ctx.scratch = make_scratch(runner_settings_.work_dir, counter_);
    guard.dir = ctx.scratch;
    auto candidate_path = ctx.scratch + "/candidate.py";
    write_file(candidate_path, job.code);

    runner_report r;
    for (int attempt = 1; attempt <= 2; ++attempt) {
      runner_job rj;
      rj.mode = "compile";
      rj.candidate_path = candidate_path;
      rj.dir = ctx.scratch + "/attempt" + std::to_string(attempt);
      rj.device = "cpu";
      rj.threads = ctx.threads;
      rj.cache_dir = settings_.cache_dir;
      rj.arch_list = settings_.arch_list;
      r = run_runner(ctx, rj, settings_.timeout_s);
      out.attempts = attempt;
      if (!r.proc.started || r.have_result)
        break;
      // A compiler that crashed or hung may have met a passing problem (memory, a killed
      // ninja); one more try, then it is the candidate's.
      spdlog::warn("compile stage: {}: attempt {} {}", job.candidate_id, attempt,
                   r.proc.timed_out ? "timed out" : ending_text(r.proc));
    }
    out.stdout_tail = tail_of_file(r.stdout_path, tail_bytes);
    out.stderr_tail = tail_of_file(r.stderr_path, tail_bytes);
    out.wall_ms = ms_since(t0);
    if (!r.proc.started) {
      out.problem = "cannot start the compile runner: " + r.proc.error;
      return out;
    }
    for (const auto& b : r.builds) {
      ++out.builds;
      out.hits += b.hit ? 1 : 0;
      out.pch_builds += b.pch ? 1 : 0;
      out.cached = out.cached && b.hit;
      if (!b.hit && !b.pch && !b.pch_key.empty() && b.error.empty()
          && std::find(out.pch_wanted.begin(), out.pch_wanted.end(), b.pch_key)
                 == out.pch_wanted.end())
        out.pch_wanted.push_back(b.pch_key);
    }
    if (!r.have_result) {
      out.failed = true;
      std::ostringstream why;
      if (r.proc.timed_out)
        why << "compile stage timed out after " << settings_.timeout_s << " s, twice";
      else
        why << "compile stage " << ending_text(r.proc) << ", twice";
      out.reason = why.str();
      return out;
    }
    if (!r.ok) {
      for (const auto& b : r.builds) {
        if (b.error.empty())
          continue;
        // The candidate's import died of its own build: that is a compile error, whatever
        // the GPU would say.
        out.failed = true;
        out.reason = "extension '" + b.name + "' failed to build: " + b.error_line;
        return out;
      }
      out.import_error = r.error;
    }
  } catch (const std::exception& e) {
    out.problem = std::string{"compile stage: "} + e.what();
    out.wall_ms = ms_since(t0);
    spdlog::error("compile stage: {}: {}", job.candidate_id, out.problem);
  }
  return out;
}

pch_outcome compile_engine::build_pch(const std::string& key) {
  auto t0 = steady::now();
  pch_outcome out;
  static const std::regex hex64{"^[0-9a-f]{64}$"};
  if (!std::regex_match(key, hex64)) {
    out.state = "failed";
    out.error = "bad precompiled header key '" + key + "'";
    return out;
  }
  const auto header = fs::path{settings_.cache_dir} / "pch" / key / "torch" / "extension.h.gch";
  const auto request = fs::path{settings_.cache_dir} / "pch" / "requests" / (key + ".json");
  std::error_code ignored;
  if (fs::exists(header, ignored)) {
    fs::remove(request, ignored);
    out.ok = true;
    out.state = "exists";
    return out;
  }
  // kiln holds the header's lock, not the runner (which may not write in the cache): from the
  // runner's start until its header is published, no other worker builds the same one.
  const int lock =
      ::open(pch_lock_path(settings_.cache_dir, key).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    if (lock >= 0)
      ::close(lock);
    out.state = "busy";
    out.error = lock < 0 ? std::string{"cannot open its lock: "} + std::strerror(errno) : "";
    out.ok = lock >= 0;
    return out;
  }
  scratch_guard guard;
  guard.keep = settings_.keep_scratch;
  try {
    runner_context ctx{
        runner_settings_, harness_path_, {}, "", "cpu", std::max(1, settings_.threads)};
    ctx.scratch = make_scratch(runner_settings_.work_dir, counter_);
    guard.dir = ctx.scratch;
    runner_job rj;
    rj.mode = "compile";
    rj.dir = ctx.scratch + "/pch";
    rj.device = "cpu";
    rj.threads = ctx.threads;
    rj.cache_dir = settings_.cache_dir;
    rj.arch_list = settings_.arch_list;
    rj.pch_key = key;
    auto r = run_runner(ctx, rj, settings_.timeout_s);
    if (!r.have_result) {
      out.state = "failed";
      out.error = r.proc.timed_out ? "timed out"
                  : r.proc.started ? ending_text(r.proc)
                                   : r.proc.error;
    } else {
      out = read_pch_result(rj.dir + "/result.json");
    }
    if (out.ok && out.state == "built") {
      auto staged = publish_pch(rj.dir + "/stage", settings_.cache_dir, key);
      if (staged.published == 0 && staged.existing > 0) {
        out.state = "exists";
      } else if (staged.published == 0) {
        out.ok = false;
        out.state = "failed";
        out.error = staged.problems.empty() ? "the pch runner staged no header"
                                            : "not published: " + staged.problems.front();
      }
    }
    if (out.ok && (out.state == "built" || out.state == "exists"))
      fs::remove(request, ignored);
  } catch (const std::exception& e) {
    out.state = "failed";
    out.error = e.what();
  }
  ::close(lock); // releases the flock
  out.wall_ms = ms_since(t0);
  if (out.ok)
    spdlog::info("compile stage: precompiled header {}: {} in {:.1f} s", key.substr(0, 12),
                 out.state, out.wall_ms / 1000);
  else
    spdlog::warn("compile stage: precompiled header {}: {}", key.substr(0, 12), out.error);
  return out;
}

void apply_compile_outcome(const compile_outcome& c, verdict& v) {
  v.compile_ms = c.wall_ms;
  v.compile_cached = c.cached && c.problem.empty();
  if (!c.failed)
    return;
  v.status = c.status;
  // The compiler quotes the candidate's code: untrusted text, as a runner's output is.
  v.reason = secrets::clean(c.reason);
  v.code = c.reason.rfind("extension '", 0) == 0             ? "build_failed"
           : c.reason.find("timed out") != std::string::npos ? "timeout"
                                                             : "compile_stage_failed";
  v.stdout_tail = secrets::clean(c.stdout_tail);
  v.stderr_tail = secrets::clean(c.stderr_tail);
}

} // namespace kiln
