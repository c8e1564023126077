#include "engine/paged_attention.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace omnirt::engine {
namespace {

void check_shapes(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                  std::span<const SequenceInput> batch) {
    OMNI_CHECK(query.dim() == 3 && keys.dim() == 4 && values.sizes() == keys.sizes(),
               "paged_attention: query [tokens, heads, dim] and a cache layer [blocks, "
               "block_size, kv_heads, dim] expected");
    OMNI_CHECK(query.size(2) == keys.size(3) && query.size(1) % keys.size(2) == 0,
               "paged_attention: head_dim differs or heads are not a multiple of kv heads");
    std::int64_t tokens = 0;
    for (const SequenceInput& sequence : batch) {
        tokens += static_cast<std::int64_t>(sequence.tokens.size());
    }
    OMNI_CHECK(tokens == query.size(0), "paged_attention: query rows differ from batch tokens");
}

// The cache slot (block * block_size + offset) of each position in [0, length).
at::Tensor slot_indices(const SequenceInput& sequence, std::int64_t length,
                        std::int64_t block_size) {
    std::vector<std::int64_t> slots(static_cast<std::size_t>(length));
    for (std::int64_t position = 0; position < length; ++position) {
        const std::int64_t block =
            sequence.block_table[static_cast<std::size_t>(position / block_size)];
        slots[static_cast<std::size_t>(position)] = block * block_size + position % block_size;
    }
    return at::tensor(slots, at::kLong);
}

// Element reads and writes of the cache dtypes as float.
template <class T>
inline float to_float(T value) {
    return static_cast<float>(value);
}
template <class T>
inline T from_float(float value) {
    return static_cast<T>(value);
}

// a . b over `size` elements; 16 independent partial sums so the compiler vectorizes the loop.
template <class T>
inline float dot(const float* a, const T* b, std::int64_t size) {
    constexpr int kLanes = 16;
    float partial[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= size; i += kLanes) {
        for (int lane = 0; lane < kLanes; ++lane) {
            partial[lane] += a[i + lane] * to_float(b[i + lane]);
        }
    }
    float sum = 0.0f;
    for (; i < size; ++i) sum += a[i] * to_float(b[i]);
    for (int lane = 0; lane < kLanes; ++lane) sum += partial[lane];
    return sum;
}

// accumulator += weight * v over `size` elements.
template <class T>
inline void axpy(float* accumulator, float weight, const T* v, std::int64_t size) {
    for (std::int64_t i = 0; i < size; ++i) accumulator[i] += weight * to_float(v[i]);
}

// Where each query row comes from.
struct RowSource {
    const SequenceInput* sequence;
    std::int64_t position;
};

template <class T>
void attention_cpu_kernel(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                          std::span<const SequenceInput> batch, double scale, at::Tensor& output) {
    const std::int64_t num_heads = query.size(1);
    const std::int64_t head_dim = query.size(2);
    const std::int64_t block_size = keys.size(1);
    const std::int64_t num_kv_heads = keys.size(2);
    const std::int64_t group = num_heads / num_kv_heads;
    const std::int64_t slot_stride = num_kv_heads * head_dim;  // elements between positions
    const std::int64_t block_stride = block_size * slot_stride;

    std::vector<RowSource> rows;
    rows.reserve(static_cast<std::size_t>(query.size(0)));
    for (const SequenceInput& sequence : batch) {
        for (std::size_t i = 0; i < sequence.tokens.size(); ++i) {
            rows.push_back({&sequence, sequence.start_position + static_cast<std::int64_t>(i)});
        }
    }

    const T* query_data = query.data_ptr<T>();
    const T* key_data = keys.data_ptr<T>();
    const T* value_data = values.data_ptr<T>();
    T* output_data = output.data_ptr<T>();
    const float scale_f = static_cast<float>(scale);
    const auto num_items = static_cast<std::int64_t>(rows.size()) * num_kv_heads;

    at::parallel_for(0, num_items, 1, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> queries(static_cast<std::size_t>(group * head_dim));
        std::vector<float> accumulators(static_cast<std::size_t>(group * head_dim));
        std::vector<float> scores;
        for (std::int64_t item = begin; item < end; ++item) {
            const RowSource& row = rows[static_cast<std::size_t>(item / num_kv_heads)];
            const std::int64_t kv_head = item % num_kv_heads;
            const std::int64_t length = row.position + 1;
            const std::int64_t row_index = item / num_kv_heads;
            const T* row_query = query_data + (row_index * num_heads + kv_head * group) * head_dim;
            for (std::int64_t i = 0; i < group * head_dim; ++i) {
                queries[static_cast<std::size_t>(i)] = to_float(row_query[i]) * scale_f;
            }
            scores.resize(static_cast<std::size_t>(group * length));
            // Scores, block by block: scores[h * length + position].
            const std::vector<std::int32_t>& table = row.sequence->block_table;
            for (std::int64_t first = 0; first < length; first += block_size) {
                const std::int64_t block = table[static_cast<std::size_t>(first / block_size)];
                const std::int64_t count = std::min(block_size, length - first);
                const T* block_keys = key_data + block * block_stride + kv_head * head_dim;
                for (std::int64_t slot = 0; slot < count; ++slot) {
                    const T* key = block_keys + slot * slot_stride;
                    for (std::int64_t h = 0; h < group; ++h) {
                        scores[static_cast<std::size_t>(h * length + first + slot)] =
                            dot(queries.data() + h * head_dim, key, head_dim);
                    }
                }
            }
            // Softmax per head (max-subtracted; the normalizer is applied at the end).
            float normalizers[64];
            std::vector<float> many_normalizers;
            float* normalizer = normalizers;
            if (group > 64) {
                many_normalizers.resize(static_cast<std::size_t>(group));
                normalizer = many_normalizers.data();
            }
            for (std::int64_t h = 0; h < group; ++h) {
                float* head_scores = scores.data() + h * length;
                const float maximum = *std::max_element(head_scores, head_scores + length);
                float sum = 0.0f;
                for (std::int64_t p = 0; p < length; ++p) {
                    head_scores[p] = std::exp(head_scores[p] - maximum);
                    sum += head_scores[p];
                }
                normalizer[h] = 1.0f / sum;
            }
            std::fill(accumulators.begin(), accumulators.end(), 0.0f);
            for (std::int64_t first = 0; first < length; first += block_size) {
                const std::int64_t block = table[static_cast<std::size_t>(first / block_size)];
                const std::int64_t count = std::min(block_size, length - first);
                const T* block_values = value_data + block * block_stride + kv_head * head_dim;
                for (std::int64_t slot = 0; slot < count; ++slot) {
                    const T* value = block_values + slot * slot_stride;
                    for (std::int64_t h = 0; h < group; ++h) {
                        axpy(accumulators.data() + h * head_dim,
                             scores[static_cast<std::size_t>(h * length + first + slot)], value,
                             head_dim);
                    }
                }
            }
            T* row_output = output_data + (row_index * num_heads + kv_head * group) * head_dim;
            for (std::int64_t h = 0; h < group; ++h) {
                for (std::int64_t i = 0; i < head_dim; ++i) {
                    row_output[h * head_dim + i] = from_float<T>(
                        accumulators[static_cast<std::size_t>(h * head_dim + i)] * normalizer[h]);
                }
            }
        }
    });
}

}  // namespace

