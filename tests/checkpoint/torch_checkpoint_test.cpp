// TorchStateDict and StoredZip: torch.save-format checkpoints written by Python's own pickle and
// zipfile (goldens/torch_state_dict.py, protocols 2 and 4, nested state dicts) read value for
// value; and every malformed or hostile file (not a zip, truncated, compressed, big-endian,
// foreign callables, unknown opcodes, storages too small, views past their storage) refused with
// a message naming the file.
#include "checkpoint/torch_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint/mapped_file.h"
#include "checkpoint/zip_archive.h"
#include "support/torch_save.h"

namespace omnirt::checkpoint {
namespace {

namespace fs = std::filesystem;

fs::path golden(const std::string& name) {
    return fs::path(OMNIRT_SOURCE_DIR) / "tests/checkpoint/goldens" / name;
}

std::vector<float> floats(const Tensor& tensor) {
    auto contiguous = tensor.contiguous();
    EXPECT_TRUE(contiguous.has_value());
    const float* data = contiguous->data_as<float>();
    return std::vector<float>(data, data + contiguous->numel());
}

void expect_golden(const TorchStateDict& state) {
    EXPECT_EQ(state.names(), (std::vector<std::string>{"conv.weight", "conv.weight_t", "tail",
                                                       "codes", "half", "empty"}));
    const Tensor* weight = state.find("conv.weight");
    ASSERT_NE(weight, nullptr);
    EXPECT_EQ(weight->dtype(), DType::f32);
    EXPECT_EQ(weight->shape(), (Shape{2, 3}));
    EXPECT_EQ(floats(*weight), (std::vector<float>{0, 0.5, 1, 1.5, 2, 2.5}));
    const Tensor* transposed = state.find("conv.weight_t");
    ASSERT_NE(transposed, nullptr);
    EXPECT_EQ(transposed->shape(), (Shape{3, 2}));
    EXPECT_EQ(floats(*transposed), (std::vector<float>{0, 1.5, 0.5, 2, 1, 2.5}));
    auto tail = state.tensor("tail");
    ASSERT_TRUE(tail.has_value());
    EXPECT_EQ(floats(*tail), (std::vector<float>{2, 2.5}));
    const Tensor* codes = state.find("codes");
    ASSERT_NE(codes, nullptr);
    ASSERT_EQ(codes->dtype(), DType::i64);
    auto contiguous = codes->contiguous();
    ASSERT_TRUE(contiguous.has_value());
    const std::int64_t* values = contiguous->data_as<std::int64_t>();
    EXPECT_EQ(std::vector<std::int64_t>(values, values + 4),
              (std::vector<std::int64_t>{-1, 0, 7, std::int64_t{1} << 40}));
    const Tensor* half = state.find("half");
    ASSERT_NE(half, nullptr);
    EXPECT_EQ(half->dtype(), DType::bf16);
    std::vector<std::uint16_t> bits(3);
    half->copy_to(std::as_writable_bytes(std::span(bits)));
    EXPECT_EQ(bits, (std::vector<std::uint16_t>{0x3F80, 0xC000, 0x3F00}));
    const Tensor* empty = state.find("empty");
    ASSERT_NE(empty, nullptr);
    EXPECT_EQ(empty->shape(), (Shape{0, 4}));
    EXPECT_EQ(state.find("step"), nullptr);  // an int, not a tensor
    auto missing = state.tensor("nope");
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

TEST(TorchStateDictTest, ReadsPythonPickleProtocols2And4) {
    for (const char* name : {"state_dict_p2.pth", "state_dict_p4.pth"}) {
        SCOPED_TRACE(name);
        auto state = TorchStateDict::open(golden(name));
        ASSERT_TRUE(state.has_value()) << state.error().to_string();
        expect_golden(**state);
    }
}

TEST(TorchStateDictTest, UnwrapsANestedStateDict) {
    auto state = TorchStateDict::open(golden("nested_p2.pth"));
    ASSERT_TRUE(state.has_value()) << state.error().to_string();
    expect_golden(**state);
}

// ---- hostile files -------------------------------------------------------------------------

std::string zip_of(const std::vector<std::pair<std::string, std::string>>& members,
                   std::uint16_t method = 0) {
    return omnirt::testing::stored_zip(members, method);
}

// Pickle pieces (protocol 2).
std::string global(const std::string& module, const std::string& name) {
    return "c" + module + "\n" + name + "\n";
}
std::string unicode(const std::string& text) {
    std::string out = "X";
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xFF));
    return out + text;
}
std::string int1(int v) { return std::string("K") + static_cast<char>(v); }
// {name: _rebuild_tensor_v2(storage 0 of `numel` floats, offset, (size,), (stride,))}
std::string tensor_pickle(int numel, int offset, int size, int stride,
                          const std::string& rebuild = "_rebuild_tensor_v2",
                          const std::string& storage_type = "FloatStorage") {
    return "\x80\x02}(" + unicode("w") + global("torch._utils", rebuild) + "((" +
           unicode("storage") + global("torch", storage_type) + unicode("0") + unicode("cpu") +
           int1(numel) + "tQ" + int1(offset) + int1(size) + "\x85" + int1(stride) + "\x85" +
           "\x89" + "}tRu.";
}

class HostileTorchTest : public ::testing::Test {
  protected:
    void SetUp() override {
        path_ = fs::temp_directory_path() /
                ("omnirt_torch_pickle_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".pth");
    }
    void TearDown() override { fs::remove(path_); }

    void write(const std::string& bytes) { std::ofstream(path_, std::ios::binary) << bytes; }
    Result<std::unique_ptr<TorchStateDict>> open_with(const std::string& pickle,
                                                      const std::string& storage) {
        write(zip_of({{"a/data.pkl", pickle}, {"a/byteorder", "little"}, {"a/data/0", storage}}));
        return TorchStateDict::open(path_);
    }
    void expect_error(const Result<std::unique_ptr<TorchStateDict>>& result,
                      const std::string& needle) {
        ASSERT_FALSE(result.has_value()) << "expected: " << needle;
        EXPECT_EQ(result.error().code, ErrorCode::invalid_argument) << result.error().message;
        EXPECT_NE(result.error().message.find(needle), std::string::npos) << result.error().message;
        EXPECT_NE(result.error().message.find(path_.string()), std::string::npos)
            << result.error().message;
    }

    fs::path path_;
};

TEST_F(HostileTorchTest, TheHandMadeBaselineReads) {
    auto state = open_with(tensor_pickle(4, 1, 2, 1), std::string(16, '\0'));
    ASSERT_TRUE(state.has_value()) << state.error().to_string();
    ASSERT_NE((*state)->find("w"), nullptr);
    EXPECT_EQ((*state)->find("w")->shape(), (Shape{2}));
    auto parameter = open_with(tensor_pickle(4, 0, 4, 1), std::string(16, '\0'));
    ASSERT_TRUE(parameter.has_value());
}

TEST_F(HostileTorchTest, RefusesForeignCallables) {
    // os.system('...') in pickle form: never executed, refused by name.
    const std::string attack =
        "\x80\x02" + global("os", "system") + "(" + unicode("touch /tmp/pwned") + "tR.";
    expect_error(open_with(attack, ""), "the callable os.system is not part of a state dict");
    expect_error(open_with(tensor_pickle(4, 0, 4, 1, "_rebuild_qtensor"), std::string(16, '\0')),
                 "torch._utils._rebuild_qtensor");
    expect_error(open_with(tensor_pickle(4, 0, 4, 1, "_rebuild_tensor_v2", "CudaStorage"),
                           std::string(16, '\0')),
                 "unknown storage type torch.CudaStorage");
}

TEST_F(HostileTorchTest, RefusesViewsPastTheirStorage) {
    expect_error(open_with(tensor_pickle(4, 0, 4, 1), std::string(8, '\0')),
                 "holds 8 bytes, not 4 elements");
    expect_error(open_with(tensor_pickle(4, 2, 4, 1), std::string(16, '\0')),
                 "reaches past its storage");
    expect_error(open_with(tensor_pickle(4, 0, 3, 2), std::string(16, '\0')),
                 "reaches past its storage");
}

TEST_F(HostileTorchTest, RefusesBrokenPickles) {
    const std::string good = tensor_pickle(4, 0, 4, 1);
    for (std::size_t cut : {std::size_t{1}, std::size_t{5}, good.size() / 2, good.size() - 1}) {
        expect_error(open_with(good.substr(0, cut), std::string(16, '\0')), "pickle byte");
    }
    expect_error(open_with("\x80\x02\xff.", ""), "unsupported pickle opcode 0xff");
    expect_error(open_with("\x80\x09}.", ""), "pickle protocol 9");
    expect_error(open_with("\x80\x02h\x05.", ""), "a memo index never stored");
    expect_error(open_with("\x80\x02s.", ""), "pop from an empty stack");
    expect_error(open_with("\x80\x02u.", ""), "no MARK");
    expect_error(open_with("\x80\x02]K\x01K\x02s.", ""), "SETITEM on a non-dict");
    expect_error(open_with("\x80\x02\x8a\x09.", ""), "wider than 64 bits");
    expect_error(open_with("\x80\x02K\x01.", ""), "not a dict");
    // A list that holds itself (a cycle through the memo): read as data, freed (LSan checks).
    using namespace std::string_literals;  // the pickles below hold NUL bytes
    expect_error(open_with("\x80\x02]q\x00h\x00"s + "a.", ""), "not a dict");
    auto cyclic = open_with("\x80\x02}q\x00"s + unicode("self") + "h\x00s."s, "");
    ASSERT_TRUE(cyclic.has_value()) << cyclic.error().to_string();
    EXPECT_TRUE((*cyclic)->names().empty());
    // A persistent id of another shape, and storage keys with no record.
    expect_error(open_with("\x80\x02" + unicode("x") + "Q.", ""), "a persistent id");
    const std::string other_key = "\x80\x02((" + unicode("storage") +
                                  global("torch", "FloatStorage") + unicode("../../etc/passwd") +
                                  unicode("cpu") + int1(1) + "tQ.";
    expect_error(open_with(other_key, ""), "no member 'a/data/../../etc/passwd'");
}

TEST_F(HostileTorchTest, RefusesBrokenContainers) {
    write("not a zip at all");
    expect_error(TorchStateDict::open(path_), "not a valid zip archive");
    write("");
    expect_error(TorchStateDict::open(path_), "not a valid zip archive");
    const std::string zip =
        zip_of({{"a/data.pkl", tensor_pickle(4, 0, 4, 1)}, {"a/data/0", std::string(16, '\0')}});
    for (std::size_t cut : {zip.size() - 1, zip.size() - 30, zip.size() / 2}) {
        write(zip.substr(0, cut));
        expect_error(TorchStateDict::open(path_), "zip");
    }
    // The central directory pointing past the end of the file.
    std::string moved = zip;
    moved[moved.size() - 3] = '\x7f';
    write(moved);
    expect_error(TorchStateDict::open(path_), "outside the file");
    write(zip_of({{"a/other.pkl", "x"}}));
    expect_error(TorchStateDict::open(path_), "no single <archive>/data.pkl");
    write(zip_of({{"a/data.pkl", "x"}, {"b/data.pkl", "x"}}));
    expect_error(TorchStateDict::open(path_), "no single <archive>/data.pkl");
    write(zip_of({{"a/data.pkl", tensor_pickle(4, 0, 4, 1)}, {"a/byteorder", "big"}}));
    expect_error(TorchStateDict::open(path_), "big-endian");
    write(zip_of({{"a/data.pkl", tensor_pickle(4, 0, 4, 1)}}, /*method=*/8));
    auto compressed = TorchStateDict::open(path_);
    ASSERT_FALSE(compressed.has_value());
    EXPECT_NE(compressed.error().message.find("compressed"), std::string::npos);
    auto missing = TorchStateDict::open(path_.string() + ".missing");
    EXPECT_FALSE(missing.has_value());
}

TEST(TorchStateDictTest, ReadsWhatTheTestWriterWrites) {
    const auto path =
        fs::temp_directory_path() / ("omnirt_torch_writer_" + std::to_string(::getpid()) + ".pth");
    const Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
    const Tensor b = Tensor::from_vector(std::vector<std::int64_t>{9, -9}, {2});
    omnirt::testing::write_torch_save(path, {{"a", a}, {"b", b}});
    auto state = TorchStateDict::open(path);
    fs::remove(path);
    ASSERT_TRUE(state.has_value()) << state.error().to_string();
    EXPECT_EQ((*state)->names(), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(floats(*(*state)->find("a")), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ((*state)->find("a")->shape(), (Shape{2, 3}));
    EXPECT_EQ((*state)->find("b")->dtype(), DType::i64);
}

TEST_F(HostileTorchTest, EveryTruncationOfTheGoldenFailsCleanly) {
    std::ifstream file(golden("state_dict_p2.pth"), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 100u);
    for (std::size_t cut = 0; cut < bytes.size(); cut += 7) {
        write(bytes.substr(0, cut));
        EXPECT_FALSE(TorchStateDict::open(path_).has_value()) << cut;
    }
    // Every single-byte corruption either fails cleanly or still reads (a data byte).
    for (std::size_t at = 0; at < bytes.size(); at += 3) {
        std::string changed = bytes;
        changed[at] = static_cast<char>(changed[at] ^ 0x5A);
        write(changed);
        (void)TorchStateDict::open(path_);
    }
}

}  // namespace
}  // namespace omnirt::checkpoint
