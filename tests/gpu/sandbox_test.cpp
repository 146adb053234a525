// Runner isolation with real children: each case runs the same small program inside the sandbox
// and, as a control, without it, so that a sandbox that does nothing cannot pass.

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/process.hpp"
#include "gpu/sandbox.hpp"

namespace fs = std::filesystem;
using kiln::sandbox_mode;
using kiln::sandbox_policy;

namespace {

std::string scratch(const std::string& name) {
  fs::path dir = fs::path(KILN_TEST_TMP) / "sandbox" / std::to_string(::getpid()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return fs::canonical(dir).string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct run_outcome {
  kiln::process_result proc;
  std::string out;
  std::string err;
};

run_outcome run_shell(const std::string& script, const std::string& dir,
                      const sandbox_policy* policy, double timeout_s = 30) {
  kiln::process_options opts;
  opts.argv = {"/bin/sh", "-c", script};
  opts.env = {"PATH=/usr/bin:/bin"};
  opts.cwd = dir;
  opts.stdout_path = dir + "/out.txt";
  opts.stderr_path = dir + "/err.txt";
  opts.timeout_s = timeout_s;
  opts.kill_grace_s = 1;
  opts.sandbox = policy;
  run_outcome o;
  o.proc = kiln::run_process(opts);
  o.out = slurp(opts.stdout_path);
  o.err = slurp(opts.stderr_path);
  return o;
}

sandbox_policy confined(const std::string& writable) {
  sandbox_policy p;
  p.mode = sandbox_mode::automatic;
  p.writable_dirs = {writable};
  return p;
}

const sandbox_policy off_policy{};

bool network_isolated() {
  const auto& s = kiln::probe_sandbox();
  return s.net_namespace || s.landlock_abi >= 4;
}

/// Pids of live processes whose command line contains `marker`.
std::vector<int> processes_with(const std::string& marker) {
  std::vector<int> out;
  DIR* proc = ::opendir("/proc");
  REQUIRE(proc != nullptr);
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    std::string cmd = slurp(std::string("/proc/") + e->d_name + "/cmdline");
    for (auto& c : cmd)
      if (c == '\0')
        c = ' ';
    std::string stat = slurp(std::string("/proc/") + e->d_name + "/stat");
    auto paren = stat.rfind(')');
    bool zombie = paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
    if (!zombie && cmd.find(marker) != std::string::npos)
      out.push_back(std::atoi(e->d_name));
  }
  ::closedir(proc);
  return out;
}

/// Polls (bounded) until no live process carries `marker`; the kernel may need a moment.
bool gone_within(const std::string& marker, std::chrono::seconds bound) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (!processes_with(marker).empty()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    ::usleep(10'000);
  }
  return true;
}

} // namespace

TEST_CASE("sandbox modes parse, and a bad one is named", "[sandbox]") {
  CHECK(kiln::parse_sandbox_mode("auto") == sandbox_mode::automatic);
  CHECK(kiln::parse_sandbox_mode("required") == sandbox_mode::required);
  CHECK(kiln::parse_sandbox_mode("off") == sandbox_mode::off);
  CHECK_THROWS_WITH(kiln::parse_sandbox_mode("strict"), Catch::Contains("'strict'"));
}

TEST_CASE("the probe describes every kind of isolation in one line", "[sandbox]") {
  const auto& s = kiln::probe_sandbox();
  auto line = s.description();
  INFO(line);
  CHECK(line.find("network: ") == 0);
  CHECK(line.find("; pids: ") != std::string::npos);
  CHECK(line.find("; files: ") != std::string::npos);
  CHECK(line.find('\n') == std::string::npos);
  if (s.pid_namespace)
    CHECK(line.find("pids: own namespace") != std::string::npos);
  else
    CHECK_FALSE(s.pid_namespace_error.empty());
  // `required` needs exactly what the description says is there.
  CHECK(s.missing().empty() == (network_isolated() && s.pid_namespace && s.landlock_abi > 0));
  CHECK(&kiln::probe_sandbox() == &s); // probed once
}

TEST_CASE("a sandboxed child cannot connect to a TCP listener on loopback", "[sandbox]") {
  if (!network_isolated()) {
    WARN("network isolation not permitted here: " << kiln::probe_sandbox().description());
    return;
  }
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const auto port = std::to_string(ntohs(addr.sin_port));
  // bash's /dev/tcp is not in dash: python without site (fast, no torch) makes the attempt.
  auto script = "exec python3 -S -c \"import socket,sys\ntry:\n"
                " socket.create_connection(('127.0.0.1', "
                + port
                + "), timeout=5)\n print('connected')\nexcept OSError as e:\n"
                  " print('refused', e.errno)\"";
  auto accepted = [&] {
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd >= 0)
      ::close(fd);
    return fd >= 0;
  };

