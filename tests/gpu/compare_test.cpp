#include <catch2/catch.hpp>

#include "gpu/python.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>

#include "gpu/compare.hpp"

namespace fs = std::filesystem;
using kiln::compare_outputs;
using kiln::output_comparison;
using kiln::verdict_status;

namespace {

// Every fixture of this file, written by one Python process (starting torch costs ~1 s).
const char* fixture_script = R"PY(
import sys, torch
d = sys.argv[1]
def save(name, obj):
    torch.save(obj, f"{d}/{name}.pt")
g = torch.Generator().manual_seed(0)
a = torch.randn(4, 8, generator=g)
b = torch.randn(3, generator=g)
save("ref", [a, b])
save("same", [a.clone(), b.clone()])
save("tuple", (a.clone(), b.clone()))
save("noisy", [a + 1e-3 * torch.randn(4, 8, generator=g), b + 1e-3 * torch.randn(3, generator=g)])
far = a.clone(); far[1, 2] += 0.53
save("far", [far, b.clone()])
save("shape", [torch.randn(4, 10, generator=g), b.clone()])
save("dtype", [a.clone(), b.double()])
save("count1", [a.clone()])
save("count3", [a.clone(), b.clone(), b.clone()])
nan = a.clone(); nan[0, 0] = float("nan")
save("nan", [nan, b.clone()])
inf = a.clone(); inf[3, 7] = float("inf")
save("inf", [inf, b.clone()])
save("notensor", [a.clone(), 3])
# Varies, but within tolerance of a constant: only the signal check can catch a constant.
flat = 1 + 1e-3 * torch.randn(64, generator=g)
save("flat_ref", [flat])
save("flat_const", [torch.ones(64)])
save("flat_good", [flat.clone()])
# A low-signal reference: zeros would pass allclose.
tiny = 1e-4 * torch.randn(64, generator=g)
save("tiny_ref", [tiny])
save("tiny_zeros", [torch.zeros(64)])
save("tiny_wrong", [1e-4 * torch.randn(64, generator=g)])
save("tiny_good", [tiny * (1 + 1e-3)])
# Mathematically constant, numerically jittery: an exactly constant candidate is right.
sums = torch.softmax(torch.randn(50, 300, generator=g), dim=1).sum(dim=1)
save("sums_ref", [sums])
save("sums_exact", [torch.ones(50)])
save("single_ref", a.clone())
save("single_same", a.clone())
save("int_ref", [torch.arange(10)])
save("int_same", [torch.arange(10)])
off = torch.arange(10); off[4] = 40
save("int_off", [off])
save("empty_ref", [torch.empty(0, 3)])
save("empty_same", [torch.empty(0, 3)])
ref_nan = a.clone(); ref_nan[2, 2] = float("nan")
save("refnan_ref", [ref_nan])
save("refnan_same", [ref_nan.clone()])
save("refnan_filled", [a.clone()])
save("nested", [[a.clone()]])
save("pair_ref", [a.clone(), a.clone()])
save("pair_shared", [a, a])
# The harness's raw format (what runners write), through its own writer.
sys.path.insert(0, sys.argv[2])
import ctypes, types, kiln_harness
io = types.SimpleNamespace(open=open, c_char=ctypes.c_char, save=torch.save)
def raw(name, tensors):
    kiln_harness._write_outputs(torch, f"{d}/{name}.pt", list(tensors), io)
raw("raw_ref", [a, b])
raw("raw_same", [a.clone(), b.clone()])
raw("raw_far", [far, b.clone()])
mixed = [a.t(), torch.tensor(3.5), torch.arange(6, dtype=torch.int16).reshape(2, 3),
         torch.tensor([True, False]), (a[:2] * 1).to(torch.bfloat16), torch.empty(0, 3),
         torch.complex(a, b.sum().expand(4, 8))]
raw("raw_mixed_ref", mixed)
save("mixed_saved", [t.contiguous() for t in mixed])
raw("raw_mixed_f16", [mixed[0]] + [mixed[1].to(torch.float16)] + mixed[2:])
# Several comparison chunks (4M values each): the worst value lies in the third.
big = torch.randn(9_000_000, generator=g)
raw("raw_big_ref", [big])
off = big.clone(); off[100] += 0.2; off[8_500_000] -= 0.7
raw("raw_big_off", [off])
save("big_off_saved", [off])
# Conjugate and negative views: their bytes are not their values.
z = torch.complex(a, a.flip(0))
raw("raw_conj", [z.conj(), torch._neg_view(b)])
save("conj_values", [z.conj().resolve_conj(), -b])
)PY";

