#include "checkpoint/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "checkpoint/safetensors.h"

namespace omnirt::checkpoint {
namespace {

constexpr std::size_t kChunkBytes = 8u << 20;

// An output file written under a temporary name, renamed by commit(), removed otherwise.
class PendingFile {
  public:
    static Result<PendingFile> create(const std::filesystem::path& path) {
        PendingFile file;
        file.path_ = path;
        file.temporary_ = path;
        file.temporary_ += ".partial";
        file.fd_ = ::open(file.temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (file.fd_ < 0) return fail(file.os_error("cannot create"));
        return file;
    }
    PendingFile() = default;
    PendingFile(PendingFile&& other) noexcept { *this = std::move(other); }
    PendingFile& operator=(PendingFile&& other) noexcept {
        std::swap(path_, other.path_);
        std::swap(temporary_, other.temporary_);
        std::swap(fd_, other.fd_);
        return *this;
    }
    ~PendingFile() {
        if (fd_ >= 0) {
            ::close(fd_);
            std::error_code ignored;
            std::filesystem::remove(temporary_, ignored);
        }
    }

    Status write(std::span<const std::byte> bytes) {
        while (!bytes.empty()) {
            ssize_t written =
                ::write(fd_, bytes.data(), std::min<std::size_t>(bytes.size(), 1u << 30));
            if (written < 0) {
                if (errno == EINTR) continue;
                return fail(os_error("cannot write"));
            }
            bytes = bytes.subspan(static_cast<std::size_t>(written));
        }
        return ok_status();
    }

    Status commit() {
        int fd = std::exchange(fd_, -1);
        if (::close(fd) != 0) {
            Error error = os_error("cannot write");
            std::error_code ignored;
            std::filesystem::remove(temporary_, ignored);
            return fail(error);
        }
        std::error_code error;
        std::filesystem::rename(temporary_, path_, error);
        if (error) {
            std::filesystem::remove(temporary_, error);
            return fail(ErrorCode::unavailable,
                        path_.string() + ": cannot rename into place: " + error.message());
        }
        return ok_status();
    }

  private:
    Error os_error(const char* what) const {
        const int error_number = errno;
        return Error{
            error_number == ENOSPC ? ErrorCode::resource_exhausted : ErrorCode::unavailable,
            path_.string() + ": " + what + ": " + std::strerror(error_number)};
    }

    std::filesystem::path path_;
    std::filesystem::path temporary_;
    int fd_ = -1;
};

Result<std::uint64_t> source_bytes(const TensorSource& source) {
    OMNI_TRY(std::int64_t numel, checked_numel(source.shape));
    const std::uint64_t size = element_size(source.dtype);
    if (static_cast<std::uint64_t>(numel) > std::numeric_limits<std::uint64_t>::max() / size) {
        return fail(ErrorCode::out_of_range, "tensor byte size overflows");
    }
    return static_cast<std::uint64_t>(numel) * size;
}

Status validate_sources(const std::vector<TensorSource>& tensors) {
    std::set<std::string_view> names;
    for (const TensorSource& source : tensors) {
        auto label = [&](std::string message) {
            return fail(ErrorCode::invalid_argument,
                        "tensor '" + source.name + "': " + std::move(message));
        };
        if (source.name.empty()) return fail(ErrorCode::invalid_argument, "a tensor name is empty");
        if (source.name == "__metadata__") return label("the name is reserved by the format");
        if (!names.insert(source.name).second) return label("the name appears twice");
        auto bytes = source_bytes(source);
        if (!bytes) return label(bytes.error().message);
        if (source.tensor.defined()) {
            if (source.tensor.dtype() != source.dtype || source.tensor.shape() != source.shape) {
                return label("the tensor's dtype or shape differs from the declared one");
            }
            if (!source.tensor.device().is_cpu()) return label("only host tensors can be written");
        } else if (!source.fill) {
            return label("neither a tensor nor a fill function is given");
        }
    }
    return ok_status();
}

}  // namespace

std::uint64_t TensorSource::nbytes() const {
    auto bytes = source_bytes(*this);
    return bytes ? *bytes : 0;
}

TensorSource tensor_source(std::string name, Tensor tensor) {
    TensorSource source{.name = std::move(name), .dtype = tensor.dtype(), .shape = tensor.shape()};
    source.tensor = std::move(tensor);
    return source;
}

Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<TensorSource>& tensors, const WriteOptions& options) {
    auto label = [&](const Error& error) { return fail(error.with_context(path.string())); };
    if (Status valid = validate_sources(tensors); !valid) return label(valid.error());

    // File order: largest element size first, then by name.
    std::vector<std::size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const std::size_t size_a = element_size(tensors[a].dtype);
        const std::size_t size_b = element_size(tensors[b].dtype);
        return size_a != size_b ? size_a > size_b : tensors[a].name < tensors[b].name;
    });
    nlohmann::json header = nlohmann::json::object();
    if (!options.metadata.empty()) header["__metadata__"] = options.metadata;
    std::uint64_t offset = 0;
    std::uint64_t largest_fill = 0;
    for (std::size_t index : order) {
        const TensorSource& source = tensors[index];
        const std::uint64_t bytes = source.nbytes();
        header[source.name] = {{"dtype", safetensors_dtype_name(source.dtype)},
                               {"shape", source.shape},
                               {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
        if (!source.tensor.defined()) largest_fill = std::max(largest_fill, bytes);
    }
    std::string header_text = header.dump();
    header_text.append((8 - (8 + header_text.size()) % 8) % 8, ' ');

    OMNI_TRY(PendingFile file, PendingFile::create(path));
    std::byte length[8];
    for (int i = 0; i < 8; ++i) {
        length[i] = static_cast<std::byte>((header_text.size() >> (8 * i)) & 0xFF);
    }
    OMNI_RETURN_IF_ERROR(file.write(length));
    OMNI_RETURN_IF_ERROR(file.write(std::as_bytes(std::span(header_text))));

    Progress progress{.bytes_total = offset, .tensors_total = tensors.size()};
    if (options.progress) options.progress(progress);
    // A multiple of 8, so every chunk but a tensor's last holds whole elements.
    std::vector<std::byte> chunk(
        static_cast<std::size_t>(std::min<std::uint64_t>((largest_fill + 7) / 8 * 8, kChunkBytes)));
    for (std::size_t index : order) {
        const TensorSource& source = tensors[index];
        const std::uint64_t bytes = source.nbytes();
        if (source.tensor.defined()) {
            auto dense = source.tensor.contiguous();
            if (!dense) return label(dense.error());
            if (bytes > 0) OMNI_RETURN_IF_ERROR(file.write({dense->data(), bytes}));
        } else {
            for (std::uint64_t done = 0; done < bytes;) {
                const std::size_t step =
                    static_cast<std::size_t>(std::min<std::uint64_t>(bytes - done, chunk.size()));
                std::span<std::byte> part(chunk.data(), step);
                Status filled = source.fill(done, part);
                if (!filled)
                    return label(filled.error().with_context("tensor '" + source.name + "'"));
                OMNI_RETURN_IF_ERROR(file.write(part));
                done += step;
            }
        }
        progress.bytes_done += bytes;
        ++progress.tensors_done;
        if (options.progress) options.progress(progress);
    }
    return file.commit();
}

Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const WriteOptions& options) {
    std::vector<TensorSource> sources;
    sources.reserve(tensors.size());
    for (const auto& [name, tensor] : tensors) {
        if (!tensor.defined()) {
            return fail(ErrorCode::invalid_argument,
                        path.string() + ": tensor '" + name + "' is undefined");
        }
        sources.push_back(tensor_source(name, tensor));
    }
    return write_safetensors(path, sources, options);
}

