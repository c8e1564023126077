#include "core/value.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/registry.h"

namespace omnirt {
namespace {

TEST(Value, KindsAndAccess) {
    EXPECT_TRUE(Value().is_null());
    EXPECT_TRUE(Value(nullptr).is_null());
    EXPECT_TRUE(Value(true).is_bool());
    EXPECT_TRUE(Value(3).is_int());
    EXPECT_TRUE(Value(std::uint16_t{3}).is_int());
    EXPECT_TRUE(Value(3.5).is_float());
    EXPECT_TRUE(Value("x").is_string());
    EXPECT_TRUE(Value(Bytes{{1, 2}}).is_bytes());
    EXPECT_TRUE(Value(List{1, 2}).is_list());
    EXPECT_TRUE(Value(Map{{"a", 1}}).is_map());
    EXPECT_TRUE(Value(Tensor::from_vector<float>({1})).is_tensor());
    EXPECT_EQ(Value(7).as_number(), 7.0);
    EXPECT_EQ(Value(7).if_string(), nullptr);
}

TEST(Value, MapInsertAndFind) {
    Value v;
    v["a"]["b"] = 2;
    ASSERT_NE(v.find("a"), nullptr);
    EXPECT_EQ(v.find("a")->find("b")->as_int(), 2);
    EXPECT_EQ(v.find("missing"), nullptr);
    EXPECT_EQ(Value(1).find("a"), nullptr);
}

TEST(Value, EqualityIsDeepAndKindStrict) {
    Value a =
        Map{{"x", List{1, "two", 3.0, Bytes{{9}}}}, {"t", Tensor::from_vector<float>({1, 2})}};
    Value b =
        Map{{"x", List{1, "two", 3.0, Bytes{{9}}}}, {"t", Tensor::from_vector<float>({1, 2})}};
    EXPECT_EQ(a, b);
    b["t"] = Tensor::from_vector<float>({1, 3});
    EXPECT_NE(a, b);
    EXPECT_NE(Value(1), Value(1.0));
    EXPECT_EQ(Value(std::nan("")), Value(std::nan("")));
}

TEST(Value, DebugStringEscapes) {
    Value v = Map{{"s", "a\"b\n"}, {"t", Tensor::from_vector<std::int64_t>({1, 2, 3, 4}, {2, 2})}};
    EXPECT_EQ(v.debug_string(), R"({"s": "a\"b\u000a", "t": tensor(int64, [2, 2])})");
}

TEST(ValueDeathTest, CheckedAccessOnWrongKindAborts) {
    EXPECT_DEATH((void)Value(1).as_string(), "not a string");
}

TEST(Registry, AddFindAndDuplicates) {
    Registry registry;
    RouteFn route = [](const std::string&,
                       const StagePayload&) -> Result<std::vector<std::string>> {
        return std::vector<std::string>{"b"};
    };
    ASSERT_TRUE(registry.add(FunctionKind::route, "my.route", {.callable = route}).has_value());
    auto again = registry.add(FunctionKind::route, "my.route", {.callable = route});
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error().code, ErrorCode::already_exists);
    EXPECT_TRUE(registry.contains(FunctionKind::route, "my.route"));
    EXPECT_FALSE(registry.contains(FunctionKind::merge, "my.route"));
    auto fn = registry.get<RouteFn>(FunctionKind::route, "my.route");
    ASSERT_TRUE(fn.has_value());
    EXPECT_EQ((*fn)("r", StagePayload{})->front(), "b");
    auto wrong = registry.get<MergeFn>(FunctionKind::route, "my.route");
    ASSERT_FALSE(wrong.has_value());
    EXPECT_NE(wrong.error().message.find("different signature"), std::string::npos);
    auto missing = registry.get<RouteFn>(FunctionKind::route, "nope");
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().message, "unknown route_fn 'nope' (registered: my.route)");
}

TEST(Registry, AddIfAbsentKeepsTheFirstEntry) {
    Registry registry;
    ASSERT_TRUE(registry.add_if_absent(FunctionKind::route, "my.route", {.description = "first"})
                    .has_value());
    ASSERT_TRUE(registry.add_if_absent(FunctionKind::route, "my.route", {.description = "second"})
                    .has_value());
    EXPECT_EQ(registry.find(FunctionKind::route, "my.route")->description, "first");
    auto unnamed = registry.add_if_absent(FunctionKind::route, "", {});
    ASSERT_FALSE(unnamed.has_value());
    EXPECT_EQ(unnamed.error().code, ErrorCode::invalid_argument);
}

TEST(Error, TryPropagates) {
    auto inner = [](bool good) -> Result<int> {
        if (!good) return fail(ErrorCode::invalid_argument, "bad");
        return 4;
    };
    auto outer = [&](bool good) -> Result<int> {
        OMNI_TRY(int x, inner(good));
        return x * 2;
    };
    EXPECT_EQ(*outer(true), 8);
    EXPECT_EQ(outer(false).error().to_string(), "invalid_argument: bad");
    Error error{ErrorCode::not_found, "x"};
    EXPECT_EQ(error.with_context("ctx").message, "ctx: x");
}

}  // namespace
}  // namespace omnirt