// CTest runs every test case in its own process, several at once: the fixtures are written
// once into a private folder and published by an atomic rename, keyed by the script's hash.
const std::string& fixtures() {
  static std::once_flag once;
  static std::string dir;
  std::call_once(once, [] {
    fs::path root(KILN_TEST_TMP);
    fs::path done = root / ("compare-" + std::to_string(std::hash<std::string>{}(fixture_script)));
    if (!fs::exists(done / "ref.pt")) {
      fs::path tmp = root / ("compare-tmp-" + std::to_string(getpid()));
      fs::remove_all(tmp);
      fs::create_directories(tmp);
      std::ofstream(tmp / "make.py") << fixture_script;
      std::string cmd = kiln::find_python("") + " '" + (tmp / "make.py").string() + "' '"
                        + tmp.string() + "' '" + KILN_SOURCE_DIR + "/gpu/harness'";
      if (std::system(cmd.c_str()) != 0)
        throw std::runtime_error("cannot write the fixtures: " + cmd);
      std::error_code ec;
      fs::rename(tmp, done, ec); // fails when another process published first: use theirs
      fs::remove_all(tmp, ec);
    }
    dir = done.string();
  });
  return dir;
}

std::string file(const std::string& name) {
  return fixtures() + "/" + name + ".pt";
}

output_comparison cmp(const std::string& ref, const std::string& cand) {
  return compare_outputs(file(ref), file(cand), kiln::tolerance{});
}

} // namespace

TEST_CASE("identical outputs are correct", "[compare]") {
  auto r = cmp("ref", "same");
  CHECK(r.ok);
  CHECK(r.reason.empty());
  REQUIRE(r.max_abs_diff.size() == 2);
  CHECK(r.max_abs_diff[0] == 0);
  CHECK(r.max_rel_diff[1] == 0);
}

TEST_CASE("a zero tolerance tells equal outputs from nearly equal ones", "[compare]") {
  // The evaluator uses this to see a reference whose output ignores its inputs.
  CHECK(compare_outputs(file("ref"), file("same"), {0, 0}).ok);
  auto r = compare_outputs(file("ref"), file("noisy"), {0, 0});
  CHECK_FALSE(r.ok);
  CHECK(r.status == verdict_status::incorrect);
}

TEST_CASE("a tuple of outputs compares like a list", "[compare]") {
  CHECK(cmp("ref", "tuple").ok);
}

TEST_CASE("noise within tolerance passes and is measured", "[compare]") {
  auto r = cmp("ref", "noisy");
  CHECK(r.ok);
  REQUIRE(r.max_abs_diff.size() == 2);
  CHECK(r.max_abs_diff[0] > 1e-4);
  CHECK(r.max_abs_diff[0] < 1e-2);
  CHECK(r.max_rel_diff[0] > 0);
}

