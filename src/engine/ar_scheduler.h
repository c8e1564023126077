#pragma once
// ArScheduler: the scheduler of autoregressive stages (the OmniScheduler role of pipeline.md).
// It presents the pipeline::Scheduler surface to the Stage and runs, on one engine thread that
// owns the model, the KV cache, the block allocator and the prefix cache:
//
//   drain inbox (new requests, aborts) -> schedule a step -> build each sequence's input (the
//   role's content, feedback, captures; ArRole::prepare_step) -> ModelRunner::forward -> sample
//   -> depth model (a frame's codes) -> ArRole::feedback / on_token -> append tokens, check stops
//   -> stream chunks / results to the outbox
//
// Configuration is split in two: ArEngineConfig sizes and drives the engine (KV budget,
// batching, prefill chunking, sampling defaults, streams, tensor parallelism); the ArRole
// (ar_role.h) is the model's adapter (prompt, content, readiness, per-token fields, result).
// An optional DepthModel (depth_model.h) generates each frame's remaining codes in the step.
//
// Scheduling (docs/engine.md, "AR engine"): continuous batching; every running sequence takes
// part in every step (decodes one token each; prompts in chunks of at most max_prefill_tokens
// per step over all sequences); waiting requests are admitted in arrival order while
// max_running_requests and the KV blocks allow (a request is admitted with blocks for its whole
// prompt; prefix-cache hits skip the cached positions). When a decode finds no free block, the
// most recently admitted sequence is preempted (recompute: its blocks are freed and it waits at
// the head of the queue, its output appended to its prompt).
//
// Per generated token, one stream chunk goes to the client (when stream_to_client) and to every
// stream target of the request:
//   {"token_id": int, "index": int (0-based in the output), "text": delta (roles with text),
//    "logprob": float, "top_logprobs": [{"token_id", "logprob"}...] (when asked for),
//    "codes": i32 [1 + depth codes] (with a depth model), + ArRole::on_token's fields}
// The result's data is ArRole::make_result's (by default output ids, text, finish reason,
// usage, log probabilities, codes); a usage map gets "engine_time_s", the seconds from the
// request's arrival at the stage to its result. Aborted requests produce nothing (the Scheduler
// contract drops their results).
//
// Input streams (config.accept_streams): stream_chunk / stream_done messages of a request go to
// its ArSequence::stream_input(), where the role takes them; ArRole::ready holds back the
// sequences that cannot take a step yet (a talker waiting for its thinker's next hidden state).
//
// Tensor parallelism (config.lockstep): every rank of a TP stage runs an ArScheduler fed the
// same messages; before every step the ranks agree on how many messages to handle, on rank 0's
// aborts and on stopping (engine/lockstep.h, ar_lockstep.cpp), so that they schedule the same
// batches. A rank whose group fails (a peer gone, a timeout, diverged state) fails its requests
// and every later one with that error.
//
// Threads: start(), stop(), abort(), active_requests(), stats() and wait_for_stats() may be
// called from any thread; the role, the model and the depth model run on the engine thread.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "core/value.h"
#include "engine/ar_role.h"
#include "engine/ar_sequence.h"
#include "engine/depth_model.h"
#include "engine/lockstep.h"
#include "engine/model_runner.h"
#include "engine/sampling_params.h"
#include "pipeline/paused_requests.h"
#include "pipeline/scheduler.h"
#include "pipeline/simple_scheduler.h"

namespace omnirt::pipeline {
class Tracer;
}

