// What the ArScheduler puts into its outbox: stream chunks, results and errors.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <utility>

#include "engine/ar_scheduler.h"
#include "engine/sampling.h"

namespace omnirt::engine {
void ArScheduler::append_token(ArSequence& sequence, const TokenStep& step, TokenFields fields,
                               const at::Tensor& feedback, std::span<const std::int32_t> frame) {
    const std::int32_t token = step.token;
    const SamplingParams& params = sequence.sampling_.params();
    const auto position = static_cast<std::int64_t>(sequence.tokens_.size());
    sequence.tokens_.push_back(token);
    append_key(sequence, token, feedback);  // ar_content.cpp
    if (feedback.defined()) {
        sequence.held_.push_back(
            ArSequence::HeldRun{.after_layers = 0, .begin = position, .values = feedback});
    }
    if (!frame.empty()) {
        sequence.codes_.insert(sequence.codes_.end(), frame.begin(), frame.end());
        ++sequence.frames_;
    }
    sequence.sampling_.add_output(token);
    ++counters_.generated_tokens;
    if (params.logprobs) sequence.logprobs_.push_back(step.sample->logprob);

    std::string reason;
    std::string delta;
    if (step.stop) {
        reason = "stop";  // the stop token's text is not part of the output
    } else if (sequence.text_) {
        std::string bytes;
        Status decoded = role_->detokenize(token, bytes);
        if (!decoded) {
            return fail_sequence(sequence, decoded.error().with_context(
                                               "stage '" + config_.stage_name + "': detokenize"));
        }
        delta = sequence.text_->append(bytes);
        if (sequence.text_->stopped()) reason = "stop";
    }
    if (reason.empty() && (sequence.sampling_.output_count() >= sequence.max_tokens_ ||
                           static_cast<std::int64_t>(sequence.tokens_.size()) >= max_positions_)) {
        reason = "length";
    }
    if (!reason.empty() && sequence.text_) delta += sequence.text_->finish();

    Map all = std::move(fields.all);
    all.insert_or_assign("token_id", Value(token));
    all.insert_or_assign("index", Value(sequence.sampling_.output_count() - 1));
    if (sequence.text_) all.insert_or_assign("text", Value(std::move(delta)));
    if (!frame.empty()) {
        all.insert_or_assign(
            "codes",
            Value(Tensor::from_vector(std::vector<std::int32_t>(frame.begin(), frame.end()))));
    }
    if (params.logprobs) {
        all.insert_or_assign("logprob", Value(step.sample->logprob));
        List top;
        for (const TokenLogprob& entry : step.sample->top) {
            top.push_back(
                Value(Map{{"token_id", Value(entry.token)}, {"logprob", Value(entry.logprob)}}));
        }
        all.insert_or_assign("top_logprobs", Value(std::move(top)));
    }
    emit_chunk(sequence, all, fields.targets);
    if (!reason.empty()) finish(sequence, reason);
}

void ArScheduler::emit_chunk(ArSequence& sequence, const Map& fields, const Map& target_fields) {
    auto push = [&](Map chunk, std::optional<std::string> target) {
        std::int64_t& next_id = sequence.next_chunk_id_[target];
        auto stream = std::make_shared<const pipeline::StreamChunk>(
            pipeline::StreamChunk{.chunk_id = next_id++, .chunk = Value(std::move(chunk))});
        outbox_.push(pipeline::OutgoingMessage{.request_id = sequence.request_id_,
                                               .kind = pipeline::OutgoingKind::stream,
                                               .chunk = std::move(stream),
                                               .target = std::move(target)});
    };
    if (config_.stream_to_client) push(fields, std::nullopt);
    if (sequence.stream_targets_.empty()) return;
    Map for_targets = fields;
    for (const auto& [key, value] : target_fields) for_targets.insert_or_assign(key, value);
    for (const std::string& target : sequence.stream_targets_) push(for_targets, target);
}

void ArScheduler::finish(ArSequence& sequence, const std::string& reason) {
    // Normally already flushed by the last token; a max_tokens of 0 ends here.
    if (sequence.text_) static_cast<void>(sequence.text_->finish());
    Result<Map> data = [&]() -> Result<Map> {
        try {
            return role_->make_result(sequence, reason);
        } catch (const std::exception& error) {
            return fail(ErrorCode::internal, std::string("threw: ") + error.what());
        }
    }();
    if (!data) {
        return fail_sequence(
            sequence, data.error().with_context("stage '" + config_.stage_name + "': make_result"));
    }
    // usage.engine_time_s: seconds from the request's arrival at this stage to its result (the
    // AR stage's share of the request, as SGLang-Omni's engine_time_s: its speech API's
    // X-Engine-Time, from which its benchmark client reads tokens/s).
    if (auto usage = data->find("usage"); usage != data->end()) {
        if (Map* fields = usage->second.if_map()) {
            fields->insert_or_assign(
                "engine_time_s",
                Value(std::chrono::duration<double>(pipeline::Clock::now() - sequence.enqueued_at_)
                          .count()));
        }
    }
    auto result =
        std::make_shared<const StagePayload>(StagePayload{.request_id = sequence.request_id_,
                                                          .request = sequence.input_->request,
                                                          .data = Value(std::move(*data))});
    // Blocks go back before the result leaves, so whoever sees the result sees them free.
    ++counters_.finished_requests;
    retire(sequence, SequenceStatus::finished);
    outbox_.push(pipeline::OutgoingMessage{.request_id = sequence.request_id_,
                                           .kind = pipeline::OutgoingKind::result,
                                           .result = std::move(result)});
}

void ArScheduler::fail_sequence(ArSequence& sequence, Error error) {
    ++counters_.failed_requests;
    retire(sequence, SequenceStatus::failed);
    outbox_.push(pipeline::OutgoingMessage{.request_id = sequence.request_id_,
                                           .kind = pipeline::OutgoingKind::error,
                                           .error = std::move(error)});
}

}  // namespace omnirt::engine
