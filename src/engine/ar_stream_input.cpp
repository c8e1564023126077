// ArScheduler: input streams (ArEngineConfig::accept_streams) and the ready gate
// (ArRole::ready). Runs on the engine thread.

#include <exception>
#include <string>
#include <utility>

#include "core/log.h"
#include "engine/ar_scheduler.h"

namespace omnirt::engine {
namespace {

void add_to(StreamInput& input, pipeline::IncomingMessage& message) {
    input.sources.insert(message.from_stage);
    if (message.kind == pipeline::IncomingKind::stream_chunk) {
        ++input.received;
        input.chunks.push_back(
            StreamInputChunk{.from_stage = message.from_stage, .chunk = std::move(message.chunk)});
    } else {
        input.done_sources.insert(message.from_stage);
    }
}

}  // namespace

void ArScheduler::handle_stream_message(pipeline::IncomingMessage message) {
    const bool is_chunk = message.kind == pipeline::IncomingKind::stream_chunk;
    if (!config_.accept_streams || (is_chunk && message.chunk == nullptr)) {
        log::warn("stage '" + config_.stage_name + "': dropping a stream " +
                  (is_chunk ? "chunk" : "done signal") + " for request '" + message.request_id +
                  "' from '" + message.from_stage + "' (" +
                  (config_.accept_streams ? "it carries no chunk"
                                          : "this AR stage takes no input streams") +
                  ")");
        return;
    }
    const std::string& id = message.request_id;
    // The request left (nothing to feed), or its early chunks were evicted (it fails if it
    // comes; keeping these would push the next oldest out).
    if (is_aborted(id) || ended_ids_.contains(id) || evicted_ids_.contains(id)) return;
    if (auto found = sequences_.find(id); found != sequences_.end()) {
        add_to(found->second->stream_input_, message);
        return;
    }
    // Before its request: kept for it. Past the bound the oldest such requests lose theirs
    // (their requests may never come here: a route can send them elsewhere); one of them that
    // does come later fails then.
    auto early = early_streams_.find(id);
    if (early == early_streams_.end()) {
        early = early_streams_.try_emplace(id).first;
        early_order_.push_back(id);
    }
    if (is_chunk) ++early_chunks_;
    add_to(early->second, message);
    evict_early_streams();
}

void ArScheduler::evict_early_streams() {
    const std::size_t limit = config_.max_early_stream_chunks;
    while ((early_chunks_ > limit || early_streams_.size() > limit) && !early_order_.empty()) {
        const std::string id = std::move(early_order_.front());
        early_order_.pop_front();
        auto oldest = early_streams_.find(id);
        if (oldest == early_streams_.end()) continue;  // adopted or dropped since
        log::warn("stage '" + config_.stage_name + "': dropping the " +
                  std::to_string(oldest->second.chunks.size()) +
                  " early stream chunks of request '" + id + "' (more than " +
                  std::to_string(limit) +
                  " chunks or requests wait for requests that have not arrived)");
        early_chunks_ -= oldest->second.chunks.size();
        early_streams_.erase(oldest);
        evicted_ids_.insert(id);
    }
    // Ids adopted or dropped stay in the order until they reach its front; keep it small.
    if (early_order_.size() > 2 * early_streams_.size() + 64) {
        std::erase_if(early_order_,
                      [&](const std::string& id) { return !early_streams_.contains(id); });
    }
}

void ArScheduler::adopt_early_stream(ArSequence& sequence) {
    auto early = early_streams_.find(sequence.request_id_);
    if (early == early_streams_.end()) return;
    early_chunks_ -= early->second.chunks.size();
    sequence.stream_input_ = std::move(early->second);
    early_streams_.erase(early);
}

void ArScheduler::drop_early_stream(const std::string& request_id) {
    auto early = early_streams_.find(request_id);
    if (early == early_streams_.end()) return;
    early_chunks_ -= early->second.chunks.size();
    early_streams_.erase(early);
}

bool ArScheduler::is_ready(ArSequence& sequence) {
    bool ready = false;
    try {
        ready = role_->ready(sequence);
    } catch (const std::exception& error) {
        fail_sequence(sequence,
                      Error{ErrorCode::internal, "stage '" + config_.stage_name +
                                                     "': the ready check threw: " + error.what()});
        return false;
    }
    if (!ready) ++counters_.not_ready;
    return ready;
}

}  // namespace omnirt::engine
