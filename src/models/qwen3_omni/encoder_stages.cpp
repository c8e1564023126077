#include "models/qwen3_omni/encoder_stages.h"
#include "models/qwen3_omni/omni_lookup.h"

#include <ATen/ops/cat.h>

#include <chrono>
#include <climits>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/tensor_check.h"
#include "models/qwen3_omni/audio_encoder.h"
#include "models/qwen3_omni/vision_encoder.h"
#include "pipeline/simple_scheduler.h"
#include "pipeline/stage_args.h"
#include "torch_bridge/threads.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

constexpr std::string_view kImageFactory = "qwen3_omni.image_encoder";
constexpr std::string_view kAudioFactory = "qwen3_omni.audio_encoder";
// Bounds a grid side as the vision encoder does (products stay far from overflow).
constexpr std::int64_t kMaxGridSide = 1 << 16;

Error invalid(std::string message) {
    return Error{ErrorCode::invalid_argument, std::move(message)};
}

// The tensor `name` of `item`: a CPU tensor of `dtype` with `dims` dimensions.
Result<const Tensor*> tensor_field(const Value& item, const char* name, DType dtype,
                                   std::size_t dims, const std::string& expected) {
    const Value* value = item.find(name);
    if (value == nullptr || !value->is_tensor()) {
        return fail(invalid(std::string("'") + name + "' must be a tensor " + expected));
    }
    const Tensor& tensor = value->as_tensor();
    if (!tensor.defined() || tensor.dtype() != dtype || tensor.dim() != dims ||
        !tensor.device().is_cpu()) {
        return fail(invalid(std::string("'") + name + "' must be a CPU tensor " + expected +
                            ", not " +
                            (tensor.defined() ? std::string(to_string(tensor.dtype())) + " " +
                                                    checkpoint::shape_to_string(tensor.shape())
                                              : std::string("undefined"))));
    }
    return &tensor;
}

// A float32 CPU copy that owns its storage (outputs may be views of a batch's tensors, and a
// cached view would keep the whole batch alive).
Result<Tensor> owned_float(const at::Tensor& tensor) {
    return torch_bridge::from_torch(
        tensor.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous());
}

class ImageItems final : public ItemEncoder {
  public:
    ImageItems(std::unique_ptr<const VisionEncoder> encoder, std::int64_t max_rows)
        : encoder_(std::move(encoder)), max_rows_(max_rows) {}

    Result<EncoderInput> parse(const Value& item) const override {
        const VisionEncoderConfig& config = encoder_->config();
        const std::string features = std::to_string(config.patch_features());
        OMNI_TRY(const Tensor* pixels, tensor_field(item, "pixel_values", DType::f32, 2,
                                                    "float32 [rows, " + features + "]"));
        if (pixels->shape()[1] != config.patch_features()) {
            return fail(invalid("'pixel_values' must be float32 [rows, " + features + "], not " +
                                checkpoint::shape_to_string(pixels->shape())));
        }
        const std::int64_t rows = pixels->shape()[0];
        if (rows > max_rows_) {
            return fail(invalid("'pixel_values' has " + std::to_string(rows) +
                                " rows, more than the stage's max_rows_per_item " +
                                std::to_string(max_rows_)));
        }
        OMNI_TRY(const Tensor* grid_tensor,
                 tensor_field(item, "grid_thw", DType::i64, 1, "int64 [3]"));
        if (grid_tensor->shape()[0] != 3) {
            return fail(invalid("'grid_thw' must be int64 [3], not " +
                                checkpoint::shape_to_string((*grid_tensor).shape())));
        }
        const at::Tensor grid_values = torch_bridge::to_torch(*grid_tensor);
        const GridThw grid{.t = grid_values[0].item<std::int64_t>(),
                           .h = grid_values[1].item<std::int64_t>(),
                           .w = grid_values[2].item<std::int64_t>()};
        const std::string shown = "(" + std::to_string(grid.t) + ", " + std::to_string(grid.h) +
                                  ", " + std::to_string(grid.w) + ")";
        for (std::int64_t size : {grid.t, grid.h, grid.w}) {
            if (size < 1 || size > kMaxGridSide) {
                return fail(invalid("'grid_thw' " + shown + " must have sizes in [1, " +
                                    std::to_string(kMaxGridSide) + "]"));
            }
        }
        const std::int64_t merge = config.spatial_merge_size;
        if (grid.h % merge != 0 || grid.w % merge != 0) {
            return fail(invalid("'grid_thw' " + shown + ": h and w must be multiples of " +
                                std::to_string(merge)));
        }
        if (grid.patches() != rows) {
            return fail(invalid("'pixel_values' has " + std::to_string(rows) +
                                " rows but 'grid_thw' " + shown +
                                " makes t*h*w = " + std::to_string(grid.patches())));
        }
        return EncoderInput{.cache_key = {.shape = {grid.t, grid.h, grid.w}},
                            .input = torch_bridge::to_torch(*pixels)};
    }

