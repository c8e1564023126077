// parse_dom: msgpack-c's SAX parser (msgpack::parse with a visitor) builds the flat Dom. The
// visitor checks every limit as soon as the parser announces an item, before anything is
// allocated for it; nesting costs no native stack.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <unordered_set>

#include <msgpack/parse.hpp>
#include <msgpack/unpack.hpp>  // msgpack::parse needs its unpack helpers

#include "proto/error_text.h"
#include "proto/tensor_ext.h"
#include "proto/value_codec.h"
#include "proto/wire_dom.h"

namespace omnirt::proto::detail {
namespace {

constexpr std::size_t kNoOffset = std::numeric_limits<std::size_t>::max();

class DomBuilder {
  public:
    DomBuilder(std::span<const std::uint8_t> input, const DecodeLimits& limits, TensorMode mode)
        : base_(reinterpret_cast<const char*>(input.data())),
          size_(input.size()),
          limits_(limits),
          max_depth_(std::min(limits.max_depth, kMaxSupportedDepth)),
          max_elements_(std::min<std::uint64_t>(limits.max_total_elements,
                                                std::numeric_limits<std::uint32_t>::max() - 1)),
          mode_(mode) {
        nodes_.reserve(std::min<std::size_t>(size_ / 4 + 8, 1024));
    }

    // --- msgpack visitor interface (see msgpack/v2/null_visitor.hpp) ---
    bool visit_nil() { return leaf(NodeKind::null); }
    bool visit_boolean(bool v) {
        if (!leaf(NodeKind::boolean)) return false;
        nodes_.back().boolean = v;
        return true;
    }
    bool visit_positive_integer(std::uint64_t v) {
        if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            return begin_item(NodeKind::integer) &&
                   fail(ErrorCode::out_of_range,
                        "integer " + std::to_string(v) + " is out of int64 range");
        }
        return visit_negative_integer(static_cast<std::int64_t>(v));
    }
    bool visit_negative_integer(std::int64_t v) {
        if (!leaf(NodeKind::integer)) return false;
        nodes_.back().number.integer = v;
        return true;
    }
    bool visit_float32(float v) { return visit_float64(v); }
    bool visit_float64(double v) {
        if (!leaf(NodeKind::floating)) return false;
        nodes_.back().number.floating = v;
        return true;
    }
    bool visit_str(const char* data, std::uint32_t size);
    bool visit_bin(const char* data, std::uint32_t size);
    bool visit_ext(const char* data, std::uint32_t size);
    bool start_array(std::uint32_t elements) { return start_container(elements, NodeKind::list); }
    bool start_map(std::uint32_t entries) { return start_container(entries, NodeKind::map); }
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
    void insufficient_bytes(std::size_t, std::size_t) {}
    bool referenced() const { return false; }
    void set_referenced(bool) {}

    [[nodiscard]] bool failed() const { return error_.has_value(); }
    [[nodiscard]] Error finish_error(bool parsed, std::size_t stop_offset) const;
    std::vector<Node> take_nodes() { return std::move(nodes_); }

  private:
    struct Frame {
        std::uint32_t node = 0;
        std::uint32_t last_key = 0;  // node of the previous key (maps with entries)
        std::uint32_t keys = 0;      // keys accepted so far
        bool expecting_key = false;
        bool sorted = true;  // every key so far was greater than the one before
        // Keys seen so far; built only for large maps whose keys arrive out of order.
        std::unique_ptr<std::unordered_set<std::string_view>> seen;
    };

    bool fail(ErrorCode code, std::string message, std::size_t offset = kNoOffset) {
        error_ = Error{code, std::move(message)};
        error_offset_ = offset;
        return false;
    }
    std::size_t offset_of(const char* p) const { return static_cast<std::size_t>(p - base_); }
    bool begin_item(NodeKind kind);
    bool leaf(NodeKind kind) {
        if (!begin_item(kind)) return false;
        nodes_.push_back(Node{.kind = kind});
        return true;
    }
    bool accept_key(std::string_view key, std::size_t at);
    bool start_container(std::uint32_t elements, NodeKind kind);
    bool end_container();

