// safetensors: write -> read round trips for every dtype, layout rules, and hostile files that
// must give a clear error (never a crash, never an allocation the file's real size does not
// justify).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint/test_support.h"

namespace omnirt::checkpoint {
namespace {

using ::testing::HasSubstr;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::zero_bytes;

Tensor patterned(Shape shape, DType dtype, int salt) {
    auto tensor = Tensor::empty(std::move(shape), dtype);
    OMNI_CHECK(tensor.has_value(), "test tensor");
    std::byte* data = tensor->nbytes() ? tensor->mutable_data() : nullptr;
    for (std::size_t i = 0; i < tensor->nbytes(); ++i) {
        data[i] = dtype == DType::boolean ? std::byte((i + salt) % 2)
                                          : static_cast<std::byte>((i * 31 + salt * 7) & 0xFF);
    }
    return *tensor;
}

Result<SafetensorsHeader> parse(const std::vector<std::byte>& bytes) {
    return parse_safetensors_header(bytes, "test.safetensors");
}

std::string error_of(const std::vector<std::byte>& bytes) {
    auto header = parse(bytes);
    EXPECT_FALSE(header.has_value());
    return header ? std::string("(parsed)") : header.error().to_string();
}

std::vector<std::byte> bytes_of_json(const std::string& header, std::size_t data_size) {
    return safetensors_bytes(header, zero_bytes(data_size));
}

TEST(SafetensorsRoundTrip, EveryDtypeShapeAndMetadata) {
    TempDir dir;
    const DType dtypes[] = {DType::boolean, DType::u8,  DType::i8,   DType::i16, DType::i32,
                            DType::i64,     DType::f16, DType::bf16, DType::f32, DType::f64};
    std::vector<std::pair<std::string, Tensor>> tensors;
    int salt = 0;
    for (DType dtype : dtypes) {
        const std::string name = "t." + std::string(to_string(dtype));
        tensors.emplace_back(name + ".matrix", patterned({3, 5}, dtype, ++salt));
        tensors.emplace_back(name + ".scalar", patterned({}, dtype, ++salt));
        tensors.emplace_back(name + ".empty", patterned({0, 4}, dtype, ++salt));
        tensors.emplace_back(name + ".odd", patterned({7}, dtype, ++salt));
    }
    const auto path = dir / "all.safetensors";
    ASSERT_TRUE(write_safetensors(path, tensors, {.metadata = {{"format", "pt"}, {"k", "v"}}}));
    EXPECT_FALSE(std::filesystem::exists(dir / "all.safetensors.partial"));

    auto file = SafetensorsFile::open(path);
    ASSERT_TRUE(file) << file.error().to_string();
    EXPECT_EQ((*file)->metadata(),
              (std::map<std::string, std::string>{{"format", "pt"}, {"k", "v"}}));
    EXPECT_EQ((*file)->entries().size(), tensors.size());
    for (const auto& [name, expected] : tensors) {
        auto tensor = (*file)->tensor(name);
        ASSERT_TRUE(tensor) << name;
        EXPECT_TRUE(tensor->equals(expected)) << name;
        EXPECT_TRUE(tensor->read_only());
        const TensorEntry* entry = (*file)->find(name);
        ASSERT_NE(entry, nullptr);
        // Each tensor starts at a multiple of its element size in the file.
        const std::uint64_t file_offset =
            (*file)->file_size() - (*file)->data_size() + entry->begin;
        EXPECT_EQ(file_offset % element_size(expected.dtype()), 0u) << name;
    }
    // The data section starts at a multiple of 8.
    EXPECT_EQ(((*file)->file_size() - (*file)->data_size()) % 8, 0u);
    auto missing = (*file)->tensor("nope");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

TEST(SafetensorsRoundTrip, TensorsOutliveTheFileObject) {
    TempDir dir;
    Tensor expected = Tensor::from_vector<float>({1.5f, -2.0f, 3.25f});
    ASSERT_TRUE(write_safetensors(dir / "a.safetensors", {{"x", expected}}));
    Tensor view;
    {
        auto file = SafetensorsFile::open(dir / "a.safetensors");
        ASSERT_TRUE(file);
        view = *(*file)->tensor("x");
    }
    std::filesystem::remove(dir / "a.safetensors");  // the mapping stays valid
    EXPECT_TRUE(view.equals(expected));
}

TEST(SafetensorsRoundTrip, StridedTensorsAreWrittenRowMajor) {
    TempDir dir;
    Tensor base = Tensor::from_vector<std::int32_t>({0, 1, 2, 3, 4, 5}, {2, 3});
    auto transposed = Tensor::from_storage(base.storage(), DType::i32, {3, 2}, {1, 3});
    ASSERT_TRUE(transposed);
    ASSERT_TRUE(write_safetensors(dir / "t.safetensors", {{"t", *transposed}}));
    auto file = SafetensorsFile::open(dir / "t.safetensors");
    ASSERT_TRUE(file);
    EXPECT_TRUE((*file)->tensor("t")->equals(
        Tensor::from_vector<std::int32_t>({0, 3, 1, 4, 2, 5}, {3, 2})));
}

TEST(SafetensorsRoundTrip, StreamedSourcesMatchTheirBytes) {
    TempDir dir;
    TensorSource source{.name = "streamed", .dtype = DType::u8, .shape = {3, 1000}};
    source.fill = [](std::uint64_t offset, std::span<std::byte> chunk) {
        for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = std::byte((offset + i) % 251);
        return ok_status();
    };
    std::vector<Progress> seen;
    ASSERT_TRUE(write_safetensors(dir / "s.safetensors", {source},
                                  {.progress = [&](const Progress& p) { seen.push_back(p); }}));
    auto file = SafetensorsFile::open(dir / "s.safetensors");
    ASSERT_TRUE(file);
    Tensor tensor = *(*file)->tensor("streamed");
    for (std::size_t i = 0; i < tensor.nbytes(); ++i) {
        ASSERT_EQ(tensor.data()[i], std::byte(i % 251)) << i;
    }
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen.back().bytes_done, 3000u);
    EXPECT_EQ(seen.back().tensors_done, 1u);
}

TEST(SafetensorsWrite, RejectsBadInputsAndLeavesNoFile) {
    TempDir dir;
    Tensor x = Tensor::from_vector<float>({1});
    auto duplicate = write_safetensors(dir / "d.safetensors", {{"x", x}, {"x", x}});
    ASSERT_FALSE(duplicate);
    EXPECT_THAT(duplicate.error().message, HasSubstr("appears twice"));
    auto reserved = write_safetensors(dir / "r.safetensors", {{"__metadata__", x}});
    ASSERT_FALSE(reserved);
    EXPECT_THAT(reserved.error().message, HasSubstr("reserved"));
    auto no_directory = write_safetensors(dir / "missing" / "x.safetensors", {{"x", x}});
    ASSERT_FALSE(no_directory);
    EXPECT_THAT(no_directory.error().message, HasSubstr("cannot create"));
    TensorSource failing{.name = "f", .dtype = DType::f32, .shape = {4}};
    failing.fill = [](std::uint64_t, std::span<std::byte>) {
        return Status(fail(ErrorCode::internal, "generator broke"));
    };
    auto failed = write_safetensors(dir / "f.safetensors", {failing});
    ASSERT_FALSE(failed);
    EXPECT_THAT(failed.error().message, HasSubstr("generator broke"));
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SafetensorsHeaderParse, AcceptsAnEmptyFileWithPadding) {
    auto header = parse(safetensors_bytes("{}      "));
    ASSERT_TRUE(header) << header.error().to_string();
    EXPECT_TRUE(header->tensors.empty());
    EXPECT_EQ(header->data_offset, 16u);
}

TEST(SafetensorsHeaderParse, LengthAndFramingErrors) {
    EXPECT_THAT(error_of(zero_bytes(5)), HasSubstr("shorter than the 8-byte header length"));
    // A huge declared length is refused before anything is allocated.
    EXPECT_THAT(error_of(safetensors_bytes("{}", {}, std::uint64_t{1} << 62)),
                HasSubstr("exceeds the limit"));
    EXPECT_THAT(error_of(safetensors_bytes("{}", {}, kMaxSafetensorsHeaderBytes + 1)),
                HasSubstr("exceeds the limit"));
    EXPECT_THAT(error_of(safetensors_bytes("{}", {}, 1000)), HasSubstr("truncated"));
    EXPECT_THAT(error_of(safetensors_bytes("", {})), HasSubstr("does not start with '{'"));
    EXPECT_THAT(error_of(safetensors_bytes("[1, 2]")), HasSubstr("does not start with '{'"));
    EXPECT_THAT(error_of(safetensors_bytes("{\"a\": ")), HasSubstr("not valid JSON"));
    EXPECT_THAT(error_of(safetensors_bytes("{not json}")), HasSubstr("not valid JSON"));
    EXPECT_THAT(error_of(safetensors_bytes("{} trailing")), HasSubstr("not valid JSON"));
    EXPECT_THAT(error_of(safetensors_bytes("{\"\xff\xfe\": 1}")), HasSubstr("not valid JSON"));
    auto code = parse(safetensors_bytes("{x"));
    ASSERT_FALSE(code);
    EXPECT_EQ(code.error().code, ErrorCode::data_loss);
    EXPECT_THAT(code.error().message, HasSubstr("test.safetensors"));
}

TEST(SafetensorsHeaderParse, EntryShapeErrors) {
    EXPECT_THAT(error_of(bytes_of_json(R"({"a": 5})", 0)),
                HasSubstr("tensor \"a\": entry must be an object"));
    EXPECT_THAT(error_of(bytes_of_json(R"({"a": [1]})", 0)), HasSubstr("entry must be an object"));
    EXPECT_THAT(error_of(bytes_of_json(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4)),
                HasSubstr("tensor \"a\": missing dtype"));
    EXPECT_THAT(error_of(bytes_of_json(R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", 4)),
                HasSubstr("missing shape"));
    EXPECT_THAT(error_of(bytes_of_json(R"({"a": {"dtype": "F32", "shape": [1]}})", 4)),
                HasSubstr("missing data_offsets"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})", 4)),
                HasSubstr("unexpected key \"x\""));
    EXPECT_THAT(
        error_of(bytes_of_json(
            R"({"a": {"dtype": "F32", "dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4)),
        HasSubstr("appears twice"));
    EXPECT_THAT(
        error_of(bytes_of_json(R"({"a": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", 4)),
        HasSubstr("dtype must be a string"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4)),
                HasSubstr("non-negative integers, not a negative number"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4)),
                HasSubstr("non-negative integers"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", 4)),
                HasSubstr("shape must be an array"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [[1]], "data_offsets": [0, 4]}})", 4)),
                HasSubstr("non-negative integers, not an array"));
    EXPECT_THAT(
        error_of(bytes_of_json(
            R"({"a": {"dtype": "F32", "shape": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], "data_offsets": [0, 4]}})",
            4)),
        HasSubstr("more than 16 dimensions"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", 8)),
                HasSubstr("data_offsets must be [begin, end]"));
    EXPECT_THAT(
        error_of(bytes_of_json(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4]}})", 4)),
        HasSubstr("data_offsets must be [begin, end]"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": {"b": 0}}})", 4)),
                HasSubstr("data_offsets must be [begin, end] integers, not an object"));
    // Deep nesting stops at the first level that cannot hold it.
    std::string deep = R"({"a": {"dtype": "F32", "shape": )" + std::string(10000, '[') +
                       std::string(10000, ']') + "}}";
    EXPECT_THAT(error_of(bytes_of_json(deep, 0)), HasSubstr("not an array"));
}

