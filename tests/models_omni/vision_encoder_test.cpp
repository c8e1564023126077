// The Qwen3-Omni vision encoder against an independent per-item forward written from
// transformers' math (Conv3d patch embed, bilinear positions and rotary angles from explicit
// loops, attention per temporal group), plus patch-order invariants, batch == alone, bfloat16
// and errors.
#include "models/qwen3_omni/vision_encoder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "models_omni/encoder_test_support.h"

namespace omnirt::models::qwen3_omni {
namespace {

using testing::expect_close;
using testing::lookup_of;
using testing::max_difference;
using testing::tiny_vision_config;
using testing::vision_weights;
using testing::WeightMap;

at::Tensor linear_of(const WeightMap& w, const std::string& name, const at::Tensor& x) {
    return at::matmul(x, w.at(name + ".weight").t()) + w.at(name + ".bias");
}

at::Tensor norm_of(const WeightMap& w, const std::string& name, const at::Tensor& x) {
    const at::Tensor mean = x.mean(-1, true);
    const at::Tensor variance = (x - mean).pow(2).mean(-1, true);
    return (x - mean) / at::sqrt(variance + 1e-6) * w.at(name + ".weight") + w.at(name + ".bias");
}

// (row, col) of every patch in merge-block order, written as the loops of its definition.
std::vector<std::pair<std::int64_t, std::int64_t>> merge_block_order(const GridThw& grid) {
    std::vector<std::pair<std::int64_t, std::int64_t>> order;
    for (std::int64_t t = 0; t < grid.t; ++t) {
        for (std::int64_t block_row = 0; block_row < grid.h / 2; ++block_row) {
            for (std::int64_t block_col = 0; block_col < grid.w / 2; ++block_col) {
                for (std::int64_t r = 0; r < 2; ++r) {
                    for (std::int64_t c = 0; c < 2; ++c) {
                        order.emplace_back(block_row * 2 + r, block_col * 2 + c);
                    }
                }
            }
        }
    }
    return order;
}

// Bilinear (align_corners) resampling of the 48 x 48 table at every patch, in float64.
at::Tensor reference_positions(const at::Tensor& table, const GridThw& grid) {
    const at::Tensor t64 = table.to(at::kDouble);
    const auto order = merge_block_order(grid);
    at::Tensor out =
        at::zeros({static_cast<std::int64_t>(order.size()), table.size(1)}, at::kDouble);
    for (std::size_t i = 0; i < order.size(); ++i) {
        const auto [row, col] = order[i];
        const double source_row = grid.h == 1 ? 0.0 : row * 47.0 / (grid.h - 1);
        const double source_col = grid.w == 1 ? 0.0 : col * 47.0 / (grid.w - 1);
        const auto r0 = static_cast<std::int64_t>(std::floor(source_row));
        const auto c0 = static_cast<std::int64_t>(std::floor(source_col));
        const std::int64_t r1 = std::min<std::int64_t>(r0 + 1, 47);
        const std::int64_t c1 = std::min<std::int64_t>(c0 + 1, 47);
        const double fr = source_row - r0;
        const double fc = source_col - c0;
        out[static_cast<std::int64_t>(i)] =
            (1 - fr) * (1 - fc) * t64[r0 * 48 + c0] + (1 - fr) * fc * t64[r0 * 48 + c1] +
            fr * (1 - fc) * t64[r1 * 48 + c0] + fr * fc * t64[r1 * 48 + c1];
    }
    return out;
}

at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    const std::int64_t half = x.size(-1) / 2;
    const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1);
}

at::Tensor reference_merger(const WeightMap& w, const std::string& name, const at::Tensor& x,
                            bool norm_after) {
    const at::Tensor grouped = norm_after
                                   ? norm_of(w, name + ".ln_q", x.reshape({-1, 4 * x.size(1)}))
                                   : norm_of(w, name + ".ln_q", x).reshape({-1, 4 * x.size(1)});
    return linear_of(w, name + ".mlp.2", at::gelu(linear_of(w, name + ".mlp.0", grouped)));
}

