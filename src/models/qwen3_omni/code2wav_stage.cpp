#include "models/qwen3_omni/code2wav_stage.h"

#include <ATen/Parallel.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <any>
#include <climits>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dummy.h"
#include "checkpoint/tensor_check.h"
#include "models/qwen3_omni/code2wav.h"
#include "models/qwen3_omni/omni_config.h"
#include "models/qwen3_omni/omni_weights.h"
#include "pipeline/stage_args.h"
#include "pipeline/streaming_scheduler.h"
#include "torch_bridge/threads.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

constexpr std::string_view kFactory = "qwen3_omni.code2wav";
constexpr std::int64_t kMaxChunkFrames = 100000;

Error invalid(std::string message) {
    return Error{ErrorCode::invalid_argument, std::move(message)};
}

// What the stage keeps between chunks; immutable after the factory.
struct Code2WavStageSettings {
    std::string who;  // "qwen3_omni.code2wav stage 'code2wav'"
    std::shared_ptr<const Code2Wav> model;
    std::int64_t chunk_frames = 25;
    std::int64_t first_chunk_frames = 10;
    std::int64_t left_context = 25;
    std::int64_t codec_eos = kDefaultCodecEosId;
};

// One request's stream. `codes` holds frames [buffer_begin, frames) row-major
// [frame][quantizer]; frames before decoded_end - left_context are dropped once decoded.
struct Code2WavStream {
    std::vector<std::int64_t> codes;
    std::int64_t buffer_begin = 0;
    std::int64_t frames = 0;
    std::int64_t decoded_end = 0;
    std::int64_t chunks = 0;
    std::int64_t samples = 0;
};

Code2WavStream& stream_of(pipeline::StreamRequestState& state) {
    if (!state.user.has_value()) state.user = Code2WavStream{};
    return std::any_cast<Code2WavStream&>(state.user);
}

// Appends the frames of chunk.chunk["codes"], skipping EOS frames; the stream is unchanged on
// error.
Status append_codes(const Code2WavStageSettings& settings, const pipeline::StreamChunk& chunk,
                    Code2WavStream& stream) {
    const Code2WavConfig& config = settings.model->config();
    const std::int64_t quantizers = config.num_quantizers;
    const std::string where =
        settings.who + ": stream chunk " + std::to_string(chunk.chunk_id) + ": 'codes'";
    const std::string expected = "an int32 or int64 CPU tensor [frames, " +
                                 std::to_string(quantizers) + "] or [" +
                                 std::to_string(quantizers) + "]";
    const Value* value = chunk.chunk.find("codes");
    // The talker's stop token (the codec EOS) comes without a frame.
    const Value* token = chunk.chunk.find("token_id");
    if (value == nullptr && token != nullptr && token->is_int() &&
        token->as_int() == settings.codec_eos) {
        return ok_status();
    }
    if (value == nullptr || !value->is_tensor()) {
        return fail(invalid(where + " must be " + expected));
    }
    const Tensor& tensor = value->as_tensor();
    if (!tensor.defined() || (tensor.dtype() != DType::i32 && tensor.dtype() != DType::i64) ||
        !tensor.device().is_cpu() || tensor.dim() < 1 || tensor.dim() > 2 ||
        tensor.shape()[tensor.dim() - 1] != quantizers) {
        return fail(invalid(where + " must be " + expected + ", not " +
                            (tensor.defined() ? std::string(to_string(tensor.dtype())) + " " +
                                                    checkpoint::shape_to_string(tensor.shape())
                                              : std::string("undefined"))));
    }
    at::Tensor codes;
    try {
        codes = torch_bridge::to_torch(tensor).to(at::kLong).contiguous().reshape({-1, quantizers});
    } catch (const std::exception& error) {
        return fail(Error{ErrorCode::internal, where + ": " + error.what()});
    }
    const std::int64_t rows = codes.size(0);
    const std::int64_t* data = codes.data_ptr<std::int64_t>();
    std::vector<std::int64_t> kept;
    kept.reserve(static_cast<std::size_t>(rows * quantizers));
    for (std::int64_t row = 0; row < rows; ++row) {
        const std::int64_t* frame = data + row * quantizers;
        if (frame[0] == settings.codec_eos) continue;
        for (std::int64_t q = 0; q < quantizers; ++q) {
            if (frame[q] < 0 || frame[q] >= config.codebook_size) {
                return fail(invalid(where + ": frame " + std::to_string(row) + ", quantizer " +
                                    std::to_string(q) + " holds " + std::to_string(frame[q]) +
                                    ", must be in [0, " + std::to_string(config.codebook_size) +
                                    ") or the codec EOS " + std::to_string(settings.codec_eos) +
                                    " as code 0"));
            }
        }
        kept.insert(kept.end(), frame, frame + quantizers);
    }
    stream.codes.insert(stream.codes.end(), kept.begin(), kept.end());
    stream.frames += static_cast<std::int64_t>(kept.size()) / quantizers;
    return ok_status();
}