TEST(SafetensorsHeaderParse, DtypeErrorsNameTheTensor) {
    auto unsupported = parse(
        bytes_of_json(R"({"w": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}})", 4));
    ASSERT_FALSE(unsupported);
    EXPECT_EQ(unsupported.error().code, ErrorCode::unimplemented);
    EXPECT_THAT(unsupported.error().message, HasSubstr("tensor \"w\""));
    EXPECT_THAT(unsupported.error().message, HasSubstr("F8_E4M3 is not supported"));
    auto unknown =
        parse(bytes_of_json(R"({"w": {"dtype": "Q7", "shape": [4], "data_offsets": [0, 4]}})", 4));
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::data_loss);
    EXPECT_THAT(unknown.error().message, HasSubstr("unknown safetensors dtype \"Q7\""));
}

TEST(SafetensorsHeaderParse, OffsetErrors) {
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 100]}})", 8)),
                HasSubstr("reach past the data section (8 bytes)"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 4)),
                HasSubstr("hold 4 bytes but shape [2] of F32 needs 8"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8)),
                HasSubstr("begin is after end"));
    EXPECT_THAT(
        error_of(bytes_of_json(
            R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]}})",
            8)),
        HasSubstr("overflows"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                    12)),
                HasSubstr("tensor \"b\" (bytes 4..12) overlaps \"a\" (bytes 0..8)"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                        "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                    12)),
                HasSubstr("bytes 4..8 of the data section belong to no tensor"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 9)),
                HasSubstr("bytes after the last tensor are not allowed"));
    EXPECT_THAT(error_of(bytes_of_json(
                    R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                        "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                    4)),
                HasSubstr("tensor \"a\" appears twice"));
    // Zero-size tensors may share an offset.
    auto empty = parse(bytes_of_json(
        R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
            "b": {"dtype": "I64", "shape": [0, 5], "data_offsets": [0, 0]},
            "c": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}})",
        3));
    ASSERT_TRUE(empty) << empty.error().to_string();
    EXPECT_EQ(empty->tensors.size(), 3u);
}

