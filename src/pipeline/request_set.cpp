#include "pipeline/request_set.h"

#include <algorithm>

namespace omnirt::pipeline {

void RecentRequestSet::insert(const std::string& request_id) {
    if (!ids_.insert(request_id).second) return;
    order_.push_back(request_id);
    while (ids_.size() > capacity_ && !order_.empty()) {
        ids_.erase(order_.front());
        order_.pop_front();
    }
}

void RecentRequestSet::erase(const std::string& request_id) {
    if (ids_.erase(request_id) == 0) return;
    // Linear in the capacity; only a reused id (rare) gets here.
    auto it = std::find(order_.rbegin(), order_.rend(), request_id);
    if (it != order_.rend()) order_.erase(std::next(it).base());
}

bool RecentRequestSet::contains(const std::string& request_id) const {
    return ids_.contains(request_id);
}

}  // namespace omnirt::pipeline