VisionItemOutput reference_vision(const VisionEncoderConfig& config, const WeightMap& w,
                                  const at::Tensor& pixels, const GridThw& grid) {
    const std::string p(kVisionEncoderPrefix);
    const std::int64_t hidden = config.hidden_size;
    at::Tensor x = at::conv3d(pixels.view({-1, 3, 2, 16, 16}), w.at(p + "patch_embed.proj.weight"),
                              w.at(p + "patch_embed.proj.bias"), {2, 16, 16})
                       .view({-1, hidden});
    x = x + reference_positions(w.at(p + "pos_embed.weight"), grid).to(at::kFloat);
    // Rotary angles: [row * f_i, col * f_i] for f_i = 10000^(-2i / (head_dim / 2)), twice.
    const std::int64_t head_dim = config.head_dim();
    const std::int64_t quarter = head_dim / 4;
    const auto order = merge_block_order(grid);
    const auto n = static_cast<std::int64_t>(order.size());
    at::Tensor angles = at::empty({n, head_dim}, at::kDouble);
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t f = 0; f < quarter; ++f) {
            const double frequency = std::pow(10000.0, -2.0 * f / (head_dim / 2.0));
            const double row = order[static_cast<std::size_t>(i)].first * frequency;
            const double col = order[static_cast<std::size_t>(i)].second * frequency;
            for (std::int64_t copy = 0; copy < 2; ++copy) {
                angles[i][copy * head_dim / 2 + f] = row;
                angles[i][copy * head_dim / 2 + quarter + f] = col;
            }
        }
    }
    const at::Tensor cos = angles.cos().to(at::kFloat);
    const at::Tensor sin = angles.sin().to(at::kFloat);
    const std::int64_t heads = config.num_heads;
    const std::int64_t group = grid.h * grid.w;
    VisionItemOutput out;
    for (std::int64_t b = 0; b < config.depth; ++b) {
        const std::string block = p + "blocks." + std::to_string(b) + ".";
        const at::Tensor qkv = linear_of(w, block + "attn.qkv", norm_of(w, block + "norm1", x))
                                   .view({n, 3, heads, -1});
        const at::Tensor q = rotate(qkv.select(1, 0), cos, sin);
        const at::Tensor k = rotate(qkv.select(1, 1), cos, sin);
        const at::Tensor v = qkv.select(1, 2);
        std::vector<at::Tensor> parts;
        for (std::int64_t start = 0; start < n; start += group) {
            auto part = [&](const at::Tensor& t) {
                return t.narrow(0, start, group).transpose(0, 1);
            };
            const at::Tensor scores =
                (at::matmul(part(q), part(k).transpose(1, 2)) / std::sqrt(double(head_dim)))
                    .softmax(-1);
            parts.push_back(at::matmul(scores, part(v)).transpose(0, 1).reshape({group, -1}));
        }
        x = x + linear_of(w, block + "attn.proj", at::cat(parts));
        const at::Tensor h = linear_of(w, block + "mlp.linear_fc1", norm_of(w, block + "norm2", x));
        x = x + linear_of(w, block + "mlp.linear_fc2", at::gelu(h, "tanh"));
        const auto& taps = config.deepstack_visual_indexes;
        const auto tap = std::find(taps.begin(), taps.end(), b);
        if (tap != taps.end()) {
            out.deepstack.push_back(reference_merger(
                w, p + "merger_list." + std::to_string(tap - taps.begin()), x, true));
        }
    }
    out.embeddings = reference_merger(w, p + "merger", x, false);
    return out;
}

std::unique_ptr<VisionEncoder> make_encoder(const VisionEncoderConfig& config, const WeightMap& w,
                                            at::ScalarType dtype = at::kFloat) {
    auto encoder = VisionEncoder::load(config, lookup_of(w), {.dtype = dtype});
    OMNI_CHECK(encoder.has_value(), encoder.has_value() ? "" : encoder.error().to_string());
    return std::move(*encoder);
}

at::Tensor random_pixels(const GridThw& grid, std::uint64_t seed) {
    at::manual_seed(seed);
    return at::rand({grid.patches(), 1536}) * 2 - 1;
}

