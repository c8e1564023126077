#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "checkpoint/convert.h"

namespace omnirt::checkpoint {
namespace {

// A weight_map file name must stay inside the checkpoint directory.
bool is_safe_relative(const std::string& name) {
    const std::filesystem::path path(name);
    if (name.empty() || path.is_absolute()) return false;
    for (const auto& part : path) {
        if (part == "..") return false;
    }
    return true;
}

}  // namespace

Result<nlohmann::json> read_json_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
    std::error_code error;
    const auto status = std::filesystem::status(path, error);
    if (!std::filesystem::exists(status)) {
        return fail(ErrorCode::not_found, path.string() + ": no such file");
    }
    if (!std::filesystem::is_regular_file(status)) {
        return fail(ErrorCode::invalid_argument, path.string() + ": not a regular file");
    }
    const auto size = std::filesystem::file_size(path, error);
    if (error) return fail(ErrorCode::unavailable, path.string() + ": " + error.message());
    if (size > max_bytes) {
        return fail(ErrorCode::out_of_range, path.string() + ": " + std::to_string(size) +
                                                 " bytes, more than the limit of " +
                                                 std::to_string(max_bytes));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(ErrorCode::unavailable, path.string() + ": cannot open");
    std::string text(static_cast<std::size_t>(size), '\0');
    in.read(text.data(), static_cast<std::streamsize>(size));
    if (!in) return fail(ErrorCode::unavailable, path.string() + ": cannot read");
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& exception) {
        return fail(ErrorCode::data_loss,
                    path.string() + ": not valid JSON: " + std::string(exception.what()));
    }
}

Status Checkpoint::add_file(std::unique_ptr<SafetensorsFile> file) {
    const std::size_t file_index = files_.size();
    for (const TensorEntry& entry : file->entries()) {
        auto [it, inserted] = index_.emplace(entry.name, Location{file.get(), &entry, file_index});
        if (!inserted) {
            return fail(ErrorCode::data_loss, "tensor '" + entry.name + "' is in both " +
                                                  it->second.file->path().filename().string() +
                                                  " and " + file->path().filename().string());
        }
        total_bytes_ += entry.nbytes();
    }
    files_.push_back(std::move(file));
    return ok_status();
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::filesystem::path& directory) {
    std::error_code error;
    if (!std::filesystem::is_directory(directory, error)) {
        return fail(ErrorCode::not_found, directory.string() + ": no such checkpoint directory");
    }
    std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
    checkpoint->directory_ = directory;
    OMNI_TRY(checkpoint->config_, read_json_file(directory / kConfigFile));
    if (!checkpoint->config_.is_object()) {
        return fail(ErrorCode::data_loss,
                    (directory / kConfigFile).string() + ": must be a JSON object");
    }

    const auto single = directory / kSingleWeightsFile;
    const auto index_path = directory / kWeightsIndexFile;
    if (std::filesystem::exists(single, error)) {
        OMNI_TRY(auto file, SafetensorsFile::open(single));
        OMNI_RETURN_IF_ERROR(checkpoint->add_file(std::move(file)));
        return checkpoint;
    }
    if (!std::filesystem::exists(index_path, error)) {
        return fail(ErrorCode::not_found, directory.string() + ": no weights: neither " +
                                              std::string(kSingleWeightsFile) + " nor " +
                                              std::string(kWeightsIndexFile) + " exists");
    }
    checkpoint->sharded_ = true;
    OMNI_TRY(nlohmann::json index, read_json_file(index_path));
    auto index_error = [&](const std::string& message) {
        return fail(ErrorCode::data_loss, index_path.string() + ": " + message);
    };
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
        return index_error("must be an object with a \"weight_map\" object");
    }
    const nlohmann::json& weight_map = index["weight_map"];
    // Shards in order of first mention, each with the first tensor that names it.
    std::vector<std::pair<std::string, std::string>> shards;
    std::set<std::string> seen;
    for (const auto& [name, value] : weight_map.items()) {
        if (!value.is_string()) return index_error("weight_map[\"" + name + "\"] is not a string");
        const std::string& shard = value.get_ref<const std::string&>();
        if (!is_safe_relative(shard)) {
            return index_error("weight_map[\"" + name + "\"] = \"" + shard +
                               "\" is not a file name inside the checkpoint directory");
        }
        if (seen.insert(shard).second) shards.emplace_back(shard, name);
    }
    if (shards.empty()) return index_error("weight_map is empty");
    std::sort(shards.begin(), shards.end());
    for (const auto& [shard, first_tensor] : shards) {
        const auto shard_path = directory / shard;
        if (!std::filesystem::exists(shard_path, error)) {
            return fail(ErrorCode::not_found, index_path.string() + ": shard " + shard +
                                                  " (named for tensor '" + first_tensor +
                                                  "') does not exist");
        }
        OMNI_TRY(auto file, SafetensorsFile::open(shard_path));
        OMNI_RETURN_IF_ERROR(checkpoint->add_file(std::move(file)));
    }
    for (const auto& [name, value] : weight_map.items()) {
        const std::string& shard = value.get_ref<const std::string&>();
        auto it = checkpoint->index_.find(name);
        if (it == checkpoint->index_.end()) {
            return index_error("weight_map names tensor '" + name + "' in " + shard +
                               " but no shard contains it");
        }
        if (it->second.file->path() != directory / shard) {
            return index_error("weight_map names tensor '" + name + "' in " + shard +
                               " but it is in " + it->second.file->path().filename().string());
        }
    }
    return checkpoint;
}