  auto dir = scratch("tcp");
  auto policy = confined(dir);
  auto in = run_shell(script, dir, &policy);
  INFO(in.out << in.err);
  CHECK(in.proc.exit_code == 0);
  CHECK(in.out.rfind("refused", 0) == 0);
  CHECK_FALSE(accepted());

  auto control = run_shell(script, dir, &off_policy);
  INFO(control.out << control.err);
  CHECK(control.out == "connected\n");
  CHECK(accepted());
  ::close(listener);
}

TEST_CASE("a sandboxed child writes only beneath its writable folders", "[sandbox]") {
  if (kiln::probe_sandbox().landlock_abi == 0) {
    WARN("landlock not available here: " << kiln::probe_sandbox().description());
    return;
  }
  auto dir = scratch("files");
  auto inside = dir + "/inside";
  auto outside = dir + "/outside";
  fs::create_directories(inside);
  fs::create_directories(outside);
  std::ofstream(outside + "/existing") << "original\n";
  auto script = "echo in > " + inside + "/new && mkdir " + inside + "/sub && echo ok >/dev/null; "
                + "echo out > " + outside + "/new; echo overwritten > " + outside + "/existing; "
                + "rm -f " + outside + "/existing; mkdir " + outside + "/sub; exit 0";

  auto policy = confined(inside);
  auto in = run_shell(script, inside, &policy);
  INFO(in.err);
  CHECK(in.proc.exit_code == 0);
  CHECK(slurp(inside + "/new") == "in\n");
  CHECK(fs::is_directory(inside + "/sub"));
  CHECK_FALSE(fs::exists(outside + "/new"));
  CHECK(slurp(outside + "/existing") == "original\n");
  CHECK_FALSE(fs::exists(outside + "/sub"));
  CHECK(in.err.find("Permission denied") != std::string::npos);

  auto control = run_shell(script, inside, &off_policy);
  CHECK(slurp(outside + "/new") == "out\n");
  CHECK_FALSE(fs::exists(outside + "/existing"));
}

TEST_CASE("everything a sandboxed child leaves behind dies with it", "[sandbox]") {
  if (!kiln::probe_sandbox().pid_namespace) {
    WARN("PID namespaces not permitted here: " << kiln::probe_sandbox().description());
    return;
  }
  auto dir = scratch("pidns");
  // setsid: the grandchild leaves the process group, so killing the group cannot reach it.
  // The odd duration is the marker that finds it in /proc.
  const std::string marker = "8" + std::to_string(100000 + ::getpid() % 100000) + ".25";
  // It says when it has its own session, so the shell cannot exit (and its group be killed)
  // before the grandchild got away.
  auto script = "echo $$; rm -f started; setsid sh -c 'echo > started; exec sleep " + marker
                + "' </dev/null >/dev/null 2>&1 & while [ ! -e started ]; do :; done; exit 0";

  auto policy = confined(dir);
  auto in = run_shell(script, dir, &policy);
  CHECK(in.proc.exit_code == 0);
  CHECK(in.out == "2\n"); // the program runs as the child of its namespace's init
  CHECK(gone_within("sleep " + marker, std::chrono::seconds(5)));

  auto control = run_shell(script, dir, &off_policy);
  CHECK(control.proc.exit_code == 0);
  auto survivors = processes_with("sleep " + marker);
  CHECK_FALSE(survivors.empty()); // without the namespace it escapes: the case can fail
  for (int pid : survivors)
    ::kill(pid, SIGKILL);
  CHECK(gone_within("sleep " + marker, std::chrono::seconds(5)));
}

