// What the ArScheduler puts into its outbox: stream chunks, results and errors.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "engine/ar_scheduler.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::engine {
namespace {

// A host float32 copy of one hidden-state row, as a Value. Null when it cannot be converted.
Value hidden_value(const at::Tensor& row) {
    at::Tensor host;
    try {
        host = row.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
    } catch (const c10::Error& error) {
        spdlog::warn("AR scheduler: dropping a hidden state: {}", error.what_without_backtrace());
        return Value();
    }
    Result<Tensor> converted = torch_bridge::from_torch(host);
    if (!converted) {
        spdlog::warn("AR scheduler: dropping a hidden state: {}", converted.error().to_string());
        return Value();
    }
    return Value(std::move(*converted));
}

}  // namespace

void ArScheduler::emit_chunk(ArSequence& sequence, const Map& fields, const at::Tensor* hidden) {
    auto push = [&](Map chunk, std::optional<std::string> target) {
        std::int64_t& next_id = sequence.next_chunk_id_[target];
        auto stream = std::make_shared<const pipeline::StreamChunk>(
            pipeline::StreamChunk{.chunk_id = next_id++, .chunk = Value(std::move(chunk))});
        outbox_.push(pipeline::OutgoingMessage{.request_id = sequence.request_id_,
                                               .kind = pipeline::OutgoingKind::stream,
                                               .chunk = std::move(stream),
                                               .target = std::move(target)});
    };
    if (options_.stream_to_client) push(fields, std::nullopt);
    if (sequence.stream_targets_.empty()) return;
    Map for_targets = fields;
    if (hidden != nullptr) for_targets.insert_or_assign("hidden", hidden_value(*hidden));
    for (const std::string& target : sequence.stream_targets_) push(for_targets, target);
}

void ArScheduler::finish(ArSequence& sequence, const std::string& reason) {
    const std::vector<std::int32_t> output(sequence.output().begin(), sequence.output().end());
    const auto completion_tokens = static_cast<std::int64_t>(output.size());
    Map data;
    data.emplace("output_ids", Value(Tensor::from_vector(output)));
    if (sequence.text_) {
        // Normally already flushed by the last token; a max_tokens of 0 ends here.
        static_cast<void>(sequence.text_->finish());
        data.emplace("text", Value(sequence.text_->text()));
    }
    data.emplace("finish_reason", Value(reason));
    data.emplace("usage", Value(Map{{"prompt_tokens", Value(sequence.prompt_tokens_)},
                                    {"completion_tokens", Value(completion_tokens)}}));
    if (sequence.sampling_.params().logprobs) {
        List logprobs;
        for (float logprob : sequence.logprobs_) logprobs.push_back(Value(logprob));
        data.emplace("logprobs", Value(std::move(logprobs)));
    }
    auto result =
        std::make_shared<const StagePayload>(StagePayload{.request_id = sequence.request_id_,
                                                          .request = sequence.input_->request,
                                                          .data = Value(std::move(data))});
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
