#pragma once

// A host-wide advisory lock per device, so that two kiln processes on one host (two users, or a
// `kiln run` beside a `kiln eval`) never evaluate on one device at once: flock(2) on a file per
// physical device, named by what every process agrees on whatever its CUDA_VISIBLE_DEVICES
// (the GPU's UUID, else its PCI bus id; `cpu` for the CPU).
//
//   claim_devices ─> open the file (O_RDWR, else O_RDONLY: flock needs no write access)
//        ─> flock(LOCK_EX | LOCK_NB) ── held elsewhere ─> say who holds it, wait for a close
//        │                                                 of the file (inotify) or 1 s, again
//        └─> got it ─> write this process's record into the file ─> hold until the claim goes
//
// A process that evaluates on a device claims it before its evaluators start and holds it for
// their life (the kernel lets go when the process ends, however it ends). Lock files are never
// removed: a removed file would let two processes lock two different files of one name.
// docs/evaluation.md ("Devices on a shared host") explains the choices.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/devices.hpp"

namespace kiln {

/// Where the lock files live instead of /run/lock. Tests give each test its own folder; hosts
/// whose kiln processes run in separate containers point them all at one shared folder.
inline constexpr const char* device_lock_dir_env = "KILN_DEVICE_LOCK_DIR";

/// Who holds a device's lock, as far as this process can tell: the lock file's record when it
/// is the holder's, else what /proc says of the process the kernel names as the holder.
struct lock_holder {
  long pid = 0;        ///< 0: unknown
  std::string command; ///< `kiln run`, `kiln eval`; empty: unknown
  std::string user;    ///< the holder's login name; empty: unknown
  std::string device;  ///< the holder's own name for the device (its mask may differ from ours)
  int64_t started = 0; ///< the holder process's start, seconds since the epoch; 0: unknown
  /// The pid in the lock file when that record is of a process that has ended (the holder could
  /// not write its own: the file is read-only to it); 0 otherwise.
  long stale_pid = 0;
};

/// `cuda:0 is held by pid 1234 (kiln run, started 10:02)`, with the user when it is not this
/// process's and the holder's name for the device when it differs from `device`.
std::string describe_holder(const std::string& device, const lock_holder& h);

struct device_lock_options {
  /// How long a claim waits for another process to let go before it gives up; 0: not at all.
  double wait_s = 600;
  /// The lock folder; empty: device_lock_dir(cache_dir).
  std::string dir;
  /// The build cache (resolve_cache_dir), for the per-user fallback folder; empty: the default.
  std::string cache_dir;
  /// Told when a claim starts to wait, and again when the holder changes, with the whole
  /// message (`cuda:0 is held by pid 1234 (...); waiting up to 600 s ...`). Empty: printed on
  /// stderr and logged.
  std::function<void(const std::string&)> on_wait;
};

/// A held device lock. Copies share it; it is let go when the last copy goes.
class device_claim {
public:
  device_claim() = default;
  /// False for an empty claim, and where no lock file could be locked (kiln then goes on
  /// without one, and has said so).
  bool held() const;
  const std::string& path() const; ///< the lock file; empty when not held
  const std::string& device() const;
  /// Lets go of this copy.
  void release() { state_.reset(); }

  struct state;

private:
  std::shared_ptr<state> state_;
  friend device_claim claim_device(const device_info& d, const device_lock_options& o);
};

/// Takes the host-wide lock of `d`, waiting at most `o.wait_s` for the holder to let go; throws
/// std::runtime_error (`cuda:0 is held by pid 1234 (kiln run, started 10:02); gave up after
/// 600 s ...`) when it must give up. Claims of one device within a process share one lock.
device_claim claim_device(const device_info& d, const device_lock_options& o);

/// Claims the devices with these ids (`cpu`, `cuda:N`) in one fixed order, by lock file, so that
/// two processes wanting some of the same devices never wait on each other; `o.wait_s` is for
/// all of them together. Throws std::runtime_error for an unknown id or a device it gives up on
/// (the claims taken so far are let go).
std::vector<device_claim> claim_devices(const std::vector<std::string>& ids,
                                        const device_lock_options& o);

/// Who holds the lock of `d` in `dir` now; nullopt when nobody does or there is no lock file.
/// Takes no lock itself where /proc/locks answers.
std::optional<lock_holder> device_lock_holder(const device_info& d, const std::string& dir);

/// The folder of the lock files: $KILN_DEVICE_LOCK_DIR when set, else /run/lock where this
/// process may create files (world-writable with the sticky bit on Debian), else
/// `<cache_dir>/device-locks`, which keeps off only this user's kiln processes.
std::string device_lock_dir(const std::string& cache_dir);

/// The lock file's name: `kiln-gpu-<uuid>.lock` (`kiln-mig-...` for a MIG instance),
/// `kiln-pci-<bus id>.lock` when the runtime gives no UUID, `kiln-cpu.lock`.
std::string device_lock_file(const device_info& d);

} // namespace kiln
