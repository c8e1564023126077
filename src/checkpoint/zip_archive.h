#pragma once
// StoredZip: the entries of a ZIP archive whose members are stored uncompressed, as
// torch.save's zip format writes them (a PyTorch checkpoint such as S2-Pro's codec.pth). Reads
// the central directory (ZIP64 too) of a mapped file and hands out each member's bytes as a span
// of the mapping. Written from the ZIP format (PKWARE APPNOTE): end of central directory record,
// ZIP64 locator and record, central directory headers, local headers.
//
// Every offset and size is checked against the file: a truncated or hostile archive is an
// invalid_argument error naming the file, never a read outside the mapping. Compressed and
// encrypted members are listed but their bytes are an unimplemented error.
//
// Thread safety: immutable after open(); any thread may read.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/mapped_file.h"
#include "core/error.h"

namespace omnirt::checkpoint {

inline constexpr std::size_t kMaxZipEntries = 1u << 20;

class StoredZip {
  public:
    [[nodiscard]] static Result<std::unique_ptr<StoredZip>> open(
        std::shared_ptr<const MappedFile> file);

    // Member names in central-directory order.
    [[nodiscard]] const std::vector<std::string>& names() const { return names_; }
    [[nodiscard]] bool contains(std::string_view name) const;
    // The bytes of a stored member; not_found for an unknown name, unimplemented for a
    // compressed or encrypted one.
    [[nodiscard]] Result<std::span<const std::byte>> member(std::string_view name) const;
    // Where a stored member's bytes start in the file.
    [[nodiscard]] Result<std::size_t> member_offset(std::string_view name) const;
    [[nodiscard]] const std::shared_ptr<const MappedFile>& file() const { return file_; }

  private:
    struct Entry {
        std::uint16_t method = 0;
        std::uint16_t flags = 0;
        std::uint64_t size = 0;           // compressed size (== size for stored members)
        std::uint64_t header_offset = 0;  // of the local header
    };
    explicit StoredZip(std::shared_ptr<const MappedFile> file) : file_(std::move(file)) {}
    [[nodiscard]] Result<const Entry*> find(std::string_view name) const;

    std::shared_ptr<const MappedFile> file_;
    std::vector<std::string> names_;
    std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace omnirt::checkpoint
