// One engine step of the ArScheduler: choose the batch (running sequences first, then
// admissions), run the hooks and the model, sample, and append the tokens.
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

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
    const auto full = static_cast<std::size_t>(sequence.computed_ / options_.block_size);
    if (full <= sequence.blocks_in_tree_) return;
    prefix_cache_->insert(sequence.cache_salt_,
                          std::span<const std::int32_t>(sequence.tokens_)
                              .first(full * static_cast<std::size_t>(options_.block_size)),
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
}

std::vector<ArScheduler::Scheduled> ArScheduler::schedule() {
    std::vector<Scheduled> plan;
    counters_.not_ready = 0;  // counted by is_ready
    unadmitted_ = nullptr;
    std::int64_t prefill_budget = options_.max_prefill_tokens;
    bool preempted = false;
    const std::int32_t block_size = options_.block_size;

    // Running sequences first, oldest first: decodes always, prompt chunks while the budget lasts.
    for (std::size_t i = 0; i < running_.size();) {
        ArSequence& sequence = *running_[i];
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

    // Admissions, in arrival order (passing over those not ready), unless this step had to
    // preempt (the memory is short).
    for (std::size_t w = 0;
         !preempted && w < waiting_.size() && prefill_budget > 0 &&
         static_cast<std::int64_t>(running_.size()) < options_.max_running_requests;) {
        ArSequence& sequence = *waiting_[w];
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
            // The last token is always computed: its logits give the next token.
            blocks = prefix_cache_->match(sequence.cache_salt_,
                                          std::span<const std::int32_t>(sequence.tokens_)
                                              .first(static_cast<std::size_t>(length - 1)));
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
        sequence.blocks_in_tree_ = cached;
        sequence.computed_ = static_cast<std::int64_t>(cached) * block_size;
        counters_.prefix_hit_tokens += static_cast<std::uint64_t>(sequence.computed_);
        const std::int64_t take = std::min(length - sequence.computed_, prefill_budget);
        prefill_budget -= take;
        sequence.status_ = SequenceStatus::running;
        waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
        running_.push_back(&sequence);
        if (options_.tracer != nullptr && options_.tracer->enabled()) {
            options_.tracer->record(pipeline::TraceSpan{.name = "queue_wait",
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
    ComputeTimer timer(*this);  // hooks, forward, sampling and output: the stage's compute time
    const std::string context = "stage '" + options_.stage_name + "'";
    std::vector<SequenceInput> inputs;
    inputs.reserve(plan.size());
    for (const Scheduled& item : plan) {
        ArSequence& sequence = *item.sequence;
        const auto begin = sequence.tokens_.begin() + sequence.computed_;
        inputs.push_back(SequenceInput{
            .request_id = sequence.request_id_,
            .tokens = std::vector<std::int32_t>(begin, begin + item.tokens),
            .start_position = sequence.computed_,
            .block_table = sequence.blocks_,
            .want_hidden = options_.stream_hidden && !sequence.stream_targets_.empty()});
    }
    if (options_.before_forward) {
        for (std::size_t k = 0; k < plan.size(); ++k) {
            Status hooked = options_.before_forward(*plan[k].sequence, inputs[k]);
            if (!hooked) {
                fail_sequence(*plan[k].sequence,
                              hooked.error().with_context(context + ": before_forward"));
            }
        }
        // Drop the failed ones from the step.
        std::size_t kept = 0;
        for (std::size_t k = 0; k < plan.size(); ++k) {
            if (plan[k].sequence->status_ != SequenceStatus::running) continue;
            if (kept != k) {
                plan[kept] = plan[k];
                inputs[kept] = std::move(inputs[k]);
            }
            ++kept;
        }
        plan.resize(kept);
        inputs.resize(kept);
        if (plan.empty()) return;
    }
    auto fail_all = [&](const Error& error) {
        for (const Scheduled& item : plan) {
            if (item.sequence->status_ == SequenceStatus::running)
                fail_sequence(*item.sequence, error);
        }
    };
    std::vector<ArSequence*> sequences;
    for (const Scheduled& item : plan) sequences.push_back(item.sequence);
    if (options_.feedback) {
        Status written = options_.feedback->write_buffers(sequences, inputs);
        if (!written) return fail_all(written.error().with_context(context + ": write_buffers"));
    }

    Result<ForwardOutput> output = [&]() -> Result<ForwardOutput> {
        pipeline::ScopedSpan span(options_.tracer, "forward", "engine",
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
    ++counters_.steps;

    // The new positions are in the cache now; full blocks join the prefix cache.
    std::vector<std::int64_t> rows;
    for (std::size_t k = 0; k < plan.size(); ++k) {
        ArSequence& sequence = *plan[k].sequence;
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
    if (!options_.lockstep) apply_aborts();
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
        if (sequence.sampling_.output_count() < params.min_tokens) {
            banned[i] = params.stop_token_ids;
            if (!params.ignore_eos) {
                banned[i].insert(banned[i].end(), options_.eos_token_ids.begin(),
                                 options_.eos_token_ids.end());
            }
        }
        sampler_rows.push_back(SamplerRow{.state = &sequence.sampling_, .banned = banned[i]});
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

    std::vector<StepFeedback> feedback;
    if (options_.feedback) {
        std::vector<std::int32_t> tokens;
        for (const SampledToken& token : *sampled) tokens.push_back(token.token);
        Result<std::vector<StepFeedback>> extracted =
            options_.feedback->extract_output(*output, rows, sampling, tokens);
        if (!extracted)
            return fail_all(extracted.error().with_context(context + ": extract_output"));
        if (extracted->size() != rows.size()) {
            return fail_all(
                Error{ErrorCode::internal, context + ": extract_output returned " +
                                               std::to_string(extracted->size()) + " entries for " +
                                               std::to_string(rows.size()) + " sequences"});
        }
        feedback = std::move(*extracted);
    }
    // Hidden states go to the stream targets of the requests that have some.
    const bool hidden_wanted =
        options_.stream_hidden &&
        std::any_of(sampling.begin(), sampling.end(),
                    [](const ArSequence* sequence) { return !sequence->stream_targets_.empty(); });
    if (hidden_wanted && (!output->hidden.defined() || output->hidden.dim() != 2 ||
                          output->hidden.size(0) != static_cast<std::int64_t>(plan.size()))) {
        return fail_all(
            Error{ErrorCode::internal, context + ": stream_hidden is set but the model returned no "
                                                 "[sequences, hidden] hidden states"});
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
        ArSequence& sequence = *sampling[i];
        Map extra;
        if (!feedback.empty()) {
            sequence.feedback_ = std::move(feedback[i].state);
            extra = std::move(feedback[i].chunk);
        }
        const bool row_hidden = hidden_wanted && !sequence.stream_targets_.empty();
        at::Tensor hidden;
        if (row_hidden) hidden = output->hidden.select(0, rows[i]);
        append_token(sequence, (*sampled)[i].token, (*sampled)[i], std::move(extra),
                     row_hidden ? &hidden : nullptr);
    }
}

void ArScheduler::append_token(ArSequence& sequence, std::int32_t token, const SampledToken& sample,
                               Map extra, const at::Tensor* hidden) {
    const SamplingParams& params = sequence.sampling_.params();
    sequence.tokens_.push_back(token);
    sequence.sampling_.add_output(token);
    if (params.logprobs) sequence.logprobs_.push_back(sample.logprob);

    std::string reason;
    std::string delta;
    const bool stop_token = (!params.ignore_eos && contains(options_.eos_token_ids, token)) ||
                            contains(params.stop_token_ids, token);
    if (stop_token) {
        reason = "stop";  // the stop token's text is not part of the output
    } else if (sequence.text_) {
        std::string bytes;
        Status decoded = options_.detokenize(token, bytes);
        if (!decoded) {
            return fail_sequence(sequence, decoded.error().with_context(
                                               "stage '" + options_.stage_name + "': detokenize"));
        }
        delta = sequence.text_->append(bytes);
        if (sequence.text_->stopped()) reason = "stop";
    }
    if (reason.empty() && (sequence.sampling_.output_count() >= sequence.max_tokens_ ||
                           static_cast<std::int64_t>(sequence.tokens_.size()) >= max_positions_)) {
        reason = "length";
    }
    if (!reason.empty() && sequence.text_) delta += sequence.text_->finish();

    Map fields = std::move(extra);
    fields.insert_or_assign("token_id", Value(token));
    fields.insert_or_assign("index", Value(sequence.sampling_.output_count() - 1));
    if (sequence.text_) fields.insert_or_assign("text", Value(std::move(delta)));
    if (params.logprobs) {
        fields.insert_or_assign("logprob", Value(sample.logprob));
        List top;
        for (const TokenLogprob& entry : sample.top) {
            top.push_back(
                Value(Map{{"token_id", Value(entry.token)}, {"logprob", Value(entry.logprob)}}));
        }
        fields.insert_or_assign("top_logprobs", Value(std::move(top)));
    }
    emit_chunk(sequence, fields, hidden);
    if (!reason.empty()) finish(sequence, reason);
}

}  // namespace omnirt::engine