TEST_CASE("a child in its own PID namespace sees its own /proc", "[sandbox]") {
  if (!kiln::probe_sandbox().pid_namespace) {
    WARN("PID namespaces not permitted here: " << kiln::probe_sandbox().description());
    return;
  }
  // The CUDA driver finds itself in /proc by getpid(); with the host's /proc that pid names
  // another process and cudaGetDeviceCount fails (error 304).
  auto dir = scratch("proc");
  const std::string script = "read pid rest < /proc/self/stat; echo $$ $pid";
  auto policy = confined(dir);
  auto in = run_shell(script, dir, &policy);
  INFO(in.err);
  CHECK(in.proc.exit_code == 0);
  CHECK(in.out == "2 2\n");
  auto control = run_shell(script, dir, &off_policy);
  auto space = control.out.find(' ');
  REQUIRE(space != std::string::npos);
  CHECK(control.out.substr(0, space) + "\n" == control.out.substr(space + 1));
  CHECK(control.out != "2 2\n");
}

TEST_CASE("a sandboxed child may write below its own /proc entry and no other", "[sandbox]") {
  if (kiln::probe_sandbox().landlock_abi == 0 || !kiln::probe_sandbox().pid_namespace) {
    WARN("no Landlock or PID namespace here: " << kiln::probe_sandbox().description());
    return;
  }
  // cuInit writes below /proc/self; the init's entry (/proc/1) stays out of reach.
  auto dir = scratch("procwrite");
  auto policy = confined(dir);
  auto in = run_shell("printf kiln > /proc/self/comm && echo own; printf x > /proc/1/comm || "
                      "echo other refused",
                      dir, &policy);
  INFO(in.err);
  CHECK(in.out == "own\nother refused\n");
}

TEST_CASE("a sandboxed child's exit code, signal and timeout are reported as its own",
          "[sandbox]") {
  auto dir = scratch("status");
  auto policy = confined(dir);
  auto exited = run_shell("exit 7", dir, &policy);
  CHECK(exited.proc.exit_code == 7);
  CHECK(exited.proc.signal == 0);

  // As the init of a namespace it would ignore this; as the init's child it dies of it.
  auto killed = run_shell("kill -SEGV $$; sleep 5", dir, &policy);
  CHECK(killed.proc.signal == SIGSEGV);
  CHECK(killed.proc.exit_code == -1);
  CHECK(killed.proc.wall_ms < 4000);

  auto hung = run_shell("sleep 100", dir, &policy, 0.3);
  CHECK(hung.proc.timed_out);
  CHECK(hung.proc.signal == SIGTERM); // the grace period was not needed
  CHECK(hung.proc.wall_ms < 300 + 900);
}

TEST_CASE("a start that fails inside the sandbox says where", "[sandbox]") {
  auto dir = scratch("fail");
  auto policy = confined(dir);
  kiln::process_options opts;
  opts.argv = {"/bin/true"};
  opts.cwd = dir + "/nowhere";
  opts.sandbox = &policy;
  auto r = kiln::run_process(opts);
  CHECK_FALSE(r.started);
  CHECK_THAT(r.error, Catch::Contains("chdir") && Catch::Contains("nowhere"));

  auto bad = confined(dir + "/missing");
  opts.cwd = dir;
  opts.sandbox = &bad;
  r = kiln::run_process(opts);
  CHECK_FALSE(r.started);
  if (kiln::probe_sandbox().landlock_abi > 0)
    CHECK_THAT(r.error, Catch::Contains("missing") && Catch::Contains("No such file"));
}

TEST_CASE("an address-space limit turns a huge allocation into MemoryError", "[sandbox]") {
  auto dir = scratch("memory");
  auto policy = confined(dir);
  policy.memory_limit_bytes = 512L << 20;
  auto script = "exec python3 -S -c \"b = bytearray(2 << 30); print(len(b))\"";
  auto in = run_shell(script, dir, &policy);
  INFO(in.err);
  CHECK(in.proc.exit_code == 1);
  CHECK(in.proc.signal == 0);
  CHECK(in.err.find("MemoryError") != std::string::npos);

  auto control = run_shell(script, dir, &off_policy);
  INFO(control.err);
  CHECK(control.out == std::to_string(2L << 30) + "\n");
}

TEST_CASE("required mode refuses to start without every feature", "[sandbox]") {
  auto dir = scratch("required");
  auto policy = confined(dir);
  policy.mode = sandbox_mode::required;
  kiln::process_options opts;
  opts.argv = {"/bin/true"};
  opts.sandbox = &policy;
  auto r = kiln::run_process(opts);
  const auto missing = kiln::probe_sandbox().missing();
  if (missing.empty()) {
    CHECK(r.started);
    CHECK(r.exit_code == 0);
  } else {
    CHECK_FALSE(r.started);
    CHECK_THAT(r.error, Catch::Contains("required") && Catch::Contains(missing));
  }
}

