#include "checkpoint/dummy.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "checkpoint/convert.h"

namespace omnirt::checkpoint {
namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::uint64_t fnv1a(std::string_view text) {
    std::uint64_t hash = 0xCBF29CE484222325ull;
    for (char c : text) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001B3ull;
    }
    return hash;
}

// sqrt(3), the half-width of a uniform distribution of unit variance.
constexpr double kSqrt3 = 1.7320508075688772;

template <class T>
void store(std::byte* p, T value) {
    std::memcpy(p, &value, sizeof(T));
}

}  // namespace

Status fill_dummy(const TensorSpec& spec, const DummyInit& init, std::uint64_t byte_offset,
                  std::span<std::byte> out) {
    const std::size_t size = element_size(spec.dtype);
    if (byte_offset % size != 0 || out.size() % size != 0) {
        return fail(ErrorCode::invalid_argument,
                    "fill_dummy: chunk of tensor '" + spec.name + "' is not element-aligned");
    }
    const bool floating = spec.dtype == DType::f16 || spec.dtype == DType::bf16 ||
                          spec.dtype == DType::f32 || spec.dtype == DType::f64;
    if (!floating) {
        std::memset(out.data(), 0, out.size());
        return ok_status();
    }
    const std::uint64_t key = mix(init.seed ^ mix(fnv1a(spec.name)));
    const double scale = init.std * kSqrt3;
    const std::uint64_t first = byte_offset / size;
    const std::size_t count = out.size() / size;
    std::byte* p = out.data();
    for (std::size_t i = 0; i < count; ++i, p += size) {
        const std::uint64_t bits = mix(key + (first + i + 1) * kGolden);
        // 24 random bits -> u in [-1, 1), exactly representable.
        const double u = static_cast<double>(bits >> 40) * (1.0 / 8388608.0) - 1.0;
        const double value = spec.mean + scale * u;
        switch (spec.dtype) {
            case DType::f64:
                store(p, value);
                break;
            case DType::f32:
                store(p, static_cast<float>(value));
                break;
            case DType::bf16:
                store(p, float_to_bf16(static_cast<float>(value)));
                break;
            default:
                store(p, float_to_f16(static_cast<float>(value)));
                break;
        }
    }
    return ok_status();
}

Result<Tensor> dummy_tensor(const TensorSpec& spec, const DummyInit& init) {
    auto tensor = Tensor::empty(spec.shape, spec.dtype);
    if (!tensor) return fail(tensor.error().with_context("tensor '" + spec.name + "'"));
    const std::size_t bytes = tensor->nbytes();
    std::span<std::byte> data(tensor->mutable_data(), bytes);
    // Every element depends on its index alone, so large tensors fill in parallel slices (an 8B
    // model's dummy weights in seconds, not minutes); the values do not depend on the split.
    constexpr std::size_t kSliceBytes = 32u << 20;
    const std::size_t threads = std::min<std::size_t>(
        std::max(1u, std::thread::hardware_concurrency()), (bytes + kSliceBytes - 1) / kSliceBytes);
    if (threads <= 1) {
        if (bytes > 0) OMNI_RETURN_IF_ERROR(fill_dummy(spec, init, 0, data));
        return *std::move(tensor);
    }
    const std::size_t element = element_size(spec.dtype);
    const std::size_t per_thread = (bytes / element + threads - 1) / threads * element;
    std::vector<Status> statuses(threads, ok_status());
    std::vector<std::thread> workers;
    workers.reserve(threads);
    for (std::size_t t = 0; t < threads; ++t) {
        const std::size_t begin = std::min(bytes, t * per_thread);
        const std::size_t end = std::min(bytes, begin + per_thread);
        workers.emplace_back([&, t, begin, end] {
            statuses[t] = fill_dummy(spec, init, begin, data.subspan(begin, end - begin));
        });
    }
    for (std::thread& worker : workers) worker.join();
    for (Status& status : statuses) OMNI_RETURN_IF_ERROR(std::move(status));
    return *std::move(tensor);
}

Result<std::vector<std::pair<std::string, Tensor>>> dummy_tensors(
    const std::vector<TensorSpec>& specs, const DummyInit& init) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    tensors.reserve(specs.size());
    for (const TensorSpec& spec : specs) {
        OMNI_TRY(Tensor tensor, dummy_tensor(spec, init));
        tensors.emplace_back(spec.name, std::move(tensor));
    }
    return tensors;
}

TensorSource dummy_source(const TensorSpec& spec, const DummyInit& init) {
    TensorSource source{.name = spec.name, .dtype = spec.dtype, .shape = spec.shape};
    source.fill = [spec, init](std::uint64_t offset, std::span<std::byte> chunk) {
        return fill_dummy(spec, init, offset, chunk);
    };
    return source;
}

}  // namespace omnirt::checkpoint
