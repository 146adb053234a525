// Publishing a runner's staged builds into the shared cache (gpu/build_cache.hpp), with staging
// folders made by hand: what a well-behaved runner leaves is published once and never replaced,
// and every trick a candidate could play with its own staging folder gets nothing published.

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "gpu/build_cache.hpp"
#include "gpu/harness.hpp"
#include "gpu/process.hpp"
#include "gpu/python.hpp"

namespace fs = std::filesystem;

namespace {

std::string root(const std::string& name) {
  auto dir = fs::path{KILN_TEST_TMP} / "build-cache" / std::to_string(::getpid()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string slurp(const fs::path& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

void put(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream{path, std::ios::binary} << text;
}

/// Every file beneath `dir` with its contents: what a test compares before and after.
std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir))
    return out;
  for (const auto& e : fs::recursive_directory_iterator{dir}) {
    auto rel = fs::relative(e.path(), dir).string();
    out[rel] = e.is_regular_file() ? slurp(e.path()) : std::string{"<dir>"};
  }
  return out;
}

/// A manifest as kiln_build.py writes one (canonical already), and its key.
std::string manifest_text(const std::string& name) {
  return R"({"args":{"cpp_sources":["int f() { return 1; }\n"],"name":")" + name
         + R"("},"kind":"load_inline","v":"kiln-ext-2","with_cuda":false})";
}

std::string key_of(const std::string& manifest) {
  std::string error;
  auto key = kiln::manifest_key(manifest, error);
  INFO(error);
  REQUIRE(key.size() == 64);
  return key;
}

/// Stages an extension entry the way kiln_build.py does; returns its key.
std::string stage_ext(const std::string& stage, const std::string& name,
                      const std::string& library = "ELF library bytes") {
  auto manifest = manifest_text(name);
  auto key = key_of(manifest);
  auto dir = fs::path{stage} / "ext" / key;
  put(dir / "manifest.json", manifest);
  put(dir / "meta.json", R"({"artifact": ")" + name + R"(.so", "module": ")" + name
                             + R"(", "kind": "load_inline", "name": ")" + name
                             + R"(", "is_python_module": true, "is_standalone": false, )"
                               R"("torch": "1.13", "pch": false})");
  put(dir / (name + ".so"), library);
  put(dir / "main.cpp", "int f() { return 1; }\n");
  return key;
}

} // namespace

