// ArScheduler: input streams (ArSchedulerOptions::accept_streams) and the ready gate
// (ArSchedulerOptions::ready). Runs on the engine thread.
#include <spdlog/spdlog.h>

#include <string>
#include <utility>

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
    if (!options_.accept_streams || (is_chunk && message.chunk == nullptr)) {
        spdlog::warn("stage '{}': dropping a stream {} for request '{}' from '{}' ({})",
                     options_.stage_name, is_chunk ? "chunk" : "done signal", message.request_id,
                     message.from_stage,
                     options_.accept_streams ? "it carries no chunk"
                                             : "this AR stage takes no input streams");
        return;
    }
    const std::string& id = message.request_id;
    if (is_aborted(id) || ended_ids_.contains(id)) return;  // the request left: nothing to feed
    if (auto found = sequences_.find(id); found != sequences_.end()) {
        add_to(found->second->stream_input_, message);
        return;
    }
    // Before its request: kept for it, within the bound over all such requests.
    auto early = early_streams_.find(id);
    if (is_chunk && early_chunks_ >= options_.max_early_stream_chunks) {
        if (early != early_streams_.end()) {
            early_chunks_ -= early->second.chunks.size();
            early_streams_.erase(early);
        }
        ended_ids_.insert(id);
        ++counters_.failed_requests;
        outbox_.push(pipeline::OutgoingMessage{
            .request_id = id,
            .kind = pipeline::OutgoingKind::error,
            .error = Error{ErrorCode::resource_exhausted,
                           "stage '" + options_.stage_name + "': more than " +
                               std::to_string(options_.max_early_stream_chunks) +
                               " stream chunks are waiting for requests that have not arrived; "
                               "request '" + id + "' fails (its chunk came from '" +
                               message.from_stage + "')"}});
        return;
    }
    if (early == early_streams_.end()) early = early_streams_.try_emplace(id).first;
    if (is_chunk) ++early_chunks_;
    add_to(early->second, message);
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

bool ArScheduler::is_ready(const ArSequence& sequence) const {
    return !options_.ready || options_.ready(sequence);
}

std::size_t ArScheduler::count_not_ready() const {
    if (!options_.ready) return 0;
    std::size_t count = 0;
    for (const ArSequence* sequence : running_) count += is_ready(*sequence) ? 0 : 1;
    for (const ArSequence* sequence : waiting_) count += is_ready(*sequence) ? 0 : 1;
    return count;
}

}  // namespace omnirt::engine
