// paged_attention: the CPU kernel against the ATen reference and against dense causal attention
// over contiguous keys, with grouped heads, several sequences, shuffled blocks and bfloat16; the
// batched gathered path (attention_index.h, what CUDA runs) against the reference, in one group
// and split into several.
#include "engine/paged_attention.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "engine/attention_index.h"
#include "engine/kv_cache.h"
#include "engine/paged_attention_decode.h"

namespace omnirt::engine {
namespace {

struct Case {
    std::int64_t heads;
    std::int64_t kv_heads;
    std::int64_t head_dim;
    std::int64_t block_size;
};

SequenceInput make_sequence(std::int64_t start, std::int64_t count,
                            std::vector<std::int32_t> blocks) {
    SequenceInput s;
    s.request_id = "s" + std::to_string(start);
    s.tokens.assign(static_cast<std::size_t>(count), 0);
    s.start_position = start;
    s.block_table = std::move(blocks);
    return s;
}

// Dense causal GQA of one sequence from contiguous keys / values [length, kv_heads, dim].
at::Tensor dense_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           std::int64_t start, double scale) {
    const std::int64_t group = q.size(1) / k.size(1);
    const at::Tensor keys = k.repeat_interleave(group, 1).transpose(0, 1);  // [heads, length, d]
    const at::Tensor values = v.repeat_interleave(group, 1).transpose(0, 1);
    at::Tensor scores = at::matmul(q.transpose(0, 1), keys.transpose(1, 2)) * scale;
    const std::int64_t count = q.size(0);
    const std::int64_t length = k.size(0);
    const at::Tensor mask =
        at::arange(length).unsqueeze(0) > (at::arange(count) + start).unsqueeze(1);
    scores = scores.masked_fill(mask, -INFINITY);
    return at::matmul(at::softmax(scores, -1), values).transpose(0, 1);
}

class PagedAttention : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttention, KernelAndReferenceMatchDenseAttention) {
    const Case c = GetParam();
    at::manual_seed(4);
    const KVCacheSpec spec{.num_layers = 1,
                           .num_kv_heads = static_cast<int>(c.kv_heads),
                           .head_dim = static_cast<int>(c.head_dim)};
    auto created = KVCache::create(spec, 64, c.block_size);
    ASSERT_TRUE(created.has_value());
    KVCache& cache = **created;
    // Sequences (start, new tokens): decode, prefill chunk after a prefix, fresh prefill.
    const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
        {20, 1}, {7, 6}, {0, 9}, {0, 1}};
    std::vector<std::int32_t> free_blocks(64);
    std::iota(free_blocks.begin(), free_blocks.end(), 0);
    std::shuffle(free_blocks.begin(), free_blocks.end(), std::mt19937(3));
    std::vector<SequenceInput> batch;
    std::vector<at::Tensor> dense_keys;
    std::vector<at::Tensor> dense_values;
    std::size_t next_block = 0;
    for (auto [start, count] : shapes) {
        const std::int64_t length = start + count;
        const std::int64_t blocks = (length + c.block_size - 1) / c.block_size;
        std::vector<std::int32_t> table(
            free_blocks.begin() + static_cast<std::ptrdiff_t>(next_block),
            free_blocks.begin() + static_cast<std::ptrdiff_t>(next_block + blocks));
        next_block += static_cast<std::size_t>(blocks);
        const at::Tensor k = at::randn({length, c.kv_heads, c.head_dim});
        const at::Tensor v = at::randn({length, c.kv_heads, c.head_dim});
        for (std::int64_t p = 0; p < length; ++p) {
            const std::int64_t block = table[static_cast<std::size_t>(p / c.block_size)];
            cache.keys(0)[block][p % c.block_size].copy_(k[p]);
            cache.values(0)[block][p % c.block_size].copy_(v[p]);
        }
        dense_keys.push_back(k);
        dense_values.push_back(v);
        batch.push_back(make_sequence(start, count, std::move(table)));
    }
    std::int64_t total = 0;
    for (auto [start, count] : shapes) total += count;
    const at::Tensor query = at::randn({total, c.heads, c.head_dim});
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));

    const at::Tensor kernel =
        paged_attention_cpu(query, cache.keys(0), cache.values(0), batch, scale);
    const at::Tensor reference =
        paged_attention_reference(query, cache.keys(0), cache.values(0), batch, scale);
    const at::Tensor dispatched =
        paged_attention(query, cache.keys(0), cache.values(0), batch, scale);
    EXPECT_TRUE(dispatched.equal(kernel));
    EXPECT_TRUE(at::allclose(kernel, reference, 1e-5, 1e-5));
    // The gathered path: one group (the default budget), one sequence per group (a budget of one
    // byte), and groups of two (a budget between).
    const std::int64_t two_sequences = 4 * 2 * c.heads * 9 * 27;
    for (const std::int64_t budget : {kDefaultScoreBudgetBytes, std::int64_t{1}, two_sequences}) {
        const AttentionIndex index =
            attention_index(batch, c.block_size, c.heads, at::kCPU, budget);
        const std::size_t expected_groups = budget == 1               ? batch.size()
                                            : budget == two_sequences ? 2
                                                                      : 1;
        EXPECT_EQ(index.groups.size(), expected_groups) << budget;
        const at::Tensor gathered =
            paged_attention_gathered(query, cache.keys(0), cache.values(0), index, scale);
        EXPECT_EQ(gathered.sizes(), query.sizes());
        EXPECT_TRUE(at::allclose(gathered, reference, 1e-5, 1e-5)) << budget;
    }
    std::int64_t row = 0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
        const std::int64_t count = shapes[i].second;
        const at::Tensor expected = dense_attention(query.narrow(0, row, count), dense_keys[i],
                                                    dense_values[i], shapes[i].first, scale);
        EXPECT_TRUE(at::allclose(kernel.narrow(0, row, count), expected, 1e-5, 1e-5)) << i;
        row += count;
    }

    // bfloat16: the kernel accumulates in float32, so it stays within bf16 rounding.
    const at::Tensor keys16 = cache.keys(0).to(at::kBFloat16);
    const at::Tensor values16 = cache.values(0).to(at::kBFloat16);
    const at::Tensor query16 = query.to(at::kBFloat16);
    const at::Tensor kernel16 = paged_attention_cpu(query16, keys16, values16, batch, scale);
    const at::Tensor reference16 =
        paged_attention_reference(query16, keys16, values16, batch, scale);
    EXPECT_EQ(kernel16.scalar_type(), at::kBFloat16);
    const at::Tensor gathered16 = paged_attention_gathered(
        query16, keys16, values16, attention_index(batch, c.block_size, c.heads, at::kCPU), scale);
    EXPECT_EQ(gathered16.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::allclose(gathered16.to(at::kFloat), reference16.to(at::kFloat), 1e-2, 1e-2));
    EXPECT_TRUE(at::allclose(kernel16.to(at::kFloat), reference16.to(at::kFloat), 2e-2, 2e-2));
    EXPECT_TRUE(at::allclose(kernel16.to(at::kFloat), kernel, 5e-2, 5e-2));
    const at::Tensor kernel_half =
        paged_attention_cpu(query.to(at::kHalf), cache.keys(0).to(at::kHalf),
                            cache.values(0).to(at::kHalf), batch, scale);
    EXPECT_EQ(kernel_half.scalar_type(), at::kHalf);
    EXPECT_TRUE(at::allclose(kernel_half.to(at::kFloat), kernel, 1e-2, 1e-2));
}