    Result<std::vector<Map>> encode(std::span<const EncoderInput* const> inputs) const override {
        std::vector<at::Tensor> pixels;
        std::vector<GridThw> grids;
        for (const EncoderInput* input : inputs) {
            pixels.push_back(input->input);
            grids.push_back(GridThw{.t = input->cache_key.shape[0],
                                    .h = input->cache_key.shape[1],
                                    .w = input->cache_key.shape[2]});
        }
        const at::Tensor batch = pixels.size() == 1 ? pixels[0] : at::cat(pixels, 0);
        OMNI_TRY(std::vector<VisionItemOutput> items, encoder_->forward(batch, grids));
        std::vector<Map> out;
        out.reserve(items.size());
        for (const VisionItemOutput& item : items) {
            OMNI_TRY(Tensor embeddings, owned_float(item.embeddings));
            List deepstack;
            for (const at::Tensor& feature : item.deepstack) {
                OMNI_TRY(Tensor owned, owned_float(feature));
                deepstack.emplace_back(std::move(owned));
            }
            out.push_back(Map{{"embeddings", Value(std::move(embeddings))},
                              {"deepstack", Value(std::move(deepstack))}});
        }
        return out;
    }

  private:
    std::unique_ptr<const VisionEncoder> encoder_;
    std::int64_t max_rows_;
};

class AudioItems final : public ItemEncoder {
  public:
    AudioItems(std::unique_ptr<const AudioEncoder> encoder, std::int64_t max_frames)
        : encoder_(std::move(encoder)), max_frames_(max_frames) {}

    Result<EncoderInput> parse(const Value& item) const override {
        const std::string bins = std::to_string(encoder_->config().num_mel_bins);
        OMNI_TRY(const Tensor* mel,
                 tensor_field(item, "mel", DType::f32, 2, "float32 [" + bins + ", T]"));
        const std::int64_t frames = mel->shape()[1];
        if (mel->shape()[0] != encoder_->config().num_mel_bins || frames < 1) {
            return fail(invalid("'mel' must be float32 [" + bins + ", T >= 1], not " +
                                checkpoint::shape_to_string((*mel).shape())));
        }
        if (frames > max_frames_) {
            return fail(invalid("'mel' has " + std::to_string(frames) +
                                " frames, more than the stage's max_frames_per_item " +
                                std::to_string(max_frames_)));
        }
        return EncoderInput{.cache_key = {.shape = {frames, 0, 0}},
                            .input = torch_bridge::to_torch(*mel)};
    }

    Result<std::vector<Map>> encode(std::span<const EncoderInput* const> inputs) const override {
        std::vector<at::Tensor> mels;
        for (const EncoderInput* input : inputs) mels.push_back(input->input);
        OMNI_TRY(std::vector<at::Tensor> embeddings, encoder_->forward(mels));
        std::vector<Map> out;
        out.reserve(embeddings.size());
        for (const at::Tensor& audio : embeddings) {
            OMNI_TRY(Tensor owned, owned_float(audio));
            out.push_back(Map{{"embeddings", Value(std::move(owned))}});
        }
        return out;
    }

  private:
    std::unique_ptr<const AudioEncoder> encoder_;
    std::int64_t max_frames_;
};

// The arguments both stages take.
struct StageArgs {
    std::string who;      // "qwen3_omni.image_encoder stage 'image_encoder'"
    OmniWeights weights;  // config.json and the tensors (checkpoint or dummy)
    at::ScalarType dtype = at::kFloat;
    std::int64_t max_batch_size = 8;
    std::int64_t max_batch_wait_us = 2000;
    std::int64_t cache_bytes = 256ll << 20;
};

Result<StageArgs> read_stage_args(const pipeline::StageContext& context, std::string_view factory) {
    StageArgs args;
    args.who = std::string(factory) + " stage '" + context.stage_name + "'";
    const std::string& who = args.who;
    OMNI_TRY(std::string model_path, pipeline::string_arg(context, "model_path", ""));
    if (model_path.empty()) return fail(invalid(who + ": arg 'model_path' is required"));
    OMNI_TRY(std::string dtype_name, pipeline::string_arg(context, "dtype", "float32"));
    if (dtype_name == "float32") {
        args.dtype = at::kFloat;
    } else if (dtype_name == "bfloat16") {
        args.dtype = at::kBFloat16;
    } else {
        return fail(
            invalid(who + ": arg 'dtype' must be float32 or bfloat16, got '" + dtype_name + "'"));
    }
    OMNI_TRY(args.max_batch_size, pipeline::int_arg_in(context, who, "max_batch_size", 8, 1, 4096));
    OMNI_TRY(args.max_batch_wait_us,
             pipeline::int_arg_in(context, who, "max_batch_wait_us", 2000, 0, 10'000'000));
    OMNI_TRY(args.cache_bytes, pipeline::int_arg_in(context, who, "cache_bytes", 256ll << 20, 0,
                                                    std::int64_t{1} << 50));
    OMNI_TRY(std::int64_t num_threads,
             pipeline::int_arg_in(context, who, "num_threads", 0, 0, 1024));
    if (!context.device.is_cpu()) {
        return fail(Error{ErrorCode::unimplemented, who + ": runs on the CPU only"});
    }
    OMNI_TRY(std::string load_format, pipeline::string_arg(context, "load_format", "auto"));
    OMNI_TRY(std::int64_t dummy_seed,
             pipeline::int_arg_in(context, who, "dummy_seed", 0, 0, INT64_MAX));
    torch_bridge::set_intra_op_threads(num_threads);
    auto weights = open_omni_weights(std::filesystem::path(model_path), load_format,
                                     args.dtype == at::kBFloat16 ? DType::bf16 : DType::f32,
                                     static_cast<std::uint64_t>(dummy_seed));
    if (!weights) return fail(weights.error().with_context(who));
    args.weights = std::move(*weights);
    return args;
}