TEST_CASE("a difference beyond tolerance is incorrect", "[compare]") {
  auto r = cmp("ref", "far");
  CHECK_FALSE(r.ok);
  CHECK(r.status == verdict_status::incorrect);
  CHECK_THAT(r.reason, Catch::StartsWith("output 0 differs: max abs diff 0.53 > tolerance "
                                         "(atol 0.01, rtol 0.01)"));
  CHECK_THAT(r.reason, Catch::Contains("[1, 2]"));
  CHECK(r.code == "tolerance");
  CHECK(r.outside >= 1);
  CHECK(r.worst_ratio > 1);
  REQUIRE(r.max_abs_diff.size() == 2);
  CHECK(r.max_abs_diff[0] == Approx(0.53).epsilon(1e-4));
  CHECK(r.max_abs_diff[1] == 0);
}

TEST_CASE("structure mismatches are rejected with the output's index", "[compare]") {
  SECTION("shape") {
    auto r = cmp("ref", "shape");
    CHECK(r.status == verdict_status::rejected);
    CHECK_THAT(r.reason, Catch::StartsWith("output 0 has shape [4, 10], expected [4, 8]"));
    CHECK(r.code == "shape");
  }
  SECTION("dtype") {
    auto r = cmp("ref", "dtype");
    CHECK(r.status == verdict_status::rejected);
    CHECK_THAT(r.reason, Catch::StartsWith("output 1 has dtype float64, expected float32"));
    CHECK(r.code == "dtype");
  }
  SECTION("count") {
    auto fewer = cmp("ref", "count1");
    CHECK_FALSE(fewer.ok);
    CHECK(fewer.status == verdict_status::rejected);
    CHECK_THAT(fewer.reason, Catch::StartsWith("output count 1, expected 2"));
    CHECK(fewer.code == "output_count");
    CHECK_THAT(cmp("ref", "count3").reason, Catch::StartsWith("output count 3, expected 2"));
  }
  SECTION("not a tensor") {
    auto r = cmp("ref", "notensor");
    CHECK(r.status == verdict_status::rejected);
    CHECK_THAT(r.reason, Catch::StartsWith("output 1 is not a tensor"));
  }
}

TEST_CASE("NaN or Inf where the reference has none is incorrect", "[compare]") {
  auto nan = cmp("ref", "nan");
  CHECK_FALSE(nan.ok);
  CHECK(nan.status == verdict_status::incorrect);
  CHECK_THAT(nan.reason, Catch::StartsWith("output 0 has NaN where the reference has none: "));
  CHECK(nan.code == "nan_output");
  CHECK(std::isinf(nan.max_abs_diff[0]));
  auto inf = cmp("ref", "inf");
  CHECK(inf.status == verdict_status::incorrect);
  CHECK_THAT(inf.reason, Catch::StartsWith("output 0 has Inf where the reference is finite: "));
  CHECK(inf.code == "inf_output");
}

TEST_CASE("NaN where the reference has NaN is fine, a number there is not", "[compare]") {
  auto same = cmp("refnan_ref", "refnan_same");
  CHECK(same.ok);
  CHECK(same.max_abs_diff[0] == 0);
  auto filled = cmp("refnan_ref", "refnan_filled");
  CHECK_FALSE(filled.ok);
  CHECK(filled.status == verdict_status::incorrect);
}

TEST_CASE("a constant output where the reference varies is rejected", "[compare]") {
  auto r = cmp("flat_ref", "flat_const");
  CHECK_FALSE(r.ok);
  CHECK(r.status == verdict_status::rejected);
  CHECK_THAT(r.reason, Catch::StartsWith("output 0 is constant where the reference varies ("));
  CHECK(r.code == "constant_output");
  CHECK(cmp("flat_ref", "flat_good").ok);
}

TEST_CASE("a reference constant up to rounding accepts an exact constant", "[compare]") {
  CHECK(cmp("sums_ref", "sums_exact").ok);
}

