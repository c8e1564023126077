#pragma once
// ArSequence: one request inside the AR engine (ar_scheduler.h). The role (ar_role.h) sees it
// through the public accessors; everything else is the scheduler's bookkeeping.
//
// Token layout: tokens() is the prompt followed by the output. After a preemption the output
// so far is recomputed as if it were prompt (recompute policy), but prompt_tokens() and
// output() keep the request's own split.
//
// Thread safety: owned and used by the engine thread only.
#include <ATen/core/Tensor.h>

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
#include "engine/ar_role.h"
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

// The input streams of a request (ArEngineConfig::accept_streams): what the stages whose
// stream_to names this stage sent for it, in arrival order (chunks that came before the request
// itself included). The role takes the chunks it uses (pop_front); the engine only appends.
// After a preemption the sequence's positions are computed again, but taken chunks do not come
// back: a role that needs them again keeps them (in its RoleRequestState).
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

// The hidden states a capture collected so far (CaptureSpec): rows for positions [begin, begin
// + count), in chunks as the steps computed them (model dtype and device). Rows stay with the
// sequence through preemption; captured positions are not captured again.
struct CaptureRows {
    CaptureSpec spec;
    std::vector<at::Tensor> chunks;  // [rows, hidden] each, in position order
    std::int64_t count = 0;
    // The next position this capture still needs; -1 when it is complete.
    [[nodiscard]] std::int64_t next_position() const {
        const std::int64_t next = spec.begin + count;
        return spec.end >= 0 && next >= spec.end ? -1 : next;
    }
    // Every row so far, [count, hidden] (undefined while none).
    [[nodiscard]] at::Tensor rows() const;
};

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
    // The role's own per-request state (RequestSetup::state), null when it has none.
    template <class T>
    [[nodiscard]] T* role_state() const {
        return dynamic_cast<T*>(role_state_.get());
    }
    // The request's stream targets (of the stage's, chosen when it arrived).
    [[nodiscard]] const std::vector<std::string>& stream_targets() const { return stream_targets_; }
    [[nodiscard]] const std::vector<CaptureRows>& captures() const { return captures_; }
    // With a depth model: one frame per output token that is not a stop token, 1 +
    // DepthModel::num_codes() ints each (the token, then its depth codes), flat.
    [[nodiscard]] std::span<const std::int32_t> frame_codes() const { return codes_; }
    [[nodiscard]] std::int64_t frames() const { return frames_; }
    // The text so far (roles that produce text), and the output tokens' log probabilities.
    [[nodiscard]] const IncrementalText* text() const { return text_ ? &*text_ : nullptr; }
    [[nodiscard]] std::span<const float> logprobs() const { return logprobs_; }
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

    // A run of positions whose content the engine holds and injects whenever they are computed.
    struct HeldRun {
        std::int32_t after_layers = 0;  // 0: replaces the embedding; n: added after n layers
        std::int64_t begin = 0;
        at::Tensor values;
    };

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
    std::unique_ptr<RoleRequestState> role_state_;
    StreamInput stream_input_;
    // Prefix-cache key of every position (token id, or a hash of it with its held content and
    // explicit position), parallel to tokens_.
    std::vector<std::uint64_t> keys_;
    std::vector<HeldRun> held_;  // prompt content (setup), then one feedback row per token
    at::Tensor positions_;       // explicit prompt positions, [axes, prompt] int64 host
    std::int64_t position_offset_ = 0;
    std::vector<CaptureRows> captures_;
    std::vector<std::int32_t> codes_;  // frames, flat
    std::int64_t frames_ = 0;
    std::vector<SamplingState> depth_sampling_;  // one per depth
    bool runner_open_ = false;  // ModelRunner::open_request succeeded and was not closed
    bool role_closed_ = false;  // ArRole::close_request ran
};

}  // namespace omnirt::engine
