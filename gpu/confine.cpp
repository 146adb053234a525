#include "gpu/confine.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <vector>

#include "gpu/landlock.hpp"

namespace kiln {

namespace {

#if defined(__x86_64__)
constexpr uint32_t native_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t native_arch = AUDIT_ARCH_AARCH64;
#else
#error "kiln's seccomp filter knows x86_64 and aarch64"
#endif

// What a candidate never needs and an attacker would: another process's memory, the kernel's
// mount table, modules and keyrings, new namespaces (whose capabilities would reopen what the
// sandbox closed), and interfaces that act behind seccomp's back (io_uring) or bypass path
// checks (open_by_handle_at). All fail with EPERM, as if unprivileged.
constexpr long denied[] = {
    __NR_ptrace,
    __NR_process_vm_readv,
    __NR_process_vm_writev,
    __NR_mount,
    __NR_umount2,
    __NR_pivot_root,
    __NR_chroot,
    __NR_kexec_load,
    __NR_kexec_file_load,
    __NR_bpf,
    __NR_keyctl,
    __NR_add_key,
    __NR_request_key,
    __NR_init_module,
    __NR_finit_module,
    __NR_delete_module,
    __NR_reboot,
    __NR_swapon,
    __NR_swapoff,
    __NR_setns,
    __NR_unshare,
    __NR_userfaultfd,
    __NR_open_by_handle_at,
    __NR_name_to_handle_at,
    __NR_acct,
    __NR_quotactl,
    __NR_fanotify_init,
#ifdef __NR_io_uring_setup
    __NR_io_uring_setup,
    __NR_io_uring_enter,
    __NR_io_uring_register,
#endif
#ifdef __NR_open_tree
    __NR_open_tree,
    __NR_move_mount,
    __NR_fsopen,
    __NR_fsconfig,
    __NR_fsmount,
    __NR_fspick,
#endif
#ifdef __NR_mount_setattr
    __NR_mount_setattr,
#endif
#ifdef __NR_iopl
    __NR_iopl,
    __NR_ioperm,
#endif
};

constexpr uint32_t namespace_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
                                     | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP;

sock_filter stmt(uint16_t code, uint32_t k) {
  return sock_filter{code, 0, 0, k};
}
sock_filter jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
  return sock_filter{code, jt, jf, k};
}
constexpr uint32_t ret_errno(int err) {
  return SECCOMP_RET_ERRNO | (static_cast<uint32_t>(err) & SECCOMP_RET_DATA);
}

std::vector<sock_filter> build_filter(bool allow_perf) {
  constexpr uint32_t arch_at = offsetof(seccomp_data, arch);
  constexpr uint32_t nr_at = offsetof(seccomp_data, nr);
  // The low 32 bits of the first argument (little-endian): a socket's family, clone's flags.
  constexpr uint32_t arg0_at = offsetof(seccomp_data, args);
  std::vector<sock_filter> f;
  // Another architecture's numbers (int 0x80 on x86_64) would mean other system calls: none.
  f.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, arch_at));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, native_arch, 1, 0));
  f.push_back(stmt(BPF_RET | BPF_K, ret_errno(EPERM)));
  f.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, nr_at));
#if defined(__x86_64__)
  // The x32 ABI: the same numbers with bit 30 set.
  f.push_back(jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 0, 1));
  f.push_back(stmt(BPF_RET | BPF_K, ret_errno(EPERM)));
#endif
  auto deny = [&f](long nr, uint32_t ret) {
    f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
    f.push_back(stmt(BPF_RET | BPF_K, ret));
  };
  for (long nr : denied)
    deny(nr, ret_errno(EPERM));
  if (!allow_perf)
    deny(__NR_perf_event_open, ret_errno(EPERM));
    // clone3 passes its flags in memory, which a filter cannot read: ENOSYS makes glibc fall
    // back to clone, whose flags it can.
#ifdef __NR_clone3
  deny(__NR_clone3, ret_errno(ENOSYS));
