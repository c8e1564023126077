#pragma once
// `load_format: dummy`: seeded random weights for a list of (name, shape, dtype), for benchmarks
// at real sizes and for generated test checkpoints.
//
// Values are deterministic across runs, machines and thread counts: element k of a tensor is a
// pure function of (seed, tensor name, k), computed with a splitmix64 counter and exact IEEE
// arithmetic only (no libm, no std:: distributions). The distribution is uniform with the
// requested mean and standard deviation: mean + std * sqrt(3) * u, u in [-1, 1). Floating
// dtypes only are random; integer and bool tensors are zero-filled.
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/safetensors_writer.h"
#include "core/tensor.h"

namespace omnirt::checkpoint {

struct TensorSpec {
    std::string name;
    Shape shape;
    DType dtype = DType::bf16;
    double mean = 0.0;  // 1.0 for norm weights, so that activations keep their scale
};

struct DummyInit {
    std::uint64_t seed = 0;
    double std = 0.02;
};

// A new owned tensor.
[[nodiscard]] Result<Tensor> dummy_tensor(const TensorSpec& spec, const DummyInit& init);
[[nodiscard]] Result<std::vector<std::pair<std::string, Tensor>>> dummy_tensors(
    const std::vector<TensorSpec>& specs, const DummyInit& init);

// Writes bytes [byte_offset, byte_offset + out.size()) of the tensor's row-major data; both must
// be multiples of the element size. Lets a writer stream a tensor without holding it whole.
[[nodiscard]] Status fill_dummy(const TensorSpec& spec, const DummyInit& init,
                                std::uint64_t byte_offset, std::span<std::byte> out);

// A write_safetensors source that generates the tensor chunk by chunk.
[[nodiscard]] TensorSource dummy_source(const TensorSpec& spec, const DummyInit& init);

}  // namespace omnirt::checkpoint
