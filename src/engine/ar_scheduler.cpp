// ArScheduler: lifecycle, the engine loop, incoming messages and request admission checks.
// One step (schedule, forward, sample) is in ar_step.cpp; what leaves through the outbox in
// ar_output.cpp.
#include "engine/ar_scheduler.h"
#include "core/log.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <random>
#include <utility>

#include "engine/block_allocator.h"
#include "engine/kv_cache.h"
#include "engine/radix_cache.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::engine {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

}  // namespace

Result<std::unique_ptr<ArScheduler>> ArScheduler::create(ArEngineConfig config,
                                                         std::unique_ptr<ModelRunner> model,
                                                         std::unique_ptr<ArRole> role,
                                                         std::unique_ptr<DepthModel> depth) {
    const std::string who = "AR scheduler of stage '" + config.stage_name + "': ";
    auto invalid = [&](const std::string& message) {
        return fail(ErrorCode::invalid_argument, who + message);
    };
    if (model == nullptr) return invalid("no model runner");
    if (config.block_size <= 0) return invalid("block_size must be positive");
    if (config.max_running_requests <= 0) return invalid("max_running_requests must be positive");
    if (config.max_prefill_tokens <= 0) return invalid("max_prefill_tokens must be positive");
    if (model->vocab_size() <= 0 || model->max_positions() <= 0) {
        return invalid("the model reports a non-positive vocab_size or max_positions");
    }
    const KVCacheSpec spec = model->kv_spec();
    std::int64_t blocks = config.num_kv_blocks;
    if (blocks <= 0) {
        if (config.kv_cache_bytes <= 0) {
            return invalid("set num_kv_blocks or kv_cache_bytes (the KV cache size)");
        }
        const std::int64_t per_block = KVCache::bytes_per_block(spec, config.block_size);
        if (per_block <= 0) return invalid("the model's KV cache spec is empty");
        blocks = config.kv_cache_bytes / per_block;
        if (blocks <= 0) {
            return invalid("kv_cache_bytes " + std::to_string(config.kv_cache_bytes) +
                           " holds no block of " + std::to_string(per_block) + " bytes");
        }
    }
    if (blocks > std::numeric_limits<std::int32_t>::max()) {
        return invalid("more KV blocks than int32 block ids can name");
    }
    for (std::int32_t id : config.eos_token_ids) {
        if (id < 0 || id >= model->vocab_size()) {
            return invalid("eos token id " + std::to_string(id) + " is outside the vocabulary");
        }
    }
    if (depth) {
        if (depth->num_codes() < 1) return invalid("the depth model generates no codes");
        for (int d = 0; d < depth->num_codes(); ++d) {
            if (depth->vocab_size(d) <= 0)
                return invalid("the depth model has an empty vocabulary");
        }
        const std::size_t entries = config.depth_sampling.size();
        if (entries > 1 && entries != static_cast<std::size_t>(depth->num_codes())) {
            return invalid("depth_sampling needs one entry, or one per depth (" +
                           std::to_string(depth->num_codes()) + "), got " +
                           std::to_string(entries));
        }
    }
    config.num_kv_blocks = blocks;
    OMNI_TRY(std::unique_ptr<KVCache> cache,
             KVCache::create(spec, blocks, config.block_size,
                             torch_bridge::to_torch_device(config.device)));
    if (!role) role = std::make_unique<ArRole>();
    std::unique_ptr<ArScheduler> scheduler(
        new ArScheduler(std::move(config), std::move(model), std::move(role), std::move(depth)));
    scheduler->kv_cache_ = std::move(cache);
    return scheduler;
}