TEST_CASE("sha256 matches the standard's test vectors", "[build_cache]") {
  CHECK(kiln::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(kiln::sha256_hex("abc")
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(kiln::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
        == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(kiln::sha256_hex(std::string(1000000, 'a'))
        == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("canonical JSON is Python's sort_keys, compact, UTF-8 text", "[build_cache]") {
  std::string error;
  // What `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` printed for
  // the same value in Python 3.11.
  const std::string python = "[\"\\u0000\\u0001\\u001f\x7f\u2028\\\"\\\\\\b\\f\\n\\r\\t/\u00e9"
                             "\U0001F600\",{\"a\":[true,null,-5],\"b\":1}]";
  CHECK(kiln::canonical_json(python, error) == python);
  CHECK(kiln::canonical_json(" { \"b\" : 1, \"a\" : [ true , null, -5 ] } ", error)
        == "{\"a\":[true,null,-5],\"b\":1}");
  CHECK(kiln::canonical_json("[\"\\u00e9\\/\"]", error) == "[\"\u00e9/\"]");

  CHECK(kiln::canonical_json("{\"a\": 1, \"a\": 2}", error).empty());
  CHECK_THAT(error, Catch::Contains("twice"));
  CHECK(kiln::canonical_json("[1.5]", error).empty());
  CHECK_THAT(error, Catch::Contains("not an integer"));
  CHECK(kiln::canonical_json("[1,", error).empty());
  CHECK_THAT(error, Catch::Contains("not JSON"));
}

TEST_CASE("an extension's key is the sha256 of its manifest's canonical text", "[build_cache]") {
  std::string error;
  const auto manifest = manifest_text("kiln_k");
  CHECK(kiln::manifest_key(manifest, error) == kiln::sha256_hex(manifest));
  // Spacing and key order do not change it; content does.
  CHECK(kiln::manifest_key(R"({"v": "kiln-ext-2", "with_cuda": false, "kind": "load_inline",
                               "args": {"name": "kiln_k",
                                        "cpp_sources": ["int f() { return 1; }\n"]}})",
                           error)
        == kiln::sha256_hex(manifest));
  CHECK(kiln::manifest_key(manifest_text("kiln_other"), error) != kiln::sha256_hex(manifest));

  CHECK(kiln::manifest_key(R"({"v": "kiln-ext-1", "kind": "load", "args": {"name": "x"}})", error)
            .empty());
  CHECK_THAT(error, Catch::Contains("version"));
  CHECK(kiln::manifest_key(R"({"v": "kiln-ext-2", "kind": "exec", "args": {"name": "x"}})", error)
            .empty());
  CHECK(kiln::manifest_key(R"({"v": "kiln-ext-2", "kind": "load", "args": {}})", error).empty());
  CHECK_THAT(error, Catch::Contains("args.name"));
}

TEST_CASE("a staged extension is published whole, read-only, and never replaced", "[build_cache]") {
  auto dir = root("publish");
  auto cache = dir + "/cache";
  kiln::prepare_cache_dir(cache);
  auto key = stage_ext(dir + "/stage1", "kiln_pub", "first library");

  auto report = kiln::publish_staged(dir + "/stage1", cache);
  CHECK(report.published == 1);
  CHECK(report.rejected == 0);
  auto entry = fs::path{cache} / "ext" / key;
  CHECK(slurp(entry / "kiln_pub.so") == "first library");
  CHECK(slurp(entry / "manifest.json") == manifest_text("kiln_pub"));
  CHECK(fs::exists(entry / "meta.json"));
  CHECK(fs::exists(entry / "main.cpp"));
  struct stat st {};
  REQUIRE(::stat((entry / "kiln_pub.so").c_str(), &st) == 0);
  CHECK((st.st_mode & 0222) == 0);
  CHECK(fs::is_empty(fs::path{cache} / "tmp"));

  // A second runner that built the same key: the first publisher's entry stays.
  stage_ext(dir + "/stage2", "kiln_pub", "second library");
  report = kiln::publish_staged(dir + "/stage2", cache);
  CHECK(report.published == 0);
  CHECK(report.existing == 1);
  CHECK(slurp(entry / "kiln_pub.so") == "first library");
  CHECK(fs::is_empty(fs::path{cache} / "tmp"));

  // No staging folder (a runner that built nothing): nothing happens.
  report = kiln::publish_staged(dir + "/nowhere", cache);
  CHECK(report.published + report.existing + report.rejected == 0);
}

TEST_CASE("staged extensions that are not what they claim are rejected and publish nothing",
          "[build_cache]") {
  auto dir = root("reject");
  auto cache = dir + "/cache";
  kiln::prepare_cache_dir(cache);
  auto before = tree(cache);
  auto stage = dir + "/stage";
  std::string expect;

  SECTION("a key its manifest does not hash to") {
    auto key = stage_ext(stage, "kiln_a");
    fs::rename(fs::path{stage} / "ext" / key, fs::path{stage} / "ext" / std::string(64, 'a'));
    expect = "its manifest's key is " + key;
  }
  SECTION("a name that is no key") {
    auto key = stage_ext(stage, "kiln_a");
    fs::rename(fs::path{stage} / "ext" / key, fs::path{stage} / "ext" / "kiln_a");
    expect = "ext/kiln_a: not a cache key";
  }
  SECTION("a library that is a symbolic link") {
    auto key = stage_ext(stage, "kiln_a");
    auto lib = fs::path{stage} / "ext" / key / "kiln_a.so";
    fs::remove(lib);
    fs::create_symlink("/etc/hostname", lib);
    expect = "kiln_a.so is a symbolic link";
  }
  SECTION("a library with a second hard link") {
    auto key = stage_ext(stage, "kiln_a");
    fs::create_hard_link(fs::path{stage} / "ext" / key / "kiln_a.so", fs::path{stage} / "other");
    expect = "kiln_a.so has 2 hard links";
  }
  SECTION("a FIFO where the library should be") {
    auto key = stage_ext(stage, "kiln_a");
    auto lib = fs::path{stage} / "ext" / key / "kiln_a.so";
    fs::remove(lib);
    REQUIRE(::mkfifo(lib.c_str(), 0644) == 0);
    expect = "kiln_a.so is not a regular file";
  }
  SECTION("a folder where the library should be") {
    auto key = stage_ext(stage, "kiln_a");
    auto lib = fs::path{stage} / "ext" / key / "kiln_a.so";
    fs::remove(lib);
    fs::create_directories(lib / "inner");
    expect = "kiln_a.so is a folder";
  }
  SECTION("an entry that is a symbolic link to a real one") {
    auto key = stage_ext(dir + "/elsewhere", "kiln_a");
    fs::create_directories(fs::path{stage} / "ext");
    fs::create_directory_symlink(fs::path{dir} / "elsewhere" / "ext" / key,
                                 fs::path{stage} / "ext" / key);
    expect = "not a folder";
  }
  SECTION("a staging folder that is a symbolic link") {
    stage_ext(dir + "/elsewhere", "kiln_a");
    fs::create_directory_symlink(fs::path{dir} / "elsewhere", stage);
    expect = "stage: not a folder";
  }
  SECTION("a file kiln does not know") {
    auto key = stage_ext(stage, "kiln_a");
    put(fs::path{stage} / "ext" / key / "extra.sh", "rm -rf /");
    expect = "an unexpected file 'extra.sh'";
  }
  SECTION("meta.json that names another library") {
    auto key = stage_ext(stage, "kiln_a");
    put(fs::path{stage} / "ext" / key / "meta.json",
        R"({"artifact": "../../evil.so", "module": "evil", "kind": "load_inline",)"
        R"( "name": "kiln_a", "is_python_module": true, "is_standalone": false})");
    expect = "names no plain artifact";
  }
  SECTION("meta.json and the manifest disagree on the build") {
    auto key = stage_ext(stage, "kiln_a");
    put(fs::path{stage} / "ext" / key / "meta.json",
        R"({"artifact": "kiln_a.so", "module": "kiln_a", "kind": "load_inline",)"
        R"( "name": "kiln_b", "is_python_module": true, "is_standalone": false})");
    expect = "name different builds";
  }
  SECTION("a manifest larger than the limit") {
    auto key = stage_ext(stage, "kiln_a");
    auto manifest = fs::path{stage} / "ext" / key / "manifest.json";
    fs::resize_file(manifest, kiln::staging_limits::manifest_bytes + 1);
    expect = "manifest.json is larger than";
  }

  auto report = kiln::publish_staged(stage, cache);
  INFO((report.problems.empty() ? std::string{"no problem"} : report.problems.front()));
  CHECK(report.published == 0);
  CHECK(report.rejected == 1);
  REQUIRE(report.problems.size() == 1);
  CHECK_THAT(report.problems.front(), Catch::Contains(expect));
  CHECK(tree(cache) == before);
}

TEST_CASE("an unfinished staged build is left alone", "[build_cache]") {
  auto dir = root("unfinished");
  auto cache = dir + "/cache";
  auto key = stage_ext(dir + "/stage", "kiln_a");
  fs::rename(fs::path{dir} / "stage" / "ext" / key,
             fs::path{dir} / "stage" / "ext" / (".tmp-" + key + "-1234"));
  auto report = kiln::publish_staged(dir + "/stage", cache);
  CHECK(report.published + report.existing + report.rejected == 0);
}

TEST_CASE("precompiled-header requests are published only as a flag set", "[build_cache]") {
  auto dir = root("requests");
  auto cache = dir + "/cache";
  kiln::prepare_cache_dir(cache);
  const std::string good(64, 'b');
  const std::string bad(64, 'c');
  put(fs::path{dir} / "stage" / "pch-requests" / (good + ".json"),
      R"({"extra_cflags": ["-O3", "-DX=\"y\""], "with_cuda": false})");
  put(fs::path{dir} / "stage" / "pch-requests" / (bad + ".json"),
      R"({"extra_cflags": [], "with_cuda": false, "command": "sh -c evil"})");
  put(fs::path{dir} / "stage" / "pch-requests" / "notakey.json", "{}");
  auto report = kiln::publish_staged(dir + "/stage", cache);
  CHECK(report.published == 1);
  CHECK(report.rejected == 2);
  CHECK(slurp(fs::path{cache} / "pch" / "requests" / (good + ".json"))
        == R"({"extra_cflags": ["-O3", "-DX=\"y\""], "with_cuda": false})");
  CHECK_FALSE(fs::exists(fs::path{cache} / "pch" / "requests" / (bad + ".json")));
}