namespace {

/// A runner's folder with its own tmp/, and the policy that makes that its /tmp.
sandbox_policy with_private_tmp(const std::string& own) {
  fs::create_directories(own + "/tmp");
  auto p = confined(own);
  p.private_tmp = own + "/tmp";
  // Bound back when it lies beneath the host's /tmp (a checkout there), as runner_sandbox does
  // with a runner's work folder.
  p.keep_in_tmp = {own};
  return p;
}

/// `ls -A /tmp` as a runner beneath `dir` sees it, less the mount point of `dir` itself when it
/// lies beneath the host's /tmp (a checkout there): kiln binds such a folder back.
std::string list_tmp(const std::string& dir) {
  auto rel = fs::weakly_canonical(dir).lexically_relative(fs::canonical("/tmp"));
  if (rel.empty() || rel.native().rfind("..", 0) == 0)
    return "ls -A /tmp";
  return "ls -A /tmp | grep -vx '" + rel.begin()->string() + "'";
}

bool private_tmp_here() {
  if (kiln::probe_sandbox().private_tmp && kiln::probe_sandbox().landlock_abi > 0)
    return true;
  WARN("no private /tmp or no Landlock here: " << kiln::probe_sandbox().description());
  return false;
}

/// A name in the host's /tmp and /dev/shm that no other process uses.
std::string host_name(const std::string& what) {
  return "kiln-sandbox-test-" + what + "-" + std::to_string(::getpid());
}

} // namespace

TEST_CASE("the probe says whether runners get a /tmp of their own", "[sandbox]") {
  const auto& s = kiln::probe_sandbox();
  auto line = s.description();
  INFO(line);
  CHECK(line.find("; tmp: ") != std::string::npos);
  if (s.private_tmp)
    CHECK(line.find("tmp: private") != std::string::npos);
  else
    CHECK_FALSE(s.private_tmp_error.empty());
  sandbox_policy p;
  p.mode = sandbox_mode::automatic;
  CHECK_FALSE(kiln::tmp_is_private(p)); // no folder of its own to mount
  p.private_tmp = "/nonexistent";
  CHECK(kiln::tmp_is_private(p) == s.private_tmp);
  p.keep_in_tmp = {"/"}; // a folder that holds /tmp cannot be kept beneath a private one
  CHECK_FALSE(kiln::tmp_is_private(p));
  p.keep_in_tmp.clear();
  p.mode = sandbox_mode::off;
  CHECK_FALSE(kiln::tmp_is_private(p));
}

TEST_CASE("a sandboxed child writes /tmp and /dev/shm of its own, never the host's", "[sandbox]") {
  if (!private_tmp_here())
    return;
  auto dir = scratch("privtmp");
  auto own = dir + "/own";
  const auto visible = host_name("visible");
  const auto written = host_name("written");
  std::ofstream("/tmp/" + visible) << "host\n";
  std::ofstream("/dev/shm/" + visible) << "host\n";
  fs::remove("/tmp/" + written);
  fs::remove("/dev/shm/" + written);
  auto script = list_tmp(dir) + "; [ -e /tmp/" + visible
                + " ] || echo host tmp hidden; [ -e /dev/shm/" + visible
                + " ] || echo host shm hidden; echo mine > /tmp/" + written + " && cat /tmp/"
                + written + "; echo shm > /dev/shm/" + written + " && cat /dev/shm/" + written
                + "; echo out > " + dir + "/outside || echo outside refused";
  auto policy = with_private_tmp(own);
  policy.keep_in_tmp = {dir}; // beneath /tmp, `outside` must be the host's folder, kept read-only
  auto in = run_shell(script, own, &policy);
  INFO(in.err);
  CHECK(in.proc.exit_code == 0);
  CHECK(in.out == "host tmp hidden\nhost shm hidden\nmine\nshm\noutside refused\n");
  // Its /tmp was its own folder, which goes with it; its /dev/shm went with its namespace.
  CHECK(slurp(own + "/tmp/" + written) == "mine\n");
  CHECK_FALSE(fs::exists("/tmp/" + written));
  CHECK_FALSE(fs::exists("/dev/shm/" + written));
  CHECK_FALSE(fs::exists(dir + "/outside"));

  // Without the sandbox the same script writes the host's: the case can fail.
  auto control = run_shell(script, own, &off_policy);
  CHECK(slurp("/tmp/" + written) == "mine\n");
  CHECK(slurp("/dev/shm/" + written) == "shm\n");
  for (const auto& name : {visible, written}) {
    fs::remove("/tmp/" + name);
    fs::remove("/dev/shm/" + name);
  }
}

