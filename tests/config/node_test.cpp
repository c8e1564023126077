// ConfigNode: YAML/JSON parsing with locations, core-schema scalar typing, Value conversion,
// and the guards against hostile input (nesting depth, alias expansion).
#include <gtest/gtest.h>

#include <cmath>

#include "config/node.h"

namespace omnirt::config {
namespace {

ConfigNode parse(const std::string& text) {
    auto node = parse_config_document(text, "n.yaml");
    EXPECT_TRUE(node.has_value()) << node.error().to_string();
    return node.has_value() ? std::move(node).value() : ConfigNode{};
}

std::string parse_error(const std::string& text) {
    auto node = parse_config_document(text, "n.yaml");
    EXPECT_FALSE(node.has_value());
    return node.has_value() ? std::string() : node.error().to_string();
}

ConfigNode scalar(const std::string& text, bool quoted = false) {
    ConfigNode node;
    node.kind = NodeKind::scalar;
    node.text = text;
    node.quoted = quoted;
    return node;
}

TEST(ConfigNode, PlainScalarsFollowTheYaml12CoreSchema) {
    struct Case {
        const char* text;
        ScalarType type;
    };
    for (auto [text, type] :
         std::vector<Case>{{"", ScalarType::null},         {"~", ScalarType::null},
                           {"null", ScalarType::null},     {"NULL", ScalarType::null},
                           {"Null", ScalarType::null},     {"true", ScalarType::boolean},
                           {"False", ScalarType::boolean}, {"TRUE", ScalarType::boolean},
                           {"0", ScalarType::integer},     {"-17", ScalarType::integer},
                           {"+4096", ScalarType::integer}, {"0x1F", ScalarType::integer},
                           {"0o17", ScalarType::integer},  {"1.5", ScalarType::floating},
                           {"-.5", ScalarType::floating},  {"1.", ScalarType::floating},
                           {"1e3", ScalarType::floating},  {"2.5E-3", ScalarType::floating},
                           {".inf", ScalarType::floating}, {"-.Inf", ScalarType::floating},
                           {".nan", ScalarType::floating}, {"yes", ScalarType::string},
                           {"on", ScalarType::string},     {"0x", ScalarType::string},
                           {"0o8", ScalarType::string},    {"1_000", ScalarType::string},
                           {"1e", ScalarType::string},     {".", ScalarType::string},
                           {"nan", ScalarType::string},    {"cuda:0", ScalarType::string},
                           {"tRUE", ScalarType::string},   {"-", ScalarType::string}}) {
        EXPECT_EQ(scalar_type(scalar(text)), type) << "'" << text << "'";
    }
}

TEST(ConfigNode, QuotedScalarsAreStrings) {
    ConfigNode root = parse("a: '4096'\nb: \"true\"\nc: !!str 12\nd: 4096\ne: ''\n");
    EXPECT_EQ(scalar_type(*root.find("a")), ScalarType::string);
    EXPECT_TRUE(root.find("a")->quoted);
    EXPECT_EQ(scalar_type(*root.find("b")), ScalarType::string);
    EXPECT_EQ(scalar_type(*root.find("c")), ScalarType::string);
    EXPECT_EQ(scalar_type(*root.find("d")), ScalarType::integer);
    EXPECT_EQ(*to_value(*root.find("e")), Value(""));
}

TEST(ConfigNode, ToValueConvertsScalarsListsAndMaps) {
    ConfigNode root = parse(
        "i: 0x10\no: 0o10\nf: 2.5\nb: false\nn: ~\ns: text\nl: [1, two, 3.0]\nm: {k: v}\n"
        "inf: -.inf\nnan: .NaN\n");
    auto value = to_value(root);
    ASSERT_TRUE(value.has_value());
    EXPECT_EQ(*value->find("i"), Value(16));
    EXPECT_EQ(*value->find("o"), Value(8));
    EXPECT_EQ(*value->find("f"), Value(2.5));
    EXPECT_EQ(*value->find("b"), Value(false));
    EXPECT_TRUE(value->find("n")->is_null());
    EXPECT_EQ(*value->find("s"), Value("text"));
    EXPECT_EQ(*value->find("l"), Value(List{Value(1), Value("two"), Value(3.0)}));
    EXPECT_EQ(*value->find("m"), Value(Map{{"k", Value("v")}}));
    EXPECT_EQ(value->find("inf")->as_number(), -INFINITY);
    EXPECT_TRUE(std::isnan(value->find("nan")->as_number()));
}

TEST(ConfigNode, IntegerOverflowIsAnError) {
    auto value = to_value(scalar("99999999999999999999"));
    ASSERT_FALSE(value.has_value());
    EXPECT_NE(value.error().message.find("does not fit in 64 bits"), std::string::npos);
    EXPECT_EQ(*to_value(scalar("-9223372036854775808")), Value(INT64_MIN));
}

TEST(ConfigNode, LocationsAreOneBasedLineAndColumn) {
    ConfigNode root = parse("model_path: m\nstages:\n  - name: a\n    next: [b, c]\n");
    EXPECT_EQ(root.location.line, 1);
    const ConfigMapEntry* stages = root.find_entry("stages");
    ASSERT_NE(stages, nullptr);
    EXPECT_EQ(stages->key_location.to_string(), "n.yaml:2:1");
    const ConfigNode& stage = stages->value.items.at(0);
    EXPECT_EQ(stage.find_entry("name")->key_location.to_string(), "n.yaml:3:5");
    EXPECT_EQ(stage.find("name")->location.to_string(), "n.yaml:3:11");
    EXPECT_EQ(stage.find("next")->items.at(1).location.to_string(), "n.yaml:4:15");
}

TEST(ConfigNode, EmptyValueIsLocatedAtItsKey) {
    ConfigNode root = parse("a: 1\nb:\nc: 2\n");
    EXPECT_TRUE(root.find("b")->is_null());
    EXPECT_EQ(root.find("b")->location.line, 2);
}

TEST(ConfigNode, MapEntriesKeepFileOrder) {
    ConfigNode root = parse("z: 1\na: 2\nm: 3\n");
    ASSERT_EQ(root.entries.size(), 3u);
    EXPECT_EQ(root.entries[0].key, "z");
    EXPECT_EQ(root.entries[1].key, "a");
    EXPECT_EQ(root.entries[2].key, "m");
}

TEST(ConfigNode, JsonIsParsedWithLines) {
    ConfigNode root =
        parse("{\n  \"model_path\": \"m\",\n  \"stages\": [\n    {\"name\": 5}\n  ]\n}\n");
    const ConfigNode& stage = root.find("stages")->items.at(0);
    EXPECT_EQ(stage.find("name")->location.to_string(), "n.yaml:4:14");
    EXPECT_EQ(scalar_type(*stage.find("name")), ScalarType::integer);
    EXPECT_EQ(scalar_type(*root.find("model_path")), ScalarType::string);
}

TEST(ConfigNode, TabIndentedJsonIsParsed) {
    ConfigNode root = parse("{\n\t\"a\": [1,\n\t\t2],\n\t\"b\": \"x\"\n}\n");
    EXPECT_EQ(root.find("a")->items.size(), 2u);
    EXPECT_EQ(root.find("b")->location.line, 4);
}

TEST(ConfigNode, ByteOrderMarkAndCrlfLineEndings) {
    ConfigNode root = parse(
        "\xEF\xBB\xBF"
        "a: 1\r\nb:\r\n  - x\r\n");
    ASSERT_NE(root.find_entry("a"), nullptr);
    ASSERT_NE(root.find("b"), nullptr);
    EXPECT_EQ(root.find_entry("a")->key_location.to_string(), "n.yaml:1:1");
    EXPECT_EQ(root.find("b")->items.at(0).location.to_string(), "n.yaml:3:5");
    EXPECT_EQ(root.find("b")->items.at(0).text, "x");
}

TEST(ConfigNode, DuplicateKeysAreAnError) {
    EXPECT_EQ(parse_error("a: 1\nb: 2\na: 3\n"),
              "n.yaml:3:1: duplicate key 'a' (first written at line 1)");
    EXPECT_NE(parse_error("{\"a\": 1, \"a\": 2}").find("duplicate key 'a'"), std::string::npos);
}

TEST(ConfigNode, SyntaxErrorsCarryTheirPosition) {
    EXPECT_EQ(parse_error("a: [1, 2\nb: 3\n"),
              "n.yaml:2:2: YAML syntax error: end of sequence flow not found");
    EXPECT_EQ(parse_error("a: b: c\n"), "n.yaml:1:5: YAML syntax error: illegal map value");
}

TEST(ConfigNode, NonScalarKeysAreAnError) {
    EXPECT_NE(parse_error("? [a, b]\n: 1\n").find("map keys must be plain or quoted strings"),
              std::string::npos);
}

TEST(ConfigNode, OneDocumentOnly) {
    EXPECT_NE(parse_error("a: 1\n---\nb: 2\n").find("a second one starts here"), std::string::npos);
    EXPECT_EQ(parse("---\na: 1\n...\n").entries.size(), 1u);
}

TEST(ConfigNode, EmptyDocumentIsNull) {
    EXPECT_TRUE(parse("").is_null());
    EXPECT_TRUE(parse("# only a comment\n").is_null());
}

TEST(ConfigNode, AnchorsAndAliasesAreExpanded) {
    ConfigNode root = parse("base: &args {x: 1, y: [2]}\nother: *args\n");
    auto value = to_value(root);
    ASSERT_TRUE(value.has_value());
    EXPECT_EQ(*value->find("other"), *value->find("base"));
}

TEST(ConfigNode, DeepFlowNestingIsRejectedWithoutCrashing) {
    std::string deep(100'000, '[');
    EXPECT_NE(parse_error(deep).find("nesting deeper than 64 levels"), std::string::npos);
    std::string braces;
    for (int i = 0; i < 100'000; ++i) braces += "{a: ";
    EXPECT_NE(parse_error(braces).find("nesting deeper than"), std::string::npos);
}

TEST(ConfigNode, DeepBlockNestingIsRejectedWithoutCrashing) {
    std::string dashes;
    for (int i = 0; i < 5'000; ++i) dashes += "- ";
    dashes += "x\n";
    EXPECT_NE(parse_error(dashes).find("nesting deeper than"), std::string::npos);
    std::string indented;
    for (int i = 0; i < 200; ++i) indented += std::string(i, ' ') + "k:\n";
    EXPECT_NE(parse_error(indented).find("nesting deeper than"), std::string::npos);
}

TEST(ConfigNode, NestingUpToTheLimitIsAccepted) {
    std::string text = std::string(kMaxConfigDepth, '[') + std::string(kMaxConfigDepth, ']');
    EXPECT_TRUE(parse_config_document(text, "n.yaml").has_value());
    text = "[" + text + "]";
    EXPECT_FALSE(parse_config_document(text, "n.yaml").has_value());
}

TEST(ConfigNode, AliasExpansionIsBounded) {
    // Each level doubles the previous one: 2^30 nodes if expanded naively.
    std::string bomb = "a0: &a0 [x, x]\n";
    for (int i = 1; i <= 30; ++i) {
        bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" +
                std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + "]\n";
    }
    std::string error = parse_error(bomb);
    EXPECT_TRUE(error.find("more than 100000 nodes") != std::string::npos ||
                error.find("nesting deeper") != std::string::npos)
        << error;
}

TEST(ConfigNode, DescribeNamesKindAndValue) {
    EXPECT_EQ(describe(scalar("5")), "integer 5");
    EXPECT_EQ(describe(scalar("0.5")), "float 0.5");
    EXPECT_EQ(describe(scalar("true")), "boolean true");
    EXPECT_EQ(describe(scalar("~")), "null");
    EXPECT_EQ(describe(scalar("abc")), "string \"abc\"");
    EXPECT_EQ(describe(scalar("5", true)), "string \"5\"");
    EXPECT_EQ(describe(parse("[1]")), "a list");
    EXPECT_EQ(describe(parse("{a: 1}")), "a map");
    EXPECT_EQ(describe(ConfigNode{}), "null");
}

TEST(ConfigNode, ArbitraryBytesNeverThrow) {
    for (std::string text :
         {std::string("\0\0\0", 3), std::string("\xff\xfe\x00\x41", 4), std::string("a: \"\\x\"\n"),
          std::string("*unknown\n"), std::string("&a [*a]\n"), std::string("!<tag> x\n"),
          std::string("%YAML 9.9\n---\nx\n"), std::string("a: |\n b\n- c\n")}) {
        auto node = parse_config_document(text, "n.yaml");
        if (!node) {
            EXPECT_FALSE(node.error().message.empty());
        }
    }
}

}  // namespace
}  // namespace omnirt::config