namespace omnirt::engine {

class BlockAllocator;
class RadixCache;
struct SampledToken;

struct ArEngineConfig {
    std::string stage_name;  // params.stage_sampling.<stage_name>; logs and errors
    // KV cache size: num_kv_blocks, or else kv_cache_bytes / KVCache::bytes_per_block.
    std::int64_t num_kv_blocks = 0;
    std::int64_t kv_cache_bytes = 0;
    std::int32_t block_size = 16;
    Device device = Device::cpu();  // of the KV cache (the model's device)
    std::int64_t max_running_requests = 256;
    std::int64_t max_prefill_tokens = 2048;  // prompt tokens per step, over all sequences
    // Blocks kept free when admitting next to running sequences, so decodes can grow without
    // preempting at once. -1: 1% of the blocks (at least 1).
    std::int64_t watermark_blocks = -1;
    bool enable_prefix_cache = true;
    SamplingParams default_sampling;  // the stage's defaults (sampling_params.h)
    // Which layers of a request's params apply (SamplingLayers::own: a talker ignores the
    // client's max_tokens, stop strings and params.sampling, which are the text's).
    SamplingLayers sampling_layers = SamplingLayers::all;
    // With a depth model: its codes' sampling, one entry for every depth or one per depth
    // (requests override it through RequestSetup::depth_sampling); empty: greedy.
    std::vector<SamplingParams> depth_sampling;
    std::vector<std::int32_t> eos_token_ids;  // end generation unless ignore_eos
    bool stream_to_client = true;
    std::vector<std::string> stream_targets;  // stages of the stage's stream_to
    // Input streams (a talker that consumes a thinker's stream while both generate). With
    // accept_streams, stream_chunk / stream_done messages go to the request's
    // ArSequence::stream_input(), where the role takes them; messages that come before the
    // request are kept for it. At most max_early_stream_chunks chunks (and as many requests)
    // are kept that way; past that the oldest requests' are dropped (their requests may never
    // come: a route can send them elsewhere), and such a request that comes later fails.
    // Without accept_streams they are dropped with a warning, as a SimpleScheduler drops them.
    // The role's ready() holds back sequences that wait for their streams: running ones keep
    // their blocks and their place among max_running_requests (but may still be preempted);
    // waiting ones are not admitted yet (later ones may be). When no sequence is ready the
    // engine waits for the inbox.
    bool accept_streams = false;
    std::size_t max_early_stream_chunks = 4096;
    std::uint64_t seed = 0;  // seeds the seeds of unseeded requests; 0 = from random_device
    std::size_t inbox_capacity = pipeline::kDefaultQueueCapacity;
    std::size_t outbox_capacity = pipeline::kDefaultQueueCapacity;
    pipeline::Tracer* tracer = nullptr;  // "forward" spans; may be null; must outlive us
    // Tensor parallelism: the group this rank agrees with before every step (usually the same
    // object that runs the model's collectives); null for a stage of one rank. With it, abort()
    // counts on rank 0 only (rank 0 forwards its aborts, ar_lockstep.cpp) and seed comes from
    // rank 0.
    std::shared_ptr<Lockstep> lockstep;
    // How long stop() waits for the engine to leave its loop together with its peers before it
    // cancels the group's collectives (a peer that stopped taking part).
    std::chrono::milliseconds lockstep_stop_grace{10000};
};

// A snapshot of the engine's state, published after every step and whenever it goes idle.
struct ArSchedulerStats {
    std::size_t waiting = 0;
    std::size_t running = 0;
    std::size_t total_blocks = 0;
    std::size_t free_blocks = 0;
    std::size_t cached_blocks = 0;  // held by the prefix cache (some may be shared)
    // Blocks the waiting and running sequences hold (a block shared by several counts for
    // each): 0 once no request holds any, whatever the prefix cache keeps.
    std::size_t request_blocks = 0;
    std::uint64_t steps = 0;
    std::uint64_t prefill_tokens = 0;  // computed prompt positions
    std::uint64_t decode_tokens = 0;
    std::uint64_t prefix_hit_tokens = 0;  // prompt positions skipped thanks to the cache
    std::uint64_t preemptions = 0;
    std::uint64_t finished_requests = 0;
    std::uint64_t aborted_requests = 0;
    std::uint64_t failed_requests = 0;
    std::size_t not_ready = 0;              // sequences ReadyFn held back at the last scheduling
    std::size_t paused = 0;                 // sequences a pause held back at the last scheduling
    std::uint64_t generated_tokens = 0;     // tokens appended to outputs
    std::size_t early_stream_requests = 0;  // unknown requests whose stream chunks are kept
    std::uint64_t loop_turns = 0;           // turns of the engine loop (a step tried, or a wait)
    // The engine waits for the inbox: no sequence, or none that can take a step.
    bool idle = true;
};

class ArScheduler final : public pipeline::Scheduler {
  public:
    // Validates the configuration and allocates the KV cache for `model`. `role` null: the
    // default ArRole (prompt ids from the payload, no text). invalid_argument for bad sizes, a
    // depth model without hidden states... ; the KVCache's errors for the allocation.
    [[nodiscard]] static Result<std::unique_ptr<ArScheduler>> create(
        ArEngineConfig config, std::unique_ptr<ModelRunner> model,
        std::unique_ptr<ArRole> role = nullptr, std::unique_ptr<DepthModel> depth = nullptr);
    ~ArScheduler() override;  // stop()

