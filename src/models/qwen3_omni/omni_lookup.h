#pragma once
// Where a Qwen3-Omni stage takes its weights from: the checkpoint's safetensors (load_format
// "auto" / "safetensors": zero-copy views of the mapped files, which stay mapped while a tensor
// uses them) or, with "dummy", seeded random tensors at the config's real sizes for every name
// of the checkpoint's tensor list (omni_weights.h; checkpoint/dummy.h values).
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace omnirt::models::qwen3_omni {

struct OmniWeights {
    nlohmann::json config;  // config.json
    std::function<Result<Tensor>(const std::string& name)> lookup;
    std::shared_ptr<checkpoint::Checkpoint> checkpoint;  // auto only
};

// invalid_argument for another load_format; the checkpoint's and the config's errors.
[[nodiscard]] Result<OmniWeights> open_omni_weights(const std::filesystem::path& directory,
                                                    const std::string& load_format,
                                                    DType dummy_dtype, std::uint64_t dummy_seed);

}  // namespace omnirt::models::qwen3_omni
