#pragma once
// Reads the committed golden files under tests/media/goldens (written by the generator scripts
// there). Little-endian binary; a malformed file fails the test that reads it.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace omnirt::media::testing {

inline std::string golden_path(const std::string& name) {
    return std::string(OMNIRT_SOURCE_DIR) + "/tests/media/goldens/" + name;
}

inline std::string read_file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Sequential reader over a golden file's bytes; ok() turns false on a short read.
class GoldenReader {
  public:
    explicit GoldenReader(std::string bytes) : bytes_(std::move(bytes)) {}

    bool ok() const { return ok_; }
    bool at_end() const { return position_ == bytes_.size(); }
    std::string text(std::size_t size) {
        if (!take(size)) return {};
        return bytes_.substr(position_ - size, size);
    }
    std::uint32_t u32() {
        std::uint32_t value = 0;
        if (take(4)) std::memcpy(&value, bytes_.data() + position_ - 4, 4);
        return value;
    }
    template <class T>
    std::vector<T> array(std::size_t count) {
        std::vector<T> values(count);
        if (take(count * sizeof(T))) {
            std::memcpy(values.data(), bytes_.data() + position_ - count * sizeof(T),
                        count * sizeof(T));
        }
        return values;
    }

  private:
    bool take(std::size_t size) {
        if (!ok_ || bytes_.size() - position_ < size) {
            ok_ = false;
            return false;
        }
        position_ += size;
        return true;
    }

    std::string bytes_;
    std::size_t position_ = 0;
    bool ok_ = true;
};

}  // namespace omnirt::media::testing
