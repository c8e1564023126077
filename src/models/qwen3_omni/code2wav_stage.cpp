#include "models/qwen3_omni/code2wav_stage.h"
#include "models/qwen3_omni/omni_lookup.h"

#include <ATen/Parallel.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <any>
#include <climits>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "checkpoint/tensor_check.h"
#include "models/qwen3_omni/code2wav.h"
#include "models/qwen3_omni/omni_config.h"
#include "pipeline/stage_args.h"
#include "pipeline/streaming_scheduler.h"
#include "torch_bridge/threads.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

constexpr std::string_view kFactory = "qwen3_omni.code2wav";
constexpr std::int64_t kMaxChunkFrames = 100000;
constexpr std::int64_t kMaxBatchStreams = 256;

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
    std::int64_t max_batch_streams = 8;
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

// The end of the chunk `stream` can decode now (frames [decoded_end, end)), or nullopt: the next
// full chunk once its frames are buffered; with `finishing`, the remainder.
std::optional<std::int64_t> next_chunk_end(const Code2WavStageSettings& settings,
                                           const Code2WavStream& stream, bool finishing) {
    const std::int64_t size =
        stream.chunks == 0 ? settings.first_chunk_frames : settings.chunk_frames;
    if (stream.frames - stream.decoded_end >= size) return stream.decoded_end + size;
    if (finishing && stream.frames > stream.decoded_end) return stream.frames;
    return std::nullopt;
}

// One row of a batched decode: frames [end - frames, end) of a stream, `context` of them
// decoded again and dropped.
struct BatchRow {
    Code2WavStream* stream = nullptr;
    pipeline::Emitter* emit = nullptr;
    std::int64_t end = 0;
    std::int64_t context = 0;
    std::int64_t frames = 0;  // context + new frames
    Status* status = nullptr;
};

// Decodes every row in one forward: the rows' codes [B, Q, longest] right-padded with code 0.
// Every stage of Code2Wav is causal (left-padded convolutions, CausalTransConv cut at both ends,
// attention to earlier keys only), so a row's first output_samples(frames) samples do not depend
// on the padding behind it: row i keeps samples [context_i * total_upsample,
// output_samples(frames_i)), exactly what decode_chunk on its own codes keeps. Each row's audio
// then leaves as its request's client chunk and its stream drops the frames no later chunk
// needs. A forward failure fails every row of the batch; emitting after an abort is a no-op.
void decode_batch(const Code2WavStageSettings& settings, std::vector<BatchRow>& rows) {
    const Code2WavConfig& config = settings.model->config();
    const std::int64_t quantizers = config.num_quantizers;
    const auto batch = static_cast<std::int64_t>(rows.size());
    std::int64_t longest = 0;
    for (const BatchRow& row : rows) longest = std::max(longest, row.frames);
    auto fail_all = [&](const Error& error) {
        for (BatchRow& row : rows) *row.status = fail(error);
    };
    at::Tensor wav;
    try {
        at::Tensor codes = at::zeros({batch, longest, quantizers}, at::kLong);
        for (std::int64_t b = 0; b < batch; ++b) {
            const BatchRow& row = rows[static_cast<std::size_t>(b)];
            Code2WavStream& stream = *row.stream;
            const std::int64_t first = row.end - row.frames;
            OMNI_CHECK(first >= stream.buffer_begin && row.end <= stream.frames &&
                           row.end > stream.decoded_end,
                       "code2wav stream buffer out of step");
            codes[b]
                .narrow(0, 0, row.frames)
                .copy_(
                    at::from_blob(stream.codes.data() + (first - stream.buffer_begin) * quantizers,
                                  {row.frames, quantizers}, at::kLong));
        }
        auto decoded = settings.model->forward(codes.transpose(1, 2));
        if (!decoded) return fail_all(decoded.error().with_context(settings.who));
        wav = decoded->to(at::kCPU, at::kFloat).reshape({batch, -1});
    } catch (const std::exception& error) {
        return fail_all(Error{ErrorCode::internal, settings.who + ": decode: " + error.what()});
    }
    for (std::int64_t b = 0; b < batch; ++b) {
        BatchRow& row = rows[static_cast<std::size_t>(b)];
        Code2WavStream& stream = *row.stream;
        const std::int64_t skip = row.context * config.total_upsample();
        at::Tensor audio;
        try {
            audio = wav[b].narrow(0, skip, config.output_samples(row.frames) - skip).clone();
        } catch (const std::exception& error) {
            *row.status = fail(Error{ErrorCode::internal, settings.who + ": " + error.what()});
            continue;
        }
        auto converted = torch_bridge::from_torch(audio);
        if (!converted) {
            *row.status = fail(converted.error().with_context(settings.who));
            continue;
        }
        stream.decoded_end = row.end;
        stream.chunks += 1;
        stream.samples += audio.size(0);
        const std::int64_t keep_from =
            std::max(stream.buffer_begin, row.end - settings.left_context);
        stream.codes.erase(
            stream.codes.begin(),
            stream.codes.begin() +
                static_cast<std::ptrdiff_t>((keep_from - stream.buffer_begin) * quantizers));
        stream.buffer_begin = keep_from;
        row.emit->emit(Value(Map{{"audio", Value(std::move(*converted))},
                                 {"sample_rate", Value(kCode2WavSampleRate)}}),
                       std::nullopt, Value(Map{{"batch_rows", Value(batch)}}));
    }
}

