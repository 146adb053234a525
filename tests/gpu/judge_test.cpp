// Verdict codes and the judgements around them (gpu/judge.hpp): the documented table and the
// codes kiln gives agree, borderline mismatches are told from real ones, scan findings map to
// their codes.

#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "gpu/judge.hpp"
#include "gpu/scan.hpp"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

/// The first column of docs/evaluation.md's table of codes, in order.
std::vector<std::string> documented_codes() {
  const auto doc = slurp(KILN_SOURCE_DIR "/docs/evaluation.md");
  const auto begin = doc.find("## Verdict codes");
  REQUIRE(begin != std::string::npos);
  const auto end = doc.find("\n## ", begin + 1);
  const auto section = doc.substr(begin, end - begin);
  std::vector<std::string> out;
  static const std::regex row{R"(\n\| `([a-z_]+)` \|)"};
  for (std::sregex_iterator it{section.begin(), section.end(), row}, stop; it != stop; ++it)
    out.push_back((*it)[1]);
  return out;
}

kiln::output_comparison tolerance_failure(int64_t outside, int64_t values, double ratio) {
  kiln::output_comparison c;
  c.ok = false;
  c.code = "tolerance";
  c.outside = outside;
  c.values = values;
  c.worst_ratio = ratio;
  return c;
}

} // namespace

TEST_CASE("every verdict code is documented, once, in the order kiln lists them", "[judge]") {
  const auto& codes = kiln::verdict_codes();
  CHECK(documented_codes() == codes);
  CHECK(std::set<std::string>(codes.begin(), codes.end()).size() == codes.size());
}

TEST_CASE("a borderline mismatch is a few values just outside, nothing more", "[judge]") {
  CHECK(tolerance_failure(1, 16384, 1.5).borderline());
  CHECK(tolerance_failure(4, 16384, 2.0).borderline());
  // Too many values, or one too far off.
  CHECK_FALSE(tolerance_failure(5, 16384, 1.1).borderline());
  CHECK_FALSE(tolerance_failure(1, 16384, 2.01).borderline());
  // On a big output the allowance is a share of the values.
  CHECK(tolerance_failure(100, 1000000, 1.9).borderline());
  CHECK_FALSE(tolerance_failure(101, 1000000, 1.9).borderline());
  // Only tolerance failures can be borderline.
  auto nan = tolerance_failure(1, 16384, 1.5);
  nan.code = "nan_output";
  CHECK_FALSE(nan.borderline());
  auto passed = tolerance_failure(0, 16384, 0);
  passed.ok = true;
  CHECK_FALSE(passed.borderline());
}

TEST_CASE("static scan findings get the code of their rule", "[judge]") {
  auto code_of = [](const std::string& source) {
    auto scan = kiln::scan_candidate(source);
    REQUIRE_FALSE(scan.rejections.empty());
    return kiln::scan_code(scan.rejections.front().rule);
  };
  CHECK(code_of("import time\ntime.perf_counter = None\n") == "scan_patch");
  CHECK(code_of("import sys\nf = sys._getframe(1)\n") == "scan_introspection");
  CHECK(code_of("import gc\nx = gc.get_objects()\n") == "scan_introspection");
  CHECK(code_of("import threading\n") == "scan_background");
  CHECK(code_of("import socket\n") == "scan_network");
  CHECK(code_of("x = eval('1')\n") == "scan_dynamic_code");
  CHECK(code_of("p = open('job.json').read()\n") == "scan_harness");
  for (const char* code : {"scan_patch", "scan_introspection", "scan_background", "scan_network",
                           "scan_dynamic_code", "scan_harness"}) {
    const auto& all = kiln::verdict_codes();
    CHECK(std::find(all.begin(), all.end(), code) != all.end());
    CHECK_FALSE(kiln::scan_cause(code).empty());
  }
}

TEST_CASE("a harness violation gets the code of what it says", "[judge]") {
  CHECK(kiln::violation_code("replaced time.perf_counter_ns at run time").first
        == "replaced_function");
  CHECK(kiln::violation_code("left a thread running after forward returned (t): ...").first
        == "thread_left_running");
  CHECK(kiln::violation_code("output 0 is a Lazy, not a plain torch.Tensor (...)").first
        == "lazy_output");
  CHECK(kiln::violation_code("output 0 has no real storage (a meta tensor)").first == "no_storage");
  CHECK(kiln::violation_code("something new").first == "harness_violation");
}

TEST_CASE("a trial is named with its place and its seed", "[judge]") {
  CHECK(kiln::trial_name(1, 3, 42) == "trial 2 of 3 (input seed 42)");
}
