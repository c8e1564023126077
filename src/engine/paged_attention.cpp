#include "engine/paged_attention.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/attention_index.h"
#include "engine/cpu_vector.h"
#include "engine/paged_attention_decode.h"

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

// Up to this many query rows of one sequence share a pass over its keys and values.
constexpr std::int64_t kQueryTile = 8;

using cpu::Float8;
using cpu::load8;
using cpu::store8;

// a . b over `size` elements; b float32 or bfloat16 (widened in registers).
template <class K>
OMNIRT_INLINE float dot(const float* a, const K* b, std::int64_t size) {
    Float8 first = {};
    Float8 second = {};
    std::int64_t i = 0;
    for (; i + 16 <= size; i += 16) {
        first += load8(a + i) * load8(b + i);
        second += load8(a + i + 8) * load8(b + i + 8);
    }
    for (; i + 8 <= size; i += 8) first += load8(a + i) * load8(b + i);
    float sum = cpu::horizontal_sum(first + second);
    for (; i < size; ++i) sum += a[i] * static_cast<float>(b[i]);
    return sum;
}

// accumulator = accumulator * scale + weight * v over `size` elements; v float32 or bfloat16.
template <class V>
OMNIRT_INLINE void scale_add(float* accumulator, float scale, float weight, const V* v,
                             std::int64_t size) {
    std::int64_t i = 0;
    for (; i + 8 <= size; i += 8) {
        store8(accumulator + i, load8(accumulator + i) * scale + load8(v + i) * weight);
    }
    for (; i < size; ++i) {
        accumulator[i] = accumulator[i] * scale + weight * static_cast<float>(v[i]);
    }
}

// The cache element type the kernel reads directly: float32 and bfloat16 (load8 widens it in
// registers); float16 is widened into float32 block copies first.
template <class T>
using DirectRead = std::conditional_t<std::is_same_v<T, c10::Half>, float, T>;

// One unit of work: rows [first_row, first_row + count) of the query, all of one sequence.
struct QueryTile {
    const SequenceInput* sequence;
    std::int64_t first_row;
    std::int64_t first_position;  // position of first_row
    std::int64_t count;
};

struct KernelShape {
    std::int64_t heads;
    std::int64_t kv_heads;
    std::int64_t group;
    std::int64_t head_dim;
    std::int64_t block_size;
};

// Flash-attention style pass over the blocks of one tile: per block, the scores of every
// (row, head) with the keys of the block, an online-softmax update of the running maximum and
// normalizer, and the weighted values added to float32 accumulators. Keys and values of a block
// are read once per tile (converted to float32 once when stored narrower).
// float32 copies of `count` cache elements (bfloat16 widens by a shift, which vectorizes).
template <class T>
OMNIRT_INLINE void widen(const T* source, float* destination, std::int64_t count) {
    if constexpr (std::is_same_v<T, c10::BFloat16>) {
        std::int64_t i = 0;
        for (; i + 8 <= count; i += 8) store8(destination + i, load8(source + i));
        for (; i < count; ++i) destination[i] = static_cast<float>(source[i]);
    } else {
        for (std::int64_t i = 0; i < count; ++i) destination[i] = static_cast<float>(source[i]);
    }
}

// Running softmax state of a tile: scaled float32 queries, accumulators [rows * heads * d],
// scores of one block [rows * heads * block_size], maxima and normalizers [rows * heads].
struct TileState {
    float* q;
    float* accumulators;
    float* scores;
    float* maxima;
    float* normalizers;
    float* corrections;  // [heads], of the block being processed
};