// One step of the scheduler: the next chunk of up to max_batch_streams pending requests in one
// forward. Requests with fewer chunks sent go first (a new stream's first chunk is never held
// behind the others' later chunks), then the oldest pending; one chunk per request per step, so
// a request's chunks leave in order and one long backlog does not hold the others' first audio.
void code2wav_step(const Code2WavStageSettings& settings,
                   std::vector<pipeline::StreamStepItem>& items) {
    struct Candidate {
        std::size_t item = 0;
        std::int64_t end = 0;
    };
    std::vector<Candidate> candidates;
    for (std::size_t i = 0; i < items.size(); ++i) {
        pipeline::StreamStepItem& item = items[i];
        const Code2WavStream& stream = stream_of(*item.state);
        const auto end = next_chunk_end(settings, stream, item.finishing);
        if (!end || item.emit->aborted()) {
            item.state->pending = false;
        } else {
            candidates.push_back({.item = i, .end = *end});
        }
    }
    std::stable_sort(
        candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
            return stream_of(*items[a.item].state).chunks < stream_of(*items[b.item].state).chunks;
        });
    if (candidates.size() > static_cast<std::size_t>(settings.max_batch_streams)) {
        candidates.resize(static_cast<std::size_t>(settings.max_batch_streams));
    }
    if (candidates.empty()) return;
    std::vector<BatchRow> rows;
    rows.reserve(candidates.size());
    for (const Candidate& candidate : candidates) {
        pipeline::StreamStepItem& item = items[candidate.item];
        Code2WavStream& stream = stream_of(*item.state);
        const std::int64_t context = std::min(settings.left_context, stream.decoded_end);
        rows.push_back(BatchRow{.stream = &stream,
                                .emit = item.emit,
                                .end = candidate.end,
                                .context = context,
                                .frames = candidate.end - stream.decoded_end + context,
                                .status = &item.status});
    }
    decode_batch(settings, rows);
    for (const Candidate& candidate : candidates) {
        pipeline::StreamStepItem& item = items[candidate.item];
        item.state->pending =
            item.status.has_value() &&
            next_chunk_end(settings, stream_of(*item.state), item.finishing).has_value();
    }
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
    auto weights =
        open_omni_weights(directory, load_format, dtype == at::kBFloat16 ? DType::bf16 : DType::f32,
                          static_cast<std::uint64_t>(dummy_seed));
    if (!weights) return fail(weights.error().with_context(who));
    config = weights->config;
    const WeightLookup lookup = weights->lookup;
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
    OMNI_TRY(settings->max_batch_streams,
             pipeline::int_arg_in(context, who, "max_batch_streams", 8, 1, kMaxBatchStreams));
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
                               const pipeline::StreamChunk& chunk, pipeline::Emitter&) -> Status {
            Code2WavStream& stream = stream_of(state);
            OMNI_RETURN_IF_ERROR(append_codes(*settings, chunk, stream));
            state.pending = next_chunk_end(*settings, stream, false).has_value();
            return ok_status();
        },
        // Every chunk, the flushed remainder included, was decoded by code2wav_step.
        .on_done = [settings](pipeline::StreamRequestState& state,
                              pipeline::Emitter&) -> Result<StagePayload> {
            Code2WavStream& stream = stream_of(state);
            const StagePayload& input = *state.payload;
            return StagePayload{.request_id = input.request_id,
                                .request = input.request,
                                .data = Value(Map{{"sample_rate", Value(kCode2WavSampleRate)},
                                                  {"samples", Value(stream.samples)},
                                                  {"frames", Value(stream.frames)}})};
        },
        .on_step =
            [settings](std::vector<pipeline::StreamStepItem>& items) {
                code2wav_step(*settings, items);
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
