#include "models/qwen3_omni/omni_stages.h"
#include "models/qwen3_omni/speech_functions.h"

#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "models/qwen3_omni/omni_config.h"
#include "models/qwen3_omni/preprocessing.h"
#include "pipeline/stage_args.h"
#include "text/tokenizer.h"

namespace omnirt::models::qwen3_omni {
namespace {

Error invalid(const std::string& who, const std::string& message) {
    return Error{ErrorCode::invalid_argument, who + ": " + message};
}

// The token ids of the checkpoint's config (defaults: the release's).
Result<LayoutConfig> layout_of(const std::filesystem::path& directory) {
    OMNI_TRY(nlohmann::json json, checkpoint::read_json_file(directory / checkpoint::kConfigFile));
    OMNI_TRY(OmniConfig config, parse_omni_config(json));
    LayoutConfig layout;
    layout.image_token_id = config.ids.image;
    layout.video_token_id = config.ids.video;
    layout.audio_token_id = config.ids.audio;
    layout.vision_start_token_id = config.ids.vision_start;
    layout.vision_end_token_id = config.ids.vision_end;
    layout.audio_start_token_id = config.ids.audio_start;
    layout.audio_end_token_id = config.ids.audio_end;
    layout.position_id_per_seconds = static_cast<double>(config.position_id_per_seconds);
    return layout;
}

// params.stage_params.<stage>.use_audio_in_video, else `fallback`.
Result<bool> audio_in_video_of(const OmniRequest& request, const std::string& stage,
                               bool fallback) {
    const Value* all = request.params.find("stage_params");
    const Value* mine = all != nullptr ? all->find(stage) : nullptr;
    const Value* flag = mine != nullptr ? mine->find("use_audio_in_video") : nullptr;
    if (flag == nullptr || flag->is_null()) return fallback;
    if (!flag->is_bool()) {
        return fail(
            invalid("qwen3_omni.preprocessing",
                    "params.stage_params." + stage + ".use_audio_in_video must be a boolean"));
    }
    return flag->as_bool();
}

Result<std::unique_ptr<pipeline::Scheduler>> make_preprocessing_stage(
    const pipeline::StageContext& context) {
    const std::string who = "qwen3_omni.preprocessing stage '" + context.stage_name + "'";
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    if (model_path.empty()) return fail(invalid(who, "arg 'model_path' is required"));
    const std::filesystem::path directory(model_path);
    auto tokenizer = text::Tokenizer::from_file((directory / "tokenizer.json").string());
    if (!tokenizer) return fail(tokenizer.error().with_context(who));
    auto layout = layout_of(directory);
    if (!layout) return fail(layout.error().with_context(who));
    PreprocessOptions options{.layout = *layout};
    OMNI_TRY(options.use_audio_in_video, pipeline::bool_arg(context, "use_audio_in_video", false));
    OMNI_TRY(std::int64_t max_items, pipeline::int_arg(context, "max_media_items", 16));
    if (max_items < 0 || max_items > 1024) {
        return fail(invalid(who, "arg 'max_media_items' must be 0 to 1024"));
    }
    options.max_media_items = static_cast<std::size_t>(max_items);
    OMNI_TRY(std::int64_t remote_bytes, pipeline::int_arg(context, "remote_max_bytes", 64 << 20));
    OMNI_TRY(std::int64_t remote_ms, pipeline::int_arg(context, "remote_timeout_ms", 10000));
    if (remote_bytes < 1 || remote_ms < 1) {
        return fail(
            invalid(who, "args 'remote_max_bytes' and 'remote_timeout_ms' must be positive"));
    }
    options.fetch.max_bytes = remote_bytes;
    options.fetch.timeout = std::chrono::milliseconds(remote_ms);
    std::shared_ptr<const text::Tokenizer> shared(std::move(*tokenizer));
    return pipeline::make_simple_scheduler(
        context,
        [shared, options, stage = context.stage_name](const StagePayload& input,
                                                      pipeline::Emitter&) -> Result<StagePayload> {
            PreprocessOptions mine = options;
            OMNI_TRY(mine.use_audio_in_video,
                     audio_in_video_of(input.request, stage, options.use_audio_in_video));
            OMNI_TRY(Map data, preprocess_request(input.request, *shared, mine));
            return StagePayload{.request_id = input.request_id,
                                .request = input.request,
                                .data = Value(std::move(data))};
        },
        /*default_workers=*/2);
}

Result<std::unique_ptr<pipeline::Scheduler>> make_aggregate_stage(
    const pipeline::StageContext& context) {
    return pipeline::make_simple_scheduler(
        context, [](const StagePayload& input, pipeline::Emitter&) -> Result<StagePayload> {
            return input;
        });
}

const List* list_field(const StagePayload& payload, std::string_view key) {
    const Value* value = payload.data.find(key);
    return value != nullptr ? value->if_list() : nullptr;
}

Result<std::vector<std::string>> route_by_modality(const std::string&, const StagePayload& output) {
    std::vector<std::string> next{"mm_aggregate"};
    const List* images = list_field(output, "image_items");
    const List* audios = list_field(output, "audio_items");
    if (images != nullptr && !images->empty()) next.emplace_back("image_encoder");
    if (audios != nullptr && !audios->empty()) next.emplace_back("audio_encoder");
    return next;
}

StagePayload with_data(const StagePayload& output, Map data) {
    return StagePayload{
        .request_id = output.request_id, .request = output.request, .data = Value(std::move(data))};
}

ProjectionFn project_items(std::string field) {
    return [field](const std::string&, const StagePayload& output) -> Result<StagePayload> {
        const Value* items = output.data.find(field);
        return with_data(output, Map{{"items", items != nullptr ? *items : Value(List{})}});
    };
}

Result<StagePayload> project_to_aggregate(const std::string&, const StagePayload& output) {
    const Map* data = output.data.if_map();
    if (data == nullptr) return output;
    Map kept;
    for (const auto& [key, value] : *data) {
        if (key != "image_items" && key != "audio_items") kept.emplace(key, value);
    }
    return with_data(output, std::move(kept));
}

Result<std::optional<std::vector<std::string>>> active_encoders(const std::string&,
                                                                const std::string& from_stage,
                                                                const StagePayload& payload) {
    const List* media = list_field(payload, "media");
    if (media == nullptr) return std::optional<std::vector<std::string>>();
    std::vector<std::string> sources{from_stage};
    std::set<std::string> seen;
    for (const Value& item : *media) {
        const Value* encoder = item.find("encoder");
        if (encoder != nullptr && encoder->is_string() &&
            seen.insert(encoder->as_string()).second) {
            sources.push_back(encoder->as_string());
        }
    }
    return std::optional<std::vector<std::string>>(std::move(sources));
}

// Rows [first, first + count) of a float32 [rows, width] tensor, as a new tensor.
Result<Tensor> row_slice(const Tensor& tensor, std::int64_t first, std::int64_t count) {
    if (first == 0 && count == tensor.shape()[0]) return tensor;
    const std::int64_t width = tensor.shape()[1];
    OMNI_TRY(Tensor out, Tensor::empty({count, width}, DType::f32));
    std::memcpy(out.mutable_data(), tensor.data_as<float>() + first * width,
                static_cast<std::size_t>(count * width) * sizeof(float));
    return out;
}

Status check_matrix(const Value* value, std::int64_t rows, const std::string& where) {
    if (value == nullptr || !value->is_tensor() || value->as_tensor().dtype() != DType::f32 ||
        value->as_tensor().shape().size() != 2 || value->as_tensor().shape()[0] != rows) {
        return fail(
            invalid("qwen3_omni.merge_for_thinker",
                    where + " must be a float32 tensor with " + std::to_string(rows) + " rows"));
    }
    return ok_status();
}

}  // namespace

Result<StagePayload> merge_for_thinker(
    const std::string& request_id,
    const std::map<std::string, std::shared_ptr<const StagePayload>>& inputs) {
    const std::string who = "qwen3_omni.merge_for_thinker";
    const StagePayload* base = nullptr;
    for (const auto& [stage, payload] : inputs) {
        if (payload && list_field(*payload, "media") != nullptr) base = payload.get();
    }
    if (base == nullptr) return fail(invalid(who, "no preprocessing payload (data.media)"));
    Map data;
    for (const char* key : {"input_ids", "positions", "rope_delta"}) {
        if (const Value* value = base->data.find(key)) data.emplace(key, *value);
    }
    List mm_runs;
    List deepstack_runs;
    const List& media = *list_field(*base, "media");
    for (std::size_t m = 0; m < media.size(); ++m) {
        const Value& entry = media[m];
        const std::string where = "media[" + std::to_string(m) + "]";
        const Value* encoder = entry.find("encoder");
        const Value* item_index = entry.find("item");
        const Value* rows_value = entry.find("rows");
        const Value* key_value = entry.find("key");
        if (encoder == nullptr || !encoder->is_string() || item_index == nullptr ||
            !item_index->is_int() || rows_value == nullptr || !rows_value->is_tensor() ||
            key_value == nullptr || !key_value->is_int()) {
            return fail(invalid(who, where + " is malformed"));
        }
        auto source = inputs.find(encoder->as_string());
        if (source == inputs.end() || !source->second) {
            return fail(invalid(who, where + ": no output from " + encoder->as_string()));
        }
        const List* items = list_field(*source->second, "items");
        const std::int64_t index = item_index->as_int();
        if (items == nullptr || index < 0 || index >= static_cast<std::int64_t>(items->size())) {
            return fail(invalid(who, where + ": " + encoder->as_string() + " has no item " +
                                         std::to_string(index)));
        }
        const Value& output = (*items)[static_cast<std::size_t>(index)];
        const Tensor& rows_tensor = rows_value->as_tensor();
        const std::int64_t* rows = rows_tensor.data_as<std::int64_t>();
        const std::int64_t count = rows_tensor.numel();
        const Value* embeddings = output.find("embeddings");
        OMNI_RETURN_IF_ERROR(check_matrix(embeddings, count, where + " embeddings"));
        const Value* deepstack = output.find("deepstack");
        const List* layers = deepstack != nullptr ? deepstack->if_list() : nullptr;
        if (layers != nullptr) {
            for (std::size_t k = 0; k < layers->size(); ++k) {
                OMNI_RETURN_IF_ERROR(
                    check_matrix(&(*layers)[k], count, where + " deepstack " + std::to_string(k)));
            }
        }
        const auto key = static_cast<std::uint64_t>(key_value->as_int());
        // Consecutive rows form one run; interleaved items (audio in video) give several.
        std::int64_t start = 0;
        std::uint64_t segment = 0;
        while (start < count) {
            std::int64_t end = start + 1;
            while (end < count && rows[end] == rows[end - 1] + 1) ++end;
            const auto run_key = static_cast<std::int64_t>(key + 0x9E3779B97F4A7C15ull * segment);
            OMNI_TRY(Tensor values, row_slice(embeddings->as_tensor(), start, end - start));
            mm_runs.push_back(Value(Map{{"begin", Value(rows[start])},
                                        {"values", Value(std::move(values))},
                                        {"key", Value(run_key)}}));
            if (layers != nullptr && !layers->empty()) {
                List per_layer;
                for (const Value& layer : *layers) {
                    OMNI_TRY(Tensor part, row_slice(layer.as_tensor(), start, end - start));
                    per_layer.push_back(Value(std::move(part)));
                }
                deepstack_runs.push_back(Value(Map{{"begin", Value(rows[start])},
                                                   {"values", Value(std::move(per_layer))},
                                                   {"key", Value(run_key)}}));
            }
            start = end;
            ++segment;
        }
    }
    data.emplace("mm_runs", Value(std::move(mm_runs)));
    data.emplace("deepstack_runs", Value(std::move(deepstack_runs)));
    return StagePayload{
        .request_id = request_id, .request = base->request, .data = Value(std::move(data))};
}

Status register_omni_stages(Registry& registry) {
    const auto add_factory = [&](const char* name, pipeline::StageFactory factory,
                                 const char* description) {
        return registry.add_if_absent(FunctionKind::factory, name,
                                      RegistryEntry{.callable = std::move(factory),
                                                    .injectable_args = {"model_path"},
                                                    .description = description});
    };
    OMNI_RETURN_IF_ERROR(add_factory("qwen3_omni.preprocessing",
                                     pipeline::StageFactory(make_preprocessing_stage),
                                     "Qwen3-Omni chat layout, media decoding, placeholders and "
                                     "3-D positions"));
    OMNI_RETURN_IF_ERROR(add_factory("qwen3_omni.mm_aggregate",
                                     pipeline::StageFactory(make_aggregate_stage),
                                     "Qwen3-Omni fan-in of preprocessing and the encoders"));
    const auto add = [&](FunctionKind kind, const char* name, std::any callable) {
        return registry.add_if_absent(kind, name, RegistryEntry{.callable = std::move(callable)});
    };
    OMNI_RETURN_IF_ERROR(
        add(FunctionKind::route, "qwen3_omni.route_by_modality", RouteFn(route_by_modality)));
    OMNI_RETURN_IF_ERROR(add(FunctionKind::projection, "qwen3_omni.project_to_image_encoder",
                             ProjectionFn(project_items("image_items"))));
    OMNI_RETURN_IF_ERROR(add(FunctionKind::projection, "qwen3_omni.project_to_audio_encoder",
                             ProjectionFn(project_items("audio_items"))));
    OMNI_RETURN_IF_ERROR(add(FunctionKind::projection, "qwen3_omni.project_to_aggregate",
                             ProjectionFn(project_to_aggregate)));
    OMNI_RETURN_IF_ERROR(
        add(FunctionKind::wait_for, "qwen3_omni.active_encoders", WaitForFn(active_encoders)));
    OMNI_RETURN_IF_ERROR(
        add(FunctionKind::merge, "qwen3_omni.merge_for_thinker", MergeFn(merge_for_thinker)));
    return register_speech_functions(registry);
}

}  // namespace omnirt::models::qwen3_omni
