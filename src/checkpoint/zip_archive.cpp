#include "checkpoint/zip_archive.h"

#include <algorithm>
#include <cstring>

namespace omnirt::checkpoint {
namespace {

constexpr std::uint32_t kEndOfDirectory = 0x06054b50;
constexpr std::uint32_t kZip64EndOfDirectory = 0x06064b50;
constexpr std::uint32_t kZip64Locator = 0x07064b50;
constexpr std::uint32_t kDirectoryHeader = 0x02014b50;
constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::size_t kEndOfDirectorySize = 22;
constexpr std::size_t kMaxComment = 0xFFFF;
constexpr std::uint16_t kZip64Extra = 0x0001;

// Little-endian reads inside a span, bounds-checked by the caller.
std::uint64_t read_le(std::span<const std::byte> bytes, std::size_t at, std::size_t width) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < width; ++i) {
        value |= static_cast<std::uint64_t>(bytes[at + i]) << (8 * i);
    }
    return value;
}

// A bounds-checked cursor over the file.
class Reader {
  public:
    Reader(std::span<const std::byte> bytes, std::string where)
        : bytes_(bytes), where_(std::move(where)) {}
    [[nodiscard]] bool fits(std::uint64_t at, std::uint64_t length) const {
        return at <= bytes_.size() && length <= bytes_.size() - at;
    }
    [[nodiscard]] Result<std::uint64_t> get(std::uint64_t at, std::size_t width) const {
        if (!fits(at, width)) return bad("a record runs past the end of the file");
        return read_le(bytes_, static_cast<std::size_t>(at), width);
    }
    [[nodiscard]] unexpected<Error> bad(const std::string& what) const {
        return fail(ErrorCode::invalid_argument, where_ + ": not a valid zip archive: " + what);
    }
    [[nodiscard]] std::span<const std::byte> bytes() const { return bytes_; }

  private:
    std::span<const std::byte> bytes_;
    std::string where_;
};

// The end of central directory record: searched backwards over the comment's maximum length.
Result<std::uint64_t> find_end_of_directory(const Reader& reader) {
    const std::size_t size = reader.bytes().size();
    if (size < kEndOfDirectorySize) return reader.bad("too short");
    const std::size_t lowest =
        size > kEndOfDirectorySize + kMaxComment ? size - kEndOfDirectorySize - kMaxComment : 0;
    for (std::size_t at = size - kEndOfDirectorySize + 1; at-- > lowest;) {
        if (read_le(reader.bytes(), at, 4) == kEndOfDirectory) return at;
    }
    return reader.bad("no end of central directory record");
}

}  // namespace