TEST_CASE("a low-signal reference must be reproduced, not approximated by zeros", "[compare]") {
  auto zeros = cmp("tiny_ref", "tiny_zeros");
  CHECK_FALSE(zeros.ok);
  CHECK(zeros.status == verdict_status::rejected);
  auto wrong = cmp("tiny_ref", "tiny_wrong");
  CHECK_FALSE(wrong.ok);
  CHECK(wrong.status == verdict_status::rejected);
  CHECK_THAT(wrong.reason, Catch::StartsWith("output 0 has low signal (|ref| within tolerance "
                                             "of zero) and the candidate does not reproduce it: "));
  CHECK(wrong.code == "low_signal");
  CHECK(cmp("tiny_ref", "tiny_good").ok);
}

TEST_CASE("a file holding a single tensor works", "[compare]") {
  auto r = cmp("single_ref", "single_same");
  CHECK(r.ok);
  CHECK(r.max_abs_diff.size() == 1);
}

TEST_CASE("lists of one element, nested lists and shared tensors are read", "[compare]") {
  // Python pickles a one-element list with APPEND, which libtorch 1.13 cannot read by itself.
  CHECK(cmp("single_ref", "count1").ok);
  auto nested = cmp("single_ref", "nested");
  CHECK(nested.status == verdict_status::rejected);
  CHECK_THAT(nested.reason, Catch::StartsWith("output 0 is not a tensor"));
  CHECK(cmp("pair_ref", "pair_shared").ok);
}

TEST_CASE("integer outputs must be equal", "[compare]") {
  CHECK(cmp("int_ref", "int_same").ok);
  auto off = cmp("int_ref", "int_off");
  CHECK_FALSE(off.ok);
  CHECK(off.status == verdict_status::incorrect);
  CHECK_THAT(off.reason, Catch::Contains("1 of 10"));
  CHECK(off.max_abs_diff[0] == 36);
}

TEST_CASE("empty outputs compare by shape only", "[compare]") {
  CHECK(cmp("empty_ref", "empty_same").ok);
}

TEST_CASE("an unreadable file throws", "[compare]") {
  std::string garbage = fixtures() + "/garbage-" + std::to_string(getpid()) + ".pt";
  std::ofstream(garbage) << "this is not a torch file";
  CHECK_THROWS_WITH(compare_outputs(file("ref"), garbage, {}), Catch::Contains(garbage));
  CHECK_THROWS_WITH(compare_outputs(fixtures() + "/missing.pt", file("ref"), {}),
                    Catch::Contains("missing.pt"));
}

TEST_CASE("merge_comparison keeps the worst differences and the first failure", "[compare]") {
  output_comparison acc; // a fresh accumulator has seen nothing yet
  output_comparison t1;
  t1.ok = true;
  t1.status = verdict_status::correct;
  t1.max_abs_diff = {0.1, 0.5};
  t1.max_rel_diff = {0.01, 0.02};
  kiln::merge_comparison(acc, t1);
  CHECK(acc.ok);

  output_comparison t2;
  t2.ok = false;
  t2.status = verdict_status::incorrect;
  t2.reason = "output 0 differs";
  t2.max_abs_diff = {0.3, 0.2, 0.7};
  t2.max_rel_diff = {0.005};
  kiln::merge_comparison(acc, t2);

  output_comparison t3;
  t3.ok = false;
  t3.status = verdict_status::rejected;
  t3.reason = "output 1 is constant where the reference varies";
  kiln::merge_comparison(acc, t3);

  CHECK_FALSE(acc.ok);
  CHECK(acc.status == verdict_status::incorrect);
  CHECK(acc.reason == "output 0 differs");
  CHECK(acc.max_abs_diff == std::vector<double>{0.3, 0.5, 0.7});
  CHECK(acc.max_rel_diff == std::vector<double>{0.01, 0.02});
}

