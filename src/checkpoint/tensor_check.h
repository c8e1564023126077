#pragma once
// Comparing a checkpoint with the tensors a model expects: missing, unexpected and wrong-shape
// tensors, listed so that a user sees at once what does not match.
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace omnirt::checkpoint {

struct ExpectedTensor {
    std::string name;
    Shape shape;
    // May be absent (e.g. lm_head.weight of a model with tied embeddings); checked when present.
    bool optional = false;
};

struct ShapeMismatch {
    std::string name;
    Shape expected;
    Shape actual;
};

struct TensorCheckReport {
    std::vector<std::string> missing;     // expected, not in the checkpoint (sorted)
    std::vector<std::string> unexpected;  // in the checkpoint, not expected (sorted)
    std::vector<ShapeMismatch> wrong_shape;

    [[nodiscard]] bool ok() const {
        return missing.empty() && unexpected.empty() && wrong_shape.empty();
    }
    // One line per problem kind, at most `max_names` names each ("... and N more").
    [[nodiscard]] std::string to_string(std::size_t max_names = 20) const;
};

// Only checkpoint tensors whose names start with `prefix` can be unexpected (a thinker's check
// ignores the talker's tensors in the same checkpoint).
[[nodiscard]] TensorCheckReport check_tensors(const Checkpoint& checkpoint,
                                              const std::vector<ExpectedTensor>& expected,
                                              std::string_view prefix = "");

// ok, or failed_precondition with "<directory>: <report>".
[[nodiscard]] Status check_tensors_status(const Checkpoint& checkpoint,
                                          const std::vector<ExpectedTensor>& expected,
                                          std::string_view prefix = "");

// "[2, 3]".
[[nodiscard]] std::string shape_to_string(const Shape& shape);

}  // namespace omnirt::checkpoint
