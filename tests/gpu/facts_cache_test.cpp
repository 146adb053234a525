// The CPU runners' facts on disk: used while every stamp holds, asked again once anything they
// depend on changes, never read from a damaged or foreign entry, and never stored where the
// entry could not be trusted.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "gpu/build_cache.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/facts_cache.hpp"
#include "gpu/python.hpp"
#include "serving_wrapper.hpp"

namespace fs = std::filesystem;

namespace {

std::string fresh_dir(const std::string& name) {
  auto dir = std::string{KILN_TEST_TMP} + "/facts-cache/" + name + "-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

kiln::runner_facts sample_facts() {
  kiln::runner_facts f;
  f.device_name = "Test CPU: 2 cores";
  f.python = "/usr/bin/python3";
  f.python_version = "3.11.2";
  f.torch_version = "1.13.0a0";
  f.triton = true;
  f.cpu_threads = 2;
  f.memory_bytes = 25276166144;
  f.memory_bandwidth_gbs = 12.5;
  return f;
}

int lines_of(const std::string& path) {
  std::ifstream in{path};
  int n = 0;
  for (std::string line; std::getline(in, line);)
    ++n;
  return n;
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

/// Dates `path` an hour back: older than the racy window, and any change now moves its time.
void aged(const std::string& path) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(1));
}

/// `paths` with their stamps now, as a runner reports them.
std::vector<std::pair<std::string, std::string>> stamped(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : paths)
    out.emplace_back(p, kiln::path_stamp(p));
  return out;
}

bool nothing_in(const std::string& dir) {
  return !fs::exists(dir) || fs::is_empty(dir);
}

} // namespace

TEST_CASE("facts come back from disk while their stamps hold", "[facts]") {
  auto dir = fresh_dir("roundtrip");
  auto site = dir + "/site-packages";
  auto version = dir + "/version.py";
  fs::create_directories(site);
  std::ofstream{version} << "__version__ = '1.13.0a0'\n";
  aged(site);
  aged(version);
  const std::string identity = "python=/usr/bin/python3 device=cpu threads=2";
  kiln::store_facts(dir + "/facts", identity, sample_facts(),
                    stamped({version, site, dir + "/python311.zip"}));

  auto back = kiln::load_facts(dir + "/facts", identity);
  REQUIRE(back);
  CHECK(back->device_name == "Test CPU: 2 cores");
  CHECK(back->python == "/usr/bin/python3");
  CHECK(back->python_version == "3.11.2");
  CHECK(back->torch_version == "1.13.0a0");
  CHECK_FALSE(back->cuda);
  CHECK(back->triton);
  CHECK_FALSE(back->compile);
  CHECK(back->cpu_threads == 2);
  CHECK(back->memory_bytes == 25276166144);
  CHECK(back->memory_bandwidth_gbs == 12.5);
  CHECK(back->capability.empty());

  SECTION("another identity is another entry") {
    CHECK_FALSE(kiln::load_facts(dir + "/facts", identity + " threads=1"));
  }
  SECTION("a package installed into a folder imports search") {
    fs::create_directories(site + "/triton");
    CHECK_FALSE(kiln::load_facts(dir + "/facts", identity));
  }
  SECTION("torch's version file rewritten in place, the same size") {
    std::ofstream{version} << "__version__ = '1.13.1a0'\n";
    CHECK_FALSE(kiln::load_facts(dir + "/facts", identity));
  }
  SECTION("a path that was missing appears") {
    std::ofstream{dir + "/python311.zip"} << "";
    CHECK_FALSE(kiln::load_facts(dir + "/facts", identity));
  }
  SECTION("a damaged entry") {
    auto entry = fs::directory_iterator {
      dir + "/facts"
      } -> path().string();
    auto text = slurp(entry);
    text.replace(text.find("fact cpu_threads=2"), 18, "fact cpu_threads=x");
    std::ofstream{entry} << text;
    CHECK_FALSE(kiln::load_facts(dir + "/facts", identity));
  }
  SECTION("no folder, no cache") {
    CHECK_FALSE(kiln::load_facts("", identity));
  }
}

