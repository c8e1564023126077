// Reads Silero VAD v5's weights from its ONNX file with ONNX's own protobuf definitions
// (Debian libonnx-dev). Only the 16 kHz branch of the graph's `If` on the sample rate is used.
// A build without ONNX (OMNIRT_VAD_ONNX=OFF: the GPU device run, which does not carry it) has
// the VAD network but cannot read its file: load_from_bytes() says so.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <new>
#include <string_view>

#ifdef OMNIRT_VAD_ONNX
#include <onnx/onnx_pb.h>
#endif

#include "vad/silero_vad.h"
#include "vad/silero_weights.h"

namespace omnirt::vad {
namespace {

using Weights = SileroModel::Weights;

// The v5 file is 2.3 MB; anything this large is not the model.
constexpr std::uintmax_t kMaxFileBytes = 64u << 20;

Error not_silero(const std::string& path, const std::string& what) {
    return Error{ErrorCode::invalid_argument,
                 "vad: " + path + " is not a Silero VAD v5 ONNX model: " + what};
}

#ifdef OMNIRT_VAD_ONNX
// Named tensors and Conv nodes of one graph (a branch of the sample-rate `If`). Names are
// matched by their last component: exporters prefix them ("If_0_then_branch__Inline_0__...").
class GraphIndex {
  public:
    explicit GraphIndex(const onnx::GraphProto& graph) {
        for (const onnx::TensorProto& tensor : graph.initializer())
            tensors_[tensor.name()] = &tensor;
        for (const onnx::NodeProto& node : graph.node()) {
            if (node.op_type() == "Constant" && node.output_size() == 1) {
                for (const onnx::AttributeProto& attribute : node.attribute()) {
                    if (attribute.name() == "value" && attribute.has_t()) {
                        tensors_[node.output(0)] = &attribute.t();
                    }
                }
            } else if (node.op_type() == "Conv" && node.input_size() >= 2) {
                convs_[node.input(1)] = &node;
            } else if (node.op_type() == "Pad") {
                pads_.push_back(&node);
            }
        }
    }

    [[nodiscard]] const onnx::TensorProto* tensor(std::string_view key) const {
        return find(tensors_, key);
    }
    // The Conv node whose weight input is the tensor `weight_key`.
    [[nodiscard]] const onnx::NodeProto* conv(std::string_view weight_key) const {
        return find(convs_, weight_key);
    }
    [[nodiscard]] const std::vector<const onnx::NodeProto*>& pads() const { return pads_; }

  private:
    template <class Map>
    static const typename Map::mapped_type find(const Map& map, std::string_view key) {
        for (const auto& [name, value] : map) {
            const std::string_view n = name;
            if (n == key) return value;
            if (n.size() > key.size() + 2 && n.ends_with(key) &&
                n.substr(n.size() - key.size() - 2, 2) == "__") {
                return value;
            }
        }
        return nullptr;
    }