// Online-softmax update of every (row, head) of the tile with positions [first, first + count)
// of one block, whose keys / values start at k / v (float32 or bfloat16, slot_width apart).
template <class KV>
OMNIRT_INLINE void attend_block(const QueryTile& tile, const KernelShape& shape,
                                const TileState& state, std::int64_t first, std::int64_t count,
                                const KV* k, const KV* v) {
    const std::int64_t heads = shape.heads;
    const std::int64_t d = shape.head_dim;
    const std::int64_t block_size = shape.block_size;
    const std::int64_t slot_width = shape.kv_heads * d;
    const std::int64_t row_width = heads * d;
    // Positions outer, heads inner: the block is read front to back (keys, then values).
    for (std::int64_t r = 0; r < tile.count; ++r) {
        // Causal: row r (position first_position + r) sees positions <= its own.
        const std::int64_t visible = std::min(count, tile.first_position + r - first + 1);
        if (visible <= 0) continue;
        const float* q_row = state.q + r * row_width;
        float* s_row = state.scores + r * heads * block_size;
        for (std::int64_t slot = 0; slot < visible; ++slot) {
            const KV* k_slot = k + slot * slot_width;
            for (std::int64_t h = 0; h < heads; ++h) {
                s_row[h * block_size + slot] =
                    dot(q_row + h * d, k_slot + (h / shape.group) * d, d);
            }
        }
        float* corrections = state.corrections;
        for (std::int64_t h = 0; h < heads; ++h) {
            float* s = s_row + h * block_size;
            float block_max = -std::numeric_limits<float>::infinity();
            for (std::int64_t slot = 0; slot < visible; ++slot)
                block_max = std::max(block_max, s[slot]);
            const std::int64_t index = r * heads + h;
            const float new_max = std::max(state.maxima[index], block_max);
            corrections[h] = std::exp(state.maxima[index] - new_max);  // 0 at the start
            state.maxima[index] = new_max;
            float sum = 0.0f;
            for (std::int64_t slot = 0; slot < visible; ++slot) {
                s[slot] = std::exp(s[slot] - new_max);
                sum += s[slot];
            }
            state.normalizers[index] = state.normalizers[index] * corrections[h] + sum;
        }
        float* accumulators = state.accumulators + r * row_width;
        for (std::int64_t slot = 0; slot < visible; ++slot) {
            const KV* v_slot = v + slot * slot_width;
            for (std::int64_t h = 0; h < heads; ++h) {
                // The first position also applies the correction of the running maximum.
                scale_add(accumulators + h * d, slot == 0 ? corrections[h] : 1.0f,
                          s_row[h * block_size + slot], v_slot + (h / shape.group) * d, d);
            }
        }
    }
}

