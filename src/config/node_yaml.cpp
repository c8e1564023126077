// parse_config_document (config/node.h): yaml-cpp's event parser feeding a ConfigNode
// builder. The event API, rather than YAML::Load, keeps quoted-vs-plain, reports duplicate
// keys, and lets the builder stop the parser at kMaxConfigDepth before yaml-cpp's recursion,
// which follows the nesting of the input, gets deep.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <map>
#include <new>
#include <sstream>
#include <unordered_map>

#include "config/node.h"

namespace omnirt::config {
namespace {

// Thrown by TreeBuilder from inside yaml-cpp's parser to stop it; caught by
// parse_config_document.
struct BuildError {
    YAML::Mark mark;
    std::string message;
};

SourceLocation locate(const std::string& source, const YAML::Mark& mark) {
    if (mark.line < 0) return SourceLocation{source, 0, 0};
    return SourceLocation{source, mark.line + 1, mark.column + 1};
}

// Builds a ConfigNode tree from yaml-cpp's parse events.
class TreeBuilder final : public YAML::EventHandler {
  public:
    explicit TreeBuilder(const std::string& source) : source_(source) {}

    bool has_root() const { return has_root_; }
    ConfigNode take_root() { return std::move(root_); }

    void OnDocumentStart(const YAML::Mark& mark) override {
        if (++documents_ > 1) {
            throw BuildError{mark, "a config holds one YAML document; a second one starts here"};
        }
    }
    void OnDocumentEnd() override {}

    void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
        ConfigNode node;
        node.location = locate(source_, mark);
        count_nodes(1, mark);
        finish(std::move(node), anchor, mark, Shape{1, 1});
    }

    void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
        auto it = anchors_.find(anchor);
        if (it == anchors_.end()) {
            throw BuildError{mark, "alias to an anchor whose node is not complete here"};
        }
        if (static_cast<int>(stack_.size()) + it->second.shape.height > kMaxConfigDepth) {
            throw BuildError{mark, "alias expands to nesting deeper than " +
                                       std::to_string(kMaxConfigDepth) + " levels"};
        }
        count_nodes(it->second.shape.count, mark);
        finish(ConfigNode(it->second.node), 0, mark, it->second.shape);
    }