    std::map<std::string, const onnx::TensorProto*> tensors_;
    std::map<std::string, const onnx::NodeProto*> convs_;
    std::vector<const onnx::NodeProto*> pads_;
};

std::string shape_string(const onnx::TensorProto& tensor) {
    std::string text = "[";
    for (int i = 0; i < tensor.dims_size(); ++i) {
        if (i > 0) text += ",";
        text += std::to_string(tensor.dims(i));
    }
    return text + "]";
}

// The float32 values of `key`, which must have exactly `shape`.
Result<std::vector<float>> read_floats(const GraphIndex& graph, const std::string& path,
                                       const std::string& key, std::vector<std::int64_t> shape) {
    const onnx::TensorProto* tensor = graph.tensor(key);
    if (tensor == nullptr) return fail(not_silero(path, "no tensor " + key));
    bool same_shape = tensor->dims_size() == static_cast<int>(shape.size());
    std::size_t count = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        same_shape = same_shape && tensor->dims(static_cast<int>(i)) == shape[i];
        count *= static_cast<std::size_t>(shape[i]);
    }
    if (!same_shape) {
        onnx::TensorProto expected;
        for (std::int64_t d : shape) expected.add_dims(d);
        return fail(not_silero(path, key + " has shape " + shape_string(*tensor) + ", expected " +
                                         shape_string(expected)));
    }
    if (tensor->data_type() != onnx::TensorProto::FLOAT) {
        return fail(not_silero(path, key + " is not float32"));
    }
    if (tensor->data_location() == onnx::TensorProto::EXTERNAL) {
        return fail(not_silero(path, key + " is stored in an external file (not supported)"));
    }
    std::vector<float> values(count);
    if (!tensor->raw_data().empty()) {
        if (tensor->raw_data().size() != count * sizeof(float)) {
            return fail(not_silero(path, key + " holds " +
                                             std::to_string(tensor->raw_data().size()) +
                                             " bytes for " + std::to_string(count) + " floats"));
        }
        // ONNX raw_data is little-endian, like every host omnirt builds for.
        std::memcpy(values.data(), tensor->raw_data().data(), count * sizeof(float));
    } else if (static_cast<std::size_t>(tensor->float_data_size()) == count) {
        std::copy(tensor->float_data().begin(), tensor->float_data().end(), values.begin());
    } else {
        return fail(not_silero(path, key + " has no data for its shape"));
    }
    for (float v : values) {
        if (!std::isfinite(v)) return fail(not_silero(path, key + " holds a non-finite value"));
    }
    return values;
}

std::vector<std::int64_t> ints_attribute(const onnx::NodeProto& node, std::string_view name,
                                         std::vector<std::int64_t> missing) {
    for (const onnx::AttributeProto& attribute : node.attribute()) {
        if (attribute.name() == name) return {attribute.ints().begin(), attribute.ints().end()};
    }
    return missing;
}

// Checks the Conv node using `weight_key` and returns its stride.
Result<int> conv_stride(const GraphIndex& graph, const std::string& path,
                        const std::string& weight_key, std::int64_t kernel, std::int64_t pad) {
    const onnx::NodeProto* node = graph.conv(weight_key);
    if (node == nullptr) return fail(not_silero(path, "no Conv node uses " + weight_key));
    const auto kernel_shape = ints_attribute(*node, "kernel_shape", {kernel});
    const auto pads = ints_attribute(*node, "pads", {0, 0});
    const auto strides = ints_attribute(*node, "strides", {1});
    const auto dilations = ints_attribute(*node, "dilations", {1});
    std::int64_t group = 1;
    for (const onnx::AttributeProto& attribute : node->attribute()) {
        if (attribute.name() == "group") group = attribute.i();
    }
    if (kernel_shape != std::vector<std::int64_t>{kernel} ||
        pads != std::vector<std::int64_t>{pad, pad} || dilations != std::vector<std::int64_t>{1} ||
        group != 1 || strides.size() != 1 || strides[0] < 1 || strides[0] > 256) {
        return fail(not_silero(path, "the Conv on " + weight_key + " is not kernel " +
                                         std::to_string(kernel) + ", padding " +
                                         std::to_string(pad) + ", dilation 1, group 1"));
    }
    return static_cast<int>(strides[0]);
}

PaddedMatrix make_matrix(int rows, int cols, const std::vector<float>& values,
                         std::vector<float> bias) {
    PaddedMatrix m;
    m.rows = rows;
    m.cols = cols;
    m.stride = (cols + kSimdWidth - 1) / kSimdWidth * kSimdWidth;
    m.values.assign(static_cast<std::size_t>(rows) * m.stride, 0.0f);
    for (int r = 0; r < rows; ++r) {
        std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(r) * cols, cols,
                    m.values.begin() + static_cast<std::ptrdiff_t>(r) * m.stride);
    }
    m.bias =
        bias.empty() ? std::vector<float>(static_cast<std::size_t>(rows), 0.0f) : std::move(bias);
    return m;
}

