#include "checkpoint/generated.h"

#include <fstream>
#include <regex>

namespace omnirt::checkpoint {

Status write_text_file(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::path temporary = path;
    temporary += ".partial";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        out << text;
        out.flush();
        if (!out) {
            std::error_code ignored;
            std::filesystem::remove(temporary, ignored);
            return fail(ErrorCode::unavailable, path.string() + ": cannot write");
        }
    }
    std::error_code error;
    std::filesystem::rename(temporary, path, error);
    if (error) return fail(ErrorCode::unavailable, path.string() + ": " + error.message());
    return ok_status();
}

Status write_json_file(const std::filesystem::path& path, const nlohmann::ordered_json& value) {
    return write_text_file(path, value.dump(2) + "\n");
}

const char* torch_dtype_name(DType dtype) {
    switch (dtype) {
        case DType::f16:
            return "float16";
        case DType::f32:
            return "float32";
        default:
            return "bfloat16";
    }
}

Status prepare_checkpoint_directory(const std::filesystem::path& directory, bool overwrite) {
    std::error_code error;
    if (std::filesystem::exists(directory, error)) {
        if (!std::filesystem::is_directory(directory, error)) {
            return fail(ErrorCode::already_exists,
                        directory.string() + " exists and is not a directory");
        }
        if (!std::filesystem::is_empty(directory, error)) {
            if (!overwrite) {
                return fail(
                    ErrorCode::already_exists,
                    directory.string() + " is not empty (overwrite to replace its checkpoint)");
            }
            static const std::regex kWeights(
                R"(model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?)");
            for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
                if (std::regex_match(entry.path().filename().string(), kWeights)) {
                    std::filesystem::remove(entry.path(), error);
                    if (error) {
                        return fail(ErrorCode::unavailable,
                                    entry.path().string() + ": cannot remove: " + error.message());
                    }
                }
            }
        }
        return ok_status();
    }
    std::filesystem::create_directories(directory, error);
    if (error) {
        return fail(ErrorCode::unavailable,
                    directory.string() + ": cannot create: " + error.message());
    }
    return ok_status();
}

}  // namespace omnirt::checkpoint
