#include "models/qwen3/text_stages.h"

#include <any>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "models/qwen3/prompt.h"
#include "pipeline/stage_args.h"
#include "pipeline/streaming_scheduler.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace omnirt::models::qwen3 {
namespace {

Result<std::shared_ptr<const text::Tokenizer>> stage_tokenizer(
    const pipeline::StageContext& context, std::string_view factory) {
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    if (model_path.empty()) {
        return fail(ErrorCode::invalid_argument, std::string(factory) + " stage '" +
                                                     context.stage_name +
                                                     "': arg 'model_path' is required");
    }
    auto tokenizer =
        text::Tokenizer::from_file((std::filesystem::path(model_path) / "tokenizer.json").string());
    if (!tokenizer) {
        return fail(tokenizer.error().with_context(std::string(factory) + " stage '" +
                                                   context.stage_name + "'"));
    }
    return std::shared_ptr<const text::Tokenizer>(std::move(*tokenizer));
}

// request.params.stage_params.<stage>.enable_thinking, else `fallback`.
Result<bool> enable_thinking_of(const OmniRequest& request, const std::string& stage,
                                bool fallback) {
    const Value* all = request.params.find("stage_params");
    const Value* mine = all != nullptr ? all->find(stage) : nullptr;
    const Value* flag = mine != nullptr ? mine->find("enable_thinking") : nullptr;
    if (flag == nullptr || flag->is_null()) return fallback;
    if (!flag->is_bool()) {
        return fail(ErrorCode::invalid_argument, "qwen3.preprocess: params.stage_params." + stage +
                                                     ".enable_thinking must be a boolean");
    }
    return flag->as_bool();
}

Result<std::unique_ptr<pipeline::Scheduler>> make_preprocess_stage(
    const pipeline::StageContext& context) {
    OMNI_TRY(auto tokenizer, stage_tokenizer(context, "qwen3.preprocess"));
    OMNI_TRY(bool enable_thinking, pipeline::bool_arg(context, "enable_thinking", true));
    return pipeline::make_simple_scheduler(
        context,
        [tokenizer, enable_thinking, stage = context.stage_name](
            const StagePayload& input, pipeline::Emitter&) -> Result<StagePayload> {
            OMNI_TRY(bool thinking, enable_thinking_of(input.request, stage, enable_thinking));
            OMNI_TRY(std::vector<std::int32_t> ids,
                     qwen3_prompt_ids(input.request, *tokenizer, thinking, "qwen3.preprocess"));
            return StagePayload{.request_id = input.request_id,
                                .request = input.request,
                                .data = Value(Map{{"input_ids", Value(Tensor::from_vector(ids))}})};
        });
}

// One log-probability entry of the client output protocol for token `id`.
Result<Value> logprob_entry(const text::Tokenizer& tokenizer, const Value& id_value,
                            const Value& logprob_value, const Value* top) {
    const std::int64_t* id = id_value.if_int();
    if (id == nullptr || *id < 0 || !logprob_value.is_number()) {
        return fail(ErrorCode::invalid_argument,
                    "qwen3.decode: a log probability needs a token_id >= 0 and a number logprob");
    }
    std::string bytes;
    if (*id > text::kMaxTokenId ||
        !tokenizer.append_token_bytes(static_cast<text::TokenId>(*id), bytes)) {
        bytes.clear();  // an id past the tokenizer (a padded embedding row): no text
    }
    std::string token;
    text::append_utf8_lossy(bytes, token);
    List byte_list;
    byte_list.reserve(bytes.size());
    for (unsigned char c : bytes) byte_list.push_back(Value(static_cast<std::int64_t>(c)));
    Map entry{{"token", Value(std::move(token))},
              {"logprob", Value(logprob_value.as_number())},
              {"bytes", Value(std::move(byte_list))}};
    if (top != nullptr) {
        const List* alternatives = top->if_list();
        if (alternatives == nullptr) {
            return fail(ErrorCode::invalid_argument, "qwen3.decode: top_logprobs must be a list");
        }
        List out;
        out.reserve(alternatives->size());
        for (const Value& alternative : *alternatives) {
            const Value* alt_id = alternative.find("token_id");
            const Value* alt_logprob = alternative.find("logprob");
            if (alt_id == nullptr || alt_logprob == nullptr) {
                return fail(ErrorCode::invalid_argument,
                            "qwen3.decode: a top_logprobs entry needs token_id and logprob");
            }
            OMNI_TRY(Value alt, logprob_entry(tokenizer, *alt_id, *alt_logprob, nullptr));
            out.push_back(std::move(alt));
        }
        entry.emplace("top_logprobs", Value(std::move(out)));
    }
    return Value(std::move(entry));
}

struct DecodeState {
    List logprobs;  // entries so far, for the result
};

Result<std::unique_ptr<pipeline::Scheduler>> make_decode_stage(
    const pipeline::StageContext& context) {
    OMNI_TRY(auto tokenizer, stage_tokenizer(context, "qwen3.decode"));
    pipeline::StreamingHandler handler{
        .on_chunk = [tokenizer](pipeline::StreamRequestState& state, const std::string&,
                                const pipeline::StreamChunk& chunk,
                                pipeline::Emitter& emit) -> Status {
            if (!state.user.has_value()) state.user = DecodeState{};
            auto& mine = std::any_cast<DecodeState&>(state.user);
            Map out;
            if (const Value* text = chunk.chunk.find("text");
                text && text->is_string() && !text->as_string().empty()) {
                out.emplace("text", *text);
            }
            if (const Value* logprob = chunk.chunk.find("logprob")) {
                const Value* id = chunk.chunk.find("token_id");
                if (id == nullptr) {
                    return fail(ErrorCode::invalid_argument,
                                "qwen3.decode: a chunk with a logprob has no token_id");
                }
                OMNI_TRY(Value entry, logprob_entry(*tokenizer, *id, *logprob,
                                                    chunk.chunk.find("top_logprobs")));
                mine.logprobs.push_back(entry);
                out.emplace("logprobs", Value(List{std::move(entry)}));
            }
            if (!out.empty()) emit.emit(Value(std::move(out)));
            return ok_status();
        },
        .on_done = [](pipeline::StreamRequestState& state,
                      pipeline::Emitter&) -> Result<StagePayload> {
            const StagePayload& input = *state.payload;
            Map data;
            for (const char* key : {"text", "finish_reason", "usage", "output_ids"}) {
                if (const Value* value = input.data.find(key)) data.emplace(key, *value);
            }
            if (state.user.has_value()) {
                auto& mine = std::any_cast<DecodeState&>(state.user);
                if (!mine.logprobs.empty())
                    data.emplace("logprobs", Value(std::move(mine.logprobs)));
            }
            return StagePayload{.request_id = input.request_id,
                                .request = input.request,
                                .data = Value(std::move(data))};
        }};
    OMNI_TRY(auto scheduler,
             pipeline::StreamingScheduler::create({.stage_name = context.stage_name,
                                                   .stream_sources = context.stream_sources,
                                                   .handler = std::move(handler),
                                                   .tracer = context.tracer}));
    return std::unique_ptr<pipeline::Scheduler>(std::move(scheduler));
}

}  // namespace

Status register_qwen3_text_stages(Registry& registry) {
    for (auto& [name, factory, description] :
         {std::tuple{"qwen3.preprocess", pipeline::StageFactory(make_preprocess_stage),
                     "Qwen3 chat template + tokenizer: data = {input_ids}"},
          std::tuple{"qwen3.decode", pipeline::StageFactory(make_decode_stage),
                     "Qwen3 thinker tokens -> client text deltas and log probabilities"}}) {
        OMNI_RETURN_IF_ERROR(registry.add_if_absent(FunctionKind::factory, name,
                                                    RegistryEntry{.callable = factory,
                                                                  .injectable_args = {"model_path"},
                                                                  .description = description}));
    }
    return ok_status();
}

}  // namespace omnirt::models::qwen3
