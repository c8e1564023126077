#pragma once
// Helpers of the checkpoint generators (`omnirt make-checkpoint`): the directory they write
// into and its small text files.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace omnirt::checkpoint {

// Writes `text` under a temporary name, then renames it: no partial file is left behind.
[[nodiscard]] Status write_text_file(const std::filesystem::path& path, const std::string& text);
// write_text_file() of value.dump(2) plus a newline.
[[nodiscard]] Status write_json_file(const std::filesystem::path& path,
                                     const nlohmann::ordered_json& value);

// Prepares `directory` for a generated checkpoint: created when missing; when not empty,
// refused (already_exists) unless `overwrite`, in which case weight files of an earlier layout
// (model.safetensors, shards, index) are removed so they cannot shadow the new ones.
[[nodiscard]] Status prepare_checkpoint_directory(const std::filesystem::path& directory,
                                                  bool overwrite);

// config.json's torch_dtype for a weight dtype: "bfloat16", "float16", "float32".
[[nodiscard]] const char* torch_dtype_name(DType dtype);

}  // namespace omnirt::checkpoint
