// The safetensors header parser: a SAX handler that builds the tensor entries directly, so memory
// stays proportional to what a valid header describes, and any deviation stops the parse with a
// message naming the tensor and the rule.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "checkpoint/safetensors.h"

namespace omnirt::checkpoint {
namespace {

struct DTypeName {
    std::string_view name;
    DType dtype;
};
constexpr std::array<DTypeName, kDTypeCount> kDTypeNames = {{
    {"BOOL", DType::boolean},
    {"U8", DType::u8},
    {"I8", DType::i8},
    {"I16", DType::i16},
    {"I32", DType::i32},
    {"I64", DType::i64},
    {"F16", DType::f16},
    {"BF16", DType::bf16},
    {"F32", DType::f32},
    {"F64", DType::f64},
}};
// Dtypes of the format that omnirt has no DType for.
constexpr std::array<std::string_view, 11> kUnsupportedNames = {
    "U16", "U32",     "U64",     "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "F4",  "F6_E2M3", "F6_E3M2", "C64",     "C128"};

using json = nlohmann::json;

std::string quote(std::string_view text) { return json(std::string(text)).dump(); }

// Builds the entries while nlohmann's SAX parser walks the header.
class HeaderHandler final : public nlohmann::json_sax<json> {
  public:
    explicit HeaderHandler(std::uint64_t data_size) : data_size_(data_size) {}

    std::vector<TensorEntry> entries;
    std::map<std::string, std::string> metadata;
    std::optional<Error> error;

    bool null() override { return scalar("null"); }
    bool boolean(bool) override { return scalar("a boolean"); }
    bool number_integer(number_integer_t value) override {
        if (value < 0) return scalar("a negative number");
        return number_unsigned(static_cast<number_unsigned_t>(value));
    }
    bool number_unsigned(number_unsigned_t value) override {
        if (state_ == State::in_shape) {
            if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
                return entry_error("shape dimension " + std::to_string(value) + " is too large");
            }
            if (current_.shape.size() >= kMaxTensorDims) {
                return entry_error("shape has more than " + std::to_string(kMaxTensorDims) +
                                   " dimensions");
            }
            current_.shape.push_back(static_cast<std::int64_t>(value));
            return true;
        }
        if (state_ == State::in_offsets) {
            if (offsets_.size() >= 2) return entry_error("data_offsets must be [begin, end]");
            offsets_.push_back(value);
            return true;
        }
        return scalar("a number");
    }
    bool number_float(number_float_t, const string_t&) override {
        return scalar("a non-integer number");
    }
    bool binary(binary_t&) override { return scalar("binary data"); }
    bool string(string_t& value) override {
        if (state_ == State::metadata_value) {
            metadata[key_] = value;
            state_ = State::in_metadata;
            return true;
        }
        if (state_ == State::entry_dtype) {
            dtype_name_ = value;
            state_ = State::in_entry;
            return true;
        }
        return scalar("a string");
    }
    bool start_object(std::size_t) override {
        switch (state_) {
            case State::start:
                state_ = State::in_root;
                return true;
            case State::root_value:
                if (key_ == "__metadata__") {
                    state_ = State::in_metadata;
                } else {
                    state_ = State::in_entry;
                    current_ = TensorEntry{.name = key_};
                    seen_ = {};
                    dtype_name_.clear();
                    offsets_.clear();
                }
                return true;
            default:
                return scalar("an object");
        }
    }
    bool key(string_t& key) override {
        if (state_ == State::in_root) {
            if (!seen_names_.insert(key).second) {
                return fail_with(key == "__metadata__" ? "__metadata__ appears twice"
                                                       : "tensor " + quote(key) + " appears twice");
            }
            key_ = key;
            state_ = State::root_value;
            return true;
        }
        if (state_ == State::in_metadata) {
            key_ = key;
            state_ = State::metadata_value;
            return true;
        }
        if (state_ == State::in_entry) {
            std::size_t field = 0;
            if (key == "dtype") {
                field = 0;
                state_ = State::entry_dtype;
            } else if (key == "shape") {
                field = 1;
                state_ = State::entry_shape;
            } else if (key == "data_offsets") {
                field = 2;
                state_ = State::entry_offsets;
            } else {
                return entry_error("unexpected key " + quote(key) +
                                   " (an entry has dtype, shape and data_offsets)");
            }
            if (seen_[field]) return entry_error("key " + quote(key) + " appears twice");
            seen_[field] = true;
            return true;
        }
        return fail_with("internal: key outside an object");
    }
    bool end_object() override {
        if (state_ == State::in_metadata) {
            state_ = State::in_root;
            return true;
        }
        if (state_ == State::in_entry) {
            state_ = State::in_root;
            return finish_entry();
        }
        if (state_ == State::in_root) {
            state_ = State::done;
            return true;
        }
        return fail_with("internal: unbalanced object");
    }
    bool start_array(std::size_t) override {
        if (state_ == State::entry_shape) {
            state_ = State::in_shape;
            return true;
        }
        if (state_ == State::entry_offsets) {
            state_ = State::in_offsets;
            return true;
        }
        return scalar("an array");
    }
    bool end_array() override {
        if (state_ == State::in_shape || state_ == State::in_offsets) {
            state_ = State::in_entry;
            return true;
        }
        return fail_with("internal: unbalanced array");
    }
    bool parse_error(std::size_t, const std::string&,
                     const nlohmann::detail::exception& exception) override {
        if (!error)
            error = Error{ErrorCode::data_loss,
                          std::string("header is not valid JSON: ") + exception.what()};
        return false;
    }

  private:
    enum class State {
        start,           // before the root object
        in_root,         // a key or the end of the root object
        root_value,      // the value of a root key
        in_metadata,     // a key or the end of __metadata__
        metadata_value,  // a metadata string
        in_entry,        // a key or the end of a tensor entry
        entry_dtype,
        entry_shape,
        in_shape,
        entry_offsets,
        in_offsets,
        done,
    };

    bool fail_with(std::string message) {
        if (!error) error = Error{ErrorCode::data_loss, std::move(message)};
        return false;
    }
    bool entry_error(const std::string& message) {
        return fail_with("tensor " + quote(current_.name) + ": " + message);
    }
    // A value of the wrong kind for the current position.
    bool scalar(const char* what) {
        switch (state_) {
            case State::start:
                return fail_with(std::string("header must be a JSON object, not ") + what);
            case State::root_value:
                if (key_ == "__metadata__") {
                    return fail_with(std::string("__metadata__ must be an object, not ") + what);
                }
                return fail_with("tensor " + quote(key_) + ": entry must be an object, not " +
                                 what);
            case State::metadata_value:
                return fail_with("__metadata__ value of " + quote(key_) +
                                 " must be a string, not " + what);
            case State::entry_dtype:
                return entry_error(std::string("dtype must be a string, not ") + what);
            case State::entry_shape:
                return entry_error(std::string("shape must be an array, not ") + what);
            case State::in_shape:
                return entry_error(std::string("shape must hold non-negative integers, not ") +
                                   what);
            case State::entry_offsets:
            case State::in_offsets:
                return entry_error(std::string("data_offsets must be [begin, end] integers, not ") +
                                   what);
            default:
                return fail_with(std::string("unexpected ") + what + " in the header");
        }
    }

    bool finish_entry() {
        static constexpr const char* kFields[] = {"dtype", "shape", "data_offsets"};
        for (std::size_t i = 0; i < 3; ++i) {
            if (!seen_[i]) return entry_error(std::string("missing ") + kFields[i]);
        }
        auto dtype = parse_safetensors_dtype(dtype_name_);
        if (!dtype) {
            error = dtype.error().with_context("tensor " + quote(current_.name));
            return false;
        }
        current_.dtype = *dtype;
        if (offsets_.size() != 2) return entry_error("data_offsets must be [begin, end]");
        auto numel = checked_numel(current_.shape);
        if (!numel) return entry_error(numel.error().message);
        const unsigned __int128 nbytes = static_cast<unsigned __int128>(*numel) *
                                         static_cast<unsigned __int128>(element_size(*dtype));
        const std::uint64_t begin = offsets_[0];
        const std::uint64_t end = offsets_[1];
        const std::string range =
            "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
        if (begin > end) return entry_error(range + ": begin is after end");
        if (end > data_size_) {
            return entry_error(range + " reach past the data section (" +
                               std::to_string(data_size_) + " bytes)");
        }
        if (nbytes != end - begin) {
            std::string shape_text;
            for (std::int64_t d : current_.shape) {
                shape_text += (shape_text.empty() ? "" : ", ") + std::to_string(d);
            }
            return entry_error(range + " hold " + std::to_string(end - begin) +
                               " bytes but shape [" + shape_text + "] of " + dtype_name_ +
                               " needs " +
                               (nbytes > std::numeric_limits<std::uint64_t>::max()
                                    ? std::string("more than 2^64")
                                    : std::to_string(static_cast<std::uint64_t>(nbytes))));
        }
        current_.begin = begin;
        current_.end = end;
        entries.push_back(std::move(current_));
        return true;
    }

    std::uint64_t data_size_;
    State state_ = State::start;
    std::string key_;
    std::set<std::string, std::less<>> seen_names_;
    TensorEntry current_;
    std::array<bool, 3> seen_{};
    std::string dtype_name_;
    std::vector<std::uint64_t> offsets_;
};

Status check_tiling(const std::vector<TensorEntry>& entries, std::uint64_t data_size) {
    std::uint64_t expected = 0;
    const TensorEntry* previous = nullptr;
    for (const TensorEntry& entry : entries) {
        if (entry.begin < expected) {
            return fail(ErrorCode::data_loss,
                        "tensor " + quote(entry.name) + " (bytes " + std::to_string(entry.begin) +
                            ".." + std::to_string(entry.end) + ") overlaps " +
                            quote(previous->name) + " (bytes " + std::to_string(previous->begin) +
                            ".." + std::to_string(previous->end) + ")");
        }
        if (entry.begin > expected) {
            return fail(ErrorCode::data_loss,
                        "bytes " + std::to_string(expected) + ".." + std::to_string(entry.begin) +
                            " of the data section belong to no tensor (before " +
                            quote(entry.name) + "); holes are not allowed");
        }
        expected = entry.end;
        previous = &entry;
    }
    if (expected != data_size) {
        return fail(ErrorCode::data_loss, "the data section has " + std::to_string(data_size) +
                                              " bytes but its tensors cover " +
                                              std::to_string(expected) +
                                              " (bytes after the last tensor are not allowed)");
    }
    return ok_status();
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
    for (const auto& entry : kDTypeNames) {
        if (entry.dtype == dtype) return entry.name;
    }
    return "?";
}

Result<DType> parse_safetensors_dtype(std::string_view name) {
    for (const auto& entry : kDTypeNames) {
        if (entry.name == name) return entry.dtype;
    }
    if (std::find(kUnsupportedNames.begin(), kUnsupportedNames.end(), name) !=
        kUnsupportedNames.end()) {
        return fail(ErrorCode::unimplemented,
                    "safetensors dtype " + std::string(name) +
                        " is not supported (supported: BOOL, U8, I8, I16, I32, I64, F16, BF16, "
                        "F32, F64)");
    }
    return fail(ErrorCode::data_loss, "unknown safetensors dtype " + quote(name));
}

Result<SafetensorsHeader> parse_safetensors_header(std::span<const std::byte> file,
                                                   std::string_view file_name) {
    auto failure = [&](ErrorCode code, const std::string& message) {
        return fail(code, std::string(file_name) + ": " + message);
    };
    if (file.size() < 8) {
        return failure(ErrorCode::data_loss,
                       "not a safetensors file: " + std::to_string(file.size()) +
                           " bytes, shorter than the 8-byte header length");
    }
    std::uint64_t header_length = 0;
    for (int i = 7; i >= 0; --i) {
        header_length = (header_length << 8) | std::to_integer<std::uint64_t>(file[i]);
    }
    if (header_length > kMaxSafetensorsHeaderBytes) {
        return failure(ErrorCode::data_loss,
                       "header length " + std::to_string(header_length) + " exceeds the limit of " +
                           std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
    }
    if (header_length > file.size() - 8) {
        return failure(ErrorCode::data_loss,
                       "truncated: the header claims " + std::to_string(header_length) +
                           " bytes but only " + std::to_string(file.size() - 8) + " follow");
    }
    const char* header = reinterpret_cast<const char*>(file.data() + 8);
    if (header_length == 0 || header[0] != '{') {
        return failure(ErrorCode::data_loss, "header does not start with '{'");
    }
    SafetensorsHeader result;
    result.data_offset = 8 + header_length;
    result.data_size = file.size() - result.data_offset;
    HeaderHandler handler(result.data_size);
    bool parsed = false;
    try {
        parsed = json::sax_parse(header, header + header_length, &handler);
    } catch (const std::exception& exception) {
        return failure(ErrorCode::data_loss,
                       std::string("header is not valid JSON: ") + exception.what());
    }
    if (!parsed || handler.error) {
        Error error =
            handler.error.value_or(Error{ErrorCode::data_loss, "header is not valid JSON"});
        return fail(error.with_context(file_name));
    }
    result.tensors = std::move(handler.entries);
    result.metadata = std::move(handler.metadata);
    std::sort(result.tensors.begin(), result.tensors.end(),
              [](const TensorEntry& a, const TensorEntry& b) {
                  return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
              });
    Status tiled = check_tiling(result.tensors, result.data_size);
    if (!tiled) return fail(tiled.error().with_context(file_name));
    return result;
}

}  // namespace omnirt::checkpoint