Result<std::unique_ptr<StoredZip>> StoredZip::open(std::shared_ptr<const MappedFile> file) {
    const Reader reader(file->bytes(), file->path().string());
    OMNI_TRY(std::uint64_t end, find_end_of_directory(reader));
    OMNI_TRY(std::uint64_t count, reader.get(end + 10, 2));
    OMNI_TRY(std::uint64_t directory_size, reader.get(end + 12, 4));
    OMNI_TRY(std::uint64_t directory_offset, reader.get(end + 16, 4));
    if (count == 0xFFFF || directory_size == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF) {
        // ZIP64: the locator sits right before the end record and points at the ZIP64 record.
        if (end < 20) return reader.bad("a ZIP64 archive without its locator");
        OMNI_TRY(std::uint64_t signature, reader.get(end - 20, 4));
        if (signature != kZip64Locator) return reader.bad("a ZIP64 archive without its locator");
        OMNI_TRY(std::uint64_t record, reader.get(end - 20 + 8, 8));
        OMNI_TRY(std::uint64_t record_signature, reader.get(record, 4));
        if (record_signature != kZip64EndOfDirectory) return reader.bad("no ZIP64 end record");
        OMNI_TRY(count, reader.get(record + 32, 8));
        OMNI_TRY(directory_size, reader.get(record + 40, 8));
        OMNI_TRY(directory_offset, reader.get(record + 48, 8));
    }
    if (!reader.fits(directory_offset, directory_size)) {
        return reader.bad("the central directory lies outside the file");
    }
    if (count > kMaxZipEntries) return reader.bad("more than 2^20 members");
    auto zip = std::unique_ptr<StoredZip>(new StoredZip(std::move(file)));
    std::uint64_t at = directory_offset;
    const std::uint64_t directory_end = directory_offset + directory_size;
    for (std::uint64_t i = 0; i < count; ++i) {
        if (at + 46 > directory_end) return reader.bad("the central directory is truncated");
        OMNI_TRY(std::uint64_t signature, reader.get(at, 4));
        if (signature != kDirectoryHeader) return reader.bad("a broken central directory header");
        Entry entry;
        OMNI_TRY(std::uint64_t flags, reader.get(at + 8, 2));
        OMNI_TRY(std::uint64_t method, reader.get(at + 10, 2));
        OMNI_TRY(entry.size, reader.get(at + 20, 4));
        OMNI_TRY(std::uint64_t uncompressed, reader.get(at + 24, 4));
        OMNI_TRY(std::uint64_t name_length, reader.get(at + 28, 2));
        OMNI_TRY(std::uint64_t extra_length, reader.get(at + 30, 2));
        OMNI_TRY(std::uint64_t comment_length, reader.get(at + 32, 2));
        OMNI_TRY(entry.header_offset, reader.get(at + 42, 4));
        entry.flags = static_cast<std::uint16_t>(flags);
        entry.method = static_cast<std::uint16_t>(method);
        const std::uint64_t name_at = at + 46;
        const std::uint64_t extra_at = name_at + name_length;
        const std::uint64_t next = extra_at + extra_length + comment_length;
        if (next > directory_end) return reader.bad("a central directory header runs past it");
        std::string name(reinterpret_cast<const char*>(reader.bytes().data() + name_at),
                         static_cast<std::size_t>(name_length));
        // ZIP64 extra field: the 64-bit values of the fields saturated above, in this order.
        for (std::uint64_t x = extra_at; x + 4 <= extra_at + extra_length;) {
            OMNI_TRY(std::uint64_t id, reader.get(x, 2));
            OMNI_TRY(std::uint64_t length, reader.get(x + 2, 2));
            if (x + 4 + length > extra_at + extra_length) return reader.bad("a broken extra field");
            if (id == kZip64Extra) {
                std::uint64_t field = x + 4;
                const std::uint64_t field_end = field + length;
                auto take = [&](std::uint64_t& value) -> Status {
                    if (field + 8 > field_end) return reader.bad("a short ZIP64 extra field");
                    OMNI_TRY(value, reader.get(field, 8));
                    field += 8;
                    return ok_status();
                };
                if (uncompressed == 0xFFFFFFFF) OMNI_RETURN_IF_ERROR(take(uncompressed));
                if (entry.size == 0xFFFFFFFF) OMNI_RETURN_IF_ERROR(take(entry.size));
                if (entry.header_offset == 0xFFFFFFFF) {
                    OMNI_RETURN_IF_ERROR(take(entry.header_offset));
                }
            }
            x += 4 + length;
        }
        if (entry.method == 0 && uncompressed != entry.size) {
            return reader.bad("the stored member '" + name + "' has two sizes");
        }
        if (zip->entries_.contains(name)) return reader.bad("the member '" + name + "' twice");
        zip->names_.push_back(name);
        zip->entries_.emplace(std::move(name), entry);
        at = next;
    }
    return zip;
}

bool StoredZip::contains(std::string_view name) const { return entries_.contains(name); }

Result<const StoredZip::Entry*> StoredZip::find(std::string_view name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
        return fail(ErrorCode::not_found,
                    file_->path().string() + ": no member '" + std::string(name) + "'");
    }
    if (it->second.method != 0 || (it->second.flags & 1) != 0) {
        return fail(ErrorCode::unimplemented, file_->path().string() + ": the member '" +
                                                  std::string(name) +
                                                  "' is compressed or encrypted (only stored "
                                                  "members are read)");
    }
    return &it->second;
}

Result<std::size_t> StoredZip::member_offset(std::string_view name) const {
    OMNI_TRY(const Entry* entry, find(name));
    const Reader reader(file_->bytes(), file_->path().string());
    OMNI_TRY(std::uint64_t signature, reader.get(entry->header_offset, 4));
    if (signature != kLocalHeader)
        return reader.bad("a broken local header of '" + std::string(name) + "'");
    OMNI_TRY(std::uint64_t name_length, reader.get(entry->header_offset + 26, 2));
    OMNI_TRY(std::uint64_t extra_length, reader.get(entry->header_offset + 28, 2));
    const std::uint64_t data = entry->header_offset + 30 + name_length + extra_length;
    if (!reader.fits(data, entry->size)) {
        return reader.bad("the member '" + std::string(name) + "' runs past the end of the file");
    }
    return static_cast<std::size_t>(data);
}

Result<std::span<const std::byte>> StoredZip::member(std::string_view name) const {
    OMNI_TRY(std::size_t offset, member_offset(name));
    OMNI_TRY(const Entry* entry, find(name));
    return file_->bytes().subspan(offset, static_cast<std::size_t>(entry->size));
}

}  // namespace omnirt::checkpoint