constexpr std::int64_t kDecodeBlock = 16;
constexpr std::int64_t kDecodeHeads = 16;
constexpr std::int64_t kDecodeKvHeads = 8;
constexpr std::int64_t kDecodeDim = 128;

// Decode rows at `positions` over a bfloat16 cache of blocks of 16 whose slots past each
// sequence hold NaN, with the same keys and values dense in float32.
struct DecodeCase {
    at::Tensor keys;
    at::Tensor values;
    at::Tensor query;
    std::vector<SequenceInput> batch;
    std::vector<at::Tensor> dense_keys;
    std::vector<at::Tensor> dense_values;
};

DecodeCase make_decode_case(const std::vector<std::int64_t>& positions) {
    DecodeCase c;
    std::int64_t blocks = 0;
    for (std::int64_t p : positions) blocks += p / kDecodeBlock + 1;
    c.keys = at::full({blocks, kDecodeBlock, kDecodeKvHeads, kDecodeDim}, NAN,
                      at::TensorOptions(at::kBFloat16));
    c.values = at::full_like(c.keys, NAN);
    std::int32_t next_block = 0;
    for (std::int64_t position : positions) {
        const std::int64_t length = position + 1;
        // Keys scaled up so that the softmax is far from uniform.
        const at::Tensor k =
            (at::randn({length, kDecodeKvHeads, kDecodeDim}) * 3).to(at::kBFloat16);
        const at::Tensor v = at::randn({length, kDecodeKvHeads, kDecodeDim}).to(at::kBFloat16);
        std::vector<std::int32_t> table;
        for (std::int64_t p = 0; p < length; ++p) {
            if (p % kDecodeBlock == 0) table.push_back(next_block++);
            c.keys[table.back()][p % kDecodeBlock].copy_(k[p]);
            c.values[table.back()][p % kDecodeBlock].copy_(v[p]);
        }
        c.dense_keys.push_back(k.to(at::kFloat));
        c.dense_values.push_back(v.to(at::kFloat));
        c.batch.push_back(make_sequence(position, 1, std::move(table)));
    }
    c.query = at::randn({static_cast<std::int64_t>(positions.size()), kDecodeHeads, kDecodeDim})
                  .to(at::kBFloat16);
    return c;
}

// bfloat16 decode rows over many blocks (the AVX512-BF16 kernel's shape: blocks of 16, head_dim
// 128, pairs of heads per kv head) against dense float32 attention over the same bfloat16 keys
// and values. The cache's slots past each sequence hold NaN: the kernel computes scores for a
// whole block and masks them, so nothing of those slots may reach the output.
TEST(PagedAttentionDecode, BFloat16RowsOverManyBlocksIgnoreSlotsPastTheSequence) {
    at::manual_seed(5);
    const std::vector<std::int64_t> positions = {0, 15, 16, 47, 100, 333};
    const DecodeCase c = make_decode_case(positions);
    const double scale = 1.0 / std::sqrt(static_cast<double>(kDecodeDim));
    const at::Tensor kernel = paged_attention_cpu(c.query, c.keys, c.values, c.batch, scale);
    ASSERT_EQ(kernel.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::isfinite(kernel).all().item<bool>());
    for (std::size_t i = 0; i < positions.size(); ++i) {
        const auto row = static_cast<std::int64_t>(i);
        const at::Tensor expected =
            dense_attention(c.query.narrow(0, row, 1).to(at::kFloat), c.dense_keys[i],
                            c.dense_values[i], positions[i], scale);
        // The output's own bfloat16 rounding (2^-9 relative) plus float32 sums.
        EXPECT_TRUE(at::allclose(kernel.narrow(0, row, 1).to(at::kFloat), expected, 1e-2, 1e-2))
            << positions[i];
    }
}

// A decode batch smaller than the thread count splits each row's kv heads among the threads;
// every split gives the bits of the row computed whole inside a batch (float32 and bfloat16).
TEST(PagedAttentionDecode, RowsSplitAcrossThreadsGiveTheBitsOfAWholeRow) {
    if (!detail::decode_kernel_applies({.heads = kDecodeHeads,
                                        .kv_heads = kDecodeKvHeads,
                                        .head_dim = kDecodeDim,
                                        .block_size = kDecodeBlock,
                                        .kv_begin = 0,
                                        .kv_end = kDecodeKvHeads})) {
        GTEST_SKIP() << "rows are split only for the AVX-512 decode kernel";
    }
    at::manual_seed(6);
    const std::vector<std::int64_t> positions = {5, 40, 77, 150, 16, 31, 200, 3, 64};
    const DecodeCase c = make_decode_case(positions);
    const double scale = 1.0 / std::sqrt(static_cast<double>(kDecodeDim));
    struct RestoreThreads {
        int count = at::get_num_threads();
        ~RestoreThreads() { at::set_num_threads(count); }
    } restore;
    for (at::ScalarType type : {at::kBFloat16, at::kFloat}) {
        const at::Tensor query = c.query.to(type);
        const at::Tensor keys = c.keys.to(type);
        const at::Tensor values = c.values.to(type);
        at::set_num_threads(1);
        const at::Tensor whole = paged_attention_cpu(query, keys, values, c.batch, scale);
        for (int threads : {2, 3, 8, 16}) {
            at::set_num_threads(threads);
            for (std::size_t i = 0; i < positions.size(); ++i) {
                const auto row = static_cast<std::int64_t>(i);
                const at::Tensor alone = paged_attention_cpu(query.narrow(0, row, 1), keys, values,
                                                             {&c.batch[i], 1}, scale);
                EXPECT_TRUE(alone[0].equal(whole[row]))
                    << c10::toString(type) << " threads " << threads << " row " << i;
            }
            // Two rows, three or more threads: parts of both.
            const at::Tensor pair =
                paged_attention_cpu(query.narrow(0, 1, 2), keys, values, {&c.batch[1], 2}, scale);
            EXPECT_TRUE(pair.equal(whole.narrow(0, 1, 2))) << c10::toString(type) << " " << threads;
        }
    }
}

// In bfloat16 on the AVX512-BF16 path, prefill rows take the decode row kernel too: a prompt's
// rows computed in one prefill call (tiles of 8) give the bits of each row computed alone as a
// decode step, so a KV-cached decode continues exactly what a recomputation would give.
TEST(PagedAttentionDecode, BFloat16PrefillRowsEqualDecodeRows) {
    const detail::DecodeShape shape{.heads = kDecodeHeads,
                                    .kv_heads = kDecodeKvHeads,
                                    .head_dim = kDecodeDim,
                                    .block_size = kDecodeBlock,
                                    .kv_begin = 0,
                                    .kv_end = kDecodeKvHeads};
    if (!detail::bfloat16_decode_kernel_applies(shape)) {
        GTEST_SKIP() << "prefill rows take the row kernel only with AVX512-BF16";
    }
    at::manual_seed(9);
    constexpr std::int64_t kLength = 45;  // three blocks, the last partial
    const DecodeCase c = make_decode_case({kLength - 1});
    const at::Tensor query = at::randn({kLength, kDecodeHeads, kDecodeDim}).to(at::kBFloat16);
    const double scale = 1.0 / std::sqrt(static_cast<double>(kDecodeDim));
    SequenceInput prompt = c.batch[0];
    prompt.start_position = 0;
    prompt.tokens.assign(static_cast<std::size_t>(kLength), 0);
    const at::Tensor prefill = paged_attention_cpu(query, c.keys, c.values, {&prompt, 1}, scale);
    for (std::int64_t position = 0; position < kLength; ++position) {
        SequenceInput step = c.batch[0];
        step.start_position = position;
        step.tokens.assign(1, 0);
        const at::Tensor decode =
            paged_attention_cpu(query.narrow(0, position, 1), c.keys, c.values, {&step, 1}, scale);
        EXPECT_TRUE(decode[0].equal(prefill[position])) << position;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttention,
                         ::testing::Values(Case{4, 2, 16, 4}, Case{8, 8, 32, 16}, Case{6, 1, 8, 1},
                                           Case{16, 8, 128, 16}, Case{2, 2, 20, 3},
                                           // head_dim 128: decode rows take the AVX-512 kernel
                                           // (groups of 3 and 1: heads in pairs and alone).
                                           Case{12, 4, 128, 16}, Case{4, 4, 128, 5}));

}  // namespace
}  // namespace omnirt::engine
