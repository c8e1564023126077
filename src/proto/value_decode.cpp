// Value decoding with msgpack-c's SAX parser (msgpack::parse with a visitor). The visitor builds
// the tree on an explicit stack, so nesting costs no native stack, and it checks every limit as
// soon as the parser announces an item, before anything is allocated for it.
#include <cstring>
#include <limits>
#include <new>
#include <optional>

#include <msgpack/unpack.hpp>  // msgpack::parse needs its unpack helpers
#include <msgpack/parse.hpp>

#include "proto/error_text.h"
#include "proto/value_codec.h"

namespace omnirt::proto {
namespace {

constexpr std::size_t kNoOffset = std::numeric_limits<std::size_t>::max();

class TreeBuilder {
public:
    TreeBuilder(const std::uint8_t* base, std::size_t size, const DecodeLimits& limits,
                bool placeholders)
        : base_(reinterpret_cast<const char*>(base)), size_(size), limits_(limits),
          placeholders_mode_(placeholders), reserve_budget_(size) {
        frames_.reserve(8);
    }

    // --- msgpack visitor interface (see msgpack/v2/null_visitor.hpp) ---
    bool visit_nil() { return begin_item(ValueKind::null) && emit(Value()); }
    bool visit_boolean(bool v) { return begin_item(ValueKind::boolean) && emit(Value(v)); }
    bool visit_positive_integer(std::uint64_t v) {
        if (!begin_item(ValueKind::integer)) return false;
        if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            return fail(ErrorCode::out_of_range,
                        "integer " + std::to_string(v) + " is out of int64 range");
        }
        return emit(Value(static_cast<std::int64_t>(v)));
    }
    bool visit_negative_integer(std::int64_t v) {
        return begin_item(ValueKind::integer) && emit(Value(v));
    }
    bool visit_float32(float v) { return begin_item(ValueKind::floating) && emit(Value(v)); }
    bool visit_float64(double v) { return begin_item(ValueKind::floating) && emit(Value(v)); }
    bool visit_str(const char* data, std::uint32_t size);
    bool visit_bin(const char* data, std::uint32_t size);
    bool visit_ext(const char* data, std::uint32_t size);
    bool start_array(std::uint32_t elements);
    bool start_map(std::uint32_t entries);
    bool start_array_item() { return true; }
    bool end_array_item() { return true; }
    bool start_map_key() {
        frames_.back().expecting_key = true;
        return true;
    }
    bool end_map_key() { return true; }
    bool start_map_value() {
        frames_.back().expecting_key = false;
        return true;
    }
    bool end_map_value() { return true; }
    bool end_array() { return end_container(); }
    bool end_map() { return end_container(); }
    void parse_error(std::size_t /*parsed*/, std::size_t error_offset) {
        bad_type_offset_ = error_offset;
    }
    void insufficient_bytes(std::size_t, std::size_t) { truncated_ = true; }
    bool referenced() const { return false; }
    void set_referenced(bool) {}

    // --- results ---
    [[nodiscard]] Error finish_error(bool parsed, std::size_t stop_offset) const;
    [[nodiscard]] bool failed() const { return error_.has_value(); }
    Value take_root() { return std::move(root_); }
    std::vector<TensorPlaceholder> take_placeholders() { return std::move(placeholders_); }

private:
    struct Frame {
        Value container;  // a List or a Map
        std::string key;  // map frames: the key of the value being decoded
        bool expecting_key = false;
    };

    bool fail(ErrorCode code, std::string message, std::size_t offset = kNoOffset) {
        error_ = Error{code, std::move(message)};
        error_offset_ = offset;
        return false;
    }
    std::size_t offset_of(const char* p) const { return static_cast<std::size_t>(p - base_); }
    // Counts an item and checks it may stand where it is; every visit starts here.
    bool begin_item(ValueKind kind);
    bool emit(Value value);
    bool start_container(std::uint32_t elements, bool is_map);
    bool end_container();
    bool decode_inline_tensor(const char* data, std::uint32_t size);
    bool decode_placeholder(const char* data, std::uint32_t size);
    TensorPath current_path() const;