    [[nodiscard]] Status start() override;
    // Drops queued messages, frees every sequence's blocks and the prefix cache, joins the
    // engine thread (after its current step), closes the outbox.
    void stop() override;
    // Queued messages of the request are removed at once; its sequence leaves before the next
    // step (its blocks are freed; nothing more reaches the outbox for it). Later messages of the
    // id are dropped (the last 4096 aborted ids are remembered).
    void abort(const std::string& request_id) override;
    // A paused request takes no step: a running one keeps its blocks (and its prefix-cache
    // hits) but leaves its batch slot (max_running_requests) to others, a waiting one is not
    // admitted; the others are scheduled as if it were not there. Its resume wakes the engine.
    // Tensor-parallel stages ignore pauses (the ranks would have to agree on them).
    void pause(const std::string& request_id, bool paused) override;
    [[nodiscard]] std::size_t active_requests() const override;
    [[nodiscard]] pipeline::SchedulerLoad load() const override;

    [[nodiscard]] ArSchedulerStats stats() const;
    // Waits until `predicate` holds for a published snapshot, or `timeout`. True when it held.
    bool wait_for_stats(const std::function<bool(const ArSchedulerStats&)>& predicate,
                        std::chrono::milliseconds timeout) const;

  private:
    struct Scheduled {
        ArSequence* sequence;
        std::int64_t tokens;  // new tokens this step
    };
    // What the engine put into a step's input, to tell whether prepare_step changed it.
    struct ContentFingerprint {
        std::vector<std::int64_t> embedding_rows;
        const void* embedding_values = nullptr;
        std::vector<const void*> layer_values;
        std::size_t layer_rows = 0;
        const void* positions = nullptr;
        std::size_t captures = 0;
        friend bool operator==(const ContentFingerprint&, const ContentFingerprint&) = default;
    };
    struct StepInput {
        SequenceInput input;
        std::vector<std::size_t> capture_slots;  // ArSequence::captures_ of input.captures
        ContentFingerprint fingerprint;
    };

    ArScheduler(ArEngineConfig config, std::unique_ptr<ModelRunner> model,
                std::unique_ptr<ArRole> role, std::unique_ptr<DepthModel> depth);
    // ar_scheduler.cpp: lifecycle, messages, requests.
    void engine_loop();
    void handle_message(pipeline::IncomingMessage message);
    // ar_stream_input.cpp: stream_chunk / stream_done messages and the ready gate.
    void handle_stream_message(pipeline::IncomingMessage message);
    void adopt_early_stream(ArSequence& sequence);  // what came before the request
    void drop_early_stream(const std::string& request_id);
    void evict_early_streams();  // the oldest, past max_early_stream_chunks
    // ArRole::ready, counted in counters_.not_ready; a throwing check fails its sequence.
    [[nodiscard]] bool is_ready(ArSequence& sequence);
    Result<std::unique_ptr<ArSequence>> make_sequence(const pipeline::IncomingMessage& message);
    // ar_content.cpp: a request's content, its prefix-cache keys, step inputs and captures.
    [[nodiscard]] Status hold_setup(ArSequence& sequence, RequestSetup& setup);
    void append_key(ArSequence& sequence, std::int32_t token, const at::Tensor& embedding);
    [[nodiscard]] std::int64_t match_limit(const ArSequence& sequence) const;
    [[nodiscard]] StepInput build_input(ArSequence& sequence, std::int64_t count);
    [[nodiscard]] static ContentFingerprint fingerprint(const SequenceInput& input);
    [[nodiscard]] Status keep_captures(ArSequence& sequence, const SequenceInput& input,
                                       std::span<const std::size_t> slots,
                                       const std::vector<at::Tensor>& captured);
    // ModelRunner::open_request for an admitted sequence (once until it is closed).
    [[nodiscard]] Status open_runner(ArSequence& sequence);
    // Closes the runner's and the role's state of a sequence that leaves (idempotent).
    void close_sequence(ArSequence& sequence);
    void apply_aborts();
    // Retires the waiting or running sequences of `ids` as aborted (engine thread).
    void retire_aborted(const std::vector<std::string>& ids);
    bool is_aborted(const std::string& request_id) const;
    void publish_stats(bool idle);
    void release_everything();
    bool guarded_step();
    // ar_lockstep.cpp: the engine loop of a tensor-parallel rank.
    void lockstep_loop();
    void apply_agreed_aborts(const std::vector<std::string>& ids);
    void break_lockstep(Error error);
    void broken_loop();
    void fail_message(const pipeline::IncomingMessage& message, const Error& error);
    [[nodiscard]] std::uint64_t state_digest() const;
    void stop_lockstep();
    // ar_step.cpp: one engine step. False when nothing changed (no sequence was ready, none
    // was preempted or failed): the loop may wait for the inbox.
    bool step();
    std::vector<Scheduled> schedule();
    bool ensure_free_blocks(std::size_t count);
    void preempt(ArSequence& sequence);
    void cache_blocks(ArSequence& sequence);
    void run_batch(std::vector<Scheduled> plan);
    // ar_depth.cpp: the frames of the rows that produced a token (depth codes per row, 1 +
    // num_codes each with the token first); an error fails those rows' sequences.
    [[nodiscard]] Result<std::vector<std::vector<std::int32_t>>> run_depth(
        std::span<ArSequence* const> sequences, const at::Tensor& hidden,
        std::span<const std::int32_t> tokens);
    [[nodiscard]] bool is_stop_token(const ArSequence& sequence, std::int32_t token) const;
    // ArRole::feedback, checked: undefined, or [1, hidden].
    [[nodiscard]] Result<at::Tensor> guarded_feedback(ArSequence& sequence, const TokenStep& step);
    // ar_output.cpp: appends the token (its key, feedback embedding and frame), streams it and
    // finishes the sequence when it ends.
    void append_token(ArSequence& sequence, const TokenStep& step, TokenFields fields,
                      const at::Tensor& feedback, std::span<const std::int32_t> frame);
    // ar_output.cpp: what leaves through the outbox.
    void emit_chunk(ArSequence& sequence, const Map& fields, const Map& target_fields);
    void finish(ArSequence& sequence, const std::string& reason);
    void fail_sequence(ArSequence& sequence, Error error);
    void retire(ArSequence& sequence, SequenceStatus status);
    void sweep();

