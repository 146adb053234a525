#include "gpu/device_share.hpp"

namespace kiln {

void device_lock::lock_shared() {
  std::unique_lock<std::mutex> guard{mutex_};
  ++readers_waiting_;
  changed_.wait(guard, [this] { return !exclusive_ && writers_waiting_ == 0; });
  --readers_waiting_;
  ++shared_;
  ++shared_grants_;
}

void device_lock::unlock_shared() {
  std::lock_guard<std::mutex> guard{mutex_};
  if (--shared_ == 0)
    changed_.notify_all();
}

void device_lock::lock() {
  std::unique_lock<std::mutex> guard{mutex_};
  ++writers_waiting_;
  changed_.wait(guard, [this] { return !exclusive_ && shared_ == 0; });
  --writers_waiting_;
  exclusive_ = true;
  ++exclusive_grants_;
}

void device_lock::unlock() {
  std::lock_guard<std::mutex> guard{mutex_};
  exclusive_ = false;
  changed_.notify_all();
}

int device_lock::shared_holders() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return shared_;
}

bool device_lock::exclusive_held() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return exclusive_;
}

int device_lock::waiting() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return readers_waiting_ + writers_waiting_;
}

long device_lock::shared_grants() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return shared_grants_;
}

long device_lock::exclusive_grants() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return exclusive_grants_;
}

void device_hold::shared() {
  if (state_ == held::shared)
    return;
  release();
  lock_.lock_shared();
  state_ = held::shared;
}

void device_hold::exclusive() {
  if (state_ == held::exclusive)
    return;
  release();
  lock_.lock();
  state_ = held::exclusive;
}

void device_hold::release() {
  if (state_ == held::shared)
    lock_.unlock_shared();
  else if (state_ == held::exclusive)
    lock_.unlock();
  state_ = held::none;
}

} // namespace kiln
