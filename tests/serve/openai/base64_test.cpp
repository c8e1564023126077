#include "serve/openai/base64.h"

#include <gtest/gtest.h>

#include <random>

namespace omnirt::serve::openai {
namespace {

std::vector<std::uint8_t> bytes_of(std::string_view text) { return {text.begin(), text.end()}; }

TEST(Base64, EncodesRfc4648Vectors) {
    EXPECT_EQ(base64_encode(bytes_of("")), "");
    EXPECT_EQ(base64_encode(bytes_of("f")), "Zg==");
    EXPECT_EQ(base64_encode(bytes_of("fo")), "Zm8=");
    EXPECT_EQ(base64_encode(bytes_of("foo")), "Zm9v");
    EXPECT_EQ(base64_encode(bytes_of("foob")), "Zm9vYg==");
    EXPECT_EQ(base64_encode(bytes_of("fooba")), "Zm9vYmE=");
    EXPECT_EQ(base64_encode(bytes_of("foobar")), "Zm9vYmFy");
}

TEST(Base64, DecodesRfc4648Vectors) {
    for (const std::string_view text : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
        auto decoded = base64_decode(base64_encode(bytes_of(text)));
        ASSERT_TRUE(decoded.has_value()) << text;
        EXPECT_EQ(*decoded, bytes_of(text));
    }
}

TEST(Base64, RoundTripsEveryByteAndRandomData) {
    std::vector<std::uint8_t> all(256);
    for (int i = 0; i < 256; ++i) all[i] = static_cast<std::uint8_t>(i);
    EXPECT_EQ(*base64_decode(base64_encode(all)), all);
    std::mt19937 rng(7);
    for (std::size_t size = 0; size < 64; ++size) {
        std::vector<std::uint8_t> data(size);
        for (auto& byte : data) byte = static_cast<std::uint8_t>(rng());
        const std::string encoded = base64_encode(data);
        EXPECT_EQ(encoded.size(), (size + 2) / 3 * 4);
        EXPECT_EQ(*base64_decode(encoded), data);
    }
}

TEST(Base64, RejectsMalformedInput) {
    for (const std::string_view bad : {
             "Zg=",                   // length not a multiple of 4
             "Z",                     // idem
             "Zm9v\n",                // whitespace
             "Zm 9v",                 // idem
             "Zm9-",                  // URL-safe alphabet
             "Zm9_",                  // idem
             "=Zm9",                  // leading padding
             "Z===",                  // too much padding
             "Zg==Zm9v",              // padding before the end
             "Zm=v",                  // data after padding
             "Zh==",                  // non-zero bits before "=="
             "Zm9=",                  // non-zero bits before "="
             "Zm9v\x80\x80\x80\x80",  // bytes outside the alphabet
         }) {
        auto decoded = base64_decode(bad);
        EXPECT_FALSE(decoded.has_value()) << "accepted: " << bad;
        if (!decoded.has_value()) {
            EXPECT_NE(decoded.error().message.find("invalid base64 at byte"), std::string::npos);
        }
    }
    std::string with_nul("Zm9v", 4);
    with_nul[1] = '\0';
    EXPECT_FALSE(base64_decode(with_nul).has_value());
}

TEST(Base64, ErrorNamesTheOffset) {
    auto decoded = base64_decode("Zm9vY!==");
    ASSERT_FALSE(decoded.has_value());
    EXPECT_NE(decoded.error().message.find("byte 5"), std::string::npos) << decoded.error().message;
}

TEST(Base64, SizeBound) {
    EXPECT_EQ(base64_decoded_size_bound(0), 0u);
    EXPECT_EQ(base64_decoded_size_bound(8), 6u);
    EXPECT_GE(base64_decoded_size_bound(base64_encode(bytes_of("fooba")).size()), 5u);
}

}  // namespace
}  // namespace omnirt::serve::openai
