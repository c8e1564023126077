#include "models/s2_pro/preprocess_stage.h"

#include <ATen/ATen.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "media/audio.h"
#include "media/fetch.h"
#include "models/s2_pro/codec_encoder.h"
#include "models/s2_pro/prompt.h"
#include "models/s2_pro/reference_cache.h"
#include "pipeline/simple_scheduler.h"
#include "pipeline/stage_args.h"
#include "torch_bridge/threads.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

constexpr std::string_view kFactory = "s2_pro.preprocess";

struct PreprocessSettings {
    S2ProConfig config;
    std::shared_ptr<const text::Tokenizer> tokenizer;
    std::shared_ptr<const CodecEncoder> encoder;
    PromptStyle style = PromptStyle::sglang;
    double max_reference_seconds = 60;
    std::shared_ptr<ReferenceCache> cache;  // encoded clips by content
};

Error invalid(const std::string& where, const std::string& message) {
    return Error{ErrorCode::invalid_argument,
                 std::string(kFactory) + ": " + where + ": " + message};
}

// Reference audio files are at most this large (a minute of 44.1 kHz float WAV is ~10 MB).
constexpr std::int64_t kMaxReferenceFileBytes = std::int64_t{64} << 20;

// The bytes of a reference's `audio_path` (a path the server checked against its allowed media
// directory) or `audio_url` (fetched here, like the media stages fetch chat's remote media).
Result<std::vector<std::byte>> reference_file(const Value& reference, const std::string& where) {
    if (const Value* path = reference.find("audio_path"); path != nullptr && path->is_string()) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path->as_string(), ec);
        std::ifstream file(path->as_string(), std::ios::binary);
        if (ec || !file) return fail(invalid(where + ".audio", "cannot read " + path->as_string()));
        if (size > static_cast<std::uintmax_t>(kMaxReferenceFileBytes)) {
            return fail(invalid(where + ".audio", "the file is larger than 64 MiB"));
        }
        std::vector<std::byte> bytes(static_cast<std::size_t>(size));
        file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
        if (!file) return fail(invalid(where + ".audio", "short read of " + path->as_string()));
        return bytes;
    }
    const Value* url = reference.find("audio_url");
    auto fetched = media::fetch_url(url->as_string(), {.max_bytes = kMaxReferenceFileBytes});
    if (!fetched) return fail(invalid(where + ".audio", fetched.error().message));
    return std::move(*fetched);
}

bool has_string(const Value& map, std::string_view key) {
    const Value* value = map.find(key);
    return value != nullptr && value->is_string();
}

// 44.1 kHz mono samples of a reference's `audio` (encoded file bytes or samples), `audio_path`
// or `audio_url`.
Result<at::Tensor> reference_audio(const PreprocessSettings& settings, const Value& reference,
                                   const std::string& where) {
    const Value* audio = reference.find("audio");
    media::AudioBuffer buffer;
    if (audio == nullptr || audio->is_null()) {
        OMNI_TRY(std::vector<std::byte> bytes, reference_file(reference, where));
        auto decoded = media::decode_audio(bytes);
        if (!decoded) return fail(invalid(where + ".audio", decoded.error().message));
        buffer = std::move(*decoded);
    } else if (const Bytes* bytes = audio->if_bytes()) {
        auto decoded =
            media::decode_audio(std::as_bytes(std::span(bytes->data.data(), bytes->data.size())));
        if (!decoded) return fail(invalid(where + ".audio", decoded.error().message));
        buffer = std::move(*decoded);
    } else if (const Tensor* samples = audio->if_tensor()) {
        std::int64_t rate = kCodecSampleRate;
        if (const Value* given = reference.find("sample_rate"); given && given->is_int()) {
            rate = given->as_int();
        }
        if (rate < media::kMinSampleRate || rate > media::kMaxSampleRate) {
            return fail(invalid(where + ".sample_rate", "out of range"));
        }
        auto converted = media::audio_from_tensor(*samples, static_cast<int>(rate));
        if (!converted) return fail(invalid(where + ".audio", converted.error().message));
        buffer = std::move(*converted);
    } else {
        return fail(
            invalid(where + ".audio", "must be an encoded file (bytes) or samples (tensor)"));
    }
    if (buffer.duration_seconds() > settings.max_reference_seconds) {
        return fail(invalid(where + ".audio", "longer than max_reference_seconds"));
    }
    if (buffer.frames() == 0) return fail(invalid(where + ".audio", "holds no samples"));
    // Mono: the channels' average (SGLang's preprocessing).
    std::vector<float> mono(static_cast<std::size_t>(buffer.frames()));
    for (std::int64_t f = 0; f < buffer.frames(); ++f) {
        float sum = 0;
        for (int c = 0; c < buffer.channels; ++c) sum += buffer.samples[f * buffer.channels + c];
        mono[static_cast<std::size_t>(f)] = sum / static_cast<float>(buffer.channels);
    }
    media::AudioBuffer single{
        .sample_rate = buffer.sample_rate, .channels = 1, .samples = std::move(mono)};
    auto resampled = media::resample(single, static_cast<int>(kCodecSampleRate));
    if (!resampled) return fail(invalid(where + ".audio", resampled.error().message));
    return at::tensor(resampled->samples, at::kFloat);
}