    const char* base_;
    std::size_t size_;
    const DecodeLimits& limits_;
    bool placeholders_mode_;
    std::vector<Frame> frames_;
    Value root_;
    std::vector<TensorPlaceholder> placeholders_;
    std::optional<Error> error_;
    std::size_t error_offset_ = kNoOffset;
    std::size_t bad_type_offset_ = kNoOffset;
    bool truncated_ = false;
    std::uint64_t elements_ = 0;
    std::uint64_t tensors_ = 0;
    // A lower bound on the parser's position: every item takes at least one byte, and strings,
    // bytes and ext values tell their exact end. Bounds what a declared count may claim.
    std::size_t position_bound_ = 0;
    // List capacity (in elements) still allowed to be reserved up front; never more in all than
    // the input has bytes, so a lying count cannot make us allocate.
    std::size_t reserve_budget_;
};

bool TreeBuilder::begin_item(ValueKind kind) {
    if (++elements_ > limits_.max_total_elements) {
        return fail(ErrorCode::out_of_range,
                    "input holds more than " + std::to_string(limits_.max_total_elements) +
                        " values");
    }
    ++position_bound_;
    if (!frames_.empty() && frames_.back().expecting_key && kind != ValueKind::string) {
        return fail(ErrorCode::invalid_argument,
                    "map key is not a string (got " + std::string(to_string(kind)) + ")");
    }
    return true;
}

bool TreeBuilder::emit(Value value) {
    if (frames_.empty()) {
        root_ = std::move(value);
        return true;
    }
    Frame& frame = frames_.back();
    if (List* list = frame.container.if_list()) {
        list->push_back(std::move(value));
    } else {
        Map& map = *frame.container.if_map();
        map.emplace_hint(map.end(), std::move(frame.key), std::move(value));
    }
    return true;
}

bool TreeBuilder::visit_str(const char* data, std::uint32_t size) {
    if (!begin_item(ValueKind::string)) return false;
    // msgpack-c passes a null pointer for an empty fixstr.
    if (size == 0) data = "";
    const std::size_t at = size > 0 ? offset_of(data) : kNoOffset;
    if (size > 0) position_bound_ = at + size;
    if (size > limits_.max_string_bytes) {
        return fail(ErrorCode::out_of_range,
                    "string of " + std::to_string(size) + " bytes exceeds the limit of " +
                        std::to_string(limits_.max_string_bytes),
                    at);
    }
    if (!frames_.empty() && frames_.back().expecting_key) {
        Frame& frame = frames_.back();
        std::string_view key(data, size);
        if (frame.container.if_map()->contains(key)) {
            return fail(ErrorCode::invalid_argument, "duplicate map key " + detail::quote(key), at);
        }
        frame.key.assign(data, size);
        return true;
    }
    return emit(Value(std::string(data, size)));
}

bool TreeBuilder::visit_bin(const char* data, std::uint32_t size) {
    if (!begin_item(ValueKind::bytes)) return false;
    if (size > 0) position_bound_ = offset_of(data) + size;
    if (size > limits_.max_bytes_bytes) {
        return fail(ErrorCode::out_of_range,
                    "bytes value of " + std::to_string(size) + " bytes exceeds the limit of " +
                        std::to_string(limits_.max_bytes_bytes),
                    offset_of(data));
    }
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(data);
    return emit(Value(Bytes{std::vector<std::uint8_t>(bytes, bytes + size)}));
}

bool TreeBuilder::visit_ext(const char* data, std::uint32_t size) {
    // `data` points at the ext type byte; `size` counts it (msgpack-c's convention).
    if (!begin_item(ValueKind::tensor)) return false;
    position_bound_ = offset_of(data) + size;
    if (size == 0) return fail(ErrorCode::data_loss, "ext value without a type byte");
    if (++tensors_ > limits_.max_tensors) {
        return fail(ErrorCode::out_of_range, "input holds more than " +
                                                 std::to_string(limits_.max_tensors) + " tensors");
    }
    const auto type = static_cast<std::int8_t>(data[0]);
    if (type == kInlineTensorExtType && !placeholders_mode_) {
        return decode_inline_tensor(data + 1, size - 1);
    }
    if (type == kPlaceholderExtType && placeholders_mode_) {
        return decode_placeholder(data + 1, size - 1);
    }
    if (type == kInlineTensorExtType || type == kPlaceholderExtType) {
        return fail(ErrorCode::invalid_argument,
                    placeholders_mode_ ? "inline tensor where only tensor placeholders are allowed"
                                       : "tensor placeholder where only inline tensors are allowed",
                    offset_of(data));
    }
    return fail(ErrorCode::invalid_argument,
                "unsupported msgpack ext type " + std::to_string(type), offset_of(data));
}

bool TreeBuilder::decode_inline_tensor(const char* data, std::uint32_t size) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(data);
    const std::size_t at = offset_of(data);
    if (size < 2) return fail(ErrorCode::invalid_argument, "inline tensor header is truncated", at);
    auto dtype = dtype_from_code(p[0]);
    if (!dtype.has_value()) {
        return fail(ErrorCode::invalid_argument, "inline tensor: " + dtype.error().message, at);
    }
    const std::size_t ndim = p[1];
    if (ndim > kMaxTensorDims) {
        return fail(ErrorCode::invalid_argument,
                    "inline tensor has " + std::to_string(ndim) + " dimensions; at most " +
                        std::to_string(kMaxTensorDims) + " are allowed",
                    at);
    }
    const std::size_t header = 2 + 8 * ndim;
    if (size < header) return fail(ErrorCode::invalid_argument, "inline tensor shape is truncated", at);
    Shape shape(ndim);
    for (std::size_t d = 0; d < ndim; ++d) {
        std::uint64_t bits = 0;
        for (int byte = 0; byte < 8; ++byte) {
            bits |= static_cast<std::uint64_t>(p[2 + 8 * d + byte]) << (8 * byte);
        }
        shape[d] = static_cast<std::int64_t>(bits);
    }
    auto numel = checked_numel(shape);
    if (!numel.has_value()) {
        return fail(ErrorCode::invalid_argument, "inline tensor: " + numel.error().message, at);
    }
    const std::uint64_t element = element_size(*dtype);
    const std::uint64_t body = size - header;
    if (static_cast<std::uint64_t>(*numel) > body / element || *numel * element != body) {
        return fail(ErrorCode::invalid_argument,
                    "inline tensor of " + std::to_string(*numel) + " " +
                        std::string(to_string(*dtype)) + " elements carries " +
                        std::to_string(body) + " data bytes",
                    at);
    }
    if (body > limits_.max_tensor_bytes) {
        return fail(ErrorCode::out_of_range,
                    "tensor of " + std::to_string(body) + " bytes exceeds the limit of " +
                        std::to_string(limits_.max_tensor_bytes),
                    at);
    }
    const std::uint8_t* elements = p + header;
    if (*dtype == DType::boolean) {
        for (std::uint64_t i = 0; i < body; ++i) {
            if (elements[i] > 1) {
                return fail(ErrorCode::invalid_argument,
                            "bool tensor holds the byte " + std::to_string(elements[i]), at);
            }
        }
    }
    auto tensor = Tensor::empty(std::move(shape), *dtype);
    if (!tensor.has_value()) return fail(tensor.error().code, tensor.error().message, at);
    if (body > 0) std::memcpy(tensor->mutable_data(), elements, body);
    return emit(Value(std::move(*tensor)));
}