// Decodes new frames [decoded_end, end) with its left context, emits the audio to the client and
// drops the frames no later chunk needs. Emitting after an abort is a no-op.
Status decode_and_emit(const Code2WavStageSettings& settings, Code2WavStream& stream,
                       std::int64_t end, pipeline::Emitter& emit) {
    const std::int64_t quantizers = settings.model->config().num_quantizers;
    const std::int64_t begin = stream.decoded_end;
    const std::int64_t context = std::min(settings.left_context, begin);
    const std::int64_t first = begin - context;
    OMNI_CHECK(first >= stream.buffer_begin && end <= stream.frames && end > begin,
               "code2wav stream buffer out of step");
    at::Tensor audio;
    try {
        const at::Tensor codes =
            at::from_blob(stream.codes.data() + (first - stream.buffer_begin) * quantizers,
                          {end - first, quantizers}, at::kLong)
                .t()
                .unsqueeze(0);
        auto decoded = settings.model->decode_chunk(codes, context);
        if (!decoded) return fail(decoded.error().with_context(settings.who));
        audio = decoded->reshape({-1}).to(at::kCPU, at::kFloat, false, /*copy=*/true).contiguous();
    } catch (const std::exception& error) {
        return fail(Error{ErrorCode::internal, settings.who + ": decode: " + error.what()});
    }
    auto converted = torch_bridge::from_torch(audio);
    if (!converted) return fail(converted.error().with_context(settings.who));
    stream.decoded_end = end;
    stream.chunks += 1;
    stream.samples += audio.size(0);
    const std::int64_t keep_from = std::max(stream.buffer_begin, end - settings.left_context);
    stream.codes.erase(stream.codes.begin(),
                       stream.codes.begin() + static_cast<std::ptrdiff_t>(
                                                  (keep_from - stream.buffer_begin) * quantizers));
    stream.buffer_begin = keep_from;
    emit.emit(Value(
        Map{{"audio", Value(std::move(*converted))}, {"sample_rate", Value(kCode2WavSampleRate)}}));
    return ok_status();
}

// Decodes every chunk whose frames are all buffered.
Status decode_ready(const Code2WavStageSettings& settings, Code2WavStream& stream,
                    pipeline::Emitter& emit) {
    while (!emit.aborted()) {
        const std::int64_t size =
            stream.chunks == 0 ? settings.first_chunk_frames : settings.chunk_frames;
        if (stream.frames - stream.decoded_end < size) break;
        OMNI_RETURN_IF_ERROR(decode_and_emit(settings, stream, stream.decoded_end + size, emit));
    }
    return ok_status();
}