Result<std::unique_ptr<Weights>> read_weights(const GraphIndex& graph, const std::string& path) {
    auto weights = std::make_unique<Weights>();
    constexpr int kHidden = Weights::kHidden;

    OMNI_TRY(auto basis, read_floats(graph, path, "stft.forward_basis_buffer",
                                     {2 * Weights::kBins, 1, Weights::kFilterLength}));
    OMNI_TRY(int hop,
             conv_stride(graph, path, "stft.forward_basis_buffer", Weights::kFilterLength, 0));
    if (hop != Weights::kHop) return fail(not_silero(path, "the STFT hop is not 128"));
    bool reflect_pad = false;
    for (const onnx::NodeProto* pad : graph.pads()) {
        for (const onnx::AttributeProto& attribute : pad->attribute()) {
            reflect_pad = reflect_pad || (attribute.name() == "mode" && attribute.s() == "reflect");
        }
    }
    if (!reflect_pad) return fail(not_silero(path, "no reflection Pad before the STFT"));
    weights->stft_basis = make_matrix(2 * Weights::kBins, Weights::kFilterLength, basis, {});

    // Encoder: (out, in) channels per block; strides come from the file.
    constexpr std::array<std::array<int, 2>, 4> kChannels = {
        {{128, Weights::kBins}, {64, 128}, {64, 64}, {128, 64}}};
    int length = Weights::kFrames;
    for (std::size_t i = 0; i < kChannels.size(); ++i) {
        const auto [out, in] = kChannels[i];
        const std::string prefix = "encoder." + std::to_string(i) + ".reparam_conv.";
        OMNI_TRY(auto weight, read_floats(graph, path, prefix + "weight", {out, in, 3}));
        OMNI_TRY(auto bias, read_floats(graph, path, prefix + "bias", {out}));
        OMNI_TRY(int stride, conv_stride(graph, path, prefix + "weight", 3, 1));
        Conv3Layer& layer = weights->encoder[i];
        layer.matrix = make_matrix(out, in * 3, weight, std::move(bias));
        layer.in_channels = in;
        layer.stride = stride;
        length = (length + 2 - 3) / stride + 1;
    }
    if (length != 1) {
        return fail(not_silero(path, "the encoder strides do not reduce 4 STFT frames to 1"));
    }

    OMNI_TRY(auto weight_ih,
             read_floats(graph, path, "decoder.rnn.weight_ih", {4 * kHidden, kHidden}));
    OMNI_TRY(auto weight_hh,
             read_floats(graph, path, "decoder.rnn.weight_hh", {4 * kHidden, kHidden}));
    OMNI_TRY(auto bias_ih, read_floats(graph, path, "decoder.rnn.bias_ih", {4 * kHidden}));
    OMNI_TRY(auto bias_hh, read_floats(graph, path, "decoder.rnn.bias_hh", {4 * kHidden}));
    std::vector<float> joined(static_cast<std::size_t>(4 * kHidden) * 2 * kHidden);
    for (int r = 0; r < 4 * kHidden; ++r) {
        std::copy_n(weight_ih.begin() + r * kHidden, kHidden, joined.begin() + r * 2 * kHidden);
        std::copy_n(weight_hh.begin() + r * kHidden, kHidden,
                    joined.begin() + r * 2 * kHidden + kHidden);
        bias_ih[r] += bias_hh[r];
    }
    weights->lstm = make_matrix(4 * kHidden, 2 * kHidden, joined, std::move(bias_ih));

    OMNI_TRY(weights->head_weight,
             read_floats(graph, path, "decoder.decoder.2.weight", {1, kHidden, 1}));
    OMNI_TRY(auto head_bias, read_floats(graph, path, "decoder.decoder.2.bias", {1}));
    weights->head_bias = head_bias[0];
    return weights;
}