    ArEngineConfig config_;
    std::unique_ptr<ModelRunner> model_;
    std::unique_ptr<ArRole> role_;
    std::unique_ptr<DepthModel> depth_;
    ModelCapabilities capabilities_;
    std::unique_ptr<KVCache> kv_cache_;
    std::unique_ptr<BlockAllocator> allocator_;
    std::unique_ptr<RadixCache> prefix_cache_;
    std::int64_t vocab_size_ = 0;
    std::int64_t max_positions_ = 0;
    std::int64_t capacity_tokens_ = 0;  // KV blocks * block size
    std::int64_t watermark_blocks_ = 0;

    // Engine thread only.
    std::unordered_map<std::string, std::unique_ptr<ArSequence>> sequences_;
    std::deque<ArSequence*> waiting_;
    ArSequence* unadmitted_ = nullptr;  // schedule(): a ready request the blocks did not admit
    // Stream inputs of requests not seen yet (accept_streams), in arrival order (may hold ids
    // already adopted or dropped), their chunk count, the ids whose early chunks were evicted
    // (their requests fail if they come), and the ids of requests that ended here (their late
    // chunks are dropped, not kept as early ones).
    std::unordered_map<std::string, StreamInput> early_streams_;
    std::deque<std::string> early_order_;
    std::size_t early_chunks_ = 0;
    pipeline::RecentRequestIds evicted_ids_;
    pipeline::RecentRequestIds ended_ids_;
    std::vector<ArSequence*> running_;  // in admission order
    std::uint64_t seed_state_ = 0;
    ArSchedulerStats counters_;
    // Lockstep only: messages taken from the inbox but not yet agreed on, the count handled so
    // far, and the error that broke the group.
    std::deque<pipeline::IncomingMessage> received_;
    std::uint64_t handled_messages_ = 0;
    std::optional<Error> lockstep_error_;

    // Shared with other threads.
    mutable std::mutex mutex_;
    std::vector<std::string> pending_aborts_;
    pipeline::RecentRequestIds aborted_ids_;
    pipeline::PausedRequests paused_;  // thread-safe itself
    bool started_ = false;
    std::atomic<bool> stopping_{false};
    std::atomic<std::size_t> sequence_count_{0};
    mutable std::mutex stats_mutex_;
    mutable std::condition_variable stats_cv_;
    ArSchedulerStats published_;
    std::mutex stop_mutex_;
    std::mutex exit_mutex_;  // lockstep: stop() waits for the engine loop's end with a grace
    std::condition_variable exit_cv_;
    bool engine_exited_ = false;
    std::thread engine_;
};

}  // namespace omnirt::engine