bool TreeBuilder::decode_placeholder(const char* data, std::uint32_t size) {
    // The body is one msgpack unsigned integer (any width) spanning the whole ext value.
    const auto* p = reinterpret_cast<const std::uint8_t*>(data);
    std::uint64_t index = 0;
    bool valid = false;
    if (size == 1 && p[0] <= 0x7f) {
        index = p[0];
        valid = true;
    } else if (size >= 1 && p[0] >= 0xcc && p[0] <= 0xcf) {
        const std::size_t width = std::size_t{1} << (p[0] - 0xcc);
        valid = size == 1 + width;
        for (std::size_t i = 0; valid && i < width; ++i) index = (index << 8) | p[1 + i];
    }
    if (!valid) {
        return fail(ErrorCode::invalid_argument,
                    "tensor placeholder does not hold a msgpack unsigned integer",
                    offset_of(data));
    }
    placeholders_.push_back(TensorPlaceholder{index, current_path()});
    return emit(Value());
}

TensorPath TreeBuilder::current_path() const {
    TensorPath path;
    path.reserve(frames_.size());
    for (const Frame& frame : frames_) {
        if (const List* list = frame.container.if_list()) {
            path.emplace_back(static_cast<std::int64_t>(list->size()));
        } else {
            path.emplace_back(frame.key);
        }
    }
    return path;
}

