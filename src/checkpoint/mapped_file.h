#pragma once
// MappedFile: a whole file mapped read-only (RAII). Tensors read from a safetensors file are views
// into the mapping; each view's storage holds a shared_ptr to it, so the mapping lives until the
// last view is gone.
//
// Thread safety: immutable after open(); any thread may read bytes().
#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>

#include "core/error.h"

namespace omnirt::checkpoint {

class MappedFile {
  public:
    // Maps `path` read-only (private mapping). An empty file maps to an empty span.
    [[nodiscard]] static Result<std::shared_ptr<const MappedFile>> open(
        const std::filesystem::path& path);

    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    [[nodiscard]] std::span<const std::byte> bytes() const { return {data_, size_}; }
    [[nodiscard]] std::size_t size() const { return size_; }
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }
    // Asks the kernel to start reading [offset, offset + length) ahead of use (a hint; errors
    // are ignored).
    void prefetch(std::size_t offset, std::size_t length) const;

  private:
    MappedFile(std::filesystem::path path, const std::byte* data, std::size_t size);

    std::filesystem::path path_;
    const std::byte* data_;
    std::size_t size_;
};

}  // namespace omnirt::checkpoint
