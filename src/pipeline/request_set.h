#pragma once
// RecentRequestSet: a bounded set of request ids that remembers the most recent `capacity`
// insertions (oldest evicted first). A stage uses it for requests it finished or dropped, so
// that late messages for them (a chunk after an abort, a fan-in source that was not needed) are
// recognised and released instead of creating new state.
//
// Thread safety: none; the owner guards it.
#include <cstddef>
#include <deque>
#include <string>
#include <unordered_set>

namespace omnirt::pipeline {

class RecentRequestSet {
  public:
    explicit RecentRequestSet(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

    // Inserts `request_id` (a no-op when present); evicts the oldest id beyond capacity.
    void insert(const std::string& request_id);
    // Forgets `request_id` (a new request reuses the id).
    void erase(const std::string& request_id);
    [[nodiscard]] bool contains(const std::string& request_id) const;
    [[nodiscard]] std::size_t size() const { return ids_.size(); }
    [[nodiscard]] std::size_t capacity() const { return capacity_; }

  private:
    std::size_t capacity_;
    std::deque<std::string> order_;  // insertion order of ids_
    std::unordered_set<std::string> ids_;
};

}  // namespace omnirt::pipeline