ArScheduler::ArScheduler(ArEngineConfig config, std::unique_ptr<ModelRunner> model,
                         std::unique_ptr<ArRole> role, std::unique_ptr<DepthModel> depth)
    : pipeline::Scheduler(config.inbox_capacity, config.outbox_capacity),
      config_(std::move(config)),
      model_(std::move(model)),
      role_(std::move(role)),
      depth_(std::move(depth)),
      capabilities_(model_->capabilities()),
      evicted_ids_(std::max<std::size_t>(4096, config_.max_early_stream_chunks)) {
    const auto blocks = static_cast<std::int32_t>(config_.num_kv_blocks);
    allocator_ = std::make_unique<BlockAllocator>(blocks);
    if (config_.enable_prefix_cache) {
        prefix_cache_ = std::make_unique<RadixCache>(*allocator_, config_.block_size);
    }
    vocab_size_ = model_->vocab_size();
    max_positions_ = model_->max_positions();
    capacity_tokens_ = config_.num_kv_blocks * config_.block_size;
    watermark_blocks_ = config_.watermark_blocks >= 0
                            ? std::min<std::int64_t>(config_.watermark_blocks, blocks)
                            : std::max<std::int64_t>(1, blocks / 100);
    seed_state_ = config_.seed != 0
                      ? config_.seed
                      : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    counters_.total_blocks = allocator_->total_blocks();
    counters_.free_blocks = allocator_->free_blocks();
    published_ = counters_;
}

ArScheduler::~ArScheduler() { stop(); }

Status ArScheduler::start() {
    std::lock_guard lock(mutex_);
    if (started_ || stopping_) {
        return fail(ErrorCode::failed_precondition,
                    "AR scheduler of stage '" + config_.stage_name + "' was already started");
    }
    started_ = true;
    engine_ = std::thread([this] { engine_loop(); });
    return ok_status();
}

void ArScheduler::stop() {
    std::lock_guard stop_lock(stop_mutex_);
    stopping_ = true;
    if (config_.lockstep) {
        stop_lockstep();  // ar_lockstep.cpp
    } else {
        inbox_.remove_if([](const pipeline::IncomingMessage&) { return true; });
        inbox_.close();
    }
    if (engine_.joinable()) engine_.join();
    outbox_.close();
}

void ArScheduler::abort(const std::string& request_id) {
    if (config_.lockstep) {
        // Rank 0's aborts are agreed on before the next step (ar_lockstep.cpp); the other ranks
        // get the same aborts from rank 0 there, so their own are ignored. Queued messages stay:
        // every rank must count the same messages.
        if (config_.lockstep->rank() == 0) {
            std::lock_guard lock(mutex_);
            pending_aborts_.push_back(request_id);
        }
        return;
    }
    {
        std::lock_guard lock(mutex_);
        aborted_ids_.insert(request_id);
        pending_aborts_.push_back(request_id);
    }
    paused_.erase(request_id);
    inbox_.remove_if(
        [&](const pipeline::IncomingMessage& message) { return message.request_id == request_id; });
    inbox_.interrupt();  // an engine waiting for input streams frees the request's blocks now
}

void ArScheduler::pause(const std::string& request_id, bool paused) {
    if (config_.lockstep) return;
    if (paused && is_aborted(request_id)) return;
    // A resume wakes an engine that waits because every sequence is held.
    if (paused_.set(request_id, paused) && !paused) inbox_.interrupt();
}

pipeline::SchedulerLoad ArScheduler::load() const {
    std::lock_guard lock(stats_mutex_);
    return pipeline::SchedulerLoad{
        .kv_blocks_used = static_cast<std::int64_t>(published_.request_blocks),
        .kv_blocks_total = static_cast<std::int64_t>(published_.total_blocks),
        .paused_requests = static_cast<std::int64_t>(published_.paused),
        .generated_tokens = static_cast<std::int64_t>(published_.generated_tokens)};
}

bool ArScheduler::is_aborted(const std::string& request_id) const {
    std::lock_guard lock(mutex_);
    return aborted_ids_.contains(request_id);
}

std::size_t ArScheduler::active_requests() const {
    return sequence_count_.load(std::memory_order_relaxed) + inbox_.size();
}

ArSchedulerStats ArScheduler::stats() const {
    std::lock_guard lock(stats_mutex_);
    return published_;
}

bool ArScheduler::wait_for_stats(const std::function<bool(const ArSchedulerStats&)>& predicate,
                                 std::chrono::milliseconds timeout) const {
    std::unique_lock lock(stats_mutex_);
    return stats_cv_.wait_for(lock, timeout, [&] { return predicate(published_); });
}

