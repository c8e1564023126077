#include "models/s2_pro/vocoder_stage.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "checkpoint/dummy.h"
#include "models/s2_pro/codec_decoder.h"
#include "models/s2_pro/codec_weights.h"
#include "pipeline/stage_args.h"
#include "pipeline/streaming_scheduler.h"
#include "torch_bridge/threads.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

constexpr std::string_view kFactory = "s2_pro.vocoder";
constexpr std::int64_t kMaxChunkFrames = 100000;

struct VocoderSettings {
    std::string who;
    std::shared_ptr<const CodecDecoder> codec;
    std::int64_t first_chunk_frames = 5;
    std::int64_t chunk_frames = 25;
};

// One request's stream: frames not decoded yet ([frames, codebooks] row-major) and the decoder
// state of those that were.
struct VocoderStream {
    CodecDecoder::DecodeState state;
    std::vector<std::int64_t> buffered;
    std::int64_t frames = 0;   // received
    std::int64_t samples = 0;  // emitted
    std::int64_t chunks = 0;   // audio chunks emitted
};

VocoderStream& stream_of(const VocoderSettings& settings, pipeline::StreamRequestState& state) {
    if (!state.user.has_value()) {
        state.user =
            std::make_shared<VocoderStream>(VocoderStream{.state = settings.codec->new_state(1)});
    }
    return *std::any_cast<std::shared_ptr<VocoderStream>&>(state.user);
}

Status append(const VocoderSettings& settings, const pipeline::StreamChunk& chunk,
              VocoderStream& stream) {
    const std::int64_t width = settings.codec->sizes().num_codebooks();
    const std::string where =
        settings.who + ": stream chunk " + std::to_string(chunk.chunk_id) + ": 'codes'";
    const Value* value = chunk.chunk.find("codes");
    const Tensor* tensor = value == nullptr ? nullptr : value->if_tensor();
    if (tensor == nullptr) {
        return fail(ErrorCode::invalid_argument, where + " is missing or not a tensor");
    }
    if ((tensor->dtype() != DType::i32 && tensor->dtype() != DType::i64) ||
        !tensor->device().is_cpu() || tensor->dim() < 1 || tensor->dim() > 2 ||
        (tensor->shape().back() != width && tensor->shape().back() != width + 1)) {
        return fail(ErrorCode::invalid_argument,
                    where + " must be an integer CPU tensor [" + std::to_string(width) + "] or [" +
                        std::to_string(width + 1) +
                        "] (the semantic token first), or [frames, either]");
    }
    at::Tensor codes =
        torch_bridge::to_torch(*tensor).to(at::kLong).reshape({-1, tensor->shape().back()});
    if (codes.size(1) == width + 1) codes = codes.narrow(1, 1, width);  // drop the token
    codes = codes.contiguous();
    const std::int64_t* data = codes.data_ptr<std::int64_t>();
    stream.buffered.insert(stream.buffered.end(), data, data + codes.numel());
    stream.frames += codes.numel() / width;
    return ok_status();
}

// Decodes the buffered frames when a chunk is due (or all of them when `flush`) and emits them.
Status decode_due(const VocoderSettings& settings, VocoderStream& stream, bool flush,
                  pipeline::Emitter& emit) {
    const std::int64_t width = settings.codec->sizes().num_codebooks();
    const auto buffered = static_cast<std::int64_t>(stream.buffered.size()) / width;
    // first_chunk_frames, then twice as many each chunk up to chunk_frames: a short first chunk
    // for the time to first audio, and each later one due while the audio before it still plays.
    std::int64_t due = settings.first_chunk_frames;
    for (std::int64_t k = 0; k < stream.chunks && due < settings.chunk_frames; ++k) due *= 2;
    due = std::max(settings.first_chunk_frames, std::min(due, settings.chunk_frames));
    if (buffered == 0 || (!flush && buffered < due)) return ok_status();
    const at::Tensor codes =
        at::from_blob(stream.buffered.data(), {buffered, width}, at::kLong).t().unsqueeze(0);
    OMNI_TRY(at::Tensor audio, settings.codec->decode_chunk(stream.state, codes));
    stream.buffered.clear();
    OMNI_TRY(Tensor samples, torch_bridge::from_torch(audio.select(0, 0).contiguous()));
    stream.samples += samples.numel();
    ++stream.chunks;
    emit.emit(
        Value(Map{{"audio", Value(std::move(samples))}, {"sample_rate", Value(kCodecSampleRate)}}));
    return ok_status();
}

