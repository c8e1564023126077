#pragma once
// Test helpers that write files in torch.save's zip layout without torch (for the torch.save
// reader's tests): a ZIP of stored members, and the protocol-2 pickle of a state dict whose
// tensors are contiguous views of one storage each (torch._utils._rebuild_tensor_v2 with
// ('storage', torch.<Type>Storage, key, 'cpu', numel) persistent ids), as torch.save writes it.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace omnirt::testing {

// A ZIP of `members` stored uncompressed (`method` 8 marks them deflated without being so);
// CRCs are left 0.
inline std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& members,
                              std::uint16_t method = 0) {
    std::string out;
    std::string directory;
    auto le = [](std::string& s, std::uint64_t v, int width) {
        for (int i = 0; i < width; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    };
    for (const auto& [name, data] : members) {
        const std::size_t offset = out.size();
        for (std::string* record : {&out, &directory}) {
            const bool central = record == &directory;
            le(*record, central ? 0x02014b50 : 0x04034b50, 4);
            if (central) le(*record, 20, 2);  // version made by
            le(*record, 20, 2);               // version needed
            le(*record, 0, 2);                // flags
            le(*record, method, 2);
            le(*record, 0, 4);  // time, date
            le(*record, 0, 4);  // crc
            le(*record, data.size(), 4);
            le(*record, data.size(), 4);
            le(*record, name.size(), 2);
            le(*record, 0, 2);  // extra
            if (central) {
                le(*record, 0, 2);  // comment
                le(*record, 0, 2);  // disk
                le(*record, 0, 2);  // internal attributes
                le(*record, 0, 4);  // external attributes
                le(*record, offset, 4);
            }
            *record += name;
        }
        out += data;
    }
    const std::size_t directory_offset = out.size();
    out += directory;
    le(out, 0x06054b50, 4);
    le(out, 0, 4);
    le(out, members.size(), 2);
    le(out, members.size(), 2);
    le(out, directory.size(), 4);
    le(out, directory_offset, 4);
    le(out, 0, 2);
    return out;
}

namespace torch_save_detail {
inline std::string le32(std::uint32_t v) {
    std::string out;
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return out;
}
inline std::string unicode(const std::string& text) {
    return "X" + le32(static_cast<std::uint32_t>(text.size())) + text;
}
inline std::string integer(std::int64_t v) { return "J" + le32(static_cast<std::uint32_t>(v)); }
inline std::string storage_type(DType dtype) {
    switch (dtype) {
        case DType::f32:
            return "FloatStorage";
        case DType::f64:
            return "DoubleStorage";
        case DType::f16:
            return "HalfStorage";
        case DType::bf16:
            return "BFloat16Storage";
        case DType::i64:
            return "LongStorage";
        case DType::i32:
            return "IntStorage";
        default:
            return "ByteStorage";
    }
}
}  // namespace torch_save_detail

// The bytes of a torch.save file holding the OrderedDict `tensors` (host tensors; sizes and
// numels below 2^31), archive name `archive`.
inline std::string torch_save_bytes(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                    const std::string& archive = "archive") {
    using namespace torch_save_detail;
    std::string pickle =
        "\x80\x02"
        "ccollections\nOrderedDict\n)R(";
    std::vector<std::pair<std::string, std::string>> members;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const auto& [name, tensor] = tensors[i];
        const std::string key = std::to_string(i);
        pickle += unicode(name) + "ctorch._utils\n_rebuild_tensor_v2\n((" + unicode("storage") +
                  "ctorch\n" + storage_type(tensor.dtype()) + "\n" + unicode(key) + unicode("cpu") +
                  integer(tensor.numel()) + "tQ" + integer(0) + "(";
        for (std::int64_t extent : tensor.shape()) pickle += integer(extent);
        pickle += "t(";
        std::int64_t stride = 1;
        std::vector<std::int64_t> strides(tensor.dim());
        for (std::size_t d = tensor.dim(); d-- > 0;) {
            strides[d] = stride;
            stride *= tensor.shape()[d];
        }
        for (std::int64_t s : strides) pickle += integer(s);
        pickle +=
            "t\x89"
            "ccollections\nOrderedDict\n)RtR";
        std::string data(tensor.nbytes(), '\0');
        tensor.copy_to(std::as_writable_bytes(std::span(data.data(), data.size())));
        members.emplace_back(archive + "/data/" + key, std::move(data));
    }
    pickle += "u.";
    members.insert(members.begin(), {archive + "/data.pkl", pickle});
    members.emplace_back(archive + "/byteorder", "little");
    members.emplace_back(archive + "/version", "3\n");
    return stored_zip(members);
}

inline void write_torch_save(const std::filesystem::path& path,
                             const std::vector<std::pair<std::string, Tensor>>& tensors) {
    std::ofstream(path, std::ios::binary) << torch_save_bytes(tensors);
}

}  // namespace omnirt::testing
