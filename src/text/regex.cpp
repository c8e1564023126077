// PCRE2 compile / match for the Split pre-tokenizer.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/regex.h"

#include <pcre2.h>

namespace omnirt::text::detail {
namespace {

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    const int length = pcre2_get_error_message(code, buffer, sizeof(buffer));
    if (length < 0) return "PCRE2 error " + std::to_string(code);
    return std::string(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(length));
}

// Per-thread match state: match data with one pair and a JIT stack that may grow to 1 MiB, so
// long whitespace runs or pathological inputs do not hit the default 32 KiB JIT stack.
struct ThreadMatchState {
    pcre2_match_data* match_data = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* jit_stack = nullptr;

    ThreadMatchState() {
        match_data = pcre2_match_data_create(1, nullptr);
        context = pcre2_match_context_create(nullptr);
        jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
        if (context != nullptr && jit_stack != nullptr) {
            pcre2_jit_stack_assign(context, nullptr, jit_stack);
        }
    }
    ~ThreadMatchState() {
        pcre2_jit_stack_free(jit_stack);
        pcre2_match_context_free(context);
        pcre2_match_data_free(match_data);
    }
    ThreadMatchState(const ThreadMatchState&) = delete;
    ThreadMatchState& operator=(const ThreadMatchState&) = delete;
};

ThreadMatchState& thread_match_state() {
    thread_local ThreadMatchState state;
    return state;
}

// Length of the UTF-8 sequence whose lead byte is `lead` (1 for a stray byte).
std::size_t sequence_length(unsigned char lead) {
    if (lead >= 0xF0) return 4;
    if (lead >= 0xE0) return 3;
    if (lead >= 0xC0) return 2;
    return 1;
}

}  // namespace

struct Regex::Compiled {
    pcre2_code* code = nullptr;
    bool jit = false;
    ~Compiled() { pcre2_code_free(code); }
};

std::string rewrite_whitespace_escapes(std::string_view pattern) {
    std::string out;
    out.reserve(pattern.size() + 32);
    bool quoted = false;  // inside \Q...\E every character is literal
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c != '\\' || i + 1 == pattern.size()) {
            out.push_back(c);
            continue;
        }
        const char next = pattern[i + 1];
        if (quoted) {
            if (next == 'E') quoted = false;
            out.push_back(c);
            out.push_back(next);
        } else if (next == 's') {
            out.append("\\p{White_Space}");
        } else if (next == 'S') {
            out.append("\\P{White_Space}");
        } else {
            if (next == 'Q') quoted = true;
            out.push_back(c);
            out.push_back(next);
        }
        ++i;
    }
    return out;
}

Result<std::unique_ptr<Regex>> Regex::compile(std::string_view pattern, bool literal) {
    const std::string source = literal ? std::string(pattern) : rewrite_whitespace_escapes(pattern);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    const std::uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    auto compiled = std::make_unique<Compiled>();
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                   options, &error_code, &error_offset, nullptr);
    if (compiled->code == nullptr) {
        return fail(ErrorCode::invalid_argument, "bad regex at offset " +
                                                     std::to_string(error_offset) + ": " +
                                                     pcre2_message(error_code));
    }
    // JIT is an optimisation: where it is unavailable the interpreter gives the same matches.
    compiled->jit = pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE) == 0;
    return std::unique_ptr<Regex>(new Regex(std::move(compiled)));
}

Regex::Regex(std::unique_ptr<Compiled> compiled) : compiled_(std::move(compiled)) {}
Regex::~Regex() = default;

Status Regex::find_all(std::string_view subject, std::vector<Span>& matches) const {
    ThreadMatchState& state = thread_match_state();
    if (state.match_data == nullptr || state.context == nullptr) {
        return fail(ErrorCode::resource_exhausted, "cannot allocate PCRE2 match data");
    }
    const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
    std::size_t position = 0;
    while (position < subject.size()) {
        const int rc = compiled_->jit
                           ? pcre2_jit_match(compiled_->code, data, subject.size(), position, 0,
                                             state.match_data, state.context)
                           : pcre2_match(compiled_->code, data, subject.size(), position,
                                         PCRE2_NO_UTF_CHECK, state.match_data, state.context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            return fail(ErrorCode::resource_exhausted, "regex match failed at byte " +
                                                           std::to_string(position) + ": " +
                                                           pcre2_message(rc));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.match_data);
        const std::size_t begin = ovector[0];
        const std::size_t end = ovector[1];
        if (end > begin) {
            matches.push_back({begin, end});
            position = end;
        } else {  // an empty match: step over one character and look again
            if (begin >= subject.size()) break;
            position = begin + sequence_length(static_cast<unsigned char>(subject[begin]));
        }
    }
    return ok_status();
}

}  // namespace omnirt::text::detail