TEST(SafetensorsHeaderParse, MetadataMustBeAMapOfStrings) {
    auto ok = parse(bytes_of_json(R"({"__metadata__": {"format": "pt", "a": ""}})", 0));
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->metadata.at("format"), "pt");
    EXPECT_THAT(error_of(bytes_of_json(R"({"__metadata__": {"n": 1}})", 0)),
                HasSubstr("__metadata__ value of \"n\" must be a string, not a number"));
    EXPECT_THAT(error_of(bytes_of_json(R"({"__metadata__": {"n": {"x": "y"}}})", 0)),
                HasSubstr("must be a string, not an object"));
    EXPECT_THAT(error_of(bytes_of_json(R"({"__metadata__": "pt"})", 0)),
                HasSubstr("__metadata__ must be an object"));
    EXPECT_THAT(error_of(bytes_of_json(R"({"__metadata__": {}, "__metadata__": {}})", 0)),
                HasSubstr("__metadata__ appears twice"));
}

TEST(SafetensorsFileOpen, MissingTruncatedAndNonRegularFiles) {
    TempDir dir;
    auto missing = SafetensorsFile::open(dir / "nope.safetensors");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    auto directory = SafetensorsFile::open(dir.path());
    ASSERT_FALSE(directory);
    EXPECT_THAT(directory.error().message, HasSubstr("not a regular file"));
    testing::write_bytes(dir / "empty.safetensors", {});
    auto empty = SafetensorsFile::open(dir / "empty.safetensors");
    ASSERT_FALSE(empty);
    EXPECT_THAT(empty.error().message, HasSubstr("0 bytes"));

    ASSERT_TRUE(write_safetensors(dir / "ok.safetensors",
                                  {{"x", Tensor::from_vector<float>({1, 2, 3, 4})}}));
    auto bytes = testing::read_bytes(dir / "ok.safetensors");
    bytes.pop_back();
    testing::write_bytes(dir / "cut.safetensors", bytes);
    auto truncated = SafetensorsFile::open(dir / "cut.safetensors");
    ASSERT_FALSE(truncated);
    EXPECT_EQ(truncated.error().code, ErrorCode::data_loss);
    EXPECT_THAT(truncated.error().message, HasSubstr("cut.safetensors"));
}

