#pragma once
// PausedRequests: the requests a scheduler was asked to hold (Scheduler::pause). Thread-safe.
//
// Ids are kept whether or not the scheduler knows the request yet (a pause may overtake the
// request's own messages). Entries do not outlive their requests: the coordinator resumes every
// request that completes while paused, an abort ends a pause, and a scheduler erases the ids of
// the requests that leave it. Bounded all the same: beyond `capacity` ids a new pause is not
// kept (flow control is advisory; the HTTP server's stall timeout still ends the request).
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_set>

namespace omnirt::pipeline {

class PausedRequests {
  public:
    explicit PausedRequests(std::size_t capacity = 4096) : capacity_(capacity) {}

    // Whether anything changed (false for a repeated call, or a pause beyond the capacity).
    bool set(const std::string& request_id, bool paused);
    void erase(const std::string& request_id) { (void)set(request_id, false); }
    [[nodiscard]] bool contains(const std::string& request_id) const;
    [[nodiscard]] std::size_t size() const;

  private:
    const std::size_t capacity_;
    mutable std::mutex mutex_;
    std::unordered_set<std::string> ids_;  // guarded by mutex_
};

}  // namespace omnirt::pipeline
