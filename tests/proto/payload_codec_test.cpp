#include "proto/payload_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "proto/random_values.h"

namespace omnirt::proto {
namespace {

using testing::RandomValues;
using Bytes8 = std::vector<std::uint8_t>;

EncodedPayload encode_ok(const StagePayload& payload) {
    auto encoded = encode_payload(payload);
    EXPECT_TRUE(encoded.has_value()) << encoded.error().to_string();
    return encoded.has_value() ? *encoded : EncodedPayload{};
}

Tensor buffer_of(const EncodedPayload& encoded) {
    auto buffer = make_flat_buffer(encoded);
    EXPECT_TRUE(buffer.has_value()) << buffer.error().to_string();
    return *buffer;
}

// A payload with one tensor of every dtype, an empty one and strided views.
StagePayload every_dtype_payload(RandomValues& random) {
    StagePayload payload{.request_id = "r", .request = {}, .data = Value()};
    List tensors;
    for (DType dtype : testing::all_dtypes()) tensors.push_back(random.tensor_of(dtype));
    tensors.push_back(Tensor::empty({0, 4}, DType::f32).value());
    tensors.push_back(random.strided_view(DType::bf16, {3, 4}));
    tensors.push_back(random.strided_view(DType::i64, {2, 5, 3}));
    payload.data = Map{{"tensors", std::move(tensors)}, {"n", 3}};
    payload.request.inputs = Map{{"image", random.tensor_of(DType::u8)}};
    return payload;
}

TEST(PayloadCodec, RoundTripsRandomPayloads) {
    RandomValues random(21);
    for (int i = 0; i < 300; ++i) {
        StagePayload payload = i == 0 ? every_dtype_payload(random) : random.payload();
        EncodedPayload encoded = encode_ok(payload);
        Tensor buffer = buffer_of(encoded);
        auto decoded = decode_payload(encoded.header, buffer);
        ASSERT_TRUE(decoded.has_value()) << i << ": " << decoded.error().to_string();
        EXPECT_TRUE(*decoded == payload) << i;
        // The header survives its own wire form.
        Bytes8 wire;
        ASSERT_TRUE(encode_payload_header(encoded.header, wire).has_value());
        auto header = decode_payload_header(wire);
        ASSERT_TRUE(header.has_value()) << header.error().to_string();
        EXPECT_EQ(*header, encoded.header);
    }
}

TEST(PayloadCodec, LayoutIsAlignedPackedAndZeroPadded) {
    RandomValues random(22);
    EncodedPayload encoded = encode_ok(every_dtype_payload(random));
    const auto& infos = encoded.header.tensor_info;
    ASSERT_EQ(infos.size(), encoded.tensors.size());
    std::uint64_t end = 0;
    for (std::size_t i = 0; i < infos.size(); ++i) {
        EXPECT_EQ(infos[i].offset % kTensorAlignment, 0u);
        EXPECT_GE(infos[i].offset, end);
        EXPECT_LT(infos[i].offset, end + kTensorAlignment);
        EXPECT_EQ(infos[i].nbytes, encoded.tensors[i].nbytes());
        end = infos[i].offset + infos[i].nbytes;
    }
    EXPECT_EQ(encoded.header.buffer_bytes, end);
    // Tensors are numbered in writing order: request (inputs, params, metadata), then data.
    EXPECT_EQ(infos[0].path,
              (TensorPath{std::string("request"), std::string("inputs"), std::string("image")}));
    EXPECT_EQ(infos[1].path,
              (TensorPath{std::string("data"), std::string("tensors"), std::int64_t{0}}));
    // Padding is zeroed even in a dirty buffer.
    std::vector<std::byte> dirty(encoded.header.buffer_bytes, std::byte{0xee});
    ASSERT_TRUE(write_tensors(encoded, dirty).has_value());
    for (std::size_t i = 1; i < infos.size(); ++i) {
        for (auto at = infos[i - 1].offset + infos[i - 1].nbytes; at < infos[i].offset; ++at) {
            ASSERT_EQ(dirty[at], std::byte{0}) << at;
        }
    }
}

TEST(PayloadCodec, TensorFreePayloadNeedsNoBuffer) {
    StagePayload payload{.request_id = "r", .request = {}, .data = Map{{"text", "hi"}}};
    EncodedPayload encoded = encode_ok(payload);
    EXPECT_EQ(encoded.header.buffer_bytes, 0u);
    EXPECT_TRUE(encoded.header.tensor_info.empty());
    auto decoded = decode_payload(encoded.header, Tensor());
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    EXPECT_TRUE(*decoded == payload);
}

TEST(PayloadCodec, EmptyTensorsNeedNoBufferEither) {
    StagePayload payload{.request_id = "r",
                         .request = {},
                         .data = Map{{"empty", Tensor::empty({0, 4}, DType::f32).value()}}};
    EncodedPayload encoded = encode_ok(payload);
    EXPECT_EQ(encoded.header.buffer_bytes, 0u);
    ASSERT_EQ(encoded.header.tensor_info.size(), 1u);
    auto decoded = decode_payload(encoded.header, Tensor());
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    EXPECT_TRUE(*decoded == payload);
    EXPECT_EQ(decoded->data.find("empty")->as_tensor().shape(), (Shape{0, 4}));
}

TEST(PayloadCodec, DecodedTensorsAreZeroCopyViewsOfTheBuffer) {
    RandomValues random(23);
    StagePayload payload = every_dtype_payload(random);
    EncodedPayload encoded = encode_ok(payload);
    const std::size_t size = encoded.header.buffer_bytes;
    auto* memory =
        static_cast<std::byte*>(std::aligned_alloc(kTensorAlignment, (size + 63) / 64 * 64));
    ASSERT_TRUE(write_tensors(encoded, std::span(memory, size)).has_value());
    int deleted = 0;
    auto storage = Storage::wrap(
        memory, size, Device::cpu(),
        [&deleted](std::byte* p) {
            ++deleted;
            std::free(p);
        },
        /*read_only=*/true);
    Tensor kept;
    {
        Tensor buffer =
            Tensor::from_storage(storage, DType::u8, {static_cast<std::int64_t>(size)}).value();
        storage.reset();
        auto decoded = decode_payload(encoded.header, buffer);
        ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
        EXPECT_TRUE(*decoded == payload);
        const List& tensors = decoded->data.find("tensors")->as_list();
        for (const Value& item : tensors) {
            const Tensor& t = item.as_tensor();
            EXPECT_EQ(t.storage().get(), buffer.storage().get());
            EXPECT_GE(t.data(), memory);
            EXPECT_LE(t.data() + t.nbytes(), memory + size);
            EXPECT_TRUE(t.read_only());
        }
        kept = tensors[0].as_tensor();
    }
    EXPECT_EQ(deleted, 0) << "a view is still alive";
    kept = Tensor();
    EXPECT_EQ(deleted, 1);
}

TEST(PayloadCodec, BlobsCarryTensorValuedMetadata) {
    RandomValues random(24);
    for (int i = 0; i < 100; ++i) {
        Value chunk = random.value(3);
        Value metadata = Map{{"codes", random.tensor()}, {"final", random.chance(0.5)}};
        auto encoded = encode_blob(chunk, metadata);
        ASSERT_TRUE(encoded.has_value()) << encoded.error().to_string();
        bool metadata_tensor = false;
        for (const TensorInfo& info : encoded->header.tensor_info) {
            metadata_tensor |= info.path.front() == PathElement(std::string("metadata"));
        }
        EXPECT_TRUE(metadata_tensor);
        auto decoded = decode_blob(encoded->header, buffer_of(*encoded));
        ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
        EXPECT_EQ(decoded->chunk, chunk);
        EXPECT_EQ(decoded->metadata, metadata);
    }
}

TEST(PayloadCodec, WriteTensorsRefusesDeviceTensors) {
    // A fake device tensor: host memory labelled cuda:0, never touched by the failing write.
    auto storage = Storage::wrap(
        new std::byte[64], 64, Device::cuda(0), [](std::byte* p) { delete[] p; }, false);
    Tensor device = Tensor::from_storage(storage, DType::f32, {4}).value();
    StagePayload payload{.request_id = "r", .request = {}, .data = Map{{"x", device}}};
    EncodedPayload encoded = encode_ok(payload);  // the header alone is device-neutral
    std::vector<std::byte> buffer(encoded.header.buffer_bytes);
    auto status = write_tensors(encoded, buffer);
    ASSERT_FALSE(status.has_value());
    EXPECT_NE(status.error().message.find("cuda:0 tensor"), std::string::npos);
}

// --- malformed headers and trees ---

struct Fixture {
    StagePayload payload;
    EncodedPayload encoded;
    Tensor buffer;
};

Fixture two_tensors() {
    Fixture f;
    f.payload = StagePayload{.request_id = "r",
                             .request = {},
                             .data = Map{{"a", Tensor::from_vector<float>({1, 2, 3, 4})},
                                         {"b", Tensor::from_vector<float>({5, 6, 7, 8})}}};
    f.encoded = encode_ok(f.payload);
    f.buffer = buffer_of(f.encoded);
    return f;
}

std::string error_of(const PayloadHeader& header, const Tensor& buffer,
                     const DecodeLimits& limits = {}) {
    auto decoded = decode_payload(header, buffer, limits);
    return decoded.has_value() ? "<decoded>" : decoded.error().message;
}

// Replaces the first occurrence of `from` in the tree bytes.
void patch_tree(PayloadHeader& header, const Bytes8& from, const Bytes8& to) {
    auto it = std::search(header.tree.begin(), header.tree.end(), from.begin(), from.end());
    ASSERT_NE(it, header.tree.end());
    std::copy(to.begin(), to.end(), it);
}

TEST(PayloadCodec, RejectsTensorInfoOutsideTheBuffer) {
    Fixture f = two_tensors();
    EXPECT_EQ(error_of(f.encoded.header, f.buffer), "<decoded>");
    PayloadHeader h = f.encoded.header;
    h.tensor_info[1].offset = h.buffer_bytes;  // past the end
    EXPECT_EQ(error_of(h, f.buffer),
              "tensor_info[1] (data.b): bytes [80, +16) lie outside the buffer of 80 bytes");
    h = f.encoded.header;
    h.tensor_info[1].offset = std::numeric_limits<std::uint64_t>::max() - 3;  // would wrap
    EXPECT_NE(error_of(h, f.buffer).find("lie outside the buffer"), std::string::npos);
    h = f.encoded.header;
    h.buffer_bytes = 1000;
    EXPECT_EQ(error_of(h, f.buffer),
              "payload needs a buffer of 1000 bytes but the flat buffer holds 80");
}

TEST(PayloadCodec, RejectsOverlapMisalignmentAndSizeMismatch) {
    Fixture f = two_tensors();
    PayloadHeader h = f.encoded.header;
    h.tensor_info[1].offset = 8;
    EXPECT_EQ(error_of(h, f.buffer),
              "tensor_info[0] (data.a) and tensor_info[1] (data.b) overlap in the buffer");
    h = f.encoded.header;
    h.tensor_info[1].offset = 62;
    EXPECT_EQ(error_of(h, f.buffer),
              "tensor_info[1] (data.b): offset 62 is not aligned to the 4-byte elements of "
              "float32");
    h = f.encoded.header;
    h.tensor_info[1].nbytes = 12;
    EXPECT_EQ(error_of(h, f.buffer),
              "tensor_info[1] (data.b): nbytes 12 differs from the 4 float32 elements of its "
              "shape");
    h = f.encoded.header;
    h.tensor_info[1].shape = {std::int64_t{1} << 62, 0, 4};
    h.tensor_info[1].nbytes = 0;
    EXPECT_NE(error_of(h, f.buffer).find("overflow int64 strides"), std::string::npos);
    h = f.encoded.header;
    h.tensor_info[1].shape = {-4};
    EXPECT_NE(error_of(h, f.buffer).find("negative"), std::string::npos);
    h = f.encoded.header;
    EXPECT_NE(error_of(h, f.buffer, {.max_tensor_bytes = 15}).find("exceeds the limit of 15"),
              std::string::npos);
    EXPECT_NE(error_of(h, f.buffer, {.max_tensors = 1}).find("payload holds 2 tensors"),
              std::string::npos);
}

TEST(PayloadCodec, EveryEntryNeedsExactlyOnePlaceholderAtItsPath) {
    Fixture f = two_tensors();
    // Placeholders: d4 01 00 (tensor 0) and d4 01 01 (tensor 1).
    PayloadHeader h = f.encoded.header;
    patch_tree(h, {0xd4, 0x01, 0x01}, {0xd4, 0x01, 0x00});
    EXPECT_EQ(error_of(h, f.buffer),
              "tensor_info[0] (data.a) is referenced by two placeholders, at data.a and data.b");
    h = f.encoded.header;
    patch_tree(h, {0xd4, 0x01, 0x01}, {0xd4, 0x01, 0x05});
    EXPECT_EQ(error_of(h, f.buffer),
              "placeholder at data.b refers to tensor 5 but tensor_info has 2 entries");
    h = f.encoded.header;
    std::swap(h.tensor_info[0].path, h.tensor_info[1].path);
    EXPECT_EQ(error_of(h, f.buffer),
              "tensor_info[0] (data.b) is referenced by a placeholder at data.a");
    h = f.encoded.header;
    h.tensor_info[1].path = h.tensor_info[0].path;  // two entries claim data.a
    EXPECT_EQ(error_of(h, f.buffer),
              "tensor_info[1] (data.a) is referenced by a placeholder at data.b");
    h = f.encoded.header;
    h.tensor_info.push_back(h.tensor_info[1]);
    h.tensor_info.back().path = {std::string("data"), std::string("c")};
    h.tensor_info.back().offset = 128;
    h.buffer_bytes = 144;
    Tensor bigger = Tensor::empty({144}, DType::u8).value();
    EXPECT_EQ(error_of(h, bigger), "tensor_info[2] (data.c) is not referenced by any placeholder");
    h = f.encoded.header;
    h.tensor_info.clear();
    EXPECT_EQ(error_of(h, f.buffer), "payload has no tensors but declares a buffer of 80 bytes");
    h.buffer_bytes = 0;
    EXPECT_EQ(error_of(h, f.buffer),
              "placeholder at data.a refers to tensor 0 but tensor_info has 0 entries");
}

TEST(PayloadCodec, RejectsBadBuffersAndTrees) {
    Fixture f = two_tensors();
    Tensor floats = Tensor::empty({20}, DType::f32).value();
    EXPECT_EQ(error_of(f.encoded.header, floats),
              "the flat buffer must be a defined, contiguous, 1-D uint8 tensor");
    EXPECT_EQ(error_of(f.encoded.header, Tensor()),
              "the flat buffer must be a defined, contiguous, 1-D uint8 tensor");
    // A buffer view at an odd address cannot hold aligned floats.
    Tensor odd = Tensor::from_storage(f.buffer.storage(), DType::u8, {79}, {}, 1).value();
    PayloadHeader h = f.encoded.header;
    h.buffer_bytes = 79;
    h.tensor_info[1].offset = 60;
    EXPECT_NE(error_of(h, odd).find("not aligned"), std::string::npos);
    h = f.encoded.header;
    h.tree = {0x91, 0xc0};
    EXPECT_EQ(error_of(h, f.buffer), "payload: expected map, got list");
    h.tree = {0x80, 0x00};
    EXPECT_NE(error_of(h, f.buffer).find("trailing bytes"), std::string::npos);
    Bytes8 inline_tree =
        encode_value(Value(Map{{"request_id", "r"}, {"x", Tensor::from_vector<float>({1})}}))
            .value();
    h.tree = inline_tree;
    EXPECT_NE(error_of(h, f.buffer).find("inline tensor where only tensor placeholders"),
              std::string::npos);
    h = f.encoded.header;
    h.tree.resize(h.tree.size() / 2);
    EXPECT_NE(error_of(h, f.buffer).find("truncated"), std::string::npos);
}

TEST(PayloadCodec, HeaderWireFormTruncatedOrMutatedNeverCrashes) {
    RandomValues random(25);
    for (int i = 0; i < 40; ++i) {
        EncodedPayload encoded = encode_ok(random.payload());
        Tensor buffer = buffer_of(encoded);
        Bytes8 wire;
        ASSERT_TRUE(encode_payload_header(encoded.header, wire).has_value());
        for (std::size_t cut = 0; cut < wire.size(); ++cut) {
            auto header = decode_payload_header(std::span(wire.data(), cut));
            ASSERT_FALSE(header.has_value());
        }
        for (int flip = 0; flip < 100; ++flip) {
            Bytes8 mutated = wire;
            mutated[random.below(mutated.size())] ^=
                static_cast<std::uint8_t>(1 + random.below(255));
            auto header = decode_payload_header(mutated);
            if (!header.has_value()) continue;
            auto decoded = decode_payload(*header, buffer);
            if (decoded.has_value()) {
                // Anything accepted re-encodes and decodes to the same payload.
                EncodedPayload again = encode_ok(*decoded);
                auto twice = decode_payload(again.header, buffer_of(again));
                ASSERT_TRUE(twice.has_value()) << twice.error().to_string();
                EXPECT_TRUE(*twice == *decoded);
            }
        }
    }
}

}  // namespace
}  // namespace omnirt::proto