void ArScheduler::publish_stats(bool idle) {
    counters_.waiting = waiting_.size();
    counters_.running = running_.size();
    counters_.free_blocks = allocator_->free_blocks();
    counters_.cached_blocks = prefix_cache_ ? prefix_cache_->cached_blocks() : 0;
    counters_.request_blocks = 0;
    for (const auto& [id, sequence] : sequences_) {
        counters_.request_blocks += sequence->blocks_.size();
    }
    counters_.idle = idle;
    if (sequences_.empty()) {
        counters_.not_ready = 0;
        counters_.paused = 0;
    }
    counters_.early_stream_requests = early_streams_.size();
    sequence_count_.store(sequences_.size() + received_.size(), std::memory_order_relaxed);
    {
        std::lock_guard lock(stats_mutex_);
        published_ = counters_;
    }
    stats_cv_.notify_all();
}

void ArScheduler::engine_loop() {
    if (config_.lockstep) {
        lockstep_loop();
        release_everything();
        publish_stats(/*idle=*/true);
        std::lock_guard lock(exit_mutex_);
        engine_exited_ = true;
        exit_cv_.notify_all();
        return;
    }
    bool progressed = true;
    for (;;) {
        ++counters_.loop_turns;
        if (sequences_.empty() || !progressed) {
            publish_stats(/*idle=*/true);
            // Nothing to compute (no sequence, or none ready): block until a message arrives,
            // an abort interrupts the wait, or stop() closes the inbox.
            std::optional<pipeline::IncomingMessage> message = inbox_.pop_interruptible();
            if (message) {
                handle_message(std::move(*message));
            } else if (inbox_.closed()) {
                break;
            }
        }
        while (std::optional<pipeline::IncomingMessage> message = inbox_.try_pop()) {
            handle_message(std::move(*message));
        }
        apply_aborts();
        sweep();
        if (stopping_.load()) break;
        progressed = sequences_.empty() || guarded_step();
        publish_stats(/*idle=*/false);
    }
    release_everything();
    publish_stats(/*idle=*/true);
}

bool ArScheduler::guarded_step() {
    try {
        return step();
    } catch (const std::exception& error) {
        // A bug or an exhausted machine (bad_alloc): the requests of the batch fail, the engine
        // goes on.
        log::error("stage '" + config_.stage_name + "': engine step failed: " + error.what());
        for (ArSequence* sequence : std::vector<ArSequence*>(running_)) {
            if (sequence->status_ == SequenceStatus::running) {
                fail_sequence(*sequence, Error{ErrorCode::internal,
                                               "stage '" + config_.stage_name +
                                                   "': engine step failed: " + error.what()});
            }
        }
        sweep();
        return true;
    }
}

void ArScheduler::handle_message(pipeline::IncomingMessage message) {
    if (message.kind != pipeline::IncomingKind::new_request) {
        handle_stream_message(std::move(message));  // ar_stream_input.cpp
        return;
    }
    if (is_aborted(message.request_id)) return;
    if (sequences_.contains(message.request_id)) {
        log::warn("stage '" + config_.stage_name +
                  "': dropping a second new_request for running request '" + message.request_id +
                  "'");
        return;
    }
    ended_ids_.erase(message.request_id);  // an id may come again once its request ended
    if (evicted_ids_.contains(message.request_id)) {
        evicted_ids_.erase(message.request_id);
        ended_ids_.insert(message.request_id);
        ++counters_.failed_requests;
        outbox_.push(pipeline::OutgoingMessage{
            .request_id = message.request_id,
            .kind = pipeline::OutgoingKind::error,
            .error = Error{ErrorCode::resource_exhausted,
                           "stage '" + config_.stage_name +
                               "': the stream chunks that came before this request were "
                               "dropped (more than " +
                               std::to_string(config_.max_early_stream_chunks) +
                               " chunks or requests waited for their requests)"}});
        return;
    }
    Result<std::unique_ptr<ArSequence>> made = make_sequence(message);
    if (!made) {
        drop_early_stream(message.request_id);
        ended_ids_.insert(message.request_id);
        ++counters_.failed_requests;
        outbox_.push(pipeline::OutgoingMessage{
            .request_id = message.request_id,
            .kind = pipeline::OutgoingKind::error,
            .error = std::move(made).error().with_context("stage '" + config_.stage_name + "'")});
        return;
    }
    ArSequence* sequence = made->get();
    sequence->enqueued_at_ = message.enqueued_at;
    adopt_early_stream(*sequence);
    sequences_.emplace(message.request_id, std::move(*made));
    waiting_.push_back(sequence);
    if (sequence->max_tokens_ == 0) finish(*sequence, "length");
}