TEST_CASE("new Triton groups are published, host code and links are not", "[build_cache]") {
  auto dir = root("triton");
  auto cache = dir + "/cache";
  kiln::prepare_cache_dir(cache);
  auto triton = fs::path{dir} / "stage" / "triton" / "sm90";
  put(triton / "KEYA" / "add_kernel.cubin", "cubin");
  put(triton / "KEYA" / "__grp__add_kernel.json",
      R"({"child_paths": {"add_kernel.cubin": "/tmp/x/KEYA/add_kernel.cubin"}})");
  fs::create_directories(triton / "KEYA" / "tmp.pid_7_abc"); // an interrupted write
  put(triton / "LAUNCHER" / "__triton_launcher.so", "host code");
  put(triton / "LINKED" / "k.cubin", "x");
  fs::create_symlink("/etc/hostname", triton / "LINKED" / "k.json");
  fs::create_directories(triton / "EMPTY"); // made by a lookup
  put(fs::path{cache} / "triton" / "sm90" / "KEYB" / "k.cubin", "theirs");
  put(triton / "KEYB" / "k.cubin", "mine");
  put(fs::path{dir} / "stage" / "triton" / "sm90 x" / "KEYC" / "k.cubin", "x");

  auto report = kiln::publish_staged(dir + "/stage", cache);
  for (const auto& p : report.problems)
    UNSCOPED_INFO(p);
  CHECK(report.published == 1);
  CHECK(report.skipped == 1);
  CHECK(report.existing == 1);
  CHECK(report.rejected == 2); // the link, and an arch tag that is none
  CHECK(slurp(fs::path{cache} / "triton" / "sm90" / "KEYA" / "add_kernel.cubin") == "cubin");
  CHECK_FALSE(fs::exists(fs::path{cache} / "triton" / "sm90" / "KEYA" / "tmp.pid_7_abc"));
  CHECK_FALSE(fs::exists(fs::path{cache} / "triton" / "sm90" / "LAUNCHER"));
  CHECK_FALSE(fs::exists(fs::path{cache} / "triton" / "sm90" / "LINKED"));
  CHECK_FALSE(fs::exists(fs::path{cache} / "triton" / "sm90" / "EMPTY"));
  CHECK(slurp(fs::path{cache} / "triton" / "sm90" / "KEYB" / "k.cubin") == "theirs");
}