// Every prefix and many random corruptions of a valid file parse or fail cleanly.
TEST(SafetensorsHeaderParse, PrefixesAndMutationsNeverCrash) {
    TempDir dir;
    ASSERT_TRUE(write_safetensors(dir / "v.safetensors",
                                  {{"a", Tensor::from_vector<float>({1, 2, 3})},
                                   {"b", Tensor::from_vector<std::int64_t>({7, 8})}},
                                  {.metadata = {{"format", "pt"}}}));
    const auto valid = testing::read_bytes(dir / "v.safetensors");
    ASSERT_TRUE(parse(valid));
    for (std::size_t n = 0; n < valid.size(); ++n) {
        std::vector<std::byte> prefix(valid.begin(),
                                      valid.begin() + static_cast<std::ptrdiff_t>(n));
        EXPECT_FALSE(parse(prefix)) << "prefix of " << n << " bytes parsed";
    }
    std::mt19937 random(12345);
    int parsed = 0;
    for (int round = 0; round < 3000; ++round) {
        auto mutated = valid;
        const int flips = 1 + static_cast<int>(random() % 4);
        for (int k = 0; k < flips; ++k) {
            mutated[random() % mutated.size()] = static_cast<std::byte>(random() & 0xFF);
        }
        auto header = parse(mutated);
        if (!header) {
            EXPECT_FALSE(header.error().message.empty());
            continue;
        }
        ++parsed;
        for (const TensorEntry& entry : header->tensors) {
            EXPECT_LE(entry.end, header->data_size);
        }
    }
    EXPECT_GT(parsed, 0);  // flips inside the data section leave a valid file
}

}  // namespace
}  // namespace omnirt::checkpoint