template <class T>
OMNIRT_INLINE void attend_tile(const QueryTile& tile, const KernelShape& shape, const T* query,
                               const T* keys, const T* values, double scale, T* output,
                               std::vector<float>& scratch) {
    const std::int64_t heads = shape.heads;
    const std::int64_t d = shape.head_dim;
    const std::int64_t block_size = shape.block_size;
    const std::int64_t slot_width = shape.kv_heads * d;  // elements of one position
    const std::int64_t rows = tile.count;
    const std::int64_t row_width = heads * d;
    // A block is read in place when the kernel reads its type directly and the tile has one row
    // (a decode step); several rows share one float32 copy of it (converted once, read by each).
    const bool widen_blocks =
        !std::is_same_v<T, float> && (rows > 1 || !std::is_same_v<DirectRead<T>, T>);
    // Scratch: the tile state and, when widening, one block of keys and values as float32.
    const std::int64_t block_floats = widen_blocks ? block_size * slot_width : 0;
    scratch.resize(static_cast<std::size_t>(2 * rows * row_width + rows * heads * block_size +
                                            2 * rows * heads + heads + 2 * block_floats));
    TileState state{.q = scratch.data()};
    state.accumulators = state.q + rows * row_width;
    state.scores = state.accumulators + rows * row_width;
    state.maxima = state.scores + rows * heads * block_size;
    state.normalizers = state.maxima + rows * heads;
    state.corrections = state.normalizers + rows * heads;
    float* block_keys = state.corrections + heads;
    float* block_values = block_keys + block_floats;

    const auto scale_f = static_cast<float>(scale);
    for (std::int64_t i = 0; i < rows * row_width; ++i) {
        state.q[i] = static_cast<float>(query[tile.first_row * row_width + i]) * scale_f;
        state.accumulators[i] = 0.0f;
    }
    for (std::int64_t i = 0; i < rows * heads; ++i) {
        state.maxima[i] = -std::numeric_limits<float>::infinity();
        state.normalizers[i] = 0.0f;
    }
    const std::int64_t length = tile.first_position + rows;  // keys the last row sees
    const std::int64_t block_stride = block_size * slot_width;
    for (std::int64_t first = 0; first < length; first += block_size) {
        const std::int64_t block =
            tile.sequence->block_table[static_cast<std::size_t>(first / block_size)];
        const std::int64_t count = std::min(block_size, length - first);
        const T* k_source = keys + block * block_stride;
        const T* v_source = values + block * block_stride;
        if (widen_blocks) {
            widen(k_source, block_keys, count * slot_width);
            widen(v_source, block_values, count * slot_width);
            attend_block(tile, shape, state, first, count, block_keys, block_values);
        } else if constexpr (!std::is_same_v<T, c10::Half>) {
            attend_block(tile, shape, state, first, count, k_source, v_source);
        }
    }
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t h = 0; h < heads; ++h) {
            const float inverse = 1.0f / state.normalizers[r * heads + h];
            const float* accumulator = state.accumulators + r * row_width + h * d;
            T* out = output + (tile.first_row + r) * row_width + h * d;
            for (std::int64_t i = 0; i < d; ++i) out[i] = static_cast<T>(accumulator[i] * inverse);
        }
    }
}

// One entry point per dtype so that each gets its target clones.
OMNIRT_KERNEL_CLONES void attend_tile_float(const QueryTile& tile, const KernelShape& shape,
                                            const float* query, const float* keys,
                                            const float* values, double scale, float* output,
                                            std::vector<float>& scratch) {
    attend_tile(tile, shape, query, keys, values, scale, output, scratch);
}
OMNIRT_KERNEL_CLONES void attend_tile_bfloat16(const QueryTile& tile, const KernelShape& shape,
                                               const c10::BFloat16* query,
                                               const c10::BFloat16* keys,
                                               const c10::BFloat16* values, double scale,
                                               c10::BFloat16* output, std::vector<float>& scratch) {
    attend_tile(tile, shape, query, keys, values, scale, output, scratch);
}
OMNIRT_KERNEL_CLONES void attend_tile_half(const QueryTile& tile, const KernelShape& shape,
                                           const c10::Half* query, const c10::Half* keys,
                                           const c10::Half* values, double scale, c10::Half* output,
                                           std::vector<float>& scratch) {
    attend_tile(tile, shape, query, keys, values, scale, output, scratch);
}
void attend_tile_any(const QueryTile& tile, const KernelShape& shape, const float* query,
                     const float* keys, const float* values, double scale, float* output,
                     std::vector<float>& scratch) {
    attend_tile_float(tile, shape, query, keys, values, scale, output, scratch);
}
void attend_tile_any(const QueryTile& tile, const KernelShape& shape, const c10::BFloat16* query,
                     const c10::BFloat16* keys, const c10::BFloat16* values, double scale,
                     c10::BFloat16* output, std::vector<float>& scratch) {
    attend_tile_bfloat16(tile, shape, query, keys, values, scale, output, scratch);
}
void attend_tile_any(const QueryTile& tile, const KernelShape& shape, const c10::Half* query,
                     const c10::Half* keys, const c10::Half* values, double scale,
                     c10::Half* output, std::vector<float>& scratch) {
    attend_tile_half(tile, shape, query, keys, values, scale, output, scratch);
}

