#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config/config.hpp"
#include "config/input_file.hpp"

namespace fs = std::filesystem;
using kiln::read_input_file;

namespace {

fs::path input_dir() {
  auto d = fs::path{KILN_TEST_TMP} / ("input-file-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string error_of(const std::string& path, size_t cap = 1024) {
  try {
    read_input_file(path, "candidate", cap);
  } catch (const kiln::input_error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("a regular file within its cap is read whole", "[input]") {
  auto p = (input_dir() / "ok.py").string();
  std::ofstream{p} << "class ModelNew: pass\n";
  CHECK(read_input_file(p, "candidate", 1024) == "class ModelNew: pass\n");
  CHECK(read_input_file(p, "candidate", 21) == "class ModelNew: pass\n");
}

TEST_CASE("what is not a regular file is refused at once, by name", "[input]") {
  auto d = input_dir();
  auto fifo = (d / "fifo.py").string();
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // With no writer, a blocking open would never return: this returns at once.
  auto t0 = std::chrono::steady_clock::now();
  CHECK(error_of(fifo) == "candidate " + fifo + " is a FIFO, not a regular file");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds{5});
  CHECK(error_of(d.string()) == "candidate " + d.string() + " is a directory, not a regular file");
  CHECK(error_of("/dev/zero") == "candidate /dev/zero is a character device, not a regular file");
  CHECK(error_of("/dev/null") == "candidate /dev/null is a character device, not a regular file");
  auto sock = (d / "s.sock").string();
  fs::remove(sock);
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  if (sock.size() < sizeof addr.sun_path
      && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    // A socket cannot be opened at all (ENXIO): it is refused just the same, by name.
    CHECK(error_of(sock).rfind("cannot read candidate " + sock + ": ", 0) == 0);
  }
  ::close(fd);
  auto missing = (d / "none.py").string();
  CHECK(error_of(missing) == "cannot read candidate " + missing + ": No such file or directory");
}

TEST_CASE("a file over its cap is refused with its size", "[input]") {
  auto p = (input_dir() / "big.py").string();
  std::ofstream{p} << std::string(2048, '#');
  CHECK(error_of(p, 1024)
        == "candidate " + p + " has 2048 bytes, more than the 1024 bytes allowed");
  CHECK(error_of(p, size_t{1} << 20) == "no error");
}

TEST_CASE("a config that is a FIFO or a device is a config error", "[input]") {
  auto fifo = (input_dir() / "cfg.toml").string();
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(kiln::load_config(fifo), "config " + fifo + " is a FIFO, not a regular file");
  CHECK_THROWS_AS(kiln::load_config("/dev/zero"), kiln::config_error);
}
