#include "proto/value_codec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <new>

#include "proto/random_values.h"

// Counts the bytes operator new hands out on this thread while enabled, to prove that lying
// size headers cost no allocation. (GCC flags the malloc/free inside replaced global operators
// as mismatched wherever it inlines them; the pairing is correct.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
thread_local bool g_counting = false;
thread_local std::size_t g_allocated = 0;
}  // namespace

void* operator new(std::size_t size) {
    if (g_counting) g_allocated += size;
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace omnirt::proto {
namespace {

std::size_t bytes_allocated_by(const auto& action) {
    g_allocated = 0;
    g_counting = true;
    action();
    g_counting = false;
    return g_allocated;
}

using testing::RandomValues;
using Bytes8 = std::vector<std::uint8_t>;

Bytes8 encode_ok(const Value& value) {
    auto bytes = encode_value(value);
    EXPECT_TRUE(bytes.has_value()) << bytes.error().to_string();
    return bytes.has_value() ? *bytes : Bytes8{};
}

std::string decode_error(const Bytes8& bytes, const DecodeLimits& limits = {}) {
    auto decoded = decode_value(bytes, limits);
    if (decoded.has_value()) return "<decoded: " + decoded->debug_string() + ">";
    return decoded.error().message;
}

TEST(ValueCodec, RoundTripsRandomTrees) {
    RandomValues random(1);
    for (int i = 0; i < 600; ++i) {
        Value value = random.value(static_cast<int>(random.below(6)));
        Bytes8 bytes = encode_ok(value);
        auto decoded = decode_value(bytes);
        ASSERT_TRUE(decoded.has_value()) << i << ": " << decoded.error().to_string();
        EXPECT_EQ(*decoded, value) << i << ": " << value.debug_string();
        // Deterministic: the decoded tree encodes to the same bytes.
        EXPECT_EQ(encode_ok(*decoded), bytes) << i;
    }
}

TEST(ValueCodec, RoundTripsTensorsOfEveryDtype) {
    RandomValues random(2);
    for (DType dtype : testing::all_dtypes()) {
        for (int i = 0; i < 30; ++i) {
            Tensor tensor = random.tensor_of(dtype);
            auto decoded = decode_value(encode_ok(Value(tensor)));
            ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
            ASSERT_TRUE(decoded->is_tensor());
            const Tensor& out = decoded->as_tensor();
            EXPECT_TRUE(out.equals(tensor)) << to_string(dtype);
            // (core's is_contiguous() reports false for some 0-element shapes)
            if (out.numel() > 0) {
                EXPECT_TRUE(out.is_contiguous());
            }
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(out.data()) % kTensorAlignment, 0u);
        }
        Tensor empty = Tensor::empty({0, 3}, dtype).value();
        auto decoded = decode_value(encode_ok(Value(empty)));
        ASSERT_TRUE(decoded.has_value());
        EXPECT_EQ(decoded->as_tensor().shape(), (Shape{0, 3}));
        Tensor scalar = Tensor::empty({}, dtype).value();
        EXPECT_EQ(decode_value(encode_ok(Value(scalar)))->as_tensor().shape(), Shape{});
    }
}

TEST(ValueCodec, WireLayoutOfScalarsMapsAndTensors) {
    EXPECT_EQ(encode_ok(Value(Map{{"b", 1}, {"a", Value()}})),
              (Bytes8{0x82, 0xa1, 'a', 0xc0, 0xa1, 'b', 0x01}));
    EXPECT_EQ(encode_ok(Value(-1)), (Bytes8{0xff}));
    EXPECT_EQ(encode_ok(Value(Bytes{{7}})), (Bytes8{0xc4, 0x01, 0x07}));
    EXPECT_EQ(encode_ok(Value(1.0)), (Bytes8{0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}));
    // ext 2: [dtype code][ndim][dims int64 LE][elements]
    Tensor t = Tensor::from_vector<std::int16_t>({1, 2}, {2});
    EXPECT_EQ(encode_ok(Value(t)), (Bytes8{0xc7, 14, 2, static_cast<std::uint8_t>(DType::i16), 1, 2,
                                           0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0}));
}

TEST(ValueCodec, AcceptsFloat32AndRejectsLargeUnsigned) {
    auto f32 = decode_value(Bytes8{0xca, 0x3f, 0xc0, 0x00, 0x00});
    ASSERT_TRUE(f32.has_value());
    EXPECT_EQ(*f32, Value(1.5));
    EXPECT_EQ(decode_error({0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}),
              "integer 18446744073709551615 is out of int64 range at byte offset 8");
    auto max = decode_value(Bytes8{0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
    EXPECT_EQ(*max, Value(std::numeric_limits<std::int64_t>::max()));
}

TEST(ValueCodec, RejectsBadMapKeys) {
    EXPECT_EQ(decode_error({0x81, 0x01, 0x02}),
              "map key is not a string (got int) at byte offset 1");
    EXPECT_EQ(decode_error({0x81, 0x90, 0x02}),
              "map key is not a string (got list) at byte offset 1");
    EXPECT_EQ(decode_error({0x82, 0xa1, 'x', 0x01, 0xa1, 'x', 0x02}),
              "duplicate map key 'x' at byte offset 5");
}

TEST(ValueCodec, FindsDuplicateKeysInUnsortedMaps) {
    EXPECT_EQ(decode_error({0x83, 0xa1, 'b', 0x01, 0xa1, 'a', 0x02, 0xa1, 'b', 0x03}),
              "duplicate map key 'b' at byte offset 8");
    // A large map in descending key order switches to a key set; the repeat is still found.
    Bytes8 large{0xde, 0x00, 41};
    for (int i = 39; i >= 0; --i)
        large.insert(large.end(), {0xa2, 'k', std::uint8_t('0' + i), 0xc0});
    large.insert(large.end(), {0xa2, 'k', '7', 0xc0});
    EXPECT_NE(decode_error(large).find("duplicate map key 'k7'"), std::string::npos);
    // Without the repeat the unsorted map decodes, and re-encodes in key order.
    large[2] = 40;
    large.resize(large.size() - 4);
    auto decoded = decode_value(large);
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    EXPECT_EQ(decoded->as_map().size(), 40u);
    EXPECT_EQ(decoded->as_map().begin()->first, "k0");
}

TEST(ValueCodec, ReportsTruncationAndTrailingBytes) {
    EXPECT_EQ(decode_error({}), "truncated input: no bytes");
    EXPECT_EQ(decode_error({0x92, 0x01}),
              "truncated input: list declares 2 elements but at most 1 bytes remain at byte "
              "offset 0");
    EXPECT_EQ(decode_error({0xa3, 'a'}),
              "truncated input: 2 bytes end inside a value at byte offset 1");
    EXPECT_EQ(decode_error({0x01, 0x02}),
              "trailing bytes after value: the value ends at byte 1 of 2");
    EXPECT_EQ(decode_error({0xc1}), "invalid msgpack type byte 0xc1 at byte offset 0");
}

TEST(ValueCodec, TruncationAtEveryOffsetFailsCleanly) {
    RandomValues random(3);
    for (int i = 0; i < 60; ++i) {
        Bytes8 bytes = encode_ok(random.value(4));
        for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
            Bytes8 prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
            auto decoded = decode_value(prefix);
            ASSERT_FALSE(decoded.has_value()) << "prefix " << cut << " of " << bytes.size();
            EXPECT_NE(decoded.error().message.find("truncated"), std::string::npos)
                << decoded.error().message;
            EXPECT_EQ(decoded.error().code, ErrorCode::data_loss);
        }
    }
}

TEST(ValueCodec, RandomByteFlipsNeverCrash) {
    RandomValues random(4);
    int decoded_count = 0;
    for (int i = 0; i < 3000; ++i) {
        Bytes8 bytes = encode_ok(random.value(4));
        if (bytes.empty()) continue;
        for (int flips = 1 + static_cast<int>(random.below(3)); flips > 0; --flips) {
            bytes[random.below(bytes.size())] ^= static_cast<std::uint8_t>(1 + random.below(255));
        }
        auto decoded = decode_value(bytes);
        if (!decoded.has_value()) {
            EXPECT_FALSE(decoded.error().message.empty());
            continue;
        }
        ++decoded_count;
        // Whatever decodes re-encodes to something that decodes to the same tree.
        auto again = decode_value(encode_ok(*decoded));
        ASSERT_TRUE(again.has_value()) << again.error().to_string();
        EXPECT_EQ(*again, *decoded);
    }
    EXPECT_GT(decoded_count, 0);
}

TEST(ValueCodec, HugeDeclaredSizesDoNotAllocate) {
    // The counter works: an honest list of 1000 elements does allocate.
    Bytes8 honest = encode_ok(Value(List(1000, Value(1))));
    EXPECT_GT(bytes_allocated_by([&] { (void)decode_value(honest); }), 1000u * sizeof(Value));
    // array32, map32, str32, bin32, ext32 declaring ~4 GiB with a handful of bytes.
    for (Bytes8 bytes : {Bytes8{0xdd, 0xff, 0xff, 0xff, 0xff, 0x01},
                         Bytes8{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'a'},
                         Bytes8{0xdb, 0xff, 0xff, 0xff, 0xfe, 'a', 'b'},
                         Bytes8{0xc6, 0xff, 0xff, 0xff, 0xfe, 0x00},
                         Bytes8{0xc9, 0xff, 0xff, 0xff, 0xfe, 0x02, 0x00},
                         Bytes8{0x91, 0xdd, 0x7f, 0xff, 0xff, 0xff}}) {
        Result<Value> decoded = Value();
        const std::size_t allocated = bytes_allocated_by([&] { decoded = decode_value(bytes); });
        ASSERT_FALSE(decoded.has_value());
        EXPECT_NE(decoded.error().message.find("truncated"), std::string::npos)
            << decoded.error().message;
        EXPECT_LT(allocated, 4096u) << decoded.error().message;
    }
    // Nested lists each declaring 65535 elements: refused once the input cannot hold them.
    Bytes8 nested;
    for (int i = 0; i < 40; ++i) nested.insert(nested.end(), {0xdc, 0xff, 0xff});
    std::string error;
    EXPECT_LT(bytes_allocated_by([&] { error = decode_error(nested); }), 8192u);
    EXPECT_NE(error.find("truncated"), std::string::npos) << error;
}

TEST(ValueCodec, DepthBombIsRefused) {
    Bytes8 lists(100000, 0x91);
    lists.push_back(0xc0);
    EXPECT_EQ(decode_error(lists), "list nested deeper than 64 levels at byte offset 64");
    Bytes8 maps;
    for (int i = 0; i < 100000; ++i) maps.insert(maps.end(), {0x81, 0xa0});
    maps.push_back(0xc0);
    EXPECT_NE(decode_error(maps).find("map nested deeper than 64 levels"), std::string::npos);
    // Exactly at the limit is fine.
    Bytes8 ok(64, 0x91);
    ok.push_back(0xc0);
    EXPECT_TRUE(decode_value(ok).has_value());
}

TEST(ValueCodec, EnforcesLimits) {
    Bytes8 text = encode_ok(Value(std::string(100, 'a')));
    EXPECT_EQ(decode_error(text, {.max_string_bytes = 99}),
              "string of 100 bytes exceeds the limit of 99 at byte offset 2");
    Bytes8 bin = encode_ok(Value(Bytes{std::vector<std::uint8_t>(10)}));
    EXPECT_NE(decode_error(bin, {.max_bytes_bytes = 9}).find("bytes value of 10 bytes"),
              std::string::npos);
    Bytes8 list = encode_ok(Value(List{1, 2, 3}));
    EXPECT_NE(decode_error(list, {.max_container_elements = 2}).find("list of 3 elements"),
              std::string::npos);
    EXPECT_NE(decode_error(list, {.max_total_elements = 3}).find("more than 3 values"),
              std::string::npos);
    EXPECT_NE(decode_error(list, {.max_total_bytes = 3}).find("input of 4 bytes"),
              std::string::npos);
    Bytes8 tensors =
        encode_ok(Value(List{Tensor::from_vector<float>({1, 2}), Tensor::from_vector<float>({3})}));
    EXPECT_NE(decode_error(tensors, {.max_tensors = 1}).find("more than 1 tensors"),
              std::string::npos);
    EXPECT_NE(decode_error(tensors, {.max_tensor_bytes = 4}).find("tensor of 8 bytes"),
              std::string::npos);
    EXPECT_TRUE(decode_value(tensors, {.max_tensor_bytes = 8}).has_value());
}

// ext 2 body: [dtype][ndim][dims...][data]
Bytes8 inline_tensor(std::uint8_t dtype, std::vector<std::int64_t> dims, std::size_t data_bytes,
                     std::uint8_t fill = 0) {
    // ext16 header, then the body.
    const std::size_t body_size = 2 + 8 * dims.size() + data_bytes;
    Bytes8 out{0xc8,
               static_cast<std::uint8_t>(body_size >> 8),
               static_cast<std::uint8_t>(body_size),
               0x02,
               dtype,
               static_cast<std::uint8_t>(dims.size())};
    for (std::int64_t d : dims) {
        for (int b = 0; b < 8; ++b) {
            out.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(d) >> (8 * b)));
        }
    }
    out.resize(out.size() + data_bytes, fill);
    return out;
}

TEST(ValueCodec, ValidatesInlineTensors) {
    const auto f32 = static_cast<std::uint8_t>(DType::f32);
    EXPECT_TRUE(decode_value(inline_tensor(f32, {2, 3}, 24)).has_value());
    EXPECT_NE(decode_error(inline_tensor(99, {2}, 8)).find("dtype code 99 is out of range"),
              std::string::npos);
    EXPECT_NE(
        decode_error(inline_tensor(f32, std::vector<std::int64_t>(17, 1), 4)).find("17 dimensions"),
        std::string::npos);
    EXPECT_NE(decode_error(inline_tensor(f32, {-2}, 0)).find("negative"), std::string::npos);
    EXPECT_NE(decode_error(inline_tensor(f32, {2, 3}, 20))
                  .find("6 float32 elements carries 20 data bytes"),
              std::string::npos);
    EXPECT_NE(decode_error(inline_tensor(f32, {std::numeric_limits<std::int64_t>::max(), 4}, 0))
                  .find("overflows"),
              std::string::npos);
    EXPECT_NE(decode_error(inline_tensor(f32, {1LL << 62}, 0)).find("carries 0 data bytes"),
              std::string::npos);
    // Zero elements, but row-major strides that overflow int64.
    EXPECT_NE(decode_error(inline_tensor(f32, {1LL << 62, 0, 4}, 0)).find("overflow int64 strides"),
              std::string::npos);
    const auto boolean = static_cast<std::uint8_t>(DType::boolean);
    EXPECT_NE(decode_error(inline_tensor(boolean, {3}, 3, 2)).find("bool tensor holds the byte 2"),
              std::string::npos);
    EXPECT_NE(decode_error({0xd4, 0x02, 0x00}).find("header is truncated"), std::string::npos);
    EXPECT_NE(decode_error({0xd4, 0x07, 0x00}).find("unsupported msgpack ext type 7"),
              std::string::npos);
    EXPECT_NE(decode_error({0xd4, 0x01, 0x00}).find("tensor placeholder where only inline"),
              std::string::npos);
}

TEST(ValueCodec, RefusesUndefinedTensors) {
    auto bytes = encode_value(Value(List{1, Tensor()}));
    ASSERT_FALSE(bytes.has_value());
    EXPECT_EQ(bytes.error().message, "cannot encode an undefined tensor");
}

TEST(ValueCodec, PlaceholdersCarryIndicesAndPaths) {
    RandomValues random(5);
    for (int i = 0; i < 300; ++i) {
        Value value = random.value(5);
        Bytes8 bytes;
        std::vector<CollectedTensor> tensors;
        ASSERT_TRUE(encode_value_with_placeholders(value, bytes, tensors).has_value());
        auto decoded = decode_value_with_placeholders(bytes);
        ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
        ASSERT_EQ(decoded->placeholders.size(), tensors.size());
        for (std::size_t k = 0; k < tensors.size(); ++k) {
            EXPECT_EQ(decoded->placeholders[k].index, k);
            EXPECT_EQ(decoded->placeholders[k].path, tensors[k].path);
        }
        // The decoded tree holds null where the tensors were; the plain decoder refuses it
        // when it has placeholders.
        if (!tensors.empty()) {
            EXPECT_FALSE(decode_value(bytes).has_value());
        }
    }
    Value tree = Map{{"a", List{1, Tensor::from_vector<float>({1})}}};
    Bytes8 bytes;
    std::vector<CollectedTensor> tensors;
    ASSERT_TRUE(encode_value_with_placeholders(tree, bytes, tensors).has_value());
    ASSERT_EQ(tensors.size(), 1u);
    EXPECT_EQ(path_to_string(tensors[0].path), "a[1]");
    EXPECT_EQ(decode_value_with_placeholders(bytes)->value, Value(Map{{"a", List{1, Value()}}}));
    // Any msgpack uint width is accepted as an index; other bodies are not.
    EXPECT_EQ(decode_value_with_placeholders(Bytes8{0xd5, 0x01, 0xcc, 0x09})->placeholders[0].index,
              9u);
    EXPECT_FALSE(decode_value_with_placeholders(Bytes8{0xd5, 0x01, 0xcd, 0x09}).has_value());
    EXPECT_FALSE(decode_value_with_placeholders(Bytes8{0xd4, 0x01, 0xff}).has_value());
    EXPECT_NE(decode_value_with_placeholders(encode_ok(Value(Tensor::from_vector<float>({1}))))
                  .error()
                  .message.find("inline tensor where only tensor placeholders"),
              std::string::npos);
}

}  // namespace
}  // namespace omnirt::proto
