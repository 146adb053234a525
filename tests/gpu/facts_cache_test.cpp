// The CPU runners' facts on disk: used while every stamp holds, asked again once anything they
// depend on changes, and never read from a damaged or foreign entry.

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpu/build_cache.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/facts_cache.hpp"
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
  f.cuda = false;
  f.triton = true;
  f.compile = false;
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

} // namespace

TEST_CASE("facts come back from disk while their stamps hold", "[facts]") {
  auto dir = fresh_dir("roundtrip");
  auto site = dir + "/site-packages";
  auto version = dir + "/version.py";
  fs::create_directories(site);
  std::ofstream{version} << "__version__ = '1.13.0a0'\n";
  const std::vector<std::string> paths = {version, site, dir + "/python311.zip"};
  const std::string identity = "python=/usr/bin/python3 device=cpu threads=2";
  kiln::store_facts(dir + "/facts", identity, sample_facts(), paths);

  auto back = kiln::load_facts(dir + "/facts", identity);
  REQUIRE(back);
  CHECK(back->device_name == "Test CPU: 2 cores");
  CHECK(back->python == "/usr/bin/python3");
  CHECK(back->python_version == "3.11.2");
  CHECK(back->torch_version == "1.13.0a0");
  CHECK_FALSE(back->cuda);
  CHECK(back->triton);
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
  SECTION("torch's version file rewritten") {
    fs::remove(version);
    std::ofstream{version} << "__version__ = '2.11.0'\n";
    CHECK_FALSE(kiln::load_facts(dir + "/facts", identity));
  }
  SECTION("a path that was missing appears") {
    std::ofstream{dir + "/python311.zip"} << "";
    CHECK_FALSE(kiln::load_facts(dir + "/facts", identity));
  }
  SECTION("a damaged entry") {
    auto entry = dir + "/facts/" + fs::directory_iterator {
      dir + "/facts"
      } -> path().filename().string();
    std::ifstream in{entry};
    std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
    in.close();
    text.replace(text.find("fact cpu_threads=2"), 18, "fact cpu_threads=x");
    std::ofstream{entry} << text;
    CHECK_FALSE(kiln::load_facts(dir + "/facts", identity));
  }
  SECTION("no folder, no cache") {
    CHECK_FALSE(kiln::load_facts("", identity));
  }
}

TEST_CASE("facts the format cannot hold are not stored", "[facts]") {
  auto dir = fresh_dir("unstorable");
  auto f = sample_facts();
  f.device_name = "two\nlines";
  kiln::store_facts(dir + "/facts", "id", f, {dir});
  CHECK_FALSE(kiln::load_facts(dir + "/facts", "id"));
  kiln::store_facts(dir + "/facts", "id", sample_facts(), {});
  CHECK_FALSE(kiln::load_facts(dir + "/facts", "id")); // nothing to tell a change by
  CHECK(kiln::path_stamp(dir + "/nothing") == "missing");
  CHECK(kiln::path_stamp(dir) != kiln::path_stamp(dir + "/nothing"));
}

TEST_CASE("a second engine on the CPU takes its facts from disk, not from a runner", "[facts]") {
  auto dir = fresh_dir("engine");
  // Every facts runner the interpreter starts leaves a line (in `<work_dir>/cache`, which a
  // runner may write).
  auto python = dir + "/python3";
  auto work = dir + "/work";
  auto log = work + "/cache/facts.log";
  kiln_test::write_serving_wrapper(
      python, "",
      "[ \"$4\" != --serve ] && grep -q '\"mode\": \"facts\"' \"$4\" && echo facts >> " + log
          + "\n");
  kiln::eval_settings s;
  s.python = python;
  s.work_dir = work;
  s.device = "cpu";
  s.cfg.pool_size = 0;
  s.cache_dir = dir + "/cache";
  kiln::prepare_cache_dir(s.cache_dir);
  s.share = std::make_shared<kiln::device_share>(s.cache_dir);
  kiln::runner_facts first;
  {
    kiln::evaluation_engine engine{s};
    first = engine.facts();
  }
  REQUIRE(first.torch_version.size() > 0);
  REQUIRE(lines_of(log) == 1);
  kiln::evaluation_engine again{s};
  auto second = again.facts();
  CHECK(lines_of(log) == 1);
  CHECK(second.torch_version == first.torch_version);
  CHECK(second.python_version == first.python_version);
  CHECK(second.device_name == first.device_name);
  CHECK(second.cpu_threads == first.cpu_threads);
  CHECK(second.memory_bytes == first.memory_bytes);
  CHECK(second.device == "cpu");
  // Another interpreter is another identity: its runner is asked.
  auto other = dir + "/python3-other";
  fs::copy_file(python, other);
  s.python = other;
  kiln::evaluation_engine third{s};
  CHECK(third.facts().torch_version == first.torch_version);
  CHECK(lines_of(log) == 2);
}
