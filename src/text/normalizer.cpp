// Unicode normalization through ICU's UTF-8 API (quick check first, so already-normalized text
// is not copied through ICU's buffers twice).
#include "text/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <algorithm>

namespace omnirt::text::detail {
namespace {

const icu::Normalizer2* instance_for(NormalForm form, UErrorCode& status) {
    switch (form) {
        case NormalForm::nfc:
            return icu::Normalizer2::getNFCInstance(status);
        case NormalForm::nfd:
            return icu::Normalizer2::getNFDInstance(status);
        case NormalForm::nfkc:
            return icu::Normalizer2::getNFKCInstance(status);
        case NormalForm::nfkd:
            return icu::Normalizer2::getNFKDInstance(status);
    }
    return nullptr;
}

bool is_ascii(std::string_view text) {
    return std::all_of(text.begin(), text.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

Result<std::unique_ptr<Normalizer>> Normalizer::create(std::vector<NormalForm> forms) {
    std::vector<const void*> instances;
    for (NormalForm form : forms) {
        UErrorCode status = U_ZERO_ERROR;
        const icu::Normalizer2* instance = instance_for(form, status);
        if (U_FAILURE(status) || instance == nullptr) {
            return fail(ErrorCode::internal,
                        std::string("ICU normalizer unavailable: ") + u_errorName(status));
        }
        instances.push_back(instance);
    }
    return std::unique_ptr<Normalizer>(new Normalizer(std::move(instances), std::move(forms)));
}

Normalizer::Normalizer(std::vector<const void*> instances, std::vector<NormalForm> forms)
    : instances_(std::move(instances)), forms_(std::move(forms)) {}
Normalizer::~Normalizer() = default;

Status Normalizer::normalize(std::string_view text, std::string& out) const {
    out.assign(text);
    if (forms_.empty() || is_ascii(text)) return ok_status();
    std::string next;
    for (const void* opaque : instances_) {
        const auto* normalizer = static_cast<const icu::Normalizer2*>(opaque);
        UErrorCode status = U_ZERO_ERROR;
        const icu::StringPiece piece(out.data(), static_cast<std::int32_t>(out.size()));
        if (normalizer->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) continue;
        status = U_ZERO_ERROR;
        next.clear();
        icu::StringByteSink<std::string> sink(&next, static_cast<std::int32_t>(out.size()));
        normalizer->normalizeUTF8(0, piece, sink, nullptr, status);
        if (U_FAILURE(status)) {
            return fail(ErrorCode::internal,
                        std::string("Unicode normalization failed: ") + u_errorName(status));
        }
        out.swap(next);
    }
    return ok_status();
}

}  // namespace omnirt::text::detail
