// Streaming test stages: token_streamer (a producer) and stream_collector (a consumer).
#include <any>
#include <utility>

#include "pipeline/streaming_scheduler.h"
#include "testing/test_stages_internal.h"

namespace omnirt::testing {
namespace {

using pipeline::StreamChunk;
using pipeline::StreamingHandler;
using pipeline::StreamingScheduler;
using pipeline::StreamRequestState;

Result<std::unique_ptr<Scheduler>> token_streamer_factory(const StageContext& context) {
    OMNI_TRY(std::int64_t tokens, int_arg(context, "tokens", 8));
    if (tokens < 0) {
        return fail(ErrorCode::invalid_argument,
                    "stage '" + context.stage_name + "': arg 'tokens' must not be negative");
    }
    return make_simple_scheduler(
        context,
        [tokens, targets = context.stream_to](const StagePayload& input,
                                              Emitter& emit) -> Result<StagePayload> {
            std::int64_t count = tokens;
            if (const Value* param = input.request.params.find("num_tokens")) {
                const std::int64_t* value = param->if_int();
                if (value == nullptr || *value < 0) {
                    return fail(ErrorCode::invalid_argument,
                                "test.token_streamer: request param 'num_tokens' must be a "
                                "non-negative integer");
                }
                count = *value;
            }
            std::string text;
            for (std::int64_t i = 0; i < count; ++i) {
                const std::string piece = "t" + std::to_string(i) + " ";
                text += piece;
                const Value chunk(Map{{"token", Value(i)}, {"text", Value(piece)}});
                bool sent = emit.emit(chunk);
                for (const std::string& target : targets) sent = emit.emit(chunk, target) && sent;
                if (!sent) return fail(ErrorCode::aborted, "test.token_streamer: aborted");
            }
            return StagePayload{.request_id = input.request_id,
                                .request = input.request,
                                .data = Value(Map{{"text", Value(std::move(text))},
                                                  {"tokens", Value(count)},
                                                  {"input", input.data}})};
        });
}

Result<std::unique_ptr<Scheduler>> stream_collector_factory(const StageContext& context) {
    OMNI_TRY(bool forward, bool_arg(context, "forward", false));
    StreamingHandler handler{
        .on_chunk = [forward](StreamRequestState& state, const std::string&,
                              const StreamChunk& chunk, Emitter& emit) -> Status {
            if (!state.user.has_value()) state.user = List{};
            std::any_cast<List&>(state.user).push_back(chunk.chunk);
            if (forward) emit.emit(chunk.chunk, std::nullopt, chunk.metadata);
            return ok_status();
        },
        .on_done = [](StreamRequestState& state, Emitter&) -> Result<StagePayload> {
            List chunks;
            if (state.user.has_value()) chunks = std::move(std::any_cast<List&>(state.user));
            const std::int64_t count = static_cast<std::int64_t>(chunks.size());
            return StagePayload{.request_id = state.request_id,
                                .request = state.payload->request,
                                .data = Value(Map{{"chunks", Value(std::move(chunks))},
                                                  {"count", Value(count)},
                                                  {"input", state.payload->data}})};
        },
    };
    OMNI_TRY(auto scheduler, StreamingScheduler::create({.stage_name = context.stage_name,
                                                         .stream_sources = context.stream_sources,
                                                         .handler = std::move(handler),
                                                         .tracer = context.tracer}));
    return std::unique_ptr<Scheduler>(std::move(scheduler));
}

}  // namespace

namespace test_stages_detail {

Status register_stream_stages(Registry& registry) {
    OMNI_RETURN_IF_ERROR(registry.add_if_absent(
        FunctionKind::factory, "test.token_streamer",
        RegistryEntry{.callable = StageFactory(token_streamer_factory),
                      .description = "streams arg tokens / param num_tokens token chunks to the "
                                     "client and every stream_to stage, then the text"}));
    return registry.add_if_absent(
        FunctionKind::factory, "test.stream_collector",
        RegistryEntry{.callable = StageFactory(stream_collector_factory),
                      .description = "collects stream chunks per request (arg forward: also to "
                                     "the client); data = {chunks, count, input}"});
}

}  // namespace test_stages_detail

}  // namespace omnirt::testing