Result<std::unique_ptr<pipeline::Scheduler>> make_stage(const pipeline::StageContext& context,
                                                        const StageArgs& args,
                                                        std::unique_ptr<const ItemEncoder> items,
                                                        EncoderStageHooks hooks) {
    auto batcher = std::make_shared<EncoderBatcher>(
        args.who, std::move(items), static_cast<std::size_t>(args.cache_bytes), std::move(hooks));
    OMNI_TRY(auto scheduler,
             pipeline::SimpleScheduler::create(
                 {.stage_name = context.stage_name,
                  .batch_compute =
                      [batcher](const std::vector<pipeline::BatchItem>& batch) {
                          return batcher->run(batch);
                      },
                  .max_batch_size = static_cast<std::size_t>(args.max_batch_size),
                  .max_batch_wait = std::chrono::microseconds(args.max_batch_wait_us),
                  .worker_threads = 1,
                  .tracer = context.tracer}));
    return std::unique_ptr<pipeline::Scheduler>(std::move(scheduler));
}

}  // namespace

Result<std::unique_ptr<pipeline::Scheduler>> make_image_encoder_stage(
    const pipeline::StageContext& context, EncoderStageHooks hooks) {
    OMNI_TRY(StageArgs args, read_stage_args(context, kImageFactory));
    OMNI_TRY(std::int64_t max_rows,
             pipeline::int_arg_in(context, args.who, "max_rows_per_item", 65536, 1, 1ll << 30));
    auto config = vision_encoder_config_of(args.weights.config);
    if (!config) return fail(config.error().with_context(args.who));
    auto encoder = VisionEncoder::load(*config, args.weights.lookup, {.dtype = args.dtype});
    if (!encoder) return fail(encoder.error().with_context(args.who));
    return make_stage(context, args, std::make_unique<ImageItems>(std::move(*encoder), max_rows),
                      std::move(hooks));
}

Result<std::unique_ptr<pipeline::Scheduler>> make_audio_encoder_stage(
    const pipeline::StageContext& context, EncoderStageHooks hooks) {
    OMNI_TRY(StageArgs args, read_stage_args(context, kAudioFactory));
    OMNI_TRY(std::int64_t max_frames,
             pipeline::int_arg_in(context, args.who, "max_frames_per_item", 180000, 1, 1ll << 30));
    auto config = audio_encoder_config_of(args.weights.config);
    if (!config) return fail(config.error().with_context(args.who));
    auto encoder = AudioEncoder::load(*config, args.weights.lookup, {.dtype = args.dtype});
    if (!encoder) return fail(encoder.error().with_context(args.who));
    return make_stage(context, args, std::make_unique<AudioItems>(std::move(*encoder), max_frames),
                      std::move(hooks));
}

Status register_encoder_stages(Registry& registry) {
    const std::vector<std::string> injectable = {"model_path"};
    OMNI_RETURN_IF_ERROR(registry.add_if_absent(
        FunctionKind::factory, std::string(kImageFactory),
        RegistryEntry{.callable = pipeline::StageFactory([](const pipeline::StageContext& context) {
                          return make_image_encoder_stage(context);
                      }),
                      .injectable_args = injectable,
                      .description = "Qwen3-Omni vision encoder, batched across requests and "
                                     "cached by key: data.items {key, pixel_values, grid_thw} -> "
                                     "{key, embeddings, deepstack}"}));
    return registry.add_if_absent(
        FunctionKind::factory, std::string(kAudioFactory),
        RegistryEntry{.callable = pipeline::StageFactory([](const pipeline::StageContext& context) {
                          return make_audio_encoder_stage(context);
                      }),
                      .injectable_args = injectable,
                      .description = "Qwen3-Omni audio encoder (AuT), batched across requests and "
                                     "cached by key: data.items {key, mel} -> {key, embeddings}"});
}

}  // namespace omnirt::models::qwen3_omni