TEST_CASE("a precompiled header is published only for the key kiln asked for", "[build_cache]") {
  auto dir = root("pch");
  auto cache = dir + "/cache";
  kiln::prepare_cache_dir(cache);
  const std::string key(64, 'd');
  auto entry = fs::path{dir} / "stage" / "pch" / key / "torch";
  put(entry / "extension.h", "#pragma once\n");
  put(entry / "extension.h.gch", "gch bytes");

  auto other = kiln::publish_pch(dir + "/stage", cache, std::string(64, 'e'));
  CHECK(other.published == 0);
  CHECK(other.rejected == 1);
  // Not through publish_staged: a pch runner's header only when kiln asked for it.
  auto staged = kiln::publish_staged(dir + "/stage", cache);
  CHECK(staged.published == 0);
  CHECK_FALSE(fs::exists(fs::path{cache} / "pch" / key));

  auto report = kiln::publish_pch(dir + "/stage", cache, key);
  CHECK(report.published == 1);
  CHECK(slurp(fs::path{cache} / "pch" / key / "torch" / "extension.h.gch") == "gch bytes");
  CHECK(slurp(fs::path{cache} / "pch" / key / "torch" / "extension.h") == "#pragma once\n");
  CHECK(kiln::publish_pch(dir + "/stage", cache, key).existing == 1);

  // A header that is a link (as it once was) is refused.
  auto key2 = std::string(64, 'f');
  auto entry2 = fs::path{dir} / "stage" / "pch" / key2 / "torch";
  put(entry2 / "extension.h.gch", "gch bytes");
  fs::create_symlink("/etc/hostname", entry2 / "extension.h");
  auto linked = kiln::publish_pch(dir + "/stage", cache, key2);
  CHECK(linked.rejected == 1);
  CHECK_FALSE(fs::exists(fs::path{cache} / "pch" / key2));
}

TEST_CASE("a prepared cache has a lock file for every stripe of keys", "[build_cache]") {
  auto dir = root("locks");
  kiln::prepare_cache_dir(dir);
  CHECK(fs::exists(fs::path{dir} / "locks" / "000.lock"));
  CHECK(fs::exists(fs::path{dir} / "locks" / "fff.lock"));
  CHECK(kiln::pch_lock_path(dir, std::string(64, 'a'))
        == dir + "/locks/pch-" + std::string(64, 'a') + ".lock");
  CHECK(kiln::prepare_cache_dir_once(dir));
  CHECK(kiln::prepare_cache_dir_once(dir));
}