template <class T>
void attention_cpu_kernel(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                          std::span<const SequenceInput> batch, double scale, at::Tensor& output) {
    KernelShape shape{.heads = query.size(1),
                      .kv_heads = keys.size(2),
                      .group = query.size(1) / keys.size(2),
                      .head_dim = query.size(2),
                      .block_size = keys.size(1)};
    std::vector<QueryTile> tiles;
    std::int64_t row = 0;
    for (const SequenceInput& sequence : batch) {
        const auto count = static_cast<std::int64_t>(sequence.tokens.size());
        for (std::int64_t first = 0; first < count; first += kQueryTile) {
            tiles.push_back({.sequence = &sequence,
                             .first_row = row + first,
                             .first_position = sequence.start_position + first,
                             .count = std::min(kQueryTile, count - first)});
        }
        row += count;
    }
    const T* query_data = query.data_ptr<T>();
    const T* key_data = keys.data_ptr<T>();
    const T* value_data = values.data_ptr<T>();
    T* output_data = output.data_ptr<T>();
    // Decode rows (tiles of one row) of float32 / bfloat16 take the AVX-512 kernel when it applies.
    const detail::DecodeShape decode_shape{.heads = shape.heads,
                                           .kv_heads = shape.kv_heads,
                                           .head_dim = shape.head_dim,
                                           .block_size = shape.block_size,
                                           .kv_begin = 0,
                                           .kv_end = shape.kv_heads};
    const bool decode_kernel =
        !std::is_same_v<T, c10::Half> && detail::decode_kernel_applies(decode_shape);
    // bfloat16 rows of prefill tiles too take the AVX512-BF16 row kernel, one row at a time
    // (each row re-reads the block from cache; still several times faster than the tile
    // kernel's float32 widening and scalar exp).
    const bool rows_by_decode_kernel =
        std::is_same_v<T, c10::BFloat16> && detail::bfloat16_decode_kernel_applies(decode_shape);
    // Fewer tiles than threads (a small decode batch): each decode row's kv heads are split into
    // parts, at most one task per thread, so every thread has work; other tiles run whole in
    // their part 0.
    const auto tile_count = static_cast<std::int64_t>(tiles.size());
    const std::int64_t parts = decode_kernel && tile_count > 0 && tile_count < at::get_num_threads()
                                   ? std::min(shape.kv_heads, at::get_num_threads() / tile_count)
                                   : 1;
    const std::int64_t row_width = shape.heads * shape.head_dim;
    at::parallel_for(0, tile_count * parts, 1, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> scratch;
        for (std::int64_t i = begin; i < end; ++i) {
            const QueryTile& tile = tiles[static_cast<std::size_t>(i / parts)];
            const std::int64_t part = i % parts;
            if constexpr (!std::is_same_v<T, c10::Half>) {
                if (decode_kernel && tile.count == 1) {
                    detail::DecodeShape part_shape = decode_shape;
                    part_shape.kv_begin = shape.kv_heads * part / parts;
                    part_shape.kv_end = shape.kv_heads * (part + 1) / parts;
                    detail::attend_decode(*tile.sequence, tile.first_position, part_shape,
                                          query_data + tile.first_row * row_width, key_data,
                                          value_data, scale,
                                          output_data + tile.first_row * row_width, scratch);
                    continue;
                }
            }
            if (part == 0 && rows_by_decode_kernel) {
                if constexpr (std::is_same_v<T, c10::BFloat16>) {
                    for (std::int64_t r = 0; r < tile.count; ++r) {
                        const std::int64_t row = tile.first_row + r;
                        detail::attend_decode(*tile.sequence, tile.first_position + r, decode_shape,
                                              query_data + row * row_width, key_data, value_data,
                                              scale, output_data + row * row_width, scratch);
                    }
                }
            } else if (part == 0) {
                attend_tile_any(tile, shape, query_data, key_data, value_data, scale, output_data,
                                scratch);
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
    check_shapes(query, keys, values, batch);
    return paged_attention_gathered(
        query, keys, values, attention_index(batch, keys.size(1), query.size(1), query.device()),
        scale);
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
