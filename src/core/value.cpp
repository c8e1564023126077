#include "core/value.h"

#include <cmath>
#include <cstdio>

namespace omnirt {

std::string_view to_string(ValueKind kind) {
    switch (kind) {
        case ValueKind::null:
            return "null";
        case ValueKind::boolean:
            return "bool";
        case ValueKind::integer:
            return "int";
        case ValueKind::floating:
            return "float";
        case ValueKind::string:
            return "string";
        case ValueKind::bytes:
            return "bytes";
        case ValueKind::list:
            return "list";
        case ValueKind::map:
            return "map";
        case ValueKind::tensor:
            return "tensor";
    }
    return "unknown";
}

namespace {
template <class T>
const T& checked_get(const auto& data, ValueKind wanted) {
    const T* p = std::get_if<T>(&data);
    OMNI_CHECK(p != nullptr, "Value is not a " + std::string(to_string(wanted)));
    return *p;
}
}  // namespace

bool Value::as_bool() const { return checked_get<bool>(data_, ValueKind::boolean); }
std::int64_t Value::as_int() const { return checked_get<std::int64_t>(data_, ValueKind::integer); }
double Value::as_number() const {
    if (const auto* i = if_int()) return static_cast<double>(*i);
    return checked_get<double>(data_, ValueKind::floating);
}
const std::string& Value::as_string() const {
    return checked_get<std::string>(data_, ValueKind::string);
}
const List& Value::as_list() const { return checked_get<List>(data_, ValueKind::list); }
const Map& Value::as_map() const { return checked_get<Map>(data_, ValueKind::map); }
const Tensor& Value::as_tensor() const { return checked_get<Tensor>(data_, ValueKind::tensor); }
List& Value::as_list() { return const_cast<List&>(std::as_const(*this).as_list()); }
Map& Value::as_map() { return const_cast<Map&>(std::as_const(*this).as_map()); }

const Value* Value::find(std::string_view key) const {
    const Map* map = if_map();
    if (map == nullptr) return nullptr;
    auto it = map->find(key);
    return it == map->end() ? nullptr : &it->second;
}

Value& Value::operator[](std::string_view key) {
    if (is_null()) data_ = Map{};
    Map& map = as_map();
    auto it = map.find(key);
    if (it == map.end()) it = map.emplace(std::string(key), Value()).first;
    return it->second;
}

bool operator==(const Value& a, const Value& b) {
    if (a.kind() != b.kind()) return false;
    if (a.is_tensor()) return a.as_tensor().equals(b.as_tensor());
    if (a.is_float()) {
        double x = *a.if_float(), y = *b.if_float();
        return x == y || (std::isnan(x) && std::isnan(y));
    }
    return a.data_ == b.data_;
}

namespace {

void append_quoted(std::string& out, const std::string& s) {
    out += '"';
    for (char c : s) {
        unsigned char u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", u);
            out += buf;
        } else {
            out += c;
        }
    }
    out += '"';
}

void render(const Value& v, std::string& out) {
    switch (v.kind()) {
        case ValueKind::null:
            out += "null";
            break;
        case ValueKind::boolean:
            out += v.as_bool() ? "true" : "false";
            break;
        case ValueKind::integer:
            out += std::to_string(v.as_int());
            break;
        case ValueKind::floating: {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.17g", *v.if_float());
            out += buf;
            break;
        }
        case ValueKind::string:
            append_quoted(out, v.as_string());
            break;
        case ValueKind::bytes:
            out += "bytes(" + std::to_string(v.if_bytes()->data.size()) + ")";
            break;
        case ValueKind::list: {
            out += '[';
            bool first = true;
            for (const Value& item : v.as_list()) {
                if (!first) out += ", ";
                first = false;
                render(item, out);
            }
            out += ']';
            break;
        }
        case ValueKind::map: {
            out += '{';
            bool first = true;
            for (const auto& [key, item] : v.as_map()) {
                if (!first) out += ", ";
                first = false;
                append_quoted(out, key);
                out += ": ";
                render(item, out);
            }
            out += '}';
            break;
        }
        case ValueKind::tensor: {
            const Tensor& t = v.as_tensor();
            out += "tensor(";
            out += to_string(t.dtype());
            out += ", [";
            for (std::size_t i = 0; i < t.shape().size(); ++i) {
                if (i) out += ", ";
                out += std::to_string(t.shape()[i]);
            }
            out += "])";
            break;
        }
    }
}

}  // namespace

std::string Value::debug_string() const {
    std::string out;
    render(*this, out);
    return out;
}

}  // namespace omnirt
