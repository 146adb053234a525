#pragma once

// What the evaluation lanes of one device share. A GPU runs `[evaluator] gpu_lanes` evaluations
// at once: their untimed work (process start, imports, correctness trials, comparisons in the
// parent) overlaps, which keeps the device busy while one evaluation waits on the CPU. Timing
// is the exception: a measurement must have the device to itself, so every runner that touches
// the GPU holds the device's lock, shared for untimed work and exclusive for anything timed.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "gpu/reference_cache.hpp"

namespace kiln {

/// A readers-writer lock for one device, with writers first: once a timing waits, no new
/// untimed work starts, so a timing waits at most for the work already running.
class device_lock {
public:
  void lock_shared();
  void unlock_shared();
  void lock();
  void unlock();

  /// What the lock is doing now, and how often each kind was granted (tests and logs).
  int shared_holders() const;
  bool exclusive_held() const;
  int waiting() const;
  long shared_grants() const;
  long exclusive_grants() const;

private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int shared_ = 0;
  int readers_waiting_ = 0;
  int writers_waiting_ = 0;
  bool exclusive_ = false;
  long shared_grants_ = 0;
  long exclusive_grants_ = 0;
};

/// One evaluation's hold on its device's lock: none, shared or exclusive; moving between them
/// releases first (no upgrade, so two holds can never wait on each other), and the destructor
/// releases whatever is held.
class device_hold {
public:
  explicit device_hold(device_lock& lock) : lock_(lock) {}
  ~device_hold() { release(); }
  device_hold(const device_hold&) = delete;
  device_hold& operator=(const device_hold&) = delete;

  void shared();
  void exclusive();
  void release();
  bool is_exclusive() const { return state_ == held::exclusive; }

private:
  enum class held { none, shared, exclusive };
  device_lock& lock_;
  held state_ = held::none;
};

/// Whether a device can still be trusted (gpu/health.cpp). Every lane of the device reports to
/// it and checks it, hence the mutex.
struct device_health {
  std::mutex mutex;
  /// A runner ended badly (signal, timeout, CUDA error text): check before the next job.
  bool suspect = false;
  std::string suspect_reason;
  bool healthy = true;
  std::string problem; ///< why not healthy
};

/// Everything the lanes of one device share: the lock, the health, and the reference timings
/// (so that every lane compares against the same measurement of a task's reference).
struct device_share {
  explicit device_share(const std::string& cache_dir) : references(cache_dir) {}
  device_lock lock;
  device_health health;
  std::mutex references_mutex;
  reference_cache references;
};

} // namespace kiln
