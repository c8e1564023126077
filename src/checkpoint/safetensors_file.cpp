#include "checkpoint/safetensors.h"

namespace omnirt::checkpoint {

SafetensorsFile::SafetensorsFile(std::shared_ptr<const MappedFile> file, SafetensorsHeader header)
    : file_(std::move(file)), header_(std::move(header)) {
    for (std::size_t i = 0; i < header_.tensors.size(); ++i) {
        index_.emplace(header_.tensors[i].name, i);
    }
    // One read-only storage over the data section; its deleter owns a reference to the mapping.
    auto* data = const_cast<std::byte*>(file_->bytes().data()) + header_.data_offset;
    data_ = Storage::wrap(
        data, header_.data_size, Device::cpu(), [mapping = file_](std::byte*) {},
        /*read_only=*/true);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::filesystem::path& path) {
    OMNI_TRY(auto file, MappedFile::open(path));
    OMNI_TRY(SafetensorsHeader header, parse_safetensors_header(file->bytes(), path.string()));
    return std::unique_ptr<SafetensorsFile>(
        new SafetensorsFile(std::move(file), std::move(header)));
}

const TensorEntry* SafetensorsFile::find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

Result<Tensor> SafetensorsFile::tensor(std::string_view name) const {
    const TensorEntry* entry = find(name);
    if (entry == nullptr) {
        return fail(ErrorCode::not_found,
                    path().string() + ": no tensor named '" + std::string(name) + "'");
    }
    return tensor(*entry);
}

Tensor SafetensorsFile::tensor(const TensorEntry& entry) const {
    // The header was validated: the view always fits the data section.
    auto view = Tensor::from_storage(data_, entry.dtype, entry.shape, {}, entry.begin);
    OMNI_CHECK(view.has_value(), "validated safetensors entry does not fit its file");
    return *std::move(view);
}

void SafetensorsFile::prefetch(const TensorEntry& entry) const {
    file_->prefetch(header_.data_offset + entry.begin, entry.nbytes());
}

}  // namespace omnirt::checkpoint