Result<CodeMatrix> reference_codes(const PreprocessSettings& settings, const Value& reference,
                                   const std::string& where) {
    const std::int64_t width = settings.config.num_codebooks;
    at::Tensor codes;
    if (const Value* given = reference.find("vq_codes"); given != nullptr && !given->is_null()) {
        const std::string shape = "[" + std::to_string(width) + ", frames]";
        if (const List* rows = given->if_list()) {  // JSON: a list of `width` lists of ints
            std::vector<std::int64_t> flat;
            std::size_t frames = 0;
            for (std::size_t k = 0; k < rows->size(); ++k) {
                const List* row = (*rows)[k].if_list();
                if (row == nullptr || (k > 0 && row->size() != frames)) {
                    return fail(invalid(where + ".vq_codes", "must be a list of lists " + shape));
                }
                frames = row->size();
                for (const Value& code : *row) {
                    if (!code.is_int()) {
                        return fail(invalid(where + ".vq_codes", "codes must be integers"));
                    }
                    flat.push_back(code.as_int());
                }
            }
            if (static_cast<std::int64_t>(rows->size()) != width) {
                return fail(invalid(where + ".vq_codes", "must have the shape " + shape));
            }
            codes = at::tensor(flat, at::kLong).view({width, static_cast<std::int64_t>(frames)});
        } else {
            const Tensor* tensor = given->if_tensor();
            if (tensor == nullptr ||
                (tensor->dtype() != DType::i32 && tensor->dtype() != DType::i64) ||
                tensor->dim() != 2 || tensor->shape()[0] != width) {
                return fail(invalid(where + ".vq_codes", "must be an integer tensor " + shape));
            }
            codes = torch_bridge::to_torch(*tensor).to(at::kCPU, at::kLong);
        }
    } else if (const Value* audio = reference.find("audio");
               (audio != nullptr && !audio->is_null()) || has_string(reference, "audio_path") ||
               has_string(reference, "audio_url")) {
        OMNI_TRY(at::Tensor samples, reference_audio(settings, reference, where));
        const ReferenceCache::Key key = ReferenceCache::key_of(
            std::span(samples.data_ptr<float>(), static_cast<std::size_t>(samples.numel())));
        if (auto cached = settings.cache->find(key)) return *std::move(cached);
        auto encoded = settings.encoder->encode(samples);
        if (!encoded)
            return fail(encoded.error().with_context(std::string(kFactory) + ": " + where));
        codes = encoded->select(0, 0).to(at::kInt).contiguous();
        CodeMatrix out{.codebooks = width, .frames = codes.size(1), .codes = {}};
        out.codes.assign(codes.data_ptr<std::int32_t>(),
                         codes.data_ptr<std::int32_t>() + codes.numel());
        settings.cache->insert(key, out);
        return out;
    } else {
        return CodeMatrix{.codebooks = width, .frames = 0, .codes = {}};
    }
    codes = codes.to(at::kInt).contiguous();
    CodeMatrix out{.codebooks = width, .frames = codes.size(1), .codes = {}};
    out.codes.assign(codes.data_ptr<std::int32_t>(),
                     codes.data_ptr<std::int32_t>() + codes.numel());
    return out;
}

