#pragma once
// Value: the tree that carries request inputs, parameters, metadata and stage payload data.
// Kinds: null, bool, int, float, string, bytes, list, map, tensor. Maps have string keys and
// iterate in key order, so encoding a Value is deterministic.
#include <concepts>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace omnirt {

class Value;
using List = std::vector<Value>;
using Map = std::map<std::string, Value, std::less<>>;

struct Bytes {
    std::vector<std::uint8_t> data;
    friend bool operator==(const Bytes&, const Bytes&) = default;
};

enum class ValueKind : std::uint8_t {
    null,
    boolean,
    integer,
    floating,
    string,
    bytes,
    list,
    map,
    tensor
};
[[nodiscard]] std::string_view to_string(ValueKind kind);

class Value {
  public:
    Value() = default;
    Value(std::nullptr_t) {}
    Value(bool v) : data_(v) {}
    template <std::integral I>
    requires(!std::same_as<I, bool>) Value(I v) : data_(static_cast<std::int64_t>(v)) {}
    Value(double v) : data_(v) {}
    Value(float v) : data_(static_cast<double>(v)) {}
    Value(const char* v) : data_(std::string(v)) {}
    Value(std::string v) : data_(std::move(v)) {}
    Value(std::string_view v) : data_(std::string(v)) {}
    Value(Bytes v) : data_(std::move(v)) {}
    Value(List v) : data_(std::move(v)) {}
    Value(Map v) : data_(std::move(v)) {}
    Value(Tensor v) : data_(std::move(v)) {}

    [[nodiscard]] ValueKind kind() const { return static_cast<ValueKind>(data_.index()); }
    [[nodiscard]] bool is_null() const { return kind() == ValueKind::null; }
    [[nodiscard]] bool is_bool() const { return kind() == ValueKind::boolean; }
    [[nodiscard]] bool is_int() const { return kind() == ValueKind::integer; }
    [[nodiscard]] bool is_float() const { return kind() == ValueKind::floating; }
    [[nodiscard]] bool is_number() const { return is_int() || is_float(); }
    [[nodiscard]] bool is_string() const { return kind() == ValueKind::string; }
    [[nodiscard]] bool is_bytes() const { return kind() == ValueKind::bytes; }
    [[nodiscard]] bool is_list() const { return kind() == ValueKind::list; }
    [[nodiscard]] bool is_map() const { return kind() == ValueKind::map; }
    [[nodiscard]] bool is_tensor() const { return kind() == ValueKind::tensor; }

    // Typed access: null when the kind differs.
    [[nodiscard]] const bool* if_bool() const { return std::get_if<bool>(&data_); }
    [[nodiscard]] const std::int64_t* if_int() const { return std::get_if<std::int64_t>(&data_); }
    [[nodiscard]] const double* if_float() const { return std::get_if<double>(&data_); }
    [[nodiscard]] const std::string* if_string() const { return std::get_if<std::string>(&data_); }
    [[nodiscard]] const Bytes* if_bytes() const { return std::get_if<Bytes>(&data_); }
    [[nodiscard]] const List* if_list() const { return std::get_if<List>(&data_); }
    [[nodiscard]] const Map* if_map() const { return std::get_if<Map>(&data_); }
    [[nodiscard]] const Tensor* if_tensor() const { return std::get_if<Tensor>(&data_); }
    [[nodiscard]] List* if_list() { return std::get_if<List>(&data_); }
    [[nodiscard]] Map* if_map() { return std::get_if<Map>(&data_); }

    // Checked access: aborts on a kind mismatch (use the if_ forms for untrusted data).
    [[nodiscard]] bool as_bool() const;
    [[nodiscard]] std::int64_t as_int() const;
    [[nodiscard]] double as_number() const;  // int or float
    [[nodiscard]] const std::string& as_string() const;
    [[nodiscard]] const List& as_list() const;
    [[nodiscard]] const Map& as_map() const;
    [[nodiscard]] const Tensor& as_tensor() const;
    [[nodiscard]] List& as_list();
    [[nodiscard]] Map& as_map();

    // Map lookup; null when this is not a map or the key is absent.
    [[nodiscard]] const Value* find(std::string_view key) const;
    // Map insertion: turns a null value into an empty map first; aborts on other kinds.
    Value& operator[](std::string_view key);

    // Deep equality; tensors compare by dtype, shape and element bytes; 1 != 1.0.
    friend bool operator==(const Value& a, const Value& b);

    // JSON-like rendering for logs and error messages; tensors as "tensor(float32, [2, 3])".
    [[nodiscard]] std::string debug_string() const;

  private:
    std::variant<std::monostate, bool, std::int64_t, double, std::string, Bytes, List, Map, Tensor>
        data_;
};

}  // namespace omnirt