    const char* base_;
    std::size_t size_;
    const DecodeLimits& limits_;
    std::uint32_t max_depth_;
    std::uint64_t max_elements_;
    TensorMode mode_;
    std::vector<Node> nodes_;
    std::vector<Frame> frames_;
    std::optional<Error> error_;
    std::size_t error_offset_ = kNoOffset;
    std::size_t bad_type_offset_ = kNoOffset;
    std::uint64_t tensors_ = 0;
    // A lower bound on the parser's position: every item takes at least one byte, and strings,
    // bytes and ext values tell their exact end. A declared count the rest of the input cannot
    // hold is refused before anything is allocated for it.
    std::size_t position_bound_ = 0;
};

bool DomBuilder::begin_item(NodeKind kind) {
    if (nodes_.size() >= max_elements_) {
        return fail(ErrorCode::out_of_range,
                    "input holds more than " + std::to_string(max_elements_) + " values");
    }
    ++position_bound_;
    if (!frames_.empty() && frames_.back().expecting_key && kind != NodeKind::string) {
        return fail(ErrorCode::invalid_argument,
                    "map key is not a string (got " + std::string(kind_name(kind)) + ")");
    }
    return true;
}

bool DomBuilder::accept_key(std::string_view key, std::size_t at) {
    Frame& frame = frames_.back();
    auto text = [this](std::uint32_t i) {
        return std::string_view(base_ + nodes_[i].offset, nodes_[i].length);
    };
    // While a map's keys arrive in order (omnirt's encoders write Value maps that way), one
    // comparison with the previous key proves a key new. Otherwise small maps are scanned and
    // large ones get a set of their keys, so no input costs quadratic time.
    constexpr std::uint32_t kScanLimit = 16;
    bool duplicate = false;
    if (frame.keys > 0 && frame.sorted && !(text(frame.last_key) < key)) frame.sorted = false;
    if (!frame.sorted && !frame.seen && frame.keys >= kScanLimit) {
        frame.seen = std::make_unique<std::unordered_set<std::string_view>>();
        for (std::uint32_t i = frame.node + 1; i < nodes_.size(); i += 1 + nodes_[i + 1].subtree) {
            frame.seen->insert(text(i));
        }
    }
    if (frame.seen) {
        duplicate = !frame.seen->insert(key).second;
    } else if (!frame.sorted) {
        for (std::uint32_t i = frame.node + 1; i < nodes_.size() && !duplicate;
             i += 1 + nodes_[i + 1].subtree) {
            duplicate = text(i) == key;
        }
    }
    if (duplicate) return fail(ErrorCode::invalid_argument, "duplicate map key " + quote(key), at);
    ++frame.keys;
    frame.last_key = static_cast<std::uint32_t>(nodes_.size());
    return true;
}

bool DomBuilder::visit_str(const char* data, std::uint32_t size) {
    if (!begin_item(NodeKind::string)) return false;
    // msgpack-c passes a null pointer for an empty fixstr.
    const std::size_t at = size > 0 ? offset_of(data) : 0;
    if (size > 0) position_bound_ = at + size;
    if (size > limits_.max_string_bytes) {
        return fail(ErrorCode::out_of_range,
                    "string of " + std::to_string(size) + " bytes exceeds the limit of " +
                        std::to_string(limits_.max_string_bytes),
                    at);
    }
    if (!frames_.empty() && frames_.back().expecting_key &&
        !accept_key(std::string_view(size > 0 ? data : "", size), size > 0 ? at : kNoOffset)) {
        return false;
    }
    nodes_.push_back(Node{.kind = NodeKind::string, .length = size, .offset = at});
    return true;
}

bool DomBuilder::visit_bin(const char* data, std::uint32_t size) {
    if (!begin_item(NodeKind::bytes)) return false;
    const std::size_t at = size > 0 ? offset_of(data) : 0;
    if (size > 0) position_bound_ = at + size;
    if (size > limits_.max_bytes_bytes) {
        return fail(ErrorCode::out_of_range,
                    "bytes value of " + std::to_string(size) + " bytes exceeds the limit of " +
                        std::to_string(limits_.max_bytes_bytes),
                    at);
    }
    nodes_.push_back(Node{.kind = NodeKind::bytes, .length = size, .offset = at});
    return true;
}

bool DomBuilder::visit_ext(const char* data, std::uint32_t size) {
    // `data` points at the ext type byte and `size` counts it (msgpack-c's convention).
    const bool placeholders = mode_ == TensorMode::placeholders;
    if (!begin_item(placeholders ? NodeKind::placeholder : NodeKind::inline_tensor)) return false;
    const std::size_t at = offset_of(data);
    position_bound_ = at + size;
    if (size == 0) return fail(ErrorCode::data_loss, "ext value without a type byte", at);
    if (++tensors_ > limits_.max_tensors) {
        return fail(ErrorCode::out_of_range,
                    "input holds more than " + std::to_string(limits_.max_tensors) + " tensors");
    }
    const auto type = static_cast<std::int8_t>(data[0]);
    const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(data + 1),
                                             size - 1);
    if (type == kInlineTensorExtType && !placeholders) {
        auto layout = parse_inline_tensor(body, limits_.max_tensor_bytes);
        if (!layout.has_value()) return fail(layout.error().code, layout.error().message, at + 1);
        nodes_.push_back(
            Node{.kind = NodeKind::inline_tensor, .length = size - 1, .offset = at + 1});
        return true;
    }
    if (type == kPlaceholderExtType && placeholders) {
        Node node{.kind = NodeKind::placeholder};
        if (!parse_placeholder(body, node.number.index)) {
            return fail(ErrorCode::invalid_argument,
                        "tensor placeholder does not hold a msgpack unsigned integer", at + 1);
        }
        nodes_.push_back(node);
        return true;
    }
    if (type == kInlineTensorExtType || type == kPlaceholderExtType) {
        return fail(ErrorCode::invalid_argument,
                    placeholders ? "inline tensor where only tensor placeholders are allowed"
                                 : "tensor placeholder where only inline tensors are allowed",
                    at);
    }
    return fail(ErrorCode::invalid_argument, "unsupported msgpack ext type " + std::to_string(type),
                at);
}

