#pragma once
// Private to omnirt_text: a compiled PCRE2 pattern (UTF + UCP, JIT when available) with the
// Hugging Face tokenizers' meaning of `\s`.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace omnirt::text::detail {

struct Span {
    std::size_t begin = 0;
    std::size_t end = 0;
};

class Regex {
  public:
    // Compiles `pattern` (a regex, or a literal string when `literal`). `\s` / `\S` become
    // \p{White_Space} / \P{White_Space}: the Unicode White_Space set that Oniguruma and Rust's
    // regex crate use (PCRE2's own \s also matches U+180E). invalid_argument on a bad pattern,
    // with PCRE2's message and the offset.
    [[nodiscard]] static Result<std::unique_ptr<Regex>> compile(std::string_view pattern,
                                                                bool literal);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Appends every non-overlapping, non-empty match in `subject` (valid UTF-8), left to right.
    // Safe to call from several threads at once. Errors (a pattern that exhausts PCRE2's match
    // or JIT stack limits on this subject): resource_exhausted.
    [[nodiscard]] Status find_all(std::string_view subject, std::vector<Span>& matches) const;

  private:
    struct Compiled;
    explicit Regex(std::unique_ptr<Compiled> compiled);
    std::unique_ptr<Compiled> compiled_;
};

// The pattern with `\s` and `\S` replaced as described above (exposed for tests).
[[nodiscard]] std::string rewrite_whitespace_escapes(std::string_view pattern);

}  // namespace omnirt::text::detail