Result<std::unique_ptr<ArSequence>> ArScheduler::make_sequence(
    const pipeline::IncomingMessage& message) {
    if (message.payload == nullptr) {
        return fail(ErrorCode::invalid_argument, "new_request without a payload");
    }
    const StagePayload& payload = *message.payload;
    Result<RequestSetup> opened = [&]() -> Result<RequestSetup> {
        try {
            return role_->open_request(payload);
        } catch (const std::exception& error) {
            return fail(ErrorCode::internal, std::string("open_request threw: ") + error.what());
        }
    }();
    if (!opened) return fail(std::move(opened).error());
    RequestSetup& setup = *opened;
    if (setup.prompt.empty()) return fail(ErrorCode::invalid_argument, "data.input_ids is empty");
    OMNI_TRY(SamplingParams params,
             parse_sampling_params(payload.request.params, config_.stage_name,
                                   config_.default_sampling, config_.sampling_layers));
    // The context a request may fill: the model's positions and what the KV cache holds.
    const std::int64_t limit = std::min(max_positions_, capacity_tokens_);
    const auto prompt_tokens = static_cast<std::int64_t>(setup.prompt.size());
    std::int64_t max_tokens = 0;
    if (params.max_tokens) {
        max_tokens = *params.max_tokens;
        if (max_tokens > 0 && prompt_tokens + max_tokens > limit) {
            return fail(ErrorCode::out_of_range,
                        "the prompt (" + std::to_string(prompt_tokens) +
                            " tokens) and max_tokens (" + std::to_string(max_tokens) +
                            ") exceed the context of " + std::to_string(limit) +
                            " tokens (model positions " + std::to_string(max_positions_) +
                            ", KV cache " + std::to_string(capacity_tokens_) + ")");
        }
    } else {
        max_tokens = limit - prompt_tokens;
        if (max_tokens < 1) {
            return fail(ErrorCode::out_of_range,
                        "the prompt (" + std::to_string(prompt_tokens) +
                            " tokens) leaves no room in the context of " + std::to_string(limit) +
                            " tokens (model positions " + std::to_string(max_positions_) +
                            ", KV cache " + std::to_string(capacity_tokens_) + ")");
        }
    }
    if (!role_->produces_text() && !params.stop.empty()) {
        log::debug("stage '" + config_.stage_name + "': request '" + message.request_id +
                   "' has stop strings but the stage produces no text; they are ignored");
    }
    std::vector<std::string> targets = config_.stream_targets;
    if (setup.stream_targets) {
        for (const std::string& target : *setup.stream_targets) {
            if (std::find(config_.stream_targets.begin(), config_.stream_targets.end(), target) ==
                config_.stream_targets.end()) {
                return fail(ErrorCode::invalid_argument,
                            "stream_targets_for chose '" + target +
                                "', which is not among the stage's stream targets");
            }
        }
        targets = std::move(*setup.stream_targets);
    }
    std::vector<std::string> stops = params.stop;
    const std::uint64_t fallback_seed = splitmix64(seed_state_);
    const std::uint64_t request_seed = params.seed.value_or(fallback_seed);
    SamplingState sampling(std::move(params), fallback_seed);
    sampling.add_prompt(setup.prompt);
    std::unique_ptr<ArSequence> sequence(new ArSequence(
        message.request_id, message.payload, std::move(setup.prompt), std::move(sampling)));
    sequence->max_tokens_ = max_tokens;
    sequence->cache_salt_ = std::move(setup.cache_salt);
    sequence->prefix_cache_ = setup.prefix_cache;
    sequence->stream_targets_ = std::move(targets);
    if (role_->produces_text()) sequence->text_.emplace(std::move(stops));
    OMNI_RETURN_IF_ERROR(hold_setup(*sequence, setup));  // ar_content.cpp: content, keys
    if (depth_) {
        const std::vector<SamplingParams>& chosen =
            setup.depth_sampling.empty() ? config_.depth_sampling : setup.depth_sampling;
        const auto depths = static_cast<std::size_t>(depth_->num_codes());
        if (chosen.size() > 1 && chosen.size() != depths) {
            return fail(ErrorCode::invalid_argument,
                        "depth_sampling needs one entry, or one per depth (" +
                            std::to_string(depths) + "), got " + std::to_string(chosen.size()));
        }
        std::uint64_t depth_seed = request_seed;
        for (std::size_t d = 0; d < depths; ++d) {
            SamplingParams depth_params;
            depth_params.temperature = 0;  // greedy unless configured
            if (!chosen.empty()) depth_params = chosen[chosen.size() == 1 ? 0 : d];
            // Each depth its own stream, derived from the request's seed: a frame's codes do not
            // depend on what else is batched with it.
            sequence->depth_sampling_.emplace_back(std::move(depth_params), splitmix64(depth_seed));
        }
    }
    sequence->role_state_ = std::move(setup.state);
    return sequence;
}

