// ArScheduler: lifecycle, the engine loop, incoming messages and request admission checks.
// One step (schedule, forward, sample) is in ar_step.cpp; what leaves through the outbox in
// ar_output.cpp.
#include "engine/ar_scheduler.h"

#include <spdlog/spdlog.h>

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

Result<std::vector<std::int32_t>> tokens_from_tensor(const Tensor& tensor) {
    const bool shape_ok = tensor.dim() == 1 || (tensor.dim() == 2 && tensor.shape()[0] == 1);
    if (!shape_ok || (tensor.dtype() != DType::i32 && tensor.dtype() != DType::i64) ||
        !tensor.device().is_cpu()) {
        return fail(ErrorCode::invalid_argument,
                    "data.input_ids must be an int32 or int64 host tensor of shape [n] or [1, n]");
    }
    OMNI_TRY(Tensor dense, tensor.contiguous());
    const auto count = static_cast<std::size_t>(dense.numel());
    std::vector<std::int32_t> ids(count);
    if (dense.dtype() == DType::i32) {
        std::copy_n(dense.data_as<std::int32_t>(), count, ids.begin());
        return ids;
    }
    const std::int64_t* wide = dense.data_as<std::int64_t>();
    for (std::size_t i = 0; i < count; ++i) {
        if (wide[i] < std::numeric_limits<std::int32_t>::min() ||
            wide[i] > std::numeric_limits<std::int32_t>::max()) {
            return fail(ErrorCode::invalid_argument,
                        "data.input_ids[" + std::to_string(i) + "] does not fit a token id");
        }
        ids[i] = static_cast<std::int32_t>(wide[i]);
    }
    return ids;
}

Result<std::vector<std::int32_t>> read_input_ids(const Value& data) {
    const Value* ids = data.find("input_ids");
    if (ids == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    "the payload has no data.input_ids (the prompt's token ids)");
    }
    if (const Tensor* tensor = ids->if_tensor()) return tokens_from_tensor(*tensor);
    const List* list = ids->if_list();
    if (list == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    "data.input_ids must be an integer tensor or a list of ints, got " +
                        std::string(to_string(ids->kind())));
    }
    std::vector<std::int32_t> out;
    out.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
        const std::int64_t* id = (*list)[i].if_int();
        if (id == nullptr || *id < std::numeric_limits<std::int32_t>::min() ||
            *id > std::numeric_limits<std::int32_t>::max()) {
            return fail(ErrorCode::invalid_argument, "data.input_ids[" + std::to_string(i) +
                                                         "] must be a token id, got " +
                                                         (*list)[i].debug_string());
        }
        out.push_back(static_cast<std::int32_t>(*id));
    }
    return out;
}

}  // namespace

Result<std::unique_ptr<ArScheduler>> ArScheduler::create(ArSchedulerOptions options,
                                                         std::unique_ptr<ModelRunner> model) {
    const std::string who = "AR scheduler of stage '" + options.stage_name + "': ";
    auto invalid = [&](const std::string& message) {
        return fail(ErrorCode::invalid_argument, who + message);
    };
    if (model == nullptr) return invalid("no model runner");
    if (options.block_size <= 0) return invalid("block_size must be positive");
    if (options.max_running_requests <= 0) return invalid("max_running_requests must be positive");
    if (options.max_prefill_tokens <= 0) return invalid("max_prefill_tokens must be positive");
    if (model->vocab_size() <= 0 || model->max_positions() <= 0) {
        return invalid("the model reports a non-positive vocab_size or max_positions");
    }
    const KVCacheSpec spec = model->kv_spec();
    std::int64_t blocks = options.num_kv_blocks;
    if (blocks <= 0) {
        if (options.kv_cache_bytes <= 0) {
            return invalid("set num_kv_blocks or kv_cache_bytes (the KV cache size)");
        }
        const std::int64_t per_block = KVCache::bytes_per_block(spec, options.block_size);
        if (per_block <= 0) return invalid("the model's KV cache spec is empty");
        blocks = options.kv_cache_bytes / per_block;
        if (blocks <= 0) {
            return invalid("kv_cache_bytes " + std::to_string(options.kv_cache_bytes) +
                           " holds no block of " + std::to_string(per_block) + " bytes");
        }
    }
    if (blocks > std::numeric_limits<std::int32_t>::max()) {
        return invalid("more KV blocks than int32 block ids can name");
    }
    for (std::int32_t id : options.eos_token_ids) {
        if (id < 0 || id >= model->vocab_size()) {
            return invalid("eos token id " + std::to_string(id) + " is outside the vocabulary");
        }
    }
    options.num_kv_blocks = blocks;
    OMNI_TRY(std::unique_ptr<KVCache> cache,
             KVCache::create(spec, blocks, options.block_size,
                             torch_bridge::to_torch_device(options.device)));
    std::unique_ptr<ArScheduler> scheduler(new ArScheduler(std::move(options), std::move(model)));
    scheduler->kv_cache_ = std::move(cache);
    return scheduler;
}

ArScheduler::ArScheduler(ArSchedulerOptions options, std::unique_ptr<ModelRunner> model)
    : pipeline::Scheduler(options.inbox_capacity, options.outbox_capacity),
      options_(std::move(options)),
      model_(std::move(model)),
      evicted_ids_(std::max<std::size_t>(4096, options_.max_early_stream_chunks)) {
    const auto blocks = static_cast<std::int32_t>(options_.num_kv_blocks);
    allocator_ = std::make_unique<BlockAllocator>(blocks);
    if (options_.enable_prefix_cache) {
        prefix_cache_ = std::make_unique<RadixCache>(*allocator_, options_.block_size);
    }
    vocab_size_ = model_->vocab_size();
    max_positions_ = model_->max_positions();
    capacity_tokens_ = options_.num_kv_blocks * options_.block_size;
    watermark_blocks_ = options_.watermark_blocks >= 0
                            ? std::min<std::int64_t>(options_.watermark_blocks, blocks)
                            : std::max<std::int64_t>(1, blocks / 100);
    seed_state_ = options_.seed != 0
                      ? options_.seed
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
                    "AR scheduler of stage '" + options_.stage_name + "' was already started");
    }
    started_ = true;
    engine_ = std::thread([this] { engine_loop(); });
    return ok_status();
}

