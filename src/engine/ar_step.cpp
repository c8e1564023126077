// One engine step of the ArScheduler: choose the batch (running sequences first, then
// admissions), run the hooks and the model, sample, and append the tokens.
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "engine/ar_scheduler.h"
#include "engine/block_allocator.h"
#include "engine/radix_cache.h"
#include "engine/sampling.h"
#include "pipeline/trace.h"

namespace omnirt::engine {
namespace {

std::size_t blocks_for(std::int64_t positions, std::int32_t block_size) {
    return static_cast<std::size_t>((positions + block_size - 1) / block_size);
}

bool contains(std::span<const std::int32_t> ids, std::int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

bool ArScheduler::ensure_free_blocks(std::size_t count) {
    const std::size_t free = allocator_->free_blocks();
    if (free >= count) return true;
    if (prefix_cache_) prefix_cache_->evict(count - free);
    return allocator_->free_blocks() >= count;
}

void ArScheduler::cache_blocks(ArSequence& sequence) {
    if (!prefix_cache_ || !sequence.prefix_cache_) return;
    const auto full = static_cast<std::size_t>(sequence.computed_ / config_.block_size);
    if (full <= sequence.blocks_in_tree_) return;
    prefix_cache_->insert(sequence.cache_salt_,
                          std::span<const PositionKey>(sequence.keys_)
                              .first(full * static_cast<std::size_t>(config_.block_size)),
                          std::span<BlockId>(sequence.blocks_).first(full));
    sequence.blocks_in_tree_ = full;
}

void ArScheduler::preempt(ArSequence& sequence) {
    // Recompute policy: what was computed stays in the prefix cache (while nobody evicts it),
    // the sequence gives its blocks back and waits at the head of the queue. Its tokens (prompt
    // and output so far) are all computed again when it is admitted next.
    cache_blocks(sequence);
    allocator_->release(sequence.blocks_);
    sequence.blocks_.clear();
    sequence.blocks_in_tree_ = 0;
    sequence.computed_ = 0;
    sequence.status_ = SequenceStatus::waiting;
    waiting_.push_front(&sequence);
    ++counters_.preemptions;
    if (sequence.runner_open_) {
        sequence.runner_open_ = false;
        model_->close_request(sequence.request_id_);
    }
    try {
        role_->preempted(sequence);
    } catch (const std::exception& error) {
        fail_sequence(sequence,
                      Error{ErrorCode::internal, "stage '" + config_.stage_name +
                                                     "': preempted threw: " + error.what()});
    }
}

std::vector<ArScheduler::Scheduled> ArScheduler::schedule() {
    std::vector<Scheduled> plan;
    counters_.not_ready = 0;  // counted by is_ready
    counters_.paused = 0;
    unadmitted_ = nullptr;
    std::int64_t prefill_budget = config_.max_prefill_tokens;
    bool preempted = false;
    const std::int32_t block_size = config_.block_size;

    // Running sequences first, oldest first: decodes always, prompt chunks while the budget lasts.
    for (std::size_t i = 0; i < running_.size();) {
        ArSequence& sequence = *running_[i];
        if (paused_.contains(sequence.request_id_)) {  // keeps its blocks, not its slot
            ++counters_.paused;
            ++i;
            continue;
        }
        if (!is_ready(sequence)) {  // waits for its input streams; keeps its blocks
            if (sequence.status_ != SequenceStatus::running) {  // its ready check threw
                running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
                continue;
            }
            ++i;
            continue;
        }
        const auto pending =
            static_cast<std::int64_t>(sequence.tokens_.size()) - sequence.computed_;
        std::int64_t take = 1;
        if (pending > 1) {
            take = std::min(pending, prefill_budget);
            if (take == 0) {
                ++i;
                continue;
            }
        }
        const std::size_t have = sequence.blocks_.size();
        const std::size_t need = blocks_for(sequence.computed_ + take, block_size);
        bool scheduled = true;
        while (need > have && !ensure_free_blocks(need - have)) {
            // Out of blocks: the most recently admitted sequence makes room (possibly this one).
            ArSequence* victim = running_.back();
            running_.pop_back();
            preempt(*victim);
            preempted = true;
            if (victim == &sequence) {
                scheduled = false;
                break;
            }
        }
        if (!scheduled) break;
        if (need > have) {
            auto fresh = allocator_->allocate(need - have);
            OMNI_CHECK(fresh.has_value(), "AR scheduler: blocks vanished after ensure_free_blocks");
            sequence.blocks_.insert(sequence.blocks_.end(), fresh->begin(), fresh->end());
        }
        if (pending > 1) prefill_budget -= take;
        plan.push_back(Scheduled{&sequence, take});
        ++i;
    }

    // Admissions, in arrival order (passing over those not ready or paused), unless this step
    // had to preempt (the memory is short). Paused running sequences leave their slots.
    const auto held = static_cast<std::int64_t>(counters_.paused);
    for (std::size_t w = 0;
         !preempted && w < waiting_.size() && prefill_budget > 0 &&
         static_cast<std::int64_t>(running_.size()) - held < config_.max_running_requests;) {
        ArSequence& sequence = *waiting_[w];
        if (paused_.contains(sequence.request_id_)) {
            ++counters_.paused;
            ++w;
            continue;
        }
        if (!is_ready(sequence)) {
            if (sequence.status_ != SequenceStatus::waiting) {  // its ready check threw
                waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
                continue;
            }
            ++w;
            continue;
        }
        const auto length = static_cast<std::int64_t>(sequence.tokens_.size());
        std::vector<BlockId> blocks;
        if (prefix_cache_ && sequence.prefix_cache_) {
            // Not the last token (its logits give the next token), nor positions a capture
            // still needs (ar_content.cpp).
            blocks = prefix_cache_->match(
                sequence.cache_salt_, std::span<const PositionKey>(sequence.keys_)
                                          .first(static_cast<std::size_t>(match_limit(sequence))));
        }
        const std::size_t cached = blocks.size();
        const std::size_t need = blocks_for(length, block_size) - cached;
        const std::size_t reserve =
            running_.empty() ? 0 : static_cast<std::size_t>(watermark_blocks_);
        if (!ensure_free_blocks(need + reserve)) {
            allocator_->release(blocks);
            unadmitted_ = &sequence;
            break;
        }
        auto fresh = allocator_->allocate(need);
        OMNI_CHECK(fresh.has_value(), "AR scheduler: blocks vanished after ensure_free_blocks");
        blocks.insert(blocks.end(), fresh->begin(), fresh->end());
        sequence.blocks_ = std::move(blocks);
        if (Status opened = open_runner(sequence); !opened) {
            waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
            fail_sequence(sequence, opened.error());  // gives the blocks back
            continue;
        }
        sequence.blocks_in_tree_ = cached;
        sequence.computed_ = static_cast<std::int64_t>(cached) * block_size;
        counters_.prefix_hit_tokens += static_cast<std::uint64_t>(sequence.computed_);
        const std::int64_t take = std::min(length - sequence.computed_, prefill_budget);
        prefill_budget -= take;
        sequence.status_ = SequenceStatus::running;
        waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
        running_.push_back(&sequence);
        if (config_.tracer != nullptr && config_.tracer->enabled()) {
            config_.tracer->record(pipeline::TraceSpan{.name = "queue_wait",
                                                       .category = "scheduler",
                                                       .request_id = sequence.request_id_,
                                                       .start = sequence.enqueued_at_,
                                                       .end = pipeline::Clock::now()});
        }
        plan.push_back(Scheduled{&sequence, take});
    }
    return plan;
}

bool ArScheduler::step() {
    const std::uint64_t preemptions = counters_.preemptions;
    const std::uint64_t failures = counters_.failed_requests;  // a throwing ready check
    std::vector<Scheduled> plan = schedule();
    if (plan.empty()) {
        // After a preemption the next step admits again; sequences that are not ready wait for
        // the inbox. A ready request that does not fit while nothing runs cannot happen while
        // the admission checks hold (a request alone always fits): fail it rather than spin.
        if (running_.empty() && unadmitted_ != nullptr && counters_.preemptions == preemptions) {
            fail_sequence(*unadmitted_,
                          Error{ErrorCode::internal, "the request could not be scheduled"});
        }
        sweep();
        return counters_.preemptions != preemptions || counters_.failed_requests != failures;
    }
    run_batch(std::move(plan));
    sweep();
    return true;
}

void ArScheduler::run_batch(std::vector<Scheduled> plan) {
    ComputeTimer timer(*this);  // role, forward, sampling and output: the stage's compute time
    const std::string context = "stage '" + config_.stage_name + "'";
    std::vector<StepInput> steps;
    steps.reserve(plan.size());
    for (const Scheduled& item : plan) steps.push_back(build_input(*item.sequence, item.tokens));
    for (std::size_t k = 0; k < plan.size(); ++k) {
        ArSequence& sequence = *plan[k].sequence;
        Status prepared = [&]() -> Status {
            try {
                return role_->prepare_step(sequence, steps[k].input);
            } catch (const std::exception& error) {
                return fail(ErrorCode::internal, std::string("threw: ") + error.what());
            }
        }();
        if (!prepared) {
            fail_sequence(sequence, prepared.error().with_context(context + ": prepare_step"));
            continue;
        }
        const ContentFingerprint after = fingerprint(steps[k].input);
        if (after == steps[k].fingerprint) continue;
        if (after.captures != steps[k].fingerprint.captures) {
            fail_sequence(sequence, Error{ErrorCode::internal,
                                          context + ": prepare_step changed the step's captures "
                                                    "(ask for them in RequestSetup::captures)"});
        } else if (prefix_cache_ && sequence.prefix_cache_) {
            // Content the engine does not hold is not in the prefix-cache keys: sharing blocks
            // could hand this request another request's KV.
            fail_sequence(sequence,
                          Error{ErrorCode::failed_precondition,
                                context + ": prepare_step changed the step's content while the "
                                          "request uses the prefix cache (pass the content in "
                                          "RequestSetup, or set RequestSetup::prefix_cache = "
                                          "false)"});
        }
    }
    // Drop the failed ones from the step.
    std::size_t kept = 0;
    for (std::size_t k = 0; k < plan.size(); ++k) {
        if (plan[k].sequence->status_ != SequenceStatus::running) continue;
        if (kept != k) {
            plan[kept] = plan[k];
            steps[kept] = std::move(steps[k]);
        }
        ++kept;
    }
    plan.resize(kept);
    steps.resize(kept);
    if (plan.empty()) return;
    auto fail_all = [&](const Error& error) {
        for (const Scheduled& item : plan) {
            if (item.sequence->status_ == SequenceStatus::running)
                fail_sequence(*item.sequence, error);
        }
    };
    std::vector<SequenceInput> inputs;
    inputs.reserve(steps.size());
    bool any_hidden = false;
    bool any_capture = false;
    for (StepInput& step : steps) {
        any_hidden = any_hidden || step.input.want_hidden;
        any_capture = any_capture || !step.input.captures.empty();
        inputs.push_back(std::move(step.input));
    }

    Result<ForwardOutput> output = [&]() -> Result<ForwardOutput> {
        pipeline::ScopedSpan span(config_.tracer, "forward", "engine",
                                  plan.size() == 1 ? plan[0].sequence->request_id_ : "batch");
        try {
            return model_->forward(inputs, *kv_cache_);
        } catch (const std::exception& error) {
            return fail(ErrorCode::internal, std::string("the model threw: ") + error.what());
        }
    }();
    if (!output) return fail_all(output.error().with_context(context + ": model forward"));
    const at::Tensor& logits = output->logits;
    if (!logits.defined() || logits.dim() != 2 ||
        logits.size(0) != static_cast<std::int64_t>(plan.size()) || logits.size(1) != vocab_size_) {
        return fail_all(Error{ErrorCode::internal,
                              context + ": the model returned logits of shape " +
                                  (logits.defined() ? c10::str(logits.sizes()) : "undefined") +
                                  " for " + std::to_string(plan.size()) + " sequences and " +
                                  std::to_string(vocab_size_) + " tokens"});
    }
    if (any_hidden && (!output->hidden.defined() || output->hidden.dim() != 2 ||
                       output->hidden.size(0) != static_cast<std::int64_t>(plan.size()))) {
        return fail_all(Error{ErrorCode::internal, context + ": the step asked for hidden states "
                                                             "but the model returned no "
                                                             "[sequences, hidden] tensor"});
    }
    if (any_capture && output->captures.size() != plan.size()) {
        return fail_all(Error{ErrorCode::internal,
                              context + ": the step asked for captures but the model returned "
                                        "none for some sequences"});
    }
    ++counters_.steps;

    // The new positions are in the cache now; full blocks join the prefix cache.
    std::vector<std::int64_t> rows;
    for (std::size_t k = 0; k < plan.size(); ++k) {
        ArSequence& sequence = *plan[k].sequence;
        if (!inputs[k].captures.empty()) {
            Status kept_rows =
                keep_captures(sequence, inputs[k], steps[k].capture_slots, output->captures[k]);
            if (!kept_rows) {
                fail_sequence(sequence, kept_rows.error().with_context(context));
                continue;
            }
        }
        const bool decode =
            sequence.computed_ + 1 == static_cast<std::int64_t>(sequence.tokens_.size());
        (decode ? counters_.decode_tokens : counters_.prefill_tokens) +=
            static_cast<std::uint64_t>(plan[k].tokens);
        sequence.computed_ += plan[k].tokens;
        cache_blocks(sequence);
        if (sequence.computed_ == static_cast<std::int64_t>(sequence.tokens_.size())) {
            rows.push_back(static_cast<std::int64_t>(k));
        }
    }
    // Aborts that arrived during the forward: their output must not leave any more. (Ranks in
    // lockstep apply aborts only where they agreed to; the Stage drops what rank 0 emits for an
    // aborted request.)
    if (!config_.lockstep) apply_aborts();
    std::erase_if(rows, [&](std::int64_t k) {
        return plan[static_cast<std::size_t>(k)].sequence->status_ != SequenceStatus::running;
    });
    if (rows.empty()) return;

    std::vector<std::vector<std::int32_t>> banned(rows.size());
    std::vector<SamplerRow> sampler_rows;
    std::vector<ArSequence*> sampling;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        ArSequence& sequence = *plan[static_cast<std::size_t>(rows[i])].sequence;
        const SamplingParams& params = sequence.sampling_.params();
        std::span<const std::int32_t> suppressed = role_->suppressed_tokens(sequence);
        std::span<const std::int32_t> row_banned = suppressed;
        if (sequence.sampling_.output_count() < params.min_tokens) {
            banned[i].assign(suppressed.begin(), suppressed.end());
            banned[i].insert(banned[i].end(), params.stop_token_ids.begin(),
                             params.stop_token_ids.end());
            if (!params.ignore_eos) {
                banned[i].insert(banned[i].end(), config_.eos_token_ids.begin(),
                                 config_.eos_token_ids.end());
            }
            row_banned = banned[i];
        }
        sampler_rows.push_back(SamplerRow{.state = &sequence.sampling_, .banned = row_banned});
        sampling.push_back(&sequence);
    }
    Result<std::vector<SampledToken>> sampled = [&]() -> Result<std::vector<SampledToken>> {
        try {
            at::Tensor selected = logits;
            if (rows.size() != plan.size()) {
                selected = logits.index_select(
                    0, at::from_blob(rows.data(), {static_cast<std::int64_t>(rows.size())},
                                     at::TensorOptions().dtype(at::kLong))
                           .to(logits.device()));
            }
            return Sampler::sample(selected, sampler_rows);
        } catch (const c10::Error& error) {
            return fail(ErrorCode::internal,
                        std::string("selecting logits failed: ") + error.what_without_backtrace());
        }
    }();
    if (!sampled) return fail_all(sampled.error().with_context(context + ": sampling"));

    // Hidden rows of the sampled sequences, and the frames of those that go on (depth model).
    std::vector<at::Tensor> hidden(rows.size());
    std::vector<bool> stops(rows.size());
    std::vector<std::size_t> framed;  // indices into rows
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (output->hidden.defined() && inputs[static_cast<std::size_t>(rows[i])].want_hidden) {
            hidden[i] = output->hidden.select(0, rows[i]);
        }
        stops[i] = is_stop_token(*sampling[i], (*sampled)[i].token);
        if (depth_ && !stops[i]) framed.push_back(i);
    }
    std::vector<std::vector<std::int32_t>> frames(rows.size());
    if (!framed.empty()) {
        std::vector<ArSequence*> framed_sequences;
        std::vector<std::int32_t> framed_tokens;
        std::vector<std::int64_t> framed_rows;
        for (std::size_t i : framed) {
            framed_sequences.push_back(sampling[i]);
            framed_tokens.push_back((*sampled)[i].token);
            framed_rows.push_back(rows[i]);
        }
        Result<std::vector<std::vector<std::int32_t>>> decoded = [&] {
            const at::Tensor index =
                at::from_blob(framed_rows.data(), {static_cast<std::int64_t>(framed_rows.size())},
                              at::TensorOptions().dtype(at::kLong))
                    .to(output->hidden.device());
            return run_depth(framed_sequences, output->hidden.index_select(0, index),
                             framed_tokens);
        }();
        if (!decoded) {
            for (ArSequence* sequence : framed_sequences) {
                fail_sequence(*sequence, decoded.error().with_context(context + ": depth model"));
            }
        } else {
            for (std::size_t j = 0; j < framed.size(); ++j) frames[framed[j]] = (*decoded)[j];
        }
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
        ArSequence& sequence = *sampling[i];
        if (sequence.status_ != SequenceStatus::running) continue;
        const SampledToken& sample = (*sampled)[i];
        const std::vector<std::int32_t>& frame = frames[i];
        TokenStep step{.token = sample.token,
                       .index = sequence.sampling_.output_count(),
                       .codes = frame.empty() ? std::span<const std::int32_t>()
                                              : std::span<const std::int32_t>(frame).subspan(1),
                       .hidden = hidden[i].defined() ? &hidden[i] : nullptr,
                       .sample = &sample,
                       .stop = stops[i]};
        Result<at::Tensor> feedback = at::Tensor();
        if (depth_ && !stops[i]) feedback = guarded_feedback(sequence, step);
        if (!feedback) {
            fail_sequence(sequence, feedback.error().with_context(context + ": feedback"));
            continue;
        }
        Result<TokenFields> fields = [&]() -> Result<TokenFields> {
            try {
                return role_->on_token(sequence, step);
            } catch (const std::exception& error) {
                return fail(ErrorCode::internal, std::string("threw: ") + error.what());
            }
        }();
        if (!fields) {
            fail_sequence(sequence, fields.error().with_context(context + ": on_token"));
            continue;
        }
        append_token(sequence, step, std::move(*fields), *feedback, frame);
    }
}

bool ArScheduler::is_stop_token(const ArSequence& sequence, std::int32_t token) const {
    const SamplingParams& params = sequence.sampling_.params();
    return (!params.ignore_eos && contains(config_.eos_token_ids, token)) ||
           contains(params.stop_token_ids, token);
}

Result<at::Tensor> ArScheduler::guarded_feedback(ArSequence& sequence, const TokenStep& step) {
    Result<at::Tensor> made = [&]() -> Result<at::Tensor> {
        try {
            return role_->feedback(sequence, step);
        } catch (const std::exception& error) {
            return fail(ErrorCode::internal, std::string("threw: ") + error.what());
        }
    }();
    if (!made || !made->defined()) return made;
    if (!capabilities_.embeddings) {
        return fail(ErrorCode::failed_precondition,
                    "the role returned a feedback embedding but the model takes no embeddings");
    }
    if (!made->is_floating_point() || made->numel() != capabilities_.hidden_size) {
        return fail(ErrorCode::internal, "the feedback embedding must be a floating tensor of " +
                                             std::to_string(capabilities_.hidden_size) + " values");
    }
    return made->reshape({1, capabilities_.hidden_size});
}

}  // namespace omnirt::engine
