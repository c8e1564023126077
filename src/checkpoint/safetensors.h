#pragma once
// Reading the safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header][data section]
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" map of strings. Validation is
// strict, as in the reference implementation: N is bounded, the header is a JSON object that
// starts with '{', every entry has exactly those three keys, byte ranges match shape x dtype and
// tile the data section exactly (no overlap, no hole, nothing after the last tensor).
//
// Errors: a file that breaks a rule is `data_loss` (the message names the file, the tensor and
// the rule); a dtype of the format that omnirt does not support (U16, F8_E4M3, ...) is
// `unimplemented`; a file that does not exist is `not_found`.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/mapped_file.h"
#include "core/tensor.h"

namespace omnirt::checkpoint {

// Largest accepted header (the reference implementation's limit).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// One tensor of a safetensors header.
struct TensorEntry {
    std::string name;
    DType dtype = DType::f32;
    Shape shape;
    std::uint64_t begin = 0;  // byte range in the data section
    std::uint64_t end = 0;

    [[nodiscard]] std::uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
    std::vector<TensorEntry> tensors;  // sorted by data offset
    std::map<std::string, std::string> metadata;
    std::uint64_t data_offset = 0;  // 8 + N: where the data section starts in the file
    std::uint64_t data_size = 0;    // bytes of the data section
};

// The format's dtype names ("BF16") and back.
[[nodiscard]] std::string_view safetensors_dtype_name(DType dtype);
// Unknown names are invalid_argument; names of the format omnirt does not support are
// unimplemented.
[[nodiscard]] Result<DType> parse_safetensors_dtype(std::string_view name);

// Parses and validates the header of a whole safetensors file held in memory. Never reads
// outside `file`; allocates in proportion to the header's real size. `file_name` only labels
// errors.
[[nodiscard]] Result<SafetensorsHeader> parse_safetensors_header(std::span<const std::byte> file,
                                                                 std::string_view file_name);

// A mapped, validated safetensors file. Tensors are read-only views into the mapping; each keeps
// the mapping alive, so they may outlive this object.
//
// Thread safety: immutable after open(); every method may be called from any thread.
class SafetensorsFile {
  public:
    [[nodiscard]] static Result<std::unique_ptr<SafetensorsFile>> open(
        const std::filesystem::path& path);

    [[nodiscard]] const std::filesystem::path& path() const { return file_->path(); }
    // Sorted by data offset (file order).
    [[nodiscard]] const std::vector<TensorEntry>& entries() const { return header_.tensors; }
    [[nodiscard]] const std::map<std::string, std::string>& metadata() const {
        return header_.metadata;
    }
    [[nodiscard]] std::uint64_t data_size() const { return header_.data_size; }
    [[nodiscard]] std::uint64_t file_size() const { return file_->size(); }

    // nullptr when there is no such tensor.
    [[nodiscard]] const TensorEntry* find(std::string_view name) const;
    // Zero-copy read-only view (not_found for an unknown name).
    [[nodiscard]] Result<Tensor> tensor(std::string_view name) const;
    [[nodiscard]] Tensor tensor(const TensorEntry& entry) const;
    // Hints the kernel to read this tensor's bytes ahead of use.
    void prefetch(const TensorEntry& entry) const;

  private:
    SafetensorsFile(std::shared_ptr<const MappedFile> file, SafetensorsHeader header);

    std::shared_ptr<const MappedFile> file_;
    SafetensorsHeader header_;
    std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in entries
    std::shared_ptr<Storage> data_;                          // the data section, read-only
};

}  // namespace omnirt::checkpoint