bool TreeBuilder::start_container(std::uint32_t elements, bool is_map) {
    if (!begin_item(is_map ? ValueKind::map : ValueKind::list)) return false;
    const char* kind = is_map ? "map" : "list";
    if (frames_.size() >= limits_.max_depth) {
        return fail(ErrorCode::out_of_range, std::string(kind) + " nested deeper than " +
                                                 std::to_string(limits_.max_depth) + " levels");
    }
    // Each element needs at least one byte (a map entry two): a count the rest of the input
    // cannot hold means truncated or corrupt input, found before allocating anything.
    const std::uint64_t needed = static_cast<std::uint64_t>(elements) * (is_map ? 2 : 1);
    const std::size_t remaining = size_ - std::min(position_bound_, size_);
    if (needed > remaining) {
        return fail(ErrorCode::data_loss,
                    "truncated input: " + std::string(kind) + " declares " +
                        std::to_string(elements) + (is_map ? " entries" : " elements") +
                        " but at most " + std::to_string(remaining) + " bytes remain");
    }
    if (elements > limits_.max_container_elements) {
        return fail(ErrorCode::out_of_range,
                    std::string(kind) + " of " + std::to_string(elements) +
                        (is_map ? " entries" : " elements") + " exceeds the limit of " +
                        std::to_string(limits_.max_container_elements));
    }
    Frame frame;
    if (is_map) {
        frame.container = Value(Map{});
    } else {
        List list;
        const std::size_t reserve = std::min<std::size_t>(elements, reserve_budget_);
        reserve_budget_ -= reserve;
        list.reserve(reserve);
        frame.container = Value(std::move(list));
    }
    frames_.push_back(std::move(frame));
    return true;
}

bool TreeBuilder::start_array(std::uint32_t elements) { return start_container(elements, false); }
bool TreeBuilder::start_map(std::uint32_t entries) { return start_container(entries, true); }

bool TreeBuilder::end_container() {
    Value done = std::move(frames_.back().container);
    frames_.pop_back();
    return emit(std::move(done));
}

Error TreeBuilder::finish_error(bool parsed, std::size_t stop_offset) const {
    auto at = [](std::size_t offset) { return " at byte offset " + std::to_string(offset); };
    if (error_.has_value()) {
        // msgpack-c (v3 API) stops on the last byte of the item's header (or of a fixed-size
        // item), so the offset always points inside the offending item.
        std::size_t offset = error_offset_ != kNoOffset ? error_offset_ : stop_offset;
        return Error{error_->code, error_->message + at(offset)};
    }
    if (bad_type_offset_ != kNoOffset) {
        std::string byte = "?";
        if (bad_type_offset_ < size_) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x",
                          static_cast<unsigned char>(base_[bad_type_offset_]));
            byte = hex;
        }
        return Error{ErrorCode::data_loss,
                     "invalid msgpack type byte " + byte + at(bad_type_offset_)};
    }
    if (parsed) {
        return Error{ErrorCode::data_loss, "trailing bytes after value: the value ends at byte " +
                                               std::to_string(stop_offset) + " of " +
                                               std::to_string(size_)};
    }
    if (size_ == 0) return Error{ErrorCode::data_loss, "truncated input: no bytes"};
    return Error{ErrorCode::data_loss, "truncated input: " + std::to_string(size_) +
                                           " bytes end inside a value" + at(stop_offset)};
}

Result<TreeBuilder*> run_parser(TreeBuilder& builder, std::span<const std::uint8_t> bytes,
                                const DecodeLimits& limits) {
    if (bytes.size() > limits.max_total_bytes) {
        return fail(ErrorCode::out_of_range, "input of " + std::to_string(bytes.size()) +
                                                 " bytes exceeds the limit of " +
                                                 std::to_string(limits.max_total_bytes));
    }
    std::size_t offset = 0;
    bool parsed = false;
    try {
        parsed = msgpack::parse(reinterpret_cast<const char*>(bytes.data()), bytes.size(), offset,
                                builder);
    } catch (const std::bad_alloc&) {
        return fail(ErrorCode::resource_exhausted, "out of memory while decoding");
    } catch (const std::exception& e) {
        return fail(ErrorCode::data_loss, std::string("malformed msgpack: ") + e.what());
    }
    if (builder.failed() || !parsed || offset != bytes.size()) {
        return fail(builder.finish_error(parsed, offset));
    }
    return &builder;
}

}  // namespace

Result<Value> decode_value(std::span<const std::uint8_t> bytes, const DecodeLimits& limits) {
    TreeBuilder builder(bytes.data(), bytes.size(), limits, /*placeholders=*/false);
    OMNI_TRY(TreeBuilder * done, run_parser(builder, bytes, limits));
    return done->take_root();
}

Result<DecodedValue> decode_value_with_placeholders(std::span<const std::uint8_t> bytes,
                                                    const DecodeLimits& limits) {
    TreeBuilder builder(bytes.data(), bytes.size(), limits, /*placeholders=*/true);
    OMNI_TRY(TreeBuilder * done, run_parser(builder, bytes, limits));
    return DecodedValue{done->take_root(), done->take_placeholders()};
}

}  // namespace omnirt::proto
