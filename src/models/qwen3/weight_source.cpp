#include "models/qwen3/weight_source.h"

#include <utility>

#include "checkpoint/convert.h"
#include "models/qwen3/weights.h"

namespace omnirt::models::qwen3 {

Result<LoadFormat> parse_load_format(std::string_view name) {
    if (name == "auto" || name == "safetensors") return LoadFormat::automatic;
    if (name == "dummy") return LoadFormat::dummy;
    return fail(ErrorCode::invalid_argument,
                "load_format must be auto, safetensors or dummy, got '" + std::string(name) + "'");
}

Result<std::unique_ptr<WeightSource>> WeightSource::open(const std::filesystem::path& directory,
                                                         WeightSourceOptions options) {
    std::unique_ptr<checkpoint::Checkpoint> opened;
    nlohmann::json json;
    if (options.format == LoadFormat::dummy) {
        if (!checkpoint::is_convertible_float(options.dummy_dtype)) {
            return fail(ErrorCode::invalid_argument,
                        "dummy weights must be float16, bfloat16 or float32, not " +
                            std::string(to_string(options.dummy_dtype)));
        }
        OMNI_TRY(json, checkpoint::read_json_file(directory / checkpoint::kConfigFile));
    } else {
        OMNI_TRY(opened, checkpoint::Checkpoint::open(directory));
        json = opened->config();
    }
    if (!options.config_pointer.empty()) {
        const nlohmann::json::json_pointer pointer = [&] {
            try {
                return nlohmann::json::json_pointer(options.config_pointer);
            } catch (const nlohmann::json::exception&) {
                return nlohmann::json::json_pointer();
            }
        }();
        if (pointer.empty() || !json.contains(pointer) || !json.at(pointer).is_object()) {
            return fail(ErrorCode::invalid_argument,
                        (directory / checkpoint::kConfigFile).string() + ": no object at " +
                            options.config_pointer);
        }
        json = nlohmann::json(json.at(pointer));
    }
    auto config = parse_qwen3_config(json);
    if (!config) {
        return fail(config.error().with_context((directory / checkpoint::kConfigFile).string()));
    }
    return std::unique_ptr<WeightSource>(
        new WeightSource(*std::move(config), std::move(options), std::move(opened)));
}

WeightSource::WeightSource(Qwen3Config config, WeightSourceOptions options,
                           std::unique_ptr<checkpoint::Checkpoint> checkpoint)
    : config_(std::move(config)), options_(std::move(options)), checkpoint_(std::move(checkpoint)) {
    for (checkpoint::TensorSpec& spec :
         tensor_specs(config_, options_.dummy_dtype, options_.prefix)) {
        std::uint64_t bytes = 0;
        if (checkpoint_) {
            // Absent tensors count zero bytes; the model's loader reports them missing.
            if (const auto info = checkpoint_->info(spec.name)) bytes = info->nbytes;
        } else {
            std::uint64_t elements = 1;
            for (std::int64_t size : spec.shape) elements *= static_cast<std::uint64_t>(size);
            bytes = elements * element_size(spec.dtype);
        }
        bytes_total_ += bytes;
        expected_bytes_.emplace(spec.name, bytes);
        if (!checkpoint_) specs_.emplace(spec.name, std::move(spec));
    }
    progress_.bytes_total = bytes_total_;
    progress_.tensors_total = expected_bytes_.size();
}

void WeightSource::complete_pending() {
    if (!pending_) return;
    const auto expected = expected_bytes_.find(*pending_);
    if (expected != expected_bytes_.end() && counted_.insert(*pending_).second) {
        progress_.bytes_done += expected->second;
        ++progress_.tensors_done;
        // The last one is reported by finish(), which the caller reaches once it is converted.
        if (options_.progress && progress_.tensors_done < progress_.tensors_total) {
            options_.progress(progress_);
        }
    }
    pending_.reset();
}

Result<Tensor> WeightSource::tensor(const std::string& name) {
    if (!started_) {
        started_ = true;
        if (options_.progress) options_.progress(progress_);
    }
    complete_pending();
    Result<Tensor> tensor = [&]() -> Result<Tensor> {
        if (checkpoint_) return checkpoint_->tensor(name);
        const auto spec = specs_.find(name);
        if (spec == specs_.end()) {
            return fail(ErrorCode::not_found,
                        "'" + name + "' is not a tensor of this Qwen3 config (dummy weights)");
        }
        return checkpoint::dummy_tensor(spec->second, options_.dummy_init);
    }();
    if (tensor) pending_ = name;
    return tensor;
}

void WeightSource::finish() {
    if (finished_) return;
    finished_ = true;
    if (!started_ && options_.progress) options_.progress(progress_);
    pending_.reset();
    // Everything the model asked for is in place; a tensor it did not need still counts as done.
    progress_.bytes_done = progress_.bytes_total;
    progress_.tensors_done = progress_.tensors_total;
    if (options_.progress) options_.progress(progress_);
}

}  // namespace omnirt::models::qwen3