TEST_CASE("folders kiln keeps beneath the host's /tmp stay visible and stay read-only",
          "[sandbox]") {
  if (!private_tmp_here())
    return;
  // `kiln eval` works in /tmp/kiln-eval-<pid>: its runners must still find it by that name.
  const auto kept = "/tmp/" + host_name("kept");
  fs::remove_all(kept);
  fs::create_directories(kept + "/own/tmp");
  std::ofstream(kept + "/harness.py") << "kiln\n";
  auto own = kept + "/own";
  auto policy = with_private_tmp(own);
  policy.keep_in_tmp = {kept};
  auto in = run_shell("cat " + kept + "/harness.py; echo x > " + kept
                          + "/harness.py || echo harness refused; echo y > " + kept
                          + "/planted || echo planting refused; echo z > " + own
                          + "/result && echo own folder ok; ls -A /tmp",
                      own, &policy);
  INFO(in.proc.error << in.err);
  CHECK(in.proc.exit_code == 0);
  CHECK(in.out
        == "kiln\nharness refused\nplanting refused\nown folder ok\n" + host_name("kept") + "\n");
  CHECK(slurp(kept + "/harness.py") == "kiln\n");
  CHECK_FALSE(fs::exists(kept + "/planted"));
  CHECK(slurp(own + "/result") == "z\n");
  fs::remove_all(kept);
}

TEST_CASE("two sandboxed children do not see each other's /tmp", "[sandbox]") {
  if (!private_tmp_here())
    return;
  auto dir = scratch("twotmp");
  auto policy_a = with_private_tmp(dir + "/a");
  auto policy_b = with_private_tmp(dir + "/b");
  // A writes its mark, says so on its stdin (a socket), and waits for the word to go on.
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
  kiln::process_options a;
  a.argv = {"/bin/sh", "-c", "echo a > /tmp/mark && echo ready >&0; read line; cat /tmp/mark"};
  a.env = {"PATH=/usr/bin:/bin"};
  a.cwd = dir + "/a";
  a.stdout_path = dir + "/a/out.txt";
  a.stderr_path = dir + "/a/err.txt";
  a.stdin_fd = pair[1];
  a.sandbox = &policy_a;
  auto child = kiln::start_process(a);
  ::close(pair[1]);
  REQUIRE(child.running());
  char buf[16] = {};
  REQUIRE(::read(pair[0], buf, sizeof buf - 1) > 0);
  CHECK(std::string{buf} == "ready\n");

  auto b = run_shell("[ -e /tmp/mark ] && echo seen; echo b > /tmp/mark; " + list_tmp(dir),
                     dir + "/b", &policy_b);
  INFO(b.err);
  CHECK(b.out == "mark\n");
  REQUIRE(::write(pair[0], "go\n", 3) == 3);
  auto ended = child.wait(30, 1);
  ::close(pair[0]);
  CHECK(ended.exit_code == 0);
  CHECK(slurp(dir + "/a/out.txt") == "a\n"); // B's write did not reach A's /tmp
  CHECK(slurp(dir + "/b/tmp/mark") == "b\n");
}

TEST_CASE("a sandboxed child cannot make device nodes in its own folder", "[sandbox]") {
  if (kiln::probe_sandbox().landlock_abi == 0) {
    WARN("landlock not available here: " << kiln::probe_sandbox().description());
    return;
  }
  // With CAP_MKNOD a node for a disk in a writable folder would write the disk.
  auto dir = scratch("mknod");
  const std::string script = "mknod null c 1 3 2>/dev/null && echo made || echo refused";
  auto policy = confined(dir);
  auto in = run_shell(script, dir, &policy);
  CHECK(in.out == "refused\n");
  CHECK_FALSE(fs::exists(dir + "/null"));
  auto control = run_shell(script, dir, &off_policy);
  if (control.out == "made\n") // only where this process may make nodes at all
    CHECK(fs::exists(dir + "/null"));
}