#endif
  // socket and socketpair: AF_UNIX only (the harness's control socket, multiprocessing).
  for (long nr : {static_cast<long>(__NR_socket), static_cast<long>(__NR_socketpair)}) {
    f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 4));
    f.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, arg0_at));
    f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1));
    f.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    f.push_back(stmt(BPF_RET | BPF_K, ret_errno(EAFNOSUPPORT)));
  }
  // clone with a namespace flag.
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(__NR_clone), 0, 4));
  f.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, arg0_at));
  f.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, namespace_flags, 0, 1));
  f.push_back(stmt(BPF_RET | BPF_K, ret_errno(EPERM)));
  f.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  return f;
}

int add_rule(int ruleset, const char* path, int flags, uint64_t rights) {
  int fd = ::open(path, O_PATH | O_CLOEXEC | flags);
  if (fd < 0)
    return errno;
  ll::path_beneath_attr attr{rights, fd};
  long rc = ::syscall(SYS_landlock_add_rule, ruleset, ll::rule_path_beneath, &attr, 0);
  int err = errno;
  ::close(fd);
  return rc != 0 ? err : 0;
}

} // namespace

const char* describe(sandbox_stage stage) {
  switch (stage) {
    case sandbox_stage::oom_score:
      return "oom_score_adj";
    case sandbox_stage::limits:
      return "sandbox setrlimit";
    case sandbox_stage::no_new_privs:
      return "PR_SET_NO_NEW_PRIVS";
    case sandbox_stage::landlock:
      return "landlock_restrict_self";
    case sandbox_stage::proc_mount:
      return "mounting the runner's own /proc";
    case sandbox_stage::tmp_mount:
      return "mounting the runner's own /tmp";
    case sandbox_stage::shm_mount:
      return "mounting the runner's own /dev/shm";
    case sandbox_stage::launcher:
      return "starting the sandbox launcher";
    case sandbox_stage::identity:
      return "switching to the runner's identity";
    case sandbox_stage::seccomp:
      return "installing the seccomp filter";
    case sandbox_stage::parent_gone:
      return "kiln ended while the runner started";
  }
  return "sandbox";
}

int install_seccomp_filter(bool allow_perf) {
  auto filter = build_filter(allow_perf);
  sock_fprog prog{static_cast<unsigned short>(filter.size()), filter.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return errno;
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
    return errno;
  return 0;
}

int confine_self(const confinement& c, sandbox_stage& stage) {
  if (c.landlock_fd >= 0) {
    // The CUDA driver writes below /proc/self during cuInit (measured on the H200 host: error
    // 304 otherwise). The rule names this process's own /proc entry, so it is added here, in
    // the process that execs, and not in the parent, where /proc/self is the daemon.
    stage = sandbox_stage::landlock;
    if (int err = add_rule(c.landlock_fd, "/proc/self", 0, c.proc_self_rights); err != 0)
      return err;
    // Reads of /proc: in a PID namespace of its own the runner's /proc was mounted after fork,
    // and the parent's rule names the host's.
    if (int err = add_rule(c.landlock_fd, "/proc", O_DIRECTORY, ll::fs_read_file | ll::fs_read_dir);
        err != 0)
      return err;
    // The runner's own /dev/shm: a tmpfs mounted after fork, which no rule made in the parent
    // can name.
    if (c.private_shm)
      if (int err = add_rule(c.landlock_fd, "/dev/shm", O_DIRECTORY, c.shm_rights); err != 0)
        return err;
    stage = sandbox_stage::no_new_privs;
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      return errno;
    stage = sandbox_stage::landlock;
    if (::syscall(SYS_landlock_restrict_self, c.landlock_fd, 0U) != 0)
      return errno;
    ::close(c.landlock_fd);
  }
  if (c.drop_identity) {
    stage = sandbox_stage::identity;
    if (::setgroups(0, nullptr) != 0 || ::setresgid(c.gid, c.gid, c.gid) != 0
        || ::setresuid(c.uid, c.uid, c.uid) != 0)
      return errno;
    // A change of identity clears the parent-death signal: armed again, and checked, or a
    // daemon that died in between would leave this runner behind.
    stage = sandbox_stage::parent_gone;
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (c.parent > 0 && ::getppid() != c.parent)
      return ESRCH;
  }
  if (c.seccomp) {
    stage = sandbox_stage::seccomp;
    if (int err = install_seccomp_filter(c.allow_perf); err != 0)
      return err;
  }
  return 0;
}

} // namespace kiln
