#pragma once

// A queue shared by many tasks that serves them in turn: each key (a task) keeps its own
// first-in-first-out line, and the keys take turns, so a task with a hundred candidates waiting
// cannot hold the devices (or a compiler) while another task's single candidate waits behind
// them. A key that has nothing waiting leaves the rotation and rejoins at its end.

#include <deque>
#include <map>
#include <string>
#include <utility>

namespace kiln {

template <class T> class fair_queue {
public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  /// Queues `item` last in `key`'s line.
  void push_back(const std::string& key, T item) {
    auto& line = lines_[key];
    if (line.empty())
      turns_.push_back(key);
    line.push_back(std::move(item));
    ++size_;
  }

  /// Queues `item` first in `key`'s line and gives `key` the next turn (a job put back after
  /// its evaluator died must not wait for a whole round).
  void push_front(const std::string& key, T item) {
    auto& line = lines_[key];
    if (!line.empty())
      remove_turn(key);
    turns_.push_front(key);
    line.push_front(std::move(item));
    ++size_;
  }

  /// The next item by turn; the queue must not be empty.
  T pop() {
    std::string key = std::move(turns_.front());
    turns_.pop_front();
    auto it = lines_.find(key);
    T item = std::move(it->second.front());
    it->second.pop_front();
    --size_;
    if (it->second.empty())
      lines_.erase(it);
    else
      turns_.push_back(std::move(key));
    return item;
  }

private:
  void remove_turn(const std::string& key) {
    for (auto it = turns_.begin(); it != turns_.end(); ++it)
      if (*it == key) {
        turns_.erase(it);
        return;
      }
  }

  std::map<std::string, std::deque<T>> lines_;
  std::deque<std::string> turns_; ///< keys with something waiting, next turn first
  size_t size_ = 0;
};

} // namespace kiln