void ArScheduler::apply_aborts() {
    std::vector<std::string> ids;
    {
        std::lock_guard lock(mutex_);
        ids.swap(pending_aborts_);
    }
    retire_aborted(ids);
}

void ArScheduler::retire_aborted(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
        drop_early_stream(id);
        auto it = sequences_.find(id);
        if (it == sequences_.end()) continue;
        ArSequence& sequence = *it->second;
        if (sequence.status_ != SequenceStatus::waiting &&
            sequence.status_ != SequenceStatus::running) {
            continue;
        }
        ++counters_.aborted_requests;
        retire(sequence, SequenceStatus::aborted);
    }
}

void ArScheduler::retire(ArSequence& sequence, SequenceStatus status) {
    paused_.erase(sequence.request_id_);
    allocator_->release(sequence.blocks_);
    sequence.blocks_.clear();
    sequence.blocks_in_tree_ = 0;
    sequence.status_ = status;
    ended_ids_.insert(sequence.request_id_);
    close_sequence(sequence);
}

Status ArScheduler::open_runner(ArSequence& sequence) {
    if (sequence.runner_open_) return ok_status();
    Status opened = [&]() -> Status {
        try {
            return model_->open_request(sequence.request_id_);
        } catch (const std::exception& error) {
            return fail(ErrorCode::internal, std::string("open_request threw: ") + error.what());
        }
    }();
    if (!opened) {
        return fail(opened.error().with_context("stage '" + config_.stage_name +
                                                "': the model runner's open_request"));
    }
    sequence.runner_open_ = true;
    return ok_status();
}

void ArScheduler::close_sequence(ArSequence& sequence) {
    if (sequence.runner_open_) {
        sequence.runner_open_ = false;
        model_->close_request(sequence.request_id_);
    }
    if (sequence.role_closed_) return;
    sequence.role_closed_ = true;
    try {
        role_->close_request(sequence);
    } catch (const std::exception& error) {
        log::error("stage '" + config_.stage_name + "': close_request of '" + sequence.request_id_ +
                   "' threw: " + error.what());
    }
    sequence.role_state_.reset();
}

void ArScheduler::sweep() {
    auto done = [](const ArSequence* sequence) {
        return sequence->status_ != SequenceStatus::waiting &&
               sequence->status_ != SequenceStatus::running;
    };
    std::erase_if(running_, done);
    std::erase_if(waiting_, done);
    std::erase_if(sequences_, [&](const auto& entry) { return done(entry.second.get()); });
}

void ArScheduler::release_everything() {
    for (auto& [id, sequence] : sequences_) {
        allocator_->release(sequence->blocks_);
        sequence->blocks_.clear();
        close_sequence(*sequence);
    }
    running_.clear();
    waiting_.clear();
    sequences_.clear();
    early_streams_.clear();
    early_order_.clear();
    early_chunks_ = 0;
    if (prefix_cache_) prefix_cache_->clear();
    allocator_->check_invariants();
    OMNI_CHECK(allocator_->free_blocks() == allocator_->total_blocks(),
               "AR scheduler: KV blocks still referenced after every sequence and the prefix "
               "cache released theirs");
}

}  // namespace omnirt::engine