Result<WrittenFiles> write_sharded_safetensors(const std::filesystem::path& directory,
                                               const std::vector<TensorSource>& tensors,
                                               const ShardedWriteOptions& options) {
    if (options.max_shard_bytes == 0) {
        return fail(ErrorCode::invalid_argument, "max_shard_bytes must be positive");
    }
    if (Status valid = validate_sources(tensors); !valid) return fail(valid.error());
    // Greedy assignment in the given order.
    std::vector<std::vector<std::size_t>> shards;
    std::uint64_t current = 0;
    WrittenFiles written{.tensor_count = tensors.size()};
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const std::uint64_t bytes = tensors[i].nbytes();
        if (shards.empty() ||
            (!shards.back().empty() && current + bytes > options.max_shard_bytes)) {
            shards.emplace_back();
            current = 0;
        }
        shards.back().push_back(i);
        current += bytes;
        written.tensor_bytes += bytes;
    }
    if (shards.empty()) shards.emplace_back();
    written.sharded = shards.size() > 1;

    Progress overall{.bytes_total = written.tensor_bytes, .tensors_total = tensors.size()};
    nlohmann::json weight_map = nlohmann::json::object();
    for (std::size_t s = 0; s < shards.size(); ++s) {
        std::string file_name = options.base_name + ".safetensors";
        if (written.sharded) {
            char numbered[64];
            std::snprintf(numbered, sizeof(numbered), "-%05zu-of-%05zu.safetensors", s + 1,
                          shards.size());
            file_name = options.base_name + numbered;
        }
        std::vector<TensorSource> shard;
        std::uint64_t shard_bytes = 0;
        for (std::size_t index : shards[s]) {
            shard.push_back(tensors[index]);
            shard_bytes += tensors[index].nbytes();
            weight_map[tensors[index].name] = file_name;
        }
        WriteOptions shard_options{.metadata = options.metadata};
        if (options.progress) {
            const Progress before = overall;
            shard_options.progress = [&options, before](const Progress& inner) {
                Progress combined = before;
                combined.bytes_done += inner.bytes_done;
                combined.tensors_done += inner.tensors_done;
                options.progress(combined);
            };
        }
        OMNI_RETURN_IF_ERROR(write_safetensors(directory / file_name, shard, shard_options));
        overall.bytes_done += shard_bytes;
        overall.tensors_done += shard.size();
        written.files.push_back(directory / file_name);
    }
    if (written.sharded) {
        nlohmann::json index = {{"metadata", {{"total_size", written.tensor_bytes}}},
                                {"weight_map", std::move(weight_map)}};
        const std::filesystem::path index_path =
            directory / (options.base_name + ".safetensors.index.json");
        OMNI_TRY(PendingFile file, PendingFile::create(index_path));
        std::string text = index.dump(2) + "\n";
        OMNI_RETURN_IF_ERROR(file.write(std::as_bytes(std::span(text))));
        OMNI_RETURN_IF_ERROR(file.commit());
        written.files.push_back(index_path);
    }
    return written;
}

}  // namespace omnirt::checkpoint