// The decoder of model_path's codec, or (load_format dummy) of a preset's sizes with seeded dummy
// weights: only the decode side is generated, as the stage loads nothing else.
Result<std::shared_ptr<const CodecDecoder>> open_codec(const pipeline::StageContext& context,
                                                       const std::string& who) {
    OMNI_TRY(std::string load_format, pipeline::string_arg(context, "load_format", "auto"));
    OMNI_TRY(std::string dtype_name, pipeline::string_arg(context, "dtype", "float32"));
    CodecDecoderOptions options;
    if (dtype_name == "bfloat16") {
        options.dtype = at::kBFloat16;
    } else if (dtype_name != "float32") {
        return fail(ErrorCode::invalid_argument,
                    who + ": arg 'dtype' must be float32 or bfloat16, got '" + dtype_name + "'");
    }
    if (load_format == "dummy") {
        OMNI_TRY(std::string preset, pipeline::string_arg(context, "codec_preset", "release"));
        OMNI_TRY(std::int64_t seed,
                 pipeline::int_arg_in(context, who, "dummy_seed", 0, 0, INT64_MAX));
        auto sizes = codec_preset(preset);
        if (!sizes) return fail(sizes.error().with_context(who + ": arg 'codec_preset'"));
        auto specs = std::make_shared<std::map<std::string, checkpoint::TensorSpec, std::less<>>>();
        for (checkpoint::TensorSpec& spec : codec_tensor_specs(*sizes, DType::f32)) {
            std::string name = spec.name;
            specs->emplace(std::move(name), std::move(spec));
        }
        const auto dummy_seed = static_cast<std::uint64_t>(seed);
        auto decoder = CodecDecoder::create(
            *sizes,
            [specs, dummy_seed](const std::string& name) -> Result<Tensor> {
                auto it = specs->find(name);
                if (it == specs->end()) {
                    return fail(ErrorCode::not_found, "no dummy codec tensor '" + name + "'");
                }
                return checkpoint::dummy_tensor(it->second, {.seed = dummy_seed});
            },
            options);
        if (!decoder) return fail(decoder.error().with_context(who));
        return std::shared_ptr<const CodecDecoder>(std::move(*decoder));
    }
    if (load_format != "auto") {
        return fail(ErrorCode::invalid_argument,
                    who + ": arg 'load_format' must be auto or dummy, got '" + load_format + "'");
    }
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    if (model_path.empty()) {
        return fail(ErrorCode::invalid_argument, who + ": arg 'model_path' is required");
    }
    auto codec = CodecDecoder::open(std::filesystem::path(model_path), options);
    if (!codec) return fail(codec.error().with_context(who));
    return std::shared_ptr<const CodecDecoder>(std::move(*codec));
}

}  // namespace

Result<std::unique_ptr<pipeline::Scheduler>> make_vocoder_stage(
    const pipeline::StageContext& context) {
    auto settings = std::make_shared<VocoderSettings>();
    settings->who = std::string(kFactory) + " stage '" + context.stage_name + "'";
    const std::string& who = settings->who;
    OMNI_TRY(settings->first_chunk_frames,
             pipeline::int_arg_in(context, who, "first_chunk_frames", 5, 1, kMaxChunkFrames));
    OMNI_TRY(settings->chunk_frames,
             pipeline::int_arg_in(context, who, "chunk_frames", 25, 1, kMaxChunkFrames));
    OMNI_TRY(std::int64_t num_threads,
             pipeline::int_arg_in(context, who, "num_threads", 0, 0, 1024));
    if (!context.device.is_cpu()) {
        return fail(ErrorCode::unimplemented, who + ": runs on the CPU only");
    }
    OMNI_TRY(settings->codec, open_codec(context, who));
    torch_bridge::set_intra_op_threads(
        torch_bridge::intra_op_threads_for(num_threads, settings->codec->sizes().decoder_dim));

    pipeline::StreamingHandler handler{
        .on_chunk = [settings](pipeline::StreamRequestState& state, const std::string&,
                               const pipeline::StreamChunk& chunk,
                               pipeline::Emitter& emit) -> Status {
            VocoderStream& stream = stream_of(*settings, state);
            OMNI_RETURN_IF_ERROR(append(*settings, chunk, stream));
            return decode_due(*settings, stream, /*flush=*/false, emit);
        },
        .on_done = [settings](pipeline::StreamRequestState& state,
                              pipeline::Emitter& emit) -> Result<StagePayload> {
            VocoderStream& stream = stream_of(*settings, state);
            OMNI_RETURN_IF_ERROR(decode_due(*settings, stream, /*flush=*/true, emit));
            const StagePayload& input = *state.payload;
            Map data{{"sample_rate", Value(kCodecSampleRate)},
                     {"samples", Value(stream.samples)},
                     {"frames", Value(stream.frames)}};
            // The tts stage's token counts (its result is this stage's input), for the client.
            if (const Value* usage = input.data.find("usage"); usage != nullptr) {
                data.emplace("usage", *usage);
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

Status register_vocoder_stage(Registry& registry) {
    return registry.add_if_absent(
        FunctionKind::factory, std::string(kFactory),
        RegistryEntry{.callable = pipeline::StageFactory(make_vocoder_stage),
                      .injectable_args = {"model_path"},
                      .description = "S2-Pro codec decoder (vocoder), streaming with carried "
                                     "state: s2_pro.tts chunks {codes [11]} -> client chunks "
                                     "{audio f32, sample_rate 44100}"});
}

}  // namespace omnirt::models::s2_pro
