// ArScheduler: the content a request's positions hold besides token ids (RequestSetup's
// embeddings, layer injections and positions, feedback embeddings), the prefix-cache keys that
// cover it, the per-step input built from it, and captures (ar_role.h). Engine thread only.
//
// Captures and the prefix cache: captured rows stay with the sequence (through preemption), and
// a prefix-cache match never covers a position a capture still needs, so every captured row is
// computed by this request (docs/engine.md, "Captures").
#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "engine/ar_scheduler.h"
#include "engine/radix_cache.h"

namespace omnirt::engine {
namespace {

constexpr PositionKey kContentBit = PositionKey{1} << 63;

PositionKey mix(PositionKey hash, std::uint64_t value) {
    std::uint64_t z = hash ^ (value + 0x9E3779B97F4A7C15ULL + (hash << 6) + (hash >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// A key of the position's token and something else that determined its KV.
PositionKey with_content(PositionKey key, std::uint64_t content) {
    return mix(key, content) | kContentBit;
}

PositionKey token_key(std::int32_t token) {
    return static_cast<PositionKey>(static_cast<std::uint32_t>(token));
}

}  // namespace

std::uint64_t content_hash(const at::Tensor& values) {
    const at::Tensor host = values.to(at::kCPU).contiguous();
    std::uint64_t hash = mix(static_cast<std::uint64_t>(host.scalar_type()), host.dim());
    for (std::int64_t size : host.sizes()) hash = mix(hash, static_cast<std::uint64_t>(size));
    const auto* bytes = static_cast<const unsigned char*>(host.data_ptr());
    const auto length = static_cast<std::size_t>(host.nbytes());
    std::size_t i = 0;
    for (; i + 8 <= length; i += 8) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes + i, 8);
        hash = (hash ^ word) * 0x100000001B3ULL;
        hash ^= hash >> 29;
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, bytes + i, length - i);
    return mix(hash, tail ^ length);
}

Status ArScheduler::hold_setup(ArSequence& sequence, RequestSetup& setup) {
    const ModelCapabilities& can = capabilities_;
    const std::int64_t prompt = sequence.prompt_tokens_;
    auto invalid = [](const std::string& message) {
        return fail(ErrorCode::invalid_argument, message);
    };
    sequence.keys_.reserve(sequence.tokens_.size());
    for (std::int32_t token : sequence.tokens_) sequence.keys_.push_back(token_key(token));
    std::vector<bool> replaced(static_cast<std::size_t>(prompt), false);

    auto check_run = [&](const PositionRun& run, const std::string& what) -> Status {
        const at::Tensor& values = run.values;
        if (!values.defined() || values.dim() != 2 || !values.is_floating_point() ||
            values.size(1) != can.hidden_size || values.size(0) < 1) {
            return invalid(what + ": values must be a floating [rows >= 1, " +
                           std::to_string(can.hidden_size) + "] tensor");
        }
        if (run.begin < 0 || run.begin + values.size(0) > prompt) {
            return invalid(what + ": positions [" + std::to_string(run.begin) + ", " +
                           std::to_string(run.begin + values.size(0)) +
                           ") are outside the prompt of " + std::to_string(prompt) + " tokens");
        }
        return ok_status();
    };
    auto hold = [&](std::int32_t after_layers, PositionRun& run) {
        const std::uint64_t key =
            mix(run.content_key != 0 ? run.content_key : content_hash(run.values),
                static_cast<std::uint64_t>(after_layers));
        for (std::int64_t j = 0; j < run.values.size(0); ++j) {
            PositionKey& position = sequence.keys_[static_cast<std::size_t>(run.begin + j)];
            position = with_content(position, mix(key, static_cast<std::uint64_t>(j)));
        }
        sequence.held_.push_back(ArSequence::HeldRun{
            .after_layers = after_layers, .begin = run.begin, .values = std::move(run.values)});
    };

    for (PositionRun& run : setup.embeddings) {
        if (!can.embeddings) return invalid("the model takes no injected embeddings");
        OMNI_RETURN_IF_ERROR(check_run(run, "embeddings"));
        for (std::int64_t j = 0; j < run.values.size(0); ++j) {
            const auto p = static_cast<std::size_t>(run.begin + j);
            if (replaced[p]) {
                return invalid("embeddings: two runs replace position " + std::to_string(p));
            }
            replaced[p] = true;
        }
        hold(0, run);
    }
    for (LayerRun& run : setup.layer_injections) {
        if (!can.layer_injections) return invalid("the model takes no layer injections");
        if (run.after_layers < 1 || run.after_layers > can.num_layers) {
            return invalid("layer_injections: after_layers " + std::to_string(run.after_layers) +
                           " is outside [1, " + std::to_string(can.num_layers) + "]");
        }
        OMNI_RETURN_IF_ERROR(check_run(run.add, "layer_injections"));
        hold(run.after_layers, run.add);
    }
    // Token ids are looked up where no embedding replaces them.
    for (std::int64_t i = 0; i < prompt; ++i) {
        const std::int32_t token = sequence.tokens_[static_cast<std::size_t>(i)];
        if (!replaced[static_cast<std::size_t>(i)] && (token < 0 || token >= vocab_size_)) {
            return invalid("data.input_ids[" + std::to_string(i) + "] = " + std::to_string(token) +
                           " is outside the vocabulary of " + std::to_string(vocab_size_) +
                           " tokens");
        }
    }

    if (setup.positions.defined()) {
        at::Tensor positions = setup.positions;
        const bool integral =
            positions.scalar_type() == at::kLong || positions.scalar_type() == at::kInt;
        if (positions.dim() == 1) positions = positions.unsqueeze(0);
        if (!integral || positions.dim() != 2 || positions.size(1) != prompt ||
            positions.size(0) < 1 || positions.size(0) > can.position_axes) {
            return invalid("positions must be an integer [" + std::to_string(prompt) +
                           "] or [axes <= " + std::to_string(can.position_axes) + ", " +
                           std::to_string(prompt) + "] tensor");
        }
        positions = positions.to(at::kCPU, at::kLong).contiguous();
        const std::int64_t low = positions.min().item<std::int64_t>();
        const std::int64_t high = positions.max().item<std::int64_t>();
        if (low < 0 || high + setup.position_offset >= max_positions_ ||
            prompt + setup.position_offset < 0) {
            return invalid("positions must lie in [0, " + std::to_string(max_positions_) + ")");
        }
        const auto axes = positions.size(0);
        const std::int64_t* data = positions.data_ptr<std::int64_t>();
        for (std::int64_t i = 0; i < prompt; ++i) {
            PositionKey& key = sequence.keys_[static_cast<std::size_t>(i)];
            for (std::int64_t a = 0; a < axes; ++a) {
                key = with_content(key, static_cast<std::uint64_t>(data[a * prompt + i]));
            }
        }
        sequence.positions_ = std::move(positions);
        sequence.position_offset_ = setup.position_offset;
    } else if (setup.position_offset != 0) {
        return invalid("position_offset needs explicit prompt positions");
    }

    for (const CaptureSpec& spec : setup.captures) {
        if (!can.captures) return invalid("the model takes no captures");
        if (spec.after_layers < 0 || spec.after_layers > can.num_layers || spec.begin < 0 ||
            (spec.end >= 0 && spec.end <= spec.begin)) {
            return invalid("captures: after_layers must lie in [0, " +
                           std::to_string(can.num_layers) +
                           "] and positions [begin, end) be non-empty (end -1: open)");
        }
        sequence.captures_.push_back(CaptureRows{.spec = spec});
    }
    return ok_status();
}

void ArScheduler::append_key(ArSequence& sequence, std::int32_t token,
                             const at::Tensor& embedding) {
    PositionKey key = token_key(token);
    if (embedding.defined()) key = with_content(key, content_hash(embedding));
    if (sequence.position_offset_ != 0) {
        key = with_content(key, static_cast<std::uint64_t>(sequence.position_offset_));
    }
    sequence.keys_.push_back(key);
}

std::int64_t ArScheduler::match_limit(const ArSequence& sequence) const {
    // The last token is always computed: its logits give the next token.
    std::int64_t limit = static_cast<std::int64_t>(sequence.tokens_.size()) - 1;
    for (const CaptureRows& capture : sequence.captures_) {
        const std::int64_t next = capture.next_position();
        if (next >= 0) limit = std::min(limit, next);
    }
    return std::max<std::int64_t>(limit, 0);
}

ArScheduler::StepInput ArScheduler::build_input(ArSequence& sequence, std::int64_t count) {
    const std::int64_t begin = sequence.computed_;
    const std::int64_t end = begin + count;
    const auto first = sequence.tokens_.begin() + begin;
    StepInput step;
    SequenceInput& input = step.input;
    input.request_id = sequence.request_id_;
    input.tokens.assign(first, first + count);
    input.start_position = begin;
    input.block_table = sequence.blocks_;
    input.want_hidden = depth_ != nullptr || role_->wants_hidden(sequence);

    // Held content over [begin, end): per layer count, the overlapping slices in row order.
    std::map<std::int32_t, std::vector<std::pair<std::int64_t, at::Tensor>>> slices;
    for (const ArSequence::HeldRun& run : sequence.held_) {
        const std::int64_t lo = std::max(begin, run.begin);
        const std::int64_t hi = std::min(end, run.begin + run.values.size(0));
        if (lo >= hi) continue;
        slices[run.after_layers].emplace_back(lo - begin,
                                              run.values.narrow(0, lo - run.begin, hi - lo));
    }
    for (auto& [after_layers, parts] : slices) {
        std::sort(parts.begin(), parts.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        RowValues values;
        std::vector<at::Tensor> tensors;
        for (const auto& [row, part] : parts) {
            for (std::int64_t r = 0; r < part.size(0); ++r) values.rows.push_back(row + r);
            tensors.push_back(part);
        }
        values.values = tensors.size() == 1 ? tensors[0] : at::cat(tensors, 0);
        if (after_layers == 0) {
            input.embeddings = std::move(values);
        } else {
            input.layer_injections.push_back(
                LayerInjection{.after_layers = after_layers, .add = std::move(values)});
        }
    }

    if (sequence.positions_.defined()) {
        const std::int64_t prompt = sequence.prompt_tokens_;
        const std::int64_t axes = sequence.positions_.size(0);
        at::Tensor positions = at::empty({axes, count}, at::kLong);
        std::int64_t* out = positions.data_ptr<std::int64_t>();
        const std::int64_t* held = sequence.positions_.data_ptr<std::int64_t>();
        for (std::int64_t a = 0; a < axes; ++a) {
            for (std::int64_t p = begin; p < end; ++p) {
                out[a * count + (p - begin)] =
                    p < prompt ? held[a * prompt + p] : p + sequence.position_offset_;
            }
        }
        input.positions = std::move(positions);
    }

    for (std::size_t c = 0; c < sequence.captures_.size(); ++c) {
        const CaptureRows& capture = sequence.captures_[c];
        const std::int64_t next = capture.next_position();
        if (next < 0 || next >= end) continue;
        // match_limit keeps prefix hits short of `next`, so the step starts at or before it.
        OMNI_CHECK(next >= begin, "AR engine: a capture would skip positions");
        const std::int64_t stop = capture.spec.end < 0 ? end : std::min(end, capture.spec.end);
        input.captures.push_back(CaptureRequest{.after_layers = capture.spec.after_layers,
                                                .row_begin = next - begin,
                                                .row_end = stop - begin});
        step.capture_slots.push_back(c);
    }
    step.fingerprint = fingerprint(input);
    return step;
}

ArScheduler::ContentFingerprint ArScheduler::fingerprint(const SequenceInput& input) {
    ContentFingerprint print;
    if (input.embeddings) {
        print.embedding_rows = input.embeddings->rows;
        print.embedding_values = input.embeddings->values.unsafeGetTensorImpl();
    }
    for (const LayerInjection& injection : input.layer_injections) {
        print.layer_values.push_back(injection.add.values.unsafeGetTensorImpl());
        print.layer_rows += injection.add.rows.size();
    }
    print.positions = input.positions.defined() ? input.positions.unsafeGetTensorImpl() : nullptr;
    print.captures = input.captures.size();
    return print;
}

Status ArScheduler::keep_captures(ArSequence& sequence, const SequenceInput& input,
                                  std::span<const std::size_t> slots,
                                  const std::vector<at::Tensor>& captured) {
    if (captured.size() != slots.size()) {
        return fail(ErrorCode::internal, "the model returned " + std::to_string(captured.size()) +
                                             " captures for a sequence that asked for " +
                                             std::to_string(slots.size()));
    }
    for (std::size_t j = 0; j < captured.size(); ++j) {
        const CaptureRequest& asked = input.captures[j];
        const at::Tensor& rows = captured[j];
        if (!rows.defined() || rows.dim() != 2 || rows.size(0) != asked.row_end - asked.row_begin ||
            rows.size(1) != capabilities_.hidden_size) {
            return fail(ErrorCode::internal, "the model returned a capture of the wrong shape");
        }
        CaptureRows& capture = sequence.captures_[slots[j]];
        capture.chunks.push_back(rows);
        capture.count += rows.size(0);
    }
    return ok_status();
}

at::Tensor CaptureRows::rows() const {
    if (chunks.empty()) return {};
    return chunks.size() == 1 ? chunks[0] : at::cat(chunks, 0);
}

}  // namespace omnirt::engine
