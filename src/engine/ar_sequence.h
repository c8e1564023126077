#pragma once
// ArSequence: one request inside the AR engine (ar_scheduler.h). The hooks see it through the
// public accessors; everything else is the scheduler's bookkeeping.
//
// Token layout: tokens() is the prompt followed by the output. After a preemption the output
// so far is recomputed as if it were prompt (recompute policy), but prompt_tokens() and
// output() keep the request's own split.
//
// Thread safety: owned and used by the engine thread only.
#include <any>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/request.h"
#include "engine/block_allocator.h"
#include "engine/incremental_text.h"
#include "engine/sampling_params.h"
#include "pipeline/scheduler.h"

namespace omnirt::engine {

class ArScheduler;

// One chunk of an input stream and the stage that sent it.
struct StreamInputChunk {
    std::string from_stage;
    std::shared_ptr<const pipeline::StreamChunk> chunk;
};

// The input streams of a request (ArSchedulerOptions::accept_streams): what the stages whose
// stream_to names this stage sent for it, in arrival order (chunks that came before the request
// itself included). The hooks take the chunks they use (pop_front); the engine only appends.
// After a preemption the sequence's positions are computed again, but taken chunks do not come
// back: a hook that needs them again keeps them (e.g. in hook_state()).
struct StreamInput {
    std::deque<StreamInputChunk> chunks;  // received and not taken yet
    std::int64_t received = 0;            // chunks received in all
    std::set<std::string> sources;        // stages that sent a chunk or a done signal
    std::set<std::string> done_sources;   // stages that sent stream_done
    // At least one stream_done came, and every stage that sent something has sent one.
    [[nodiscard]] bool done() const {
        return !done_sources.empty() && done_sources.size() == sources.size();
    }
};

enum class SequenceStatus : std::uint8_t { waiting, running, finished, aborted, failed };

class ArSequence {
  public:
    ArSequence(const ArSequence&) = delete;
    ArSequence& operator=(const ArSequence&) = delete;

    [[nodiscard]] const std::string& request_id() const { return request_id_; }
    // The request's new_request payload (its `request` holds the client's inputs and params).
    [[nodiscard]] const StagePayload& input() const { return *input_; }
    [[nodiscard]] std::span<const std::int32_t> tokens() const { return tokens_; }
    [[nodiscard]] std::int64_t prompt_tokens() const { return prompt_tokens_; }
    [[nodiscard]] std::span<const std::int32_t> output() const {
        return std::span<const std::int32_t>(tokens_).subspan(
            static_cast<std::size_t>(prompt_tokens_));
    }
    // Positions whose keys and values are in the KV cache.
    [[nodiscard]] std::int64_t computed_tokens() const { return computed_; }
    [[nodiscard]] const SamplingParams& sampling_params() const { return sampling_.params(); }
    // The hooks' own per-request state (empty at first; kept until the request leaves).
    [[nodiscard]] std::any& hook_state() { return hook_state_; }
    [[nodiscard]] const std::any& hook_state() const { return hook_state_; }
    // What FeedbackStrategy::extract_output returned for this request at its last step.
    [[nodiscard]] std::any& feedback() { return feedback_; }
    [[nodiscard]] const std::any& feedback() const { return feedback_; }
    // The request's input streams (empty unless the stage accepts streams).
    [[nodiscard]] StreamInput& stream_input() { return stream_input_; }
    [[nodiscard]] const StreamInput& stream_input() const { return stream_input_; }

  private:
    friend class ArScheduler;
    ArSequence(std::string request_id, std::shared_ptr<const StagePayload> input,
               std::vector<std::int32_t> prompt, SamplingState sampling)
        : request_id_(std::move(request_id)),
          input_(std::move(input)),
          tokens_(std::move(prompt)),
          prompt_tokens_(static_cast<std::int64_t>(tokens_.size())),
          sampling_(std::move(sampling)) {}

    std::string request_id_;
    std::shared_ptr<const StagePayload> input_;
    std::vector<std::int32_t> tokens_;
    std::int64_t prompt_tokens_ = 0;
    std::int64_t computed_ = 0;
    std::int64_t max_tokens_ = 0;  // resolved against the context and the KV capacity
    SamplingState sampling_;
    std::optional<IncrementalText> text_;  // with a detokenizer
    std::string cache_salt_;
    bool prefix_cache_ = true;
    SequenceStatus status_ = SequenceStatus::waiting;
    std::vector<BlockId> blocks_;
    std::size_t blocks_in_tree_ = 0;           // leading blocks_ known to the prefix cache
    std::vector<float> logprobs_;              // of the output tokens, when asked for
    std::vector<std::string> stream_targets_;  // of the stage's, chosen for this request
    std::map<std::optional<std::string>, std::int64_t> next_chunk_id_;  // per stream target
    pipeline::Clock::time_point enqueued_at_;
    std::any hook_state_;
    std::any feedback_;
    StreamInput stream_input_;
};

}  // namespace omnirt::engine