    void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  const std::string& value) override {
        ConfigNode node;
        node.kind = NodeKind::scalar;
        node.text = value;
        // "!" is the non-specific tag of quoted scalars; "?" that of plain ones.
        node.quoted = tag == "!" || tag == "tag:yaml.org,2002:str";
        node.location = locate(source_, mark);
        count_nodes(1, mark);
        finish(std::move(node), anchor, mark, Shape{1, 1});
    }

    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                         YAML::EmitterStyle::value) override {
        open(NodeKind::sequence, mark, anchor);
    }
    void OnSequenceEnd() override { close(); }

    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                    YAML::EmitterStyle::value) override {
        open(NodeKind::map, mark, anchor);
    }
    void OnMapEnd() override { close(); }

  private:
    struct Shape {
        int height = 0;         // levels, 1 for a scalar
        std::size_t count = 0;  // nodes in the subtree
    };
    struct Frame {
        ConfigNode node;
        YAML::anchor_t anchor = 0;
        YAML::Mark mark;
        Shape shape{1, 1};
        bool has_key = false;
        std::string key;
        SourceLocation key_location;
        std::unordered_map<std::string, int> key_lines;  // duplicate-key check
    };
    struct Anchored {
        ConfigNode node;
        Shape shape;
    };

    void count_nodes(std::size_t n, const YAML::Mark& mark) {
        nodes_ += n;
        if (nodes_ > kMaxConfigNodes) {
            throw BuildError{mark, "the document has more than " + std::to_string(kMaxConfigNodes) +
                                       " nodes (aliases expanded)"};
        }
    }

    void open(NodeKind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
        if (static_cast<int>(stack_.size()) >= kMaxConfigDepth) {
            throw BuildError{mark,
                             "nesting deeper than " + std::to_string(kMaxConfigDepth) + " levels"};
        }
        count_nodes(1, mark);
        Frame frame;
        frame.node.kind = kind;
        frame.node.location = locate(source_, mark);
        frame.anchor = anchor;
        frame.mark = mark;
        stack_.push_back(std::move(frame));
    }

    void close() {
        Frame frame = std::move(stack_.back());
        stack_.pop_back();
        finish(std::move(frame.node), frame.anchor, frame.mark, frame.shape);
    }

    void finish(ConfigNode node, YAML::anchor_t anchor, const YAML::Mark& mark, Shape shape) {
        if (anchor != 0) {
            // Anchored subtrees are kept as copies; nested anchors copy their contents again.
            anchored_nodes_ += shape.count;
            if (anchored_nodes_ > kMaxConfigNodes) {
                throw BuildError{
                    mark, "anchors hold more than " + std::to_string(kMaxConfigNodes) + " nodes"};
            }
            anchors_[anchor] = Anchored{node, shape};
        }
        if (stack_.empty()) {
            root_ = std::move(node);
            has_root_ = true;
            return;
        }
        Frame& parent = stack_.back();
        parent.shape.height = std::max(parent.shape.height, shape.height + 1);
        parent.shape.count += shape.count;
        if (parent.node.kind == NodeKind::sequence) {
            parent.node.items.push_back(std::move(node));
            return;
        }
        if (!parent.has_key) {
            if (node.kind != NodeKind::scalar) {
                throw BuildError{mark, "map keys must be plain or quoted strings"};
            }
            int line = node.location.line;
            auto [it, inserted] = parent.key_lines.emplace(node.text, line);
            if (!inserted) {
                throw BuildError{mark, "duplicate key '" + node.text + "' (first written at line " +
                                           std::to_string(it->second) + ")"};
            }
            parent.has_key = true;
            parent.key = std::move(node.text);
            parent.key_location = node.location;
            return;
        }
        // An empty value (`key:`) is reported at the next token; place it at its key instead.
        if (node.kind == NodeKind::null) node.location = parent.key_location;
        parent.node.entries.push_back(
            ConfigMapEntry{std::move(parent.key), parent.key_location, std::move(node)});
        parent.has_key = false;
        parent.key.clear();
    }

    const std::string& source_;
    std::vector<Frame> stack_;
    std::map<YAML::anchor_t, Anchored> anchors_;
    ConfigNode root_;
    bool has_root_ = false;
    int documents_ = 0;
    std::size_t nodes_ = 0;
    std::size_t anchored_nodes_ = 0;
};

}  // namespace

expected<ConfigNode, Diagnostic> parse_config_document(std::string_view text,
                                                       const std::string& source_name) {
    auto failure = [&](const YAML::Mark& mark, std::string message) {
        return unexpected<Diagnostic>(
            Diagnostic{locate(source_name, mark), "", "", std::move(message)});
    };
    try {
        std::istringstream input{std::string(text)};
        YAML::Parser parser(input);
        TreeBuilder builder(source_name);
        if (parser.HandleNextDocument(builder)) parser.HandleNextDocument(builder);
        if (!builder.has_root()) {
            ConfigNode empty;
            empty.location = SourceLocation{source_name, 1, 1};
            return empty;
        }
        return builder.take_root();
    } catch (const BuildError& error) {
        return failure(error.mark, error.message);
    } catch (const YAML::Exception& error) {
        return failure(error.mark, "YAML syntax error: " + error.msg);
    } catch (const std::bad_alloc&) {
        return failure(YAML::Mark::null_mark(), "out of memory while parsing");
    } catch (const std::exception& error) {
        return failure(YAML::Mark::null_mark(), std::string("cannot parse: ") + error.what());
    } catch (...) {
        return failure(YAML::Mark::null_mark(), "cannot parse: unknown error");
    }
}

}  // namespace omnirt::config
