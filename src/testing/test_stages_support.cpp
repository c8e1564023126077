// The test stages' payload pattern and register_test_stages.
#include <utility>

#include "testing/test_stages.h"

namespace omnirt::testing {
namespace {

template <class T>
void fill_numeric(Tensor& tensor) {
    auto* out = reinterpret_cast<T*>(tensor.mutable_data());
    for (std::int64_t i = 0; i < tensor.numel(); ++i) out[i] = static_cast<T>(i % 251);
}

}  // namespace

Result<Tensor> make_pattern_tensor(std::size_t bytes, DType dtype) {
    const std::size_t element = element_size(dtype);
    if (bytes % element != 0) {
        return fail(ErrorCode::invalid_argument, "pattern tensor: " + std::to_string(bytes) +
                                                     " bytes is not a multiple of " +
                                                     std::string(to_string(dtype)) + "'s " +
                                                     std::to_string(element) + "-byte elements");
    }
    OMNI_TRY(Tensor tensor, Tensor::empty({static_cast<std::int64_t>(bytes / element)}, dtype));
    switch (dtype) {
        case DType::boolean: {
            auto* out = reinterpret_cast<bool*>(tensor.mutable_data());
            for (std::int64_t i = 0; i < tensor.numel(); ++i) out[i] = (i % 2) == 1;
            break;
        }
        case DType::u8:
            fill_numeric<std::uint8_t>(tensor);
            break;
        case DType::i8:
            fill_numeric<std::int8_t>(tensor);
            break;
        case DType::i16:
            fill_numeric<std::int16_t>(tensor);
            break;
        case DType::i32:
            fill_numeric<std::int32_t>(tensor);
            break;
        case DType::i64:
            fill_numeric<std::int64_t>(tensor);
            break;
        case DType::f32:
            fill_numeric<float>(tensor);
            break;
        case DType::f64:
            fill_numeric<double>(tensor);
            break;
        case DType::f16:
        case DType::bf16: {
            std::byte* out = tensor.mutable_data();
            for (std::size_t k = 0; k < bytes; ++k)
                out[k] = static_cast<std::byte>((k * 7 + 3) & 0xff);
            break;
        }
    }
    return tensor;
}

Status register_test_stages(Registry& registry) {
    OMNI_RETURN_IF_ERROR(test_stages_detail::register_basic_stages(registry));
    OMNI_RETURN_IF_ERROR(test_stages_detail::register_stream_stages(registry));
    OMNI_RETURN_IF_ERROR(test_stages_detail::register_functions(registry));
    OMNI_RETURN_IF_ERROR(test_stages_detail::register_sink_stage(registry));
    return test_stages_detail::register_rank_log_stage(registry);
}

}  // namespace omnirt::testing