TEST_CASE("the harness's raw outputs files compare like torch.save archives", "[compare]") {
  CHECK(cmp("raw_ref", "raw_same").ok);
  CHECK(cmp("ref", "raw_same").ok); // either format on either side
  auto far = cmp("raw_ref", "raw_far");
  CHECK_FALSE(far.ok);
  CHECK_THAT(far.reason, Catch::Contains("worst at [1, 2]"));
  // Views, 0-d, int16, bool, bfloat16, empty and complex outputs survive the round trip.
  auto mixed = cmp("raw_mixed_ref", "mixed_saved");
  CHECK(mixed.ok);
  CHECK(mixed.max_abs_diff.size() == 7);
  auto dtype = cmp("raw_mixed_ref", "raw_mixed_f16");
  CHECK(dtype.status == verdict_status::rejected);
  CHECK_THAT(dtype.reason, Catch::Contains("output 1 has dtype float16, expected float32"));
}

TEST_CASE("a comparison spread over chunks finds the worst value and counts every miss",
          "[compare]") {
  auto r = cmp("raw_big_ref", "raw_big_off");
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("2 of 9000000 values outside"));
  CHECK_THAT(r.reason, Catch::Contains("worst at [8500000]"));
  auto saved = cmp("raw_big_ref", "big_off_saved");
  CHECK(saved.reason == r.reason);
  CHECK(saved.max_abs_diff == r.max_abs_diff);
}

TEST_CASE("a damaged raw outputs file is refused with the reason", "[compare]") {
  auto write = [](const std::string& tag, const std::string& text) {
    std::string path = fixtures() + "/bad-" + tag + "-" + std::to_string(getpid()) + ".pt";
    std::ofstream(path, std::ios::binary) << text;
    return path;
  };
  std::string data(16, '\0');
  auto head = [](const std::string& line) {
    std::string h = "KILNOUT1\n1\n" + line + "\n";
    return h + std::string(64 - h.size(), '\0');
  };
  auto fails = [&](const std::string& tag, const std::string& text, const std::string& why) {
    auto path = write(tag, text);
    CHECK_THROWS_WITH(compare_outputs(path, path, {}),
                      Catch::Contains(path) && Catch::Contains(why));
  };
  fails("dtype", head("float99 1 4 64 16") + data, "unknown dtype 'float99'");
  fails("size", head("float32 1 5 64 16") + data, "16 bytes for its shape");
  fails("outside", head("float32 1 4 128 16") + data, "outside the file");
  fails("number", head("float32 1 x4 64 16") + data, "not a number");
  fails("short", "KILNOUT1\n1\nfloat32 1", "expected");
  fails("bool", head("bool 1 4 64 4") + std::string("\x00\x01\x07\x00", 4), "holds the byte 7");
  auto good = write("good", head("float32 1 4 64 16") + data);
  CHECK(compare_outputs(good, good, {}).ok);
}

TEST_CASE("conjugate and negative views are written as their values", "[compare]") {
  auto r = cmp("conj_values", "raw_conj");
  CHECK(r.ok);
  CHECK(r.max_abs_diff == std::vector<double>{0, 0});
}

TEST_CASE("an outputs file must be a plain file of a sane size", "[compare]") {
  auto dir = fixtures() + "/odd-" + std::to_string(getpid());
  fs::create_directories(dir);
  // A FIFO in the file's place is refused at once, not waited on for a writer that never comes.
  auto fifo = dir + "/out_0.pt";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(kiln::file_bytes::open(fifo), Catch::Contains("not a regular file"));
  // A symbolic link is not followed (it could point at any readable file, of any size).
  auto link = dir + "/out_1.pt";
  fs::create_symlink(file("ref"), link);
  CHECK_THROWS_WITH(kiln::file_bytes::open(link), Catch::Contains("symbolic link"));
  // A file larger than its outputs can take is refused before it is read.
  auto big = dir + "/out_2.pt";
  fs::copy_file(file("raw_big_ref"), big);
  CHECK_THROWS_WITH(kiln::file_bytes::open(big, 1000), Catch::Contains("more than the 1000"));
  CHECK(kiln::file_bytes::open(big).bytes().size() == fs::file_size(big));
  fs::remove_all(dir);
}