// The 16 kHz branch: the graph (top level or a branch of an `If`) whose STFT basis is
// [258, 1, 256] (the 8 kHz branch has [130, 1, 128]).
const onnx::GraphProto* find_16k_graph(const onnx::GraphProto& top) {
    auto is_16k = [](const onnx::GraphProto& graph) {
        const onnx::TensorProto* basis = GraphIndex(graph).tensor("stft.forward_basis_buffer");
        return basis != nullptr && basis->dims_size() == 3 &&
               basis->dims(0) == 2 * Weights::kBins && basis->dims(2) == Weights::kFilterLength;
    };
    if (is_16k(top)) return &top;
    for (const onnx::NodeProto& node : top.node()) {
        if (node.op_type() != "If") continue;
        for (const onnx::AttributeProto& attribute : node.attribute()) {
            if (attribute.has_g() && is_16k(attribute.g())) return &attribute.g();
        }
    }
    return nullptr;
}

#endif  // OMNIRT_VAD_ONNX

}  // namespace

SileroModel::SileroModel(std::unique_ptr<const Weights> weights) : weights_(std::move(weights)) {}
SileroModel::~SileroModel() = default;

Result<std::shared_ptr<const SileroModel>> SileroModel::load(const std::string& onnx_path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(onnx_path, ec);
    std::ifstream file(onnx_path, std::ios::binary);
    if (ec || !file) {
        return fail(ErrorCode::not_found,
                    "vad: cannot open the Silero VAD model " + onnx_path +
                        (ec ? " (" + ec.message() + ")" : std::string()) +
                        "; run scripts/fetch_vad_model.sh or name the file with --vad-model");
    }
    if (size > kMaxFileBytes) {
        return fail(not_silero(
            onnx_path, "the file has " + std::to_string(size) + " bytes (the model has 2.3 MB)"));
    }
    const std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    if (bytes.size() != size) {
        return fail(ErrorCode::data_loss, "vad: short read of " + onnx_path);
    }
    return load_from_bytes(bytes, onnx_path);
}

Result<std::shared_ptr<const SileroModel>> SileroModel::load_from_bytes(std::string_view onnx_bytes,
                                                                        const std::string& name) {
    if (onnx_bytes.size() > kMaxFileBytes) {
        return fail(not_silero(
            name, "it has " + std::to_string(onnx_bytes.size()) + " bytes (the model has 2.3 MB)"));
    }
#ifndef OMNIRT_VAD_ONNX
    return fail(ErrorCode::failed_precondition,
                "vad: cannot read " + name +
                    ": this omnirt was built without ONNX's protobuf library (libonnx-dev)");
#else
    try {
        onnx::ModelProto model;
        if (onnx_bytes.empty() ||
            !model.ParseFromArray(onnx_bytes.data(), static_cast<int>(onnx_bytes.size()))) {
            return fail(ErrorCode::data_loss, "vad: " + name +
                                                  " is not an ONNX model (protobuf parse failed: "
                                                  "truncated or not ONNX)");
        }
        if (!model.has_graph()) return fail(not_silero(name, "the model has no graph"));
        const onnx::GraphProto* graph = find_16k_graph(model.graph());
        if (graph == nullptr) {
            return fail(not_silero(name,
                                   "no graph with a 16 kHz STFT basis stft.forward_basis_buffer "
                                   "[258,1,256]"));
        }
        OMNI_TRY(auto weights, read_weights(GraphIndex(*graph), name));
        return std::shared_ptr<const SileroModel>(new SileroModel(std::move(weights)));
    } catch (const std::bad_alloc&) {
        return fail(ErrorCode::resource_exhausted, "vad: out of memory reading " + name);
    }
#endif
}

std::string default_model_path() {
    std::filesystem::path cache;
    if (const char* dir = std::getenv("OMNIRT_CACHE_DIR"); dir != nullptr && *dir != '\0') {
        cache = dir;
    } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
        cache = std::filesystem::path(home) / ".cache" / "omnirt";
    } else {
        cache = "/tmp/omnirt-cache";
    }
    return (cache / "silero_vad" / "silero_vad_v5.onnx").string();
}

}  // namespace omnirt::vad