TEST_CASE("runners read Triton's shared groups and write only their staging folder",
          "[build_cache][triton]") {
  // No Triton here: a package of its own name whose cache module has Triton's FileCacheManager
  // (python/triton/runtime/cache.py), reduced to what kiln_build.py's patch touches.
  auto dir = root("triton-patch");
  auto harness = kiln::install_harness(dir + "/harness");
  put(fs::path{dir} / "fake" / "triton" / "__init__.py", "");
  put(fs::path{dir} / "fake" / "triton" / "runtime" / "__init__.py", "");
  put(fs::path{dir} / "fake" / "triton" / "runtime" / "cache.py", R"PY(
import json, os
class FileCacheManager:
    def __init__(self, key, override=False, dump=False):
        self.key = key
        base = os.environ["TRITON_OVERRIDE_DIR" if override else "TRITON_CACHE_DIR"]
        self.cache_dir = os.path.join(base, key)
        os.makedirs(self.cache_dir, exist_ok=True)
    def _make_path(self, filename):
        return os.path.join(self.cache_dir, filename)
    def has_file(self, filename):
        return os.path.exists(self._make_path(filename))
    def get_file(self, filename):
        return self._make_path(filename) if self.has_file(filename) else None
    def get_group(self, filename):
        if not self.has_file("__grp__" + filename):
            return None
        with open(self._make_path("__grp__" + filename)) as f:
            children = json.load(f)["child_paths"]
        return {c: p for c, p in children.items() if os.path.exists(p)}
    def put(self, data, filename, binary=True):
        with open(self._make_path(filename), "wb" if binary else "w") as f:
            f.write(data)
        return self._make_path(filename)
)PY");
  auto shared = fs::path{dir} / "cache" / "triton" / "sm90";
  put(shared / "KEY" / "k.cubin", "shared cubin");
  put(shared / "KEY" / "k.json", "{}");
  // As published: the paths are the publishing runner's, long gone.
  put(shared / "KEY" / "__grp__k.json",
      R"({"child_paths": {"k.cubin": "/gone/KEY/k.cubin", "k.json": "/gone/KEY/k.json"}})");
  put(fs::path{dir} / "check.py", R"PY(
import os, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import kiln_build
private, shared = sys.argv[3], sys.argv[4]
os.environ["TRITON_CACHE_DIR"] = private
os.environ["TRITON_OVERRIDE_DIR"] = sys.argv[5]
sys.meta_path.insert(0, kiln_build._PatchOnImport(
    {"triton.runtime.cache": lambda m: kiln_build._patch_triton_cache(m, private, shared)}))
from triton.runtime.cache import FileCacheManager
m = FileCacheManager("KEY")
print(m.get_file("k.cubin"))
print(sorted(m.get_group("k.json").items()))
print(m.get_file("missing"), m.get_group("missing.json"))
print(m.put(b"mine", "new.cubin"))
print(FileCacheManager("KEY", override=True).get_file("k.cubin"))
print(FileCacheManager("OTHER").get_file("k.cubin"))
)PY");
  const auto private_dir = dir + "/stage/triton/sm90";
  kiln::process_options opts;
  opts.argv = {kiln::find_python(""),
               "-I",
               "-B",
               dir + "/check.py",
               fs::path{harness}.parent_path().string(),
               dir + "/fake",
               private_dir,
               shared.string(),
               dir + "/override"};
  opts.env = {"PATH=/usr/bin:/bin"};
  opts.stdout_path = dir + "/out.txt";
  opts.stderr_path = dir + "/err.txt";
  opts.timeout_s = 60;
  auto r = kiln::run_process(opts);
  INFO(slurp(dir + "/err.txt"));
  CHECK(r.exit_code == 0);
  const auto s = shared.string();
  CHECK(slurp(dir + "/out.txt")
        == s + "/KEY/k.cubin\n" + "[('k.cubin', '" + s + "/KEY/k.cubin'), ('k.json', '" + s
               + "/KEY/k.json')]\n" + "None None\n" + private_dir + "/KEY/new.cubin\n"
               + "None\nNone\n");
  CHECK(slurp(private_dir + "/KEY/new.cubin") == "mine");
  CHECK_FALSE(fs::exists(shared / "KEY" / "new.cubin"));
}
