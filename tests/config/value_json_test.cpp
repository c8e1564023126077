#include "config/value_json.h"

#include <gtest/gtest.h>

namespace omnirt::config {
namespace {

TEST(ValueJson, ParsesEveryKind) {
    auto value = parse_json_value(R"({"a": [1, 2.5, "x", true, null], "b": {"c": -3}})");
    ASSERT_TRUE(value.has_value()) << value.error().to_string();
    Value expected = Map{{"a", List{1, 2.5, "x", true, Value()}}, {"b", Map{{"c", -3}}}};
    EXPECT_EQ(*value, expected);
    EXPECT_EQ(value_to_json(*value).dump(), R"({"a":[1,2.5,"x",true,null],"b":{"c":-3}})");
}

TEST(ValueJson, RejectsMalformedAndHostileInput) {
    for (const char* text : {"{", "[1,", "{\"a\":}", "nul", "\"\\u12\"", ""}) {
        auto value = parse_json_value(text);
        ASSERT_FALSE(value.has_value()) << text;
        EXPECT_NE(value.error().message.find("invalid JSON"), std::string::npos) << text;
    }
    auto huge = parse_json_value("18446744073709551615");
    ASSERT_FALSE(huge.has_value());
    EXPECT_NE(huge.error().message.find("does not fit int64"), std::string::npos);
    std::string deep(100000, '[');
    auto nested = parse_json_value(deep);
    ASSERT_FALSE(nested.has_value());
    EXPECT_NE(nested.error().message.find("deeper than 64"), std::string::npos);
    // Brackets inside strings do not count as nesting.
    EXPECT_TRUE(parse_json_value("\"" + std::string(1000, '[') + "\"").has_value());
}

TEST(ValueJson, TensorsAndBytesRenderAsSummaries) {
    Value value = Map{{"t", Tensor::from_vector<float>({1, 2, 3}, {3})},
                      {"big", Tensor::empty({1000}, DType::u8).value()},
                      {"raw", Bytes{{1, 2, 3, 4}}}};
    auto json = value_to_json(value);
    EXPECT_EQ(json["t"]["tensor"]["dtype"], "float32");
    EXPECT_EQ(json["t"]["tensor"]["values"], nlohmann::json({1.0, 2.0, 3.0}));
    EXPECT_EQ(json["big"]["tensor"]["nbytes"], 1000);
    EXPECT_FALSE(json["big"]["tensor"].contains("values"));
    EXPECT_EQ(json["raw"]["bytes"], 4);
    EXPECT_TRUE(value_to_json(Value(std::nan(""))).is_null());
}

}  // namespace
}  // namespace omnirt::config