bool DomBuilder::start_container(std::uint32_t elements, NodeKind kind) {
    if (!begin_item(kind)) return false;
    const bool is_map = kind == NodeKind::map;
    const char* name = is_map ? "map" : "list";
    const char* unit = is_map ? " entries" : " elements";
    if (frames_.size() >= max_depth_) {
        return fail(ErrorCode::out_of_range, std::string(name) + " nested deeper than " +
                                                 std::to_string(max_depth_) + " levels");
    }
    const std::uint64_t needed = static_cast<std::uint64_t>(elements) * (is_map ? 2 : 1);
    const std::size_t remaining = size_ - std::min(position_bound_, size_);
    if (needed > remaining) {
        return fail(ErrorCode::data_loss, "truncated input: " + std::string(name) + " declares " +
                                              std::to_string(elements) + unit + " but at most " +
                                              std::to_string(remaining) + " bytes remain");
    }
    if (elements > limits_.max_container_elements) {
        return fail(ErrorCode::out_of_range, std::string(name) + " of " + std::to_string(elements) +
                                                 unit + " exceeds the limit of " +
                                                 std::to_string(limits_.max_container_elements));
    }
    const auto index = static_cast<std::uint32_t>(nodes_.size());
    nodes_.push_back(Node{.kind = kind, .count = elements});
    // For an empty container msgpack-c calls end_array/end_map right away.
    frames_.push_back(Frame{.node = index});
    return true;
}

bool DomBuilder::end_container() {
    const std::uint32_t index = frames_.back().node;
    nodes_[index].subtree = static_cast<std::uint32_t>(nodes_.size()) - index;
    frames_.pop_back();
    return true;
}

Error DomBuilder::finish_error(bool parsed, std::size_t stop_offset) const {
    auto at = [](std::size_t offset) { return " at byte offset " + std::to_string(offset); };
    if (error_.has_value()) {
        // msgpack-c (v3 API) stops on the last byte of the item's header (or of a fixed-size
        // item), so the offset always points inside the offending item.
        return Error{error_->code, error_->message + at(error_offset_ != kNoOffset ? error_offset_
                                                                                   : stop_offset)};
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

}  // namespace

std::string_view kind_name(NodeKind kind) {
    switch (kind) {
        case NodeKind::null:
            return "null";
        case NodeKind::boolean:
            return "bool";
        case NodeKind::integer:
            return "int";
        case NodeKind::floating:
            return "float";
        case NodeKind::string:
            return "string";
        case NodeKind::bytes:
            return "bytes";
        case NodeKind::list:
            return "list";
        case NodeKind::map:
            return "map";
        case NodeKind::inline_tensor:
        case NodeKind::placeholder:
            return "tensor";
    }
    return "unknown";
}

Result<Dom> parse_dom(std::span<const std::uint8_t> input, const DecodeLimits& limits,
                      TensorMode tensors) {
    if (input.size() > limits.max_total_bytes) {
        return fail(ErrorCode::out_of_range, "input of " + std::to_string(input.size()) +
                                                 " bytes exceeds the limit of " +
                                                 std::to_string(limits.max_total_bytes));
    }
    DomBuilder builder(input, limits, tensors);
    std::size_t offset = 0;
    bool parsed = false;
    try {
        parsed = msgpack::parse(reinterpret_cast<const char*>(input.data()), input.size(), offset,
                                builder);
    } catch (const std::bad_alloc&) {
        return fail(ErrorCode::resource_exhausted, "out of memory while decoding");
    } catch (const std::exception& e) {
        return fail(ErrorCode::data_loss, std::string("malformed msgpack: ") + e.what());
    }
    if (builder.failed() || !parsed || offset != input.size()) {
        return fail(builder.finish_error(parsed, offset));
    }
    return Dom{input, builder.take_nodes()};
}

}  // namespace omnirt::proto::detail