// talker_config.codec_eos_token_id when the config has it, else the released value.
Result<std::int64_t> codec_eos_of(const nlohmann::json& config, const std::string& who) {
    const auto talker = config.find("talker_config");
    if (talker == config.end() || !talker->is_object()) return kDefaultCodecEosId;
    const auto eos = talker->find("codec_eos_token_id");
    if (eos == talker->end() || eos->is_null()) return kDefaultCodecEosId;
    if (!eos->is_number_integer()) {
        return fail(invalid(who + ": talker_config.codec_eos_token_id must be an integer"));
    }
    return eos->get<std::int64_t>();
}

// The model from the checkpoint or, with load_format dummy, from generated weights.
Result<std::shared_ptr<const Code2Wav>> load_model(const pipeline::StageContext& context,
                                                   const std::string& who,
                                                   const std::filesystem::path& directory,
                                                   at::ScalarType dtype, nlohmann::json& config) {
    OMNI_TRY(std::string load_format, pipeline::string_arg(context, "load_format", "auto"));
    OMNI_TRY(std::int64_t dummy_seed,
             pipeline::int_arg_in(context, who, "dummy_seed", 0, 0, INT64_MAX));
    WeightLookup lookup;
    std::unique_ptr<checkpoint::Checkpoint> checkpoint;
    if (load_format == "dummy") {
        auto json = checkpoint::read_json_file(directory / checkpoint::kConfigFile);
        if (!json) return fail(json.error().with_context(who));
        config = std::move(*json);
        auto parsed = parse_omni_config(config);
        if (!parsed) return fail(parsed.error().with_context(who));
        auto specs = omni_tensor_specs(*parsed, dtype == at::kBFloat16 ? DType::bf16 : DType::f32);
        if (!specs) return fail(specs.error().with_context(who));
        auto by_name =
            std::make_shared<std::map<std::string, checkpoint::TensorSpec, std::less<>>>();
        for (checkpoint::TensorSpec& spec : *specs) by_name->emplace(spec.name, std::move(spec));
        lookup = [by_name,
                  init = checkpoint::DummyInit{.seed = static_cast<std::uint64_t>(dummy_seed)}](
                     const std::string& name) -> Result<Tensor> {
            auto spec = by_name->find(name);
            if (spec == by_name->end()) {
                return fail(ErrorCode::not_found,
                            "'" + name + "' is not a tensor of this config (dummy weights)");
            }
            return checkpoint::dummy_tensor(spec->second, init);
        };
    } else if (load_format == "auto" || load_format == "safetensors") {
        auto opened = checkpoint::Checkpoint::open(directory);
        if (!opened) return fail(opened.error().with_context(who));
        checkpoint = std::move(*opened);
        config = checkpoint->config();
        lookup = [raw = checkpoint.get()](const std::string& name) { return raw->tensor(name); };
    } else {
        return fail(invalid(who + ": arg 'load_format' must be auto, safetensors or dummy, got '" +
                            load_format + "'"));
    }
    auto wav_config = code2wav_config_of(config);
    if (!wav_config) return fail(wav_config.error().with_context(who));
    // The weights are copied into the model's own tensors; the checkpoint may close afterwards.
    auto model = Code2Wav::load(*wav_config, lookup, {.dtype = dtype});
    if (!model) return fail(model.error().with_context(who));
    return std::shared_ptr<const Code2Wav>(std::move(*model));
}

}  // namespace

std::vector<Code2WavChunk> code2wav_stream_chunks(std::int64_t frames,
                                                  std::int64_t first_chunk_frames,
                                                  std::int64_t chunk_frames,
                                                  std::int64_t left_context) {
    OMNI_CHECK(first_chunk_frames >= 1 && chunk_frames >= 1 && left_context >= 0,
               "code2wav_stream_chunks: sizes >= 1, left_context >= 0");
    std::vector<Code2WavChunk> chunks;
    std::int64_t begin = 0;
    while (begin < frames) {
        const std::int64_t size = chunks.empty() ? first_chunk_frames : chunk_frames;
        const std::int64_t end = std::min(frames, begin + size);
        chunks.push_back({.begin = begin, .end = end, .context = std::min(left_context, begin)});
        begin = end;
    }
    return chunks;
}