at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& keys,
                           const at::Tensor& values, std::span<const SequenceInput> batch,
                           double scale) {
    const at::ScalarType type = query.scalar_type();
    const bool cpu_kernel_fits =
        query.device().is_cpu() && keys.device().is_cpu() &&
        (type == at::kFloat || type == at::kBFloat16 || type == at::kHalf) &&
        keys.scalar_type() == type && values.scalar_type() == type;
    if (cpu_kernel_fits) return paged_attention_cpu(query, keys, values, batch, scale);
    return paged_attention_reference(query, keys, values, batch, scale);
}

at::Tensor paged_attention_cpu(const at::Tensor& query, const at::Tensor& keys,
                               const at::Tensor& values, std::span<const SequenceInput> batch,
                               double scale) {
    check_shapes(query, keys, values, batch);
    OMNI_CHECK(keys.is_contiguous() && values.is_contiguous(),
               "paged_attention_cpu: the cache layer must be contiguous");
    const at::Tensor contiguous_query = query.contiguous();
    at::Tensor output = at::empty_like(contiguous_query);
    switch (query.scalar_type()) {
        case at::kFloat:
            attention_cpu_kernel<float>(contiguous_query, keys, values, batch, scale, output);
            break;
        case at::kBFloat16:
            attention_cpu_kernel<c10::BFloat16>(contiguous_query, keys, values, batch, scale,
                                                output);
            break;
        case at::kHalf:
            attention_cpu_kernel<c10::Half>(contiguous_query, keys, values, batch, scale, output);
            break;
        default:
            OMNI_CHECK(false, "paged_attention_cpu: float32, bfloat16 or float16 only");
    }
    return output;
}

