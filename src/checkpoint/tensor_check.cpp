#include "checkpoint/tensor_check.h"

#include <algorithm>
#include <set>

namespace omnirt::checkpoint {
namespace {

template <class T, class Format>
std::string list(const std::vector<T>& items, std::size_t max_names, Format format) {
    std::string text;
    for (std::size_t i = 0; i < items.size() && i < max_names; ++i) {
        text += (i ? ", " : "") + format(items[i]);
    }
    if (items.size() > max_names) {
        text += " ... and " + std::to_string(items.size() - max_names) + " more";
    }
    return text;
}

}  // namespace

std::string shape_to_string(const Shape& shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        text += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return text + "]";
}

std::string TensorCheckReport::to_string(std::size_t max_names) const {
    std::string text;
    auto add_line = [&](const std::string& line) { text += (text.empty() ? "" : "\n") + line; };
    if (!missing.empty()) {
        add_line(std::to_string(missing.size()) + " missing tensor(s): " +
                 list(missing, max_names, [](const std::string& s) { return s; }));
    }
    if (!wrong_shape.empty()) {
        add_line(std::to_string(wrong_shape.size()) + " tensor(s) of the wrong shape: " +
                 list(wrong_shape, max_names, [](const ShapeMismatch& m) {
                     return m.name + " is " + shape_to_string(m.actual) + ", expected " +
                            shape_to_string(m.expected);
                 }));
    }
    if (!unexpected.empty()) {
        add_line(std::to_string(unexpected.size()) + " unexpected tensor(s): " +
                 list(unexpected, max_names, [](const std::string& s) { return s; }));
    }
    return text.empty() ? "all tensors match" : text;
}

TensorCheckReport check_tensors(const Checkpoint& checkpoint,
                                const std::vector<ExpectedTensor>& expected,
                                std::string_view prefix) {
    TensorCheckReport report;
    std::set<std::string_view> expected_names;
    for (const ExpectedTensor& tensor : expected) {
        expected_names.insert(tensor.name);
        const TensorEntry* entry = checkpoint.find(tensor.name);
        if (entry == nullptr) {
            if (!tensor.optional) report.missing.push_back(tensor.name);
        } else if (entry->shape != tensor.shape) {
            report.wrong_shape.push_back({tensor.name, tensor.shape, entry->shape});
        }
    }
    for (const std::string& name : checkpoint.tensor_names()) {
        if (name.starts_with(prefix) && !expected_names.contains(name)) {
            report.unexpected.push_back(name);
        }
    }
    std::sort(report.missing.begin(), report.missing.end());
    std::sort(report.wrong_shape.begin(), report.wrong_shape.end(),
              [](const ShapeMismatch& a, const ShapeMismatch& b) { return a.name < b.name; });
    return report;
}

Status check_tensors_status(const Checkpoint& checkpoint,
                            const std::vector<ExpectedTensor>& expected, std::string_view prefix) {
    TensorCheckReport report = check_tensors(checkpoint, expected, prefix);
    if (report.ok()) return ok_status();
    return fail(ErrorCode::failed_precondition, checkpoint.directory().string() +
                                                    ": the checkpoint does not match the model:\n" +
                                                    report.to_string());
}

}  // namespace omnirt::checkpoint