Result<std::unique_ptr<pipeline::Scheduler>> make_code2wav_stage(
    const pipeline::StageContext& context) {
    auto settings = std::make_shared<Code2WavStageSettings>();
    settings->who = std::string(kFactory) + " stage '" + context.stage_name + "'";
    const std::string& who = settings->who;
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    if (model_path.empty()) return fail(invalid(who + ": arg 'model_path' is required"));
    OMNI_TRY(std::string dtype_name, pipeline::string_arg(context, "dtype", "float32"));
    at::ScalarType dtype = at::kFloat;
    if (dtype_name == "bfloat16") {
        dtype = at::kBFloat16;
    } else if (dtype_name != "float32") {
        return fail(
            invalid(who + ": arg 'dtype' must be float32 or bfloat16, got '" + dtype_name + "'"));
    }
    OMNI_TRY(settings->chunk_frames,
             pipeline::int_arg_in(context, who, "chunk_frames", 25, 1, kMaxChunkFrames));
    OMNI_TRY(settings->first_chunk_frames,
             pipeline::int_arg_in(context, who, "first_chunk_frames", 10, 1, kMaxChunkFrames));
    OMNI_TRY(settings->left_context,
             pipeline::int_arg_in(context, who, "left_context_frames", 25, 0, kMaxChunkFrames));
    OMNI_TRY(std::int64_t num_threads,
             pipeline::int_arg_in(context, who, "num_threads", 0, 0, 1024));
    if (!context.device.is_cpu()) {
        return fail(Error{ErrorCode::unimplemented, who + ": runs on the CPU only"});
    }
    torch_bridge::set_intra_op_threads(num_threads);
    nlohmann::json config;
    OMNI_TRY(settings->model,
             load_model(context, who, std::filesystem::path(model_path), dtype, config));
    OMNI_TRY(settings->codec_eos, codec_eos_of(config, who));

    pipeline::StreamingHandler handler{
        .on_chunk = [settings](pipeline::StreamRequestState& state, const std::string&,
                               const pipeline::StreamChunk& chunk,
                               pipeline::Emitter& emit) -> Status {
            Code2WavStream& stream = stream_of(state);
            OMNI_RETURN_IF_ERROR(append_codes(*settings, chunk, stream));
            return decode_ready(*settings, stream, emit);
        },
        .on_done = [settings](pipeline::StreamRequestState& state,
                              pipeline::Emitter& emit) -> Result<StagePayload> {
            Code2WavStream& stream = stream_of(state);
            OMNI_RETURN_IF_ERROR(decode_ready(*settings, stream, emit));
            if (stream.frames > stream.decoded_end && !emit.aborted()) {
                OMNI_RETURN_IF_ERROR(decode_and_emit(*settings, stream, stream.frames, emit));
            }
            const StagePayload& input = *state.payload;
            return StagePayload{.request_id = input.request_id,
                                .request = input.request,
                                .data = Value(Map{{"sample_rate", Value(kCode2WavSampleRate)},
                                                  {"samples", Value(stream.samples)},
                                                  {"frames", Value(stream.frames)}})};
        }};
    OMNI_TRY(auto scheduler,
             pipeline::StreamingScheduler::create({.stage_name = context.stage_name,
                                                   .stream_sources = context.stream_sources,
                                                   .handler = std::move(handler),
                                                   .tracer = context.tracer}));
    return std::unique_ptr<pipeline::Scheduler>(std::move(scheduler));
}

Status register_code2wav_stage(Registry& registry) {
    return registry.add_if_absent(
        FunctionKind::factory, std::string(kFactory),
        RegistryEntry{.callable = pipeline::StageFactory(make_code2wav_stage),
                      .injectable_args = {"model_path"},
                      .description = "Qwen3-Omni code2wav (vocoder), streaming: talker chunks "
                                     "{codes [frames, 16]} -> client chunks {audio f32, "
                                     "sample_rate 24000}"});
}

}  // namespace omnirt::models::qwen3_omni