at::Tensor paged_attention_reference(const at::Tensor& query, const at::Tensor& keys,
                                     const at::Tensor& values, std::span<const SequenceInput> batch,
                                     double scale) {
    check_shapes(query, keys, values, batch);
    const std::int64_t num_heads = query.size(1);
    const std::int64_t head_dim = query.size(2);
    const std::int64_t block_size = keys.size(1);
    const std::int64_t num_kv_heads = keys.size(2);
    const std::int64_t group = num_heads / num_kv_heads;
    const at::Tensor flat_keys = keys.reshape({-1, num_kv_heads, head_dim});
    const at::Tensor flat_values = values.reshape({-1, num_kv_heads, head_dim});
    at::Tensor output = at::empty_like(query, at::MemoryFormat::Contiguous);

    std::int64_t row = 0;
    for (const SequenceInput& sequence : batch) {
        const auto count = static_cast<std::int64_t>(sequence.tokens.size());
        const std::int64_t length = sequence.start_position + count;
        const at::Tensor slots = slot_indices(sequence, length, block_size).to(keys.device());
        // [kv_heads, dim, length] and [kv_heads, length, dim], float32.
        const at::Tensor k = flat_keys.index_select(0, slots).to(at::kFloat).permute({1, 2, 0});
        const at::Tensor v = flat_values.index_select(0, slots).to(at::kFloat).permute({1, 0, 2});
        // [count, heads, dim] -> [kv_heads, group * count, dim].
        const at::Tensor q = query.narrow(0, row, count)
                                 .to(at::kFloat)
                                 .view({count, num_kv_heads, group, head_dim})
                                 .permute({1, 2, 0, 3})
                                 .reshape({num_kv_heads, group * count, head_dim});
        at::Tensor scores = at::bmm(q, k).mul_(scale).view({num_kv_heads, group, count, length});
        // Query i (position start + i) must not see positions after its own.
        const at::Tensor key_positions =
            at::arange(length, at::TensorOptions().dtype(at::kLong).device(keys.device()));
        const at::Tensor query_positions =
            at::arange(sequence.start_position, length,
                       at::TensorOptions().dtype(at::kLong).device(keys.device()));
        const at::Tensor future = key_positions.unsqueeze(0) > query_positions.unsqueeze(1);
        scores.masked_fill_(future, -std::numeric_limits<float>::infinity());
        const at::Tensor probabilities =
            scores.softmax(-1).view({num_kv_heads, group * count, length});
        const at::Tensor attended = at::bmm(probabilities, v)  // [kv_heads, group * count, dim]
                                        .view({num_kv_heads, group, count, head_dim})
                                        .permute({2, 0, 1, 3})
                                        .reshape({count, num_heads, head_dim});
        output.narrow(0, row, count).copy_(attended);
        row += count;
    }
    return output;
}

}  // namespace omnirt::engine
