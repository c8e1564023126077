#include "engine/text_role.h"

#include <algorithm>
#include <utility>

#include "engine/ar_sequence.h"

namespace omnirt::engine {

Result<RequestSetup> TextRole::open_request(const StagePayload& payload) {
    RequestSetup setup;
    if (payload.data.find("input_ids") == nullptr && options_.prepare_input) {
        OMNI_TRY(setup.prompt, options_.prepare_input(payload));
        OMNI_TRY(setup.cache_salt, read_cache_salt(payload.data));
    } else {
        OMNI_TRY(setup, read_request_setup(payload));
    }
    if (options_.extend_setup) OMNI_RETURN_IF_ERROR(options_.extend_setup(payload, setup));
    if (options_.stream_targets_for) {
        Result<std::vector<std::string>> chosen = options_.stream_targets_for(payload);
        if (!chosen) return fail(chosen.error().with_context("stream_targets_for"));
        setup.stream_targets = std::move(*chosen);
    }
    return setup;
}

bool TextRole::wants_hidden(const ArSequence& sequence) {
    return options_.stream_hidden && !sequence.stream_targets().empty();
}

Result<TokenFields> TextRole::on_token(ArSequence& sequence, const TokenStep& step) {
    TokenFields fields;
    if (step.hidden != nullptr && wants_hidden(sequence)) {
        fields.targets.insert_or_assign("hidden", hidden_row_value(*step.hidden));
    }
    if (options_.token_fields) OMNI_RETURN_IF_ERROR(options_.token_fields(sequence, step, fields));
    return fields;
}

}  // namespace omnirt::engine
