#pragma once
// Private to omnirt_text: the tokenizer.json normalizers this layer supports, Unicode
// normalization forms applied in sequence (ICU).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace omnirt::text::detail {

enum class NormalForm : std::uint8_t { nfc, nfd, nfkc, nfkd };

class Normalizer {
  public:
    // An empty list normalizes nothing. internal when ICU cannot load its data.
    [[nodiscard]] static Result<std::unique_ptr<Normalizer>> create(std::vector<NormalForm> forms);
    ~Normalizer();

    [[nodiscard]] bool empty() const { return forms_.empty(); }
    // Writes the normalized form of `text` (valid UTF-8) to `out` (replacing its contents).
    // ASCII text is returned unchanged without calling ICU. Safe from any thread.
    [[nodiscard]] Status normalize(std::string_view text, std::string& out) const;

  private:
    explicit Normalizer(std::vector<const void*> instances, std::vector<NormalForm> forms);
    std::vector<const void*> instances_;  // icu::Normalizer2*, owned by ICU
    std::vector<NormalForm> forms_;
};

}  // namespace omnirt::text::detail