TEST_CASE("facts are stored only where the entry can be trusted", "[facts]") {
  auto dir = fresh_dir("unstorable");
  auto file = dir + "/version.py";
  std::ofstream{file} << "__version__ = '1.13.0a0'\n";
  SECTION("a value on two lines") {
    aged(file);
    auto f = sample_facts();
    f.device_name = "two\nlines";
    kiln::store_facts(dir + "/facts", "id", f, stamped({file}));
  }
  SECTION("nothing to tell a change by") {
    kiln::store_facts(dir + "/facts", "id", sample_facts(), {});
  }
  SECTION("a path that changed while the runner read the facts") {
    auto before = stamped({file});
    aged(file);
    kiln::store_facts(dir + "/facts", "id", sample_facts(), before);
  }
  SECTION("a change too recent to be sure that a later one would show") {
    kiln::store_facts(dir + "/facts", "id", sample_facts(), stamped({file}));
  }
  CHECK(nothing_in(dir + "/facts"));
  CHECK_FALSE(kiln::load_facts(dir + "/facts", "id"));
}

TEST_CASE("a path's stamp tells files, folders and missing paths apart", "[facts]") {
  auto dir = fresh_dir("stamps");
  auto file = dir + "/version.py";
  std::ofstream{file} << "x\n";
  CHECK(kiln::path_stamp(dir + "/nothing") == "missing");
  CHECK(kiln::path_stamp(file + "/below") == "missing"); // ENOTDIR, as for a zip's sub-path
  CHECK(kiln::path_stamp(dir) != kiln::path_stamp(file));
  CHECK(kiln::path_stamp(file) == kiln::path_stamp(file));
}

namespace {

kiln::eval_settings engine_settings(const std::string& dir, const std::string& python) {
  kiln::eval_settings s;
  s.python = python;
  s.work_dir = dir + "/work";
  s.device = "cpu";
  s.cfg.pool_size = 0;
  s.cache_dir = dir + "/cache";
  kiln::prepare_cache_dir(s.cache_dir);
  s.share = std::make_shared<kiln::device_share>(s.cache_dir);
  return s;
}

kiln::runner_facts facts_of(const kiln::eval_settings& s) {
  kiln::evaluation_engine engine{s};
  return engine.facts();
}

} // namespace

TEST_CASE("a second engine on the CPU takes its facts from disk, not from a runner", "[facts]") {
  auto dir = fresh_dir("engine");
  // A link to the interpreter: kiln starts that interpreter itself, so its facts may be kept.
  auto python = dir + "/python3";
  fs::create_symlink(kiln::find_python(""), python);
  auto s = engine_settings(dir, python);
  auto first = facts_of(s);
  REQUIRE(first.torch_version.size() > 0);
  REQUIRE_FALSE(nothing_in(dir + "/cache/facts"));
  // Marked, so that facts read from the entry tell themselves apart from a runner's.
  auto entry = fs::directory_iterator {
    dir + "/cache/facts"
    } -> path().string();
  auto text = slurp(entry);
  auto at = text.find("fact device_name=");
  REQUIRE(at != std::string::npos);
  text.replace(at, text.find('\n', at) - at, "fact device_name=from the entry");
  std::ofstream{entry} << text;

  auto second = facts_of(s);
  CHECK(second.device_name == "from the entry");
  CHECK(second.torch_version == first.torch_version);
  CHECK(second.python_version == first.python_version);
  CHECK(second.cpu_threads == first.cpu_threads);
  CHECK(second.memory_bytes == first.memory_bytes);
  CHECK(second.device == "cpu");
  SECTION("another path to the interpreter is another identity") {
    auto other = dir + "/python3-other";
    fs::create_symlink(kiln::find_python(""), other);
    CHECK(facts_of(engine_settings(dir, other)).device_name == first.device_name);
  }
  SECTION("other runner threads are another identity") {
    s.cfg.cpu_threads = 1;
    auto one = facts_of(s);
    CHECK(one.device_name == first.device_name);
    CHECK(one.cpu_threads == 1);
  }
  SECTION("the same path, now a wrapper script") {
    // A wrapper can start another Python behind one path, which no stamp shows: never kept.
    // Its facts runs leave a line each (in `<work_dir>/cache`, which a runner may write).
    fs::remove(python);
    auto log = dir + "/work/cache/facts.log";
    kiln_test::write_serving_wrapper(
        python, "",
        "[ \"$4\" != --serve ] && grep -q '\"mode\": \"facts\"' \"$4\" && echo facts >> " + log
            + "\n");
    CHECK(facts_of(s).device_name == first.device_name);
    CHECK(facts_of(s).device_name == first.device_name);
    CHECK(lines_of(log) == 2);
  }
}
