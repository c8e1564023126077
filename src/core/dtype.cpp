#include "core/dtype.h"

#include <charconv>

namespace omnirt {
namespace {

struct DTypeInfo {
    DType dtype;
    std::size_t size;
    std::string_view name;
};

constexpr DTypeInfo kDTypes[kDTypeCount] = {
    {DType::boolean, 1, "bool"}, {DType::u8, 1, "uint8"},      {DType::i8, 1, "int8"},
    {DType::i16, 2, "int16"},    {DType::i32, 4, "int32"},     {DType::i64, 8, "int64"},
    {DType::f16, 2, "float16"},  {DType::bf16, 2, "bfloat16"}, {DType::f32, 4, "float32"},
    {DType::f64, 8, "float64"},
};

}  // namespace

std::size_t element_size(DType dtype) { return kDTypes[static_cast<int>(dtype)].size; }

std::string_view to_string(DType dtype) { return kDTypes[static_cast<int>(dtype)].name; }

Result<DType> parse_dtype(std::string_view name) {
    for (const auto& info : kDTypes) {
        if (info.name == name) return info.dtype;
    }
    return fail(ErrorCode::invalid_argument, "unknown dtype '" + std::string(name) +
                                                 "' (expected bool, uint8, int8, int16, int32, "
                                                 "int64, float16, bfloat16, float32 or float64)");
}

Result<DType> dtype_from_code(std::int64_t code) {
    if (code < 0 || code >= kDTypeCount) {
        return fail(ErrorCode::invalid_argument, "dtype code " + std::to_string(code) +
                                                     " is out of range [0, " +
                                                     std::to_string(kDTypeCount) + ")");
    }
    return static_cast<DType>(code);
}

std::string Device::to_string() const {
    if (kind == DeviceKind::cpu) return "cpu";
    return "cuda:" + std::to_string(index);
}

Result<Device> parse_device(std::string_view text) {
    if (text == "cpu") return Device::cpu();
    if (text == "cuda") return Device::cuda(0);
    constexpr std::string_view kPrefix = "cuda:";
    if (text.starts_with(kPrefix)) {
        std::string_view digits = text.substr(kPrefix.size());
        int index = -1;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 &&
            !digits.empty()) {
            return Device::cuda(index);
        }
    }
    return fail(ErrorCode::invalid_argument,
                "invalid device '" + std::string(text) + "' (expected cpu, cuda or cuda:N)");
}

}  // namespace omnirt