Result<StagePayload> preprocess(const PreprocessSettings& settings, const StagePayload& input) {
    const Value& inputs = input.request.inputs;
    const Value* text = inputs.find("text");
    if (text == nullptr || !text->is_string() || text->as_string().empty()) {
        return fail(invalid("inputs.text", "the text to speak is required"));
    }
    std::vector<PromptReference> references;
    if (const Value* list = inputs.find("references"); list != nullptr && !list->is_null()) {
        if (list->if_list() == nullptr) return fail(invalid("inputs.references", "must be a list"));
        for (std::size_t i = 0; i < list->if_list()->size(); ++i) {
            const Value& reference = (*list->if_list())[i];
            const std::string where = "inputs.references[" + std::to_string(i) + "]";
            if (reference.if_map() == nullptr) return fail(invalid(where, "must be an object"));
            PromptReference made;
            if (const Value* ref_text = reference.find("text"); ref_text && !ref_text->is_null()) {
                if (!ref_text->is_string())
                    return fail(invalid(where + ".text", "must be a string"));
                made.text = ref_text->as_string();
            }
            OMNI_TRY(made.codes, reference_codes(settings, reference, where));
            references.push_back(std::move(made));
        }
    }
    auto prompt = build_prompt(*settings.tokenizer, settings.config, text->as_string(), references,
                               settings.style);
    if (!prompt) return fail(prompt.error().with_context(std::string(kFactory)));
    return StagePayload{
        .request_id = input.request_id,
        .request = input.request,
        .data = Value(Map{{"input_ids", Value(Tensor::from_vector(prompt->ids))},
                          {"vq_positions", Value(Tensor::from_vector(prompt->vq_positions))},
                          {"vq_codes", Value(Tensor::from_vector(prompt->vq_codes))}})};
}

}  // namespace

Result<std::unique_ptr<pipeline::Scheduler>> make_preprocess_stage(
    const pipeline::StageContext& context) {
    const std::string who = std::string(kFactory) + " stage '" + context.stage_name + "'";
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    if (model_path.empty()) {
        return fail(ErrorCode::invalid_argument, who + ": arg 'model_path' is required");
    }
    auto settings = std::make_shared<PreprocessSettings>();
    OMNI_TRY(std::string style, pipeline::string_arg(context, "prompt_style", "sglang"));
    if (style == "fish_speech") {
        settings->style = PromptStyle::fish_speech;
    } else if (style != "sglang") {
        return fail(
            ErrorCode::invalid_argument,
            who + ": arg 'prompt_style' must be sglang or fish_speech, got '" + style + "'");
    }
    OMNI_TRY(settings->max_reference_seconds,
             pipeline::number_arg(context, "max_reference_seconds", 60.0));
    OMNI_TRY(std::int64_t cache_entries,
             pipeline::int_arg_in(context, who, "reference_cache_entries", 32, 0, 4096));
    settings->cache = std::make_shared<ReferenceCache>(static_cast<std::size_t>(cache_entries));
    OMNI_TRY(std::int64_t num_threads,
             pipeline::int_arg_in(context, who, "num_threads", 0, 0, 1024));
    torch_bridge::set_intra_op_threads(num_threads);
    const std::filesystem::path directory(model_path);
    auto json = checkpoint::read_json_file(directory / checkpoint::kConfigFile);
    if (!json) return fail(json.error().with_context(who));
    auto config = parse_s2_pro_config(*json);
    if (!config) return fail(config.error().with_context(who));
    settings->config = *config;
    auto tokenizer = text::Tokenizer::from_file((directory / "tokenizer.json").string());
    if (!tokenizer) return fail(tokenizer.error().with_context(who));
    settings->tokenizer = std::move(*tokenizer);
    auto encoder = CodecEncoder::open(directory);
    if (!encoder) return fail(encoder.error().with_context(who));
    settings->encoder = std::move(*encoder);
    return pipeline::make_simple_scheduler(
        context, [settings](const StagePayload& input, pipeline::Emitter&) {
            return preprocess(*settings, input);
        });
}

Status register_preprocess_stage(Registry& registry) {
    return registry.add_if_absent(
        FunctionKind::factory, std::string(kFactory),
        RegistryEntry{.callable = pipeline::StageFactory(make_preprocess_stage),
                      .injectable_args = {"model_path"},
                      .description = "S2-Pro preprocessing: text + reference clips (audio or "
                                     "codes) -> prompt ids, vq_positions, vq_codes"});
}

}  // namespace omnirt::models::s2_pro