void ArScheduler::stop() {
    std::lock_guard stop_lock(stop_mutex_);
    stopping_ = true;
    if (options_.lockstep) {
        stop_lockstep();  // ar_lockstep.cpp
    } else {
        inbox_.remove_if([](const pipeline::IncomingMessage&) { return true; });
        inbox_.close();
    }
    if (engine_.joinable()) engine_.join();
    outbox_.close();
}

void ArScheduler::abort(const std::string& request_id) {
    if (options_.lockstep) {
        // Rank 0's aborts are agreed on before the next step (ar_lockstep.cpp); the other ranks
        // get the same aborts from rank 0 there, so their own are ignored. Queued messages stay:
        // every rank must count the same messages.
        if (options_.lockstep->rank() == 0) {
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
    inbox_.remove_if(
        [&](const pipeline::IncomingMessage& message) { return message.request_id == request_id; });
    inbox_.interrupt();  // an engine waiting for input streams frees the request's blocks now
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
    counters_.idle = idle;
    if (sequences_.empty()) counters_.not_ready = 0;
    counters_.early_stream_requests = early_streams_.size();
    sequence_count_.store(sequences_.size() + received_.size(), std::memory_order_relaxed);
    {
        std::lock_guard lock(stats_mutex_);
        published_ = counters_;
    }
    stats_cv_.notify_all();
}

void ArScheduler::engine_loop() {
    if (options_.lockstep) {
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
        spdlog::error("stage '{}': engine step failed: {}", options_.stage_name, error.what());
        for (ArSequence* sequence : std::vector<ArSequence*>(running_)) {
            if (sequence->status_ == SequenceStatus::running) {
                fail_sequence(*sequence, Error{ErrorCode::internal,
                                               "stage '" + options_.stage_name +
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
        spdlog::warn("stage '{}': dropping a second new_request for running request '{}'",
                     options_.stage_name, message.request_id);
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
                           "stage '" + options_.stage_name +
                               "': the stream chunks that came before this request were "
                               "dropped (more than " +
                               std::to_string(options_.max_early_stream_chunks) +
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
            .error = std::move(made).error().with_context("stage '" + options_.stage_name + "'")});
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
    std::vector<std::int32_t> prompt;
    if (payload.data.find("input_ids") == nullptr && options_.prepare_input) {
        OMNI_TRY(prompt, options_.prepare_input(payload));
    } else {
        OMNI_TRY(prompt, read_input_ids(payload.data));
    }
    if (prompt.empty()) return fail(ErrorCode::invalid_argument, "data.input_ids is empty");
    for (std::size_t i = 0; i < prompt.size(); ++i) {
        if (prompt[i] < 0 || prompt[i] >= vocab_size_) {
            return fail(ErrorCode::invalid_argument, "data.input_ids[" + std::to_string(i) +
                                                         "] = " + std::to_string(prompt[i]) +
                                                         " is outside the vocabulary of " +
                                                         std::to_string(vocab_size_) + " tokens");
        }
    }
    std::string salt;
    if (const Value* value = payload.data.find("cache_salt"); value && !value->is_null()) {
        if (!value->is_string()) {
            return fail(ErrorCode::invalid_argument, "data.cache_salt must be a string");
        }
        salt = value->as_string();
    }
    OMNI_TRY(SamplingParams params,
             parse_sampling_params(payload.request.params, options_.stage_name,
                                   options_.default_sampling));
    // The context a request may fill: the model's positions and what the KV cache holds.
    const std::int64_t limit = std::min(max_positions_, capacity_tokens_);
    const auto prompt_tokens = static_cast<std::int64_t>(prompt.size());
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
    if (!options_.detokenize && !params.stop.empty()) {
        spdlog::debug(
            "stage '{}': request '{}' has stop strings but the stage has no "
            "detokenizer; they are ignored",
            options_.stage_name, message.request_id);
    }
    std::vector<std::string> targets = options_.stream_targets;
    if (options_.stream_targets_for) {
        Result<std::vector<std::string>> chosen = options_.stream_targets_for(*message.payload);
        if (!chosen) return fail(chosen.error().with_context("stream_targets_for"));
        for (const std::string& target : *chosen) {
            if (std::find(options_.stream_targets.begin(), options_.stream_targets.end(), target) ==
                options_.stream_targets.end()) {
                return fail(ErrorCode::invalid_argument,
                            "stream_targets_for chose '" + target +
                                "', which is not among the stage's stream targets");
            }
        }
        targets = std::move(*chosen);
    }
    std::vector<std::string> stops = params.stop;
    SamplingState sampling(std::move(params), splitmix64(seed_state_));
    sampling.add_prompt(prompt);
    std::unique_ptr<ArSequence> sequence(new ArSequence(message.request_id, message.payload,
                                                        std::move(prompt), std::move(sampling)));
    sequence->max_tokens_ = max_tokens;
    sequence->cache_salt_ = std::move(salt);
    sequence->stream_targets_ = std::move(targets);
    if (options_.detokenize) sequence->text_.emplace(std::move(stops));
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
    allocator_->release(sequence.blocks_);
    sequence.blocks_.clear();
    sequence.blocks_in_tree_ = 0;
    sequence.status_ = status;
    ended_ids_.insert(sequence.request_id_);
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