std::vector<std::string> Checkpoint::tensor_names() const {
    std::vector<std::string> names;
    names.reserve(index_.size());
    for (const auto& [name, location] : index_) names.push_back(name);
    return names;
}

Result<const Checkpoint::Location*> Checkpoint::locate(std::string_view name) const {
    auto it = index_.find(name);
    if (it == index_.end()) {
        return fail(ErrorCode::not_found,
                    directory_.string() + ": no tensor named '" + std::string(name) + "'");
    }
    return &it->second;
}

const TensorEntry* Checkpoint::find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second.entry;
}

Result<TensorInfo> Checkpoint::info(std::string_view name) const {
    OMNI_TRY(const Location* location, locate(name));
    return TensorInfo{.name = location->entry->name,
                      .dtype = location->entry->dtype,
                      .shape = location->entry->shape,
                      .nbytes = location->entry->nbytes(),
                      .file = location->file->path()};
}

Result<Tensor> Checkpoint::tensor(std::string_view name) const {
    OMNI_TRY(const Location* location, locate(name));
    return location->file->tensor(*location->entry);
}

Result<Tensor> Checkpoint::load_tensor(std::string_view name, DType target) const {
    OMNI_TRY(Tensor view, tensor(name));
    auto converted = convert_dtype(view, target);
    if (!converted)
        return fail(converted.error().with_context("tensor '" + std::string(name) + "'"));
    return converted;
}

Status Checkpoint::load_tensors(const std::vector<std::string>& names, const TensorVisitor& visit,
                                const LoadOptions& options) const {
    std::vector<const Location*> order;
    order.reserve(names.size());
    std::vector<std::string> missing;
    for (const std::string& name : names) {
        auto it = index_.find(name);
        if (it == index_.end()) {
            missing.push_back(name);
        } else {
            order.push_back(&it->second);
        }
    }
    if (!missing.empty()) {
        std::string list;
        for (std::size_t i = 0; i < missing.size() && i < 10; ++i) {
            list += (i ? ", " : "") + missing[i];
        }
        if (missing.size() > 10) list += ", ... (" + std::to_string(missing.size()) + " in all)";
        return fail(ErrorCode::not_found, directory_.string() + ": missing tensors: " + list);
    }
    std::sort(order.begin(), order.end(), [](const Location* a, const Location* b) {
        return a->file_index != b->file_index ? a->file_index < b->file_index
                                              : a->entry->begin < b->entry->begin;
    });
    Progress progress{.tensors_total = order.size()};
    for (const Location* location : order) progress.bytes_total += location->entry->nbytes();
    if (options.progress) options.progress(progress);
    for (std::size_t i = 0; i < order.size(); ++i) {
        const Location& location = *order[i];
        if (i + 1 < order.size()) order[i + 1]->file->prefetch(*order[i + 1]->entry);
        Tensor tensor = location.file->tensor(*location.entry);
        if (options.dtype && tensor.dtype() != *options.dtype &&
            is_convertible_float(tensor.dtype()) && is_convertible_float(*options.dtype)) {
            OMNI_TRY(tensor, convert_dtype(tensor, *options.dtype));
        }
        OMNI_RETURN_IF_ERROR(visit(location.entry->name, std::move(tensor)));
        progress.bytes_done += location.entry->nbytes();
        ++progress.tensors_done;
        if (options.progress) options.progress(progress);
    }
    return ok_status();
}

Status Checkpoint::load_all(const TensorVisitor& visit, const LoadOptions& options) const {
    return load_tensors(tensor_names(), visit, options);
}

}  // namespace omnirt::checkpoint
