#pragma once
// Internal to proto/: a msgpack writer over a growable byte vector, shared by the value,
// message and payload encoders. Not part of the public API (it exposes no msgpack type, but its
// behaviour is an implementation detail).
//
// Errors are sticky: the first failing call (an over-long string, an undefined tensor, ...)
// records an Error, later calls still run but the output is garbage; check status() at the end.
// This keeps encoders free of per-field error plumbing on the hot path.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/value.h"
#include "proto/value_codec.h"

namespace omnirt::proto::detail {

class WireWriter {
  public:
    // Appends to `out`, which must outlive the writer.
    explicit WireWriter(std::vector<std::uint8_t>& out) : out_(&out) {}

    void map_header(std::size_t entries);
    void list_header(std::size_t elements);
    void str(std::string_view text);
    void bin(std::span<const std::uint8_t> bytes);
    void integer(std::int64_t number);
    void boolean(bool flag);
    void nil();
    void float64(double number);
    // `key` then `text`: the common case of a string field.
    void field(std::string_view key, std::string_view text) {
        str(key);
        str(text);
    }

    // Writes `value`. Tensors are written inline when `collected` is null; otherwise they are
    // appended to *collected and written as placeholders, their paths rooted at `base_path`.
    void value(const Value& value, std::vector<CollectedTensor>* collected = nullptr,
               const TensorPath& base_path = {});

    [[nodiscard]] bool ok() const { return error_ == nullptr; }
    // ok_status() or the first error.
    [[nodiscard]] Status status() const;
    void set_error(ErrorCode code, std::string message);

  private:
    struct PathStep {
        const std::string* key;  // null for a list index
        std::int64_t index;
    };
    void write(const void* data, std::size_t size);
    void value_at(const Value& value, std::vector<CollectedTensor>* collected,
                  std::vector<PathStep>& path, const TensorPath& base_path);
    void inline_tensor(const Tensor& tensor);
    void placeholder(const Tensor& tensor, std::vector<CollectedTensor>& collected,
                     const std::vector<PathStep>& path, const TensorPath& base_path);
    void ext_header(std::uint32_t size, std::int8_t type);

    std::vector<std::uint8_t>* out_;
    std::unique_ptr<Error> error_;  // first error; a pointer keeps the writer small
};

}  // namespace omnirt::proto::detail
