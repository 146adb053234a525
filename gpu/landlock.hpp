#pragma once

// Landlock's user API, spelled out here because the build machine's kernel headers (Debian 12:
// 6.1) predate the rights kiln uses; the values are the kernel's stable ABI. Shared by the
// parent, which builds a runner's ruleset (gpu/sandbox.cpp), and the launcher, which enforces
// it (gpu/confine.cpp).

#include <sys/syscall.h>

#include <cstdint>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

namespace kiln::ll {

constexpr uint32_t create_ruleset_version = 1U << 0;
constexpr int rule_path_beneath = 1;

constexpr uint64_t fs_execute = 1ULL << 0;
constexpr uint64_t fs_write_file = 1ULL << 1;
constexpr uint64_t fs_read_file = 1ULL << 2;
constexpr uint64_t fs_read_dir = 1ULL << 3;
constexpr uint64_t fs_remove_dir = 1ULL << 4;
constexpr uint64_t fs_remove_file = 1ULL << 5;
constexpr uint64_t fs_make_char = 1ULL << 6;
constexpr uint64_t fs_make_dir = 1ULL << 7;
constexpr uint64_t fs_make_reg = 1ULL << 8;
constexpr uint64_t fs_make_sock = 1ULL << 9;
constexpr uint64_t fs_make_fifo = 1ULL << 10;
constexpr uint64_t fs_make_block = 1ULL << 11;
constexpr uint64_t fs_make_sym = 1ULL << 12;
constexpr uint64_t fs_refer = 1ULL << 13;    // ABI 2
constexpr uint64_t fs_truncate = 1ULL << 14; // ABI 3

/// What reading a file system takes: open for reading, list folders, execute.
constexpr uint64_t fs_read_rights = fs_execute | fs_read_file | fs_read_dir;

constexpr uint64_t net_bind_tcp = 1ULL << 0; // ABI 4
constexpr uint64_t net_connect_tcp = 1ULL << 1;

constexpr uint64_t scope_abstract_unix_socket = 1ULL << 0; // ABI 6
constexpr uint64_t scope_signal = 1ULL << 1;

struct ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct __attribute__((packed)) path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

} // namespace kiln::ll