TEST(VisionPositions, PatchCoordinatesAreInMergeBlockOrder) {
    for (const GridThw grid : {GridThw{1, 4, 4}, GridThw{2, 2, 6}, GridThw{1, 6, 2}}) {
        const at::Tensor coordinates = vision_patch_coordinates(grid, 2);
        const auto order = merge_block_order(grid);
        ASSERT_EQ(coordinates.sizes(), (at::IntArrayRef{grid.patches(), 2}));
        for (std::size_t i = 0; i < order.size(); ++i) {
            const auto row = static_cast<std::int64_t>(i);
            EXPECT_EQ(coordinates[row][0].item<std::int64_t>(), order[i].first);
            EXPECT_EQ(coordinates[row][1].item<std::int64_t>(), order[i].second);
        }
    }
    // The first merge block of a 4 x 4 grid is patches (0,0) (0,1) (1,0) (1,1).
    const at::Tensor first = vision_patch_coordinates({1, 4, 4}, 2).narrow(0, 0, 5);
    EXPECT_TRUE(at::equal(first, at::tensor({0, 0, 0, 1, 1, 0, 1, 1, 0, 2}).view({5, 2})));
}

TEST(VisionPositions, FullSizeGridIsTheTableItself) {
    at::manual_seed(1);
    for (at::ScalarType type : {at::kFloat, at::kBFloat16}) {
        const at::Tensor table = at::randn({2304, 8}).to(type);
        const at::Tensor positions = interpolated_position_embedding(table, {1, 48, 48}, 2);
        // Row-major table rows in merge-block order, bit for bit.
        const auto order = merge_block_order({1, 48, 48});
        std::vector<std::int64_t> rows;
        for (const auto& [row, col] : order) rows.push_back(row * 48 + col);
        EXPECT_TRUE(at::equal(positions, table.index_select(0, at::tensor(rows))));
    }
}

TEST(VisionPositions, BilinearMatchesTheFormula) {
    at::manual_seed(2);
    const at::Tensor table = at::randn({2304, 8});
    for (const GridThw grid :
         {GridThw{1, 2, 2}, GridThw{2, 6, 4}, GridThw{1, 10, 32}, GridThw{1, 64, 2}}) {
        expect_close(interpolated_position_embedding(table, grid, 2),
                     reference_positions(table, grid), 5e-5);  // float32 coordinates
    }
}

TEST(VisionEncoder, MatchesReferenceForward) {
    const VisionEncoderConfig config = tiny_vision_config();
    const WeightMap w = vision_weights(config, 3);
    const auto encoder = make_encoder(config, w);
    for (const GridThw grid : {GridThw{1, 4, 6}, GridThw{2, 2, 2}, GridThw{3, 6, 4}}) {
        const at::Tensor pixels = random_pixels(grid, 4);
        auto out = encoder->forward(pixels, {grid});
        ASSERT_TRUE(out.has_value()) << out.error().to_string();
        const VisionItemOutput expected = reference_vision(config, w, pixels, grid);
        const VisionItemOutput& actual = (*out)[0];
        ASSERT_EQ(actual.embeddings.sizes(), (at::IntArrayRef{grid.patches() / 4, 24}));
        expect_close(actual.embeddings, expected.embeddings, 1e-4);
        ASSERT_EQ(actual.deepstack.size(), 2u);
        for (std::size_t k = 0; k < 2; ++k) {
            expect_close(actual.deepstack[k], expected.deepstack[k], 1e-4);
        }
    }
}

TEST(VisionEncoder, BatchEqualsEachItemAlone) {
    const VisionEncoderConfig config = tiny_vision_config();
    const WeightMap w = vision_weights(config, 5);
    const auto encoder = make_encoder(config, w);
    const std::vector<GridThw> grids = {{1, 4, 6}, {2, 2, 4}, {1, 8, 8}, {1, 4, 6}, {4, 2, 2}};
    std::vector<at::Tensor> pixels;
    for (std::size_t i = 0; i < grids.size(); ++i) pixels.push_back(random_pixels(grids[i], i));
    auto batch = encoder->forward(at::cat(pixels), grids);
    ASSERT_TRUE(batch.has_value()) << batch.error().to_string();
    ASSERT_EQ(batch->size(), grids.size());
    for (std::size_t i = 0; i < grids.size(); ++i) {
        auto alone = encoder->forward(pixels[i], {grids[i]});
        ASSERT_TRUE(alone.has_value());
        expect_close((*batch)[i].embeddings, (*alone)[0].embeddings, 1e-5);
        for (std::size_t k = 0; k < 2; ++k) {
            expect_close((*batch)[i].deepstack[k], (*alone)[0].deepstack[k], 1e-5);
        }
    }
}

