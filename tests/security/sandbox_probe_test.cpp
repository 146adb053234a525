// What a hostile runner can reach of kiln's own: each probe runs as a real sandboxed child, and
// where it can, once more without the sandbox, so that a probe that could never find anything
// cannot pass.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iterator>
#include <string>
#include <vector>

#include "gpu/process.hpp"
#include "gpu/sandbox.hpp"

namespace fs = std::filesystem;

namespace {

// Planted in this process's environment: the sandbox must keep it from every child.
constexpr const char* planted_key = "sk-kiln-planted-0123456789abcdef";

// The key must be in this program's environment from its exec, as an API key is in kiln's:
// /proc/<pid>/environ shows that block, not what setenv changes later. Without it, the program
// runs itself once more with the key planted.
const bool planted_at_exec = [] {
  std::ifstream in("/proc/self/environ", std::ios::binary);
  std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (env.find(planted_key) != std::string::npos)
    return true;
  std::ifstream cmd("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string a; std::getline(cmd, a, '\0');)
    args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  ::setenv("KILN_PROBE_API_KEY", planted_key, 1);
  ::execv("/proc/self/exe", argv.data());
  return false; // exec failed: the controls below say so
}();

std::string scratch(const std::string& name) {
  fs::path dir = fs::path(KILN_TEST_TMP) / "security" / std::to_string(::getpid()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return fs::canonical(dir).string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct outcome {
  kiln::process_result proc;
  std::string out;
  std::string err;
};

outcome run(const std::vector<std::string>& argv, const std::string& dir,
            const kiln::sandbox_policy* policy) {
  kiln::process_options opts;
  opts.argv = argv;
  opts.env = {"PATH=/usr/bin:/bin", "HOME=" + dir};
  opts.cwd = dir;
  opts.stdout_path = dir + "/out.txt";
  opts.stderr_path = dir + "/err.txt";
  opts.timeout_s = 60;
  opts.kill_grace_s = 1;
  opts.sandbox = policy;
  outcome o;
  o.proc = kiln::run_process(opts);
  o.out = read_all(opts.stdout_path);
  o.err = read_all(opts.stderr_path);
  return o;
}

kiln::sandbox_policy confined(const std::string& dir) {
  kiln::sandbox_policy p;
  p.mode = kiln::sandbox_mode::automatic;
  p.writable_dirs = {dir};
  p.private_tmp = dir + "/tmp";
  fs::create_directories(p.private_tmp);
  return p;
}

bool full_sandbox() {
  const auto& s = kiln::probe_sandbox();
  return s.pid_namespace && s.landlock_abi > 0 && s.seccomp && !s.launcher.empty();
}

// Everything a process can read about every process it can see, and its own descriptors.
const char* const snoop = R"sh(
for p in /proc/[0-9]*; do
  for f in environ cmdline maps; do cat "$p/$f" 2>/dev/null | tr '\0' '\n'; done
done
for fd in /proc/self/fd/*; do echo "fd $(basename $fd) -> $(readlink $fd)"; done
)sh";

} // namespace

TEST_CASE("a sandboxed runner finds no key in any process it can see, nor any descriptor of "
          "kiln's",
          "[security]") {
  if (!full_sandbox()) {
    WARN("no full sandbox here: " << kiln::probe_sandbox().description());
    return;
  }
  auto dir = scratch("snoop");
  auto policy = confined(dir);
  auto in = run({"/bin/sh", "-c", snoop}, dir, &policy);
  INFO(in.err);
  REQUIRE(in.proc.exit_code == 0);
  CHECK(in.out.find(planted_key) == std::string::npos);
  CHECK(in.out.find("KILN_PROBE_API_KEY") == std::string::npos);
  // The init is the launcher, not a copy of this test program.
  CHECK(in.out.find("test_security") == std::string::npos);
  CHECK(in.out.find("kiln-sandbox") != std::string::npos);
  // stdin, stdout, stderr and the descriptor the loop itself opens; nothing inherited.
  std::istringstream lines(in.out);
  std::string line;
  int fds = 0;
  while (std::getline(lines, line))
    if (line.rfind("fd ", 0) == 0) {
      ++fds;
      INFO(line);
      CHECK((line.rfind("fd 0 ", 0) == 0 || line.rfind("fd 1 ", 0) == 0
             || line.rfind("fd 2 ", 0) == 0
             || line.find("/proc/") != std::string::npos
             // the loop's own listing of the folder, closed by the time readlink runs
             || line.back() == ' '));
    }
  CHECK(fds >= 3);

  // The control: without the sandbox, the same loop finds this process and its key.
  REQUIRE(planted_at_exec);
  auto control = run({"/bin/sh", "-c", snoop}, dir, nullptr);
  CHECK(control.out.find(planted_key) != std::string::npos);
}

TEST_CASE("a sandboxed runner runs as an unprivileged user of its own", "[security]") {
  if (!full_sandbox() || ::geteuid() != 0) {
    WARN("needs root and a full sandbox: " << kiln::probe_sandbox().description());
    return;
  }
  const auto& id = kiln::identity_for("kiln-runner");
  REQUIRE(id.available);
  auto dir = scratch("identity");
  auto policy = confined(dir);
  auto in =
      run({"/bin/sh", "-c", "id -u; id -g; id -G; echo x > own.txt && echo wrote"}, dir, &policy);
  INFO(in.err);
  REQUIRE(in.proc.exit_code == 0);
  const std::string uid = std::to_string(id.uid);
  const std::string gid = std::to_string(id.gid);
  CHECK(in.out == uid + "\n" + gid + "\n" + gid + "\nwrote\n");
  CHECK(fs::exists(dir + "/own.txt"));
  auto control = run({"/bin/sh", "-c", "id -u"}, dir, nullptr);
  CHECK(control.out == "0\n");
}

TEST_CASE("the seccomp filter refuses what a candidate never needs", "[security]") {
  if (!full_sandbox() || ::access("/usr/bin/python3", X_OK) != 0) {
    WARN("needs a full sandbox and /usr/bin/python3: " << kiln::probe_sandbox().description());
    return;
  }
  // Each line: a call, then what it got (`ok` or the errno's name).
  const char* probe = R"py(
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def call(name, f):
    try:
        r = f()
        if isinstance(r, int) and r < 0:
            print(name, errno.errorcode.get(ctypes.get_errno(), "?"))
        else:
            print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, "?"))
call("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
# The control runs unconfined as this test's user (root, often): nothing past the harmless
# socket may run there (an attach would stop the test, a mount would land on the host).
if sys.argv[1:] == ["control"]:
    sys.exit(0)
call("inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close())
call("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close())
call("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
call("ptrace", lambda: libc.ptrace(16, os.getppid(), 0, 0))
call("mount", lambda: libc.mount(b"none", b"mnt", b"tmpfs", 0, None))
call("unshare", lambda: libc.unshare(0x10000000))
call("keyctl", lambda: libc.syscall(250, 0, 0, 0, 0, 0))
call("bpf", lambda: libc.syscall(321, 0, 0, 0))
call("perf", lambda: libc.syscall(298, 0, 0, -1, -1, 0))
call("io_uring", lambda: libc.syscall(425, 1, 0))
call("fork", lambda: os.waitpid(os.fork() or os._exit(0), 0))
)py";
  auto dir = scratch("seccomp");
  fs::create_directories(dir + "/mnt");
  auto policy = confined(dir);
  auto in = run({"/usr/bin/python3", "-I", "-c", probe}, dir, &policy);
  INFO(in.out << in.err);
  REQUIRE(in.proc.exit_code == 0);
  CHECK(in.out.find("inet EAFNOSUPPORT\n") != std::string::npos);
  CHECK(in.out.find("inet6 EAFNOSUPPORT\n") != std::string::npos);
  CHECK(in.out.find("netlink EAFNOSUPPORT\n") != std::string::npos);
  CHECK(in.out.find("unix ok\n") != std::string::npos);
  CHECK(in.out.find("ptrace EPERM\n") != std::string::npos);
  CHECK(in.out.find("mount EPERM\n") != std::string::npos);
  CHECK(in.out.find("unshare EPERM\n") != std::string::npos);
  CHECK(in.out.find("keyctl EPERM\n") != std::string::npos);
  CHECK(in.out.find("bpf EPERM\n") != std::string::npos);
  CHECK(in.out.find("perf EPERM\n") != std::string::npos);
  CHECK(in.out.find("io_uring EPERM\n") != std::string::npos);
  CHECK(in.out.find("fork ok\n") != std::string::npos);
  // The control: outside the sandbox the same probe is not refused by a filter.
  auto control = run({"/usr/bin/python3", "-I", "-c", probe, "control"}, dir, nullptr);
  CHECK(control.out.find("inet ok\n") != std::string::npos);
}

TEST_CASE("a sandboxed runner cannot read root's or the system's secrets", "[security]") {
  if (!full_sandbox() || ::geteuid() != 0) {
    WARN("needs root and a full sandbox: " << kiln::probe_sandbox().description());
    return;
  }
  // A secret of root's own, made here so that the probe does not depend on the machine's files.
  const std::string own = "/root/.kiln-probe-secret";
  { std::ofstream{own} << "root-only-" << planted_key << "\n"; }
  fs::permissions(own, fs::perms::owner_read | fs::perms::owner_write);
  // Unable to look into /root at all, the runner cannot even tell that a file exists there.
  const char* probe = "for f in /etc/shadow /root/.bashrc /root/.kiln-probe-secret; do "
                      "head -c 64 \"$f\" >/dev/null 2>&1 && "
                      "echo \"$f read\" || echo \"$f denied\"; done";
  auto dir = scratch("reads");
  auto policy = confined(dir);
  auto in = run({"/bin/sh", "-c", probe}, dir, &policy);
  auto control = run({"/bin/sh", "-c", probe}, dir, nullptr);
  fs::remove(own);
  INFO(in.out << in.err << control.out);
  REQUIRE(in.proc.exit_code == 0);
  CHECK(in.out.find("/root/.kiln-probe-secret denied\n") != std::string::npos);
  CHECK(in.out.find(" read\n") == std::string::npos);
  CHECK(in.out.find("/root/.bashrc denied\n") != std::string::npos);
  CHECK(in.out.find("/etc/shadow denied\n") != std::string::npos);
  // Unconfined, as root, every one of them is read: the probe can find what it looks for.
  CHECK(control.out.find("/root/.kiln-probe-secret read\n") != std::string::npos);
}

TEST_CASE("what a sandboxed runner leaves in /dev/shm is gone with it", "[security]") {
  if (!full_sandbox() || !kiln::probe_sandbox().private_tmp) {
    WARN("needs a full sandbox with a mount namespace: " << kiln::probe_sandbox().description());
    return;
  }
  const std::string name = "kiln-probe-shm-" + std::to_string(::getpid());
  auto dir = scratch("shm");
  auto policy = confined(dir);
  auto in = run({"/bin/sh", "-c", "echo x > /dev/shm/" + name + " && echo wrote"}, dir, &policy);
  INFO(in.err);
  REQUIRE(in.proc.exit_code == 0);
  CHECK(in.out == "wrote\n");
  CHECK_FALSE(fs::exists("/dev/shm/" + name));
  // A second runner sees nothing of the first's.
  auto next = run({"/bin/sh", "-c", "ls /dev/shm/ | grep -c kiln-probe-shm || true"}, dir, &policy);
  CHECK(next.out == "0\n");
}

TEST_CASE("a sandboxed runner reads the system and kiln's folders, not a user's world-readable "
          "files",
          "[security]") {
  if (!full_sandbox()) {
    WARN("no full sandbox here: " << kiln::probe_sandbox().description());
    return;
  }
  // A home as users have them: a world-readable file in a folder anyone may enter, outside
  // every folder kiln names. Only Landlock's read rules keep a runner (even one of the same
  // user) out of it.
  auto home = scratch("home");
  fs::permissions(home, fs::perms::all & ~(fs::perms::group_write | fs::perms::others_write));
  { std::ofstream{home + "/.bash_history"} << "export TOKEN=" << planted_key << "\n"; }
  fs::permissions(home + "/.bash_history", fs::perms::owner_read | fs::perms::owner_write
                                               | fs::perms::group_read | fs::perms::others_read);
  auto kept = scratch("kept");
  { std::ofstream{kept + "/task.py"} << "kept\n"; }
  const std::string probe = "cat " + home
                            + "/.bash_history >/dev/null 2>&1 && echo home read "
                              "|| echo home denied; cat "
                            + kept
                            + "/task.py; "
                              "head -c 4 /etc/os-release >/dev/null && echo etc read; "
                              "ls /usr/bin >/dev/null && echo usr read; "
                              "head -c 4 /proc/self/status >/dev/null && echo proc read";
  auto dir = scratch("reads-allowed");
  auto policy = confined(dir);
  policy.keep_in_tmp = {kept};
  auto in = run({"/bin/sh", "-c", probe}, dir, &policy);
  auto control = run({"/bin/sh", "-c", probe}, dir, nullptr);
  INFO(in.out << in.err << control.out);
  REQUIRE(in.proc.exit_code == 0);
  CHECK(in.out == "home denied\nkept\netc read\nusr read\nproc read\n");
  // Unconfined, the same probe reads the home: it can find what it looks for.
  CHECK(control.out.find("home read\n") != std::string::npos);
}
