#pragma once
// Test helper for the config loader tests: a pipeline config as YAML text that a test mutates
// field by field and that knows the line of every field, so that tests can assert on the
// reported location.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "config/load.h"

namespace omnirt::config::testing {

inline constexpr const char* kSource = "test.yaml";

class PipelineText {
  public:
    using Fields = std::vector<std::pair<std::string, std::string>>;  // key, YAML value text

    // a -> b -> c, each stage in its own process, c terminal; valid as it is.
    static PipelineText linear() {
        PipelineText text;
        text.top_ = {{"model_path", "/models/test"}};
        text.add_stage("a", {{"process", "pa"}, {"factory", "test.a"}, {"next", "b"}});
        text.add_stage("b", {{"process", "pb"}, {"factory", "test.b"}, {"next", "c"}});
        text.add_stage("c", {{"process", "pc"}, {"factory", "test.c"}, {"terminal", "true"}});
        return text;
    }

    PipelineText& add_stage(const std::string& name, Fields fields) {
        fields.insert(fields.begin(), {"name", name});
        stages_.push_back({name, std::move(fields)});
        return *this;
    }
    // Sets (or adds) a pipeline-level key.
    PipelineText& top(const std::string& key, const std::string& value) {
        put(top_, key, value);
        return *this;
    }
    PipelineText& erase_top(const std::string& key) {
        std::erase_if(top_, [&](const auto& field) { return field.first == key; });
        return *this;
    }
    // Sets (or adds) a key of stage `stage` (found by the name it was added with).
    PipelineText& set(const std::string& stage, const std::string& key, const std::string& value) {
        put(find(stage), key, value);
        return *this;
    }
    PipelineText& erase(const std::string& stage, const std::string& key) {
        std::erase_if(find(stage), [&](const auto& field) { return field.first == key; });
        return *this;
    }

    [[nodiscard]] std::string text() const {
        std::string out;
        for (const auto& [key, value] : top_) out += key + ": " + value + "\n";
        out += "stages:\n";
        for (const auto& stage : stages_) {
            for (std::size_t i = 0; i < stage.fields.size(); ++i) {
                out += (i == 0 ? "  - " : "    ") + stage.fields[i].first + ": " +
                       stage.fields[i].second + "\n";
            }
        }
        return out;
    }

    // 1-based line of `key` in stage `stage`.
    [[nodiscard]] int line(const std::string& stage, const std::string& key) const {
        int line = static_cast<int>(top_.size()) + 2;
        for (const auto& s : stages_) {
            for (const auto& field : s.fields) {
                if (s.id == stage && field.first == key) return line;
                ++line;
            }
        }
        ADD_FAILURE() << "no field " << key << " in stage " << stage;
        return -1;
    }
    // 1-based line of the pipeline-level `key`.
    [[nodiscard]] int top_line(const std::string& key) const {
        for (std::size_t i = 0; i < top_.size(); ++i) {
            if (top_[i].first == key) return static_cast<int>(i) + 1;
        }
        ADD_FAILURE() << "no pipeline field " << key;
        return -1;
    }

  private:
    struct Stage {
        std::string id;
        Fields fields;
    };
    static void put(Fields& fields, const std::string& key, const std::string& value) {
        for (auto& field : fields) {
            if (field.first == key) {
                field.second = value;
                return;
            }
        }
        fields.emplace_back(key, value);
    }
    Fields& find(const std::string& stage) {
        for (auto& s : stages_) {
            if (s.id == stage) return s.fields;
        }
        ADD_FAILURE() << "no stage " << stage;
        return stages_.front().fields;
    }

    Fields top_;
    std::vector<Stage> stages_;
};

// Loads without plugins and, unless a test asks for it, without registry checks.
inline LoadReport load_report(const std::string& text,
                              LoadOptions options = {.load_plugins = false,
                                                     .check_registry = false}) {
    return load_pipeline_text_report(text, kSource, options);
}

inline std::string dump(const LoadReport& report) {
    return "diagnostics:\n" + format_diagnostics(report.diagnostics);
}

// Some diagnostic is at `line` of test.yaml (0: any line), names `stage` and `field` (the
// formatted text carries both) and contains `reason`.
inline ::testing::AssertionResult has_diagnostic(const LoadReport& report, int line,
                                                 const std::string& stage, const std::string& field,
                                                 const std::string& reason) {
    std::string prefix = line > 0 ? std::string(kSource) + ":" + std::to_string(line) + ":" : "";
    std::string names = (stage.empty() ? "" : "stage '" + stage + "': ") +
                        (field.empty() ? "" : "field '" + field + "': ");
    for (const auto& diagnostic : report.diagnostics) {
        std::string text = diagnostic.to_string();
        if (text.starts_with(prefix) && text.find(": " + names) != std::string::npos &&
            text.find(reason) != std::string::npos) {
            return ::testing::AssertionSuccess();
        }
    }
    return ::testing::AssertionFailure() << "no diagnostic at line " << line << " for " << names
                                         << "containing '" << reason << "'\n"
                                         << dump(report);
}

}  // namespace omnirt::config::testing