TEST(VisionEncoder, TemporalGroupsDoNotAttendToEachOther) {
    const VisionEncoderConfig config = tiny_vision_config();
    const WeightMap w = vision_weights(config, 6);
    const auto encoder = make_encoder(config, w);
    // A video of 3 groups of 4 x 4 patches: changing group 1's pixels leaves groups 0 and 2.
    const GridThw grid{3, 4, 4};
    const at::Tensor pixels = random_pixels(grid, 7);
    at::Tensor changed = pixels.clone();
    changed.narrow(0, 16, 16).add_(1.0);
    auto before = encoder->forward(pixels, {grid});
    auto after = encoder->forward(changed, {grid});
    ASSERT_TRUE(before.has_value() && after.has_value());
    const at::Tensor& a = (*before)[0].embeddings;
    const at::Tensor& b = (*after)[0].embeddings;
    expect_close(b.narrow(0, 0, 4), a.narrow(0, 0, 4), 1e-6);
    expect_close(b.narrow(0, 8, 4), a.narrow(0, 8, 4), 1e-6);
    EXPECT_GT(max_difference(b.narrow(0, 4, 4), a.narrow(0, 4, 4)), 1e-3);
}

TEST(VisionEncoder, Bfloat16FollowsFloat32) {
    const VisionEncoderConfig config = tiny_vision_config();
    const WeightMap w = vision_weights(config, 8);
    const auto full = make_encoder(config, w);
    const auto half = make_encoder(config, w, at::kBFloat16);
    const std::vector<GridThw> grids = {{1, 4, 6}, {2, 2, 2}};
    const at::Tensor pixels = at::cat({random_pixels(grids[0], 1), random_pixels(grids[1], 2)});
    auto expected = full->forward(pixels, grids);
    auto actual = half->forward(pixels, grids);
    ASSERT_TRUE(expected.has_value() && actual.has_value());
    for (std::size_t i = 0; i < grids.size(); ++i) {
        EXPECT_EQ((*actual)[i].embeddings.scalar_type(), at::kBFloat16);
        const double scale = (*expected)[i].embeddings.abs().max().item<double>();
        EXPECT_LE(max_difference((*actual)[i].embeddings, (*expected)[i].embeddings),
                  0.05 * scale + 0.02);
    }
}

TEST(VisionEncoder, ErrorsNameTheProblem) {
    const VisionEncoderConfig config = tiny_vision_config();
    WeightMap w = vision_weights(config, 9);
    const auto encoder = make_encoder(config, w);
    const at::Tensor pixels = random_pixels({1, 4, 4}, 1);
    EXPECT_FALSE(encoder->forward(pixels, {}).has_value());
    auto odd = encoder->forward(random_pixels({1, 3, 4}, 1), {{1, 3, 4}});
    ASSERT_FALSE(odd.has_value());
    EXPECT_NE(odd.error().message.find("spatial_merge_size"), std::string::npos);
    auto rows = encoder->forward(pixels, {{1, 4, 6}});
    ASSERT_FALSE(rows.has_value());
    EXPECT_EQ(rows.error().code, ErrorCode::invalid_argument);
    EXPECT_FALSE(encoder->forward(pixels.narrow(1, 0, 100), {{1, 4, 4}}).has_value());
    EXPECT_FALSE(encoder->forward(pixels, {{0, 4, 4}}).has_value());

    w.erase("thinker.visual.merger_list.1.mlp.2.bias");
    auto missing = VisionEncoder::load(config, lookup_of(w));
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    EXPECT_NE(missing.error().message.find("merger_list.1.mlp.2.bias"), std::string::npos);

    w = vision_weights(config, 9);
    w["thinker.visual.pos_embed.weight"] = at::zeros({2300, 32});
    auto wrong = VisionEncoder::load(config, lookup_of(w));
    ASSERT_FALSE(wrong.has_value());
    EXPECT_EQ(wrong.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(wrong.error().message.find("pos_embed.weight"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni
