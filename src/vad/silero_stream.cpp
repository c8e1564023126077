// One window through the Silero VAD v5 network (see silero_weights.h for the graph).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "vad/silero_vad.h"
#include "vad/silero_weights.h"

namespace omnirt::vad {
namespace {

using Weights = SileroModel::Weights;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// tanh through one expf: glibc's tanhf (expm1f) was an eighth of the network's time. Absolute
// error about 1e-7; saturates cleanly (exp overflow gives 1, underflow -1).
float fast_tanh(float x) { return 1.0f - 2.0f / (1.0f + std::exp(2.0f * x)); }

// Conv1d (kernel 3, padding 1) + ReLU on a time-major activation in[in_len][in_channels], into
// out[out_len][out_channels]; returns out_len. cols holds out_len im2col columns.
int conv3_relu(const Conv3Layer& layer, const float* in, int in_len, float* cols, float* out) {
    const PaddedMatrix& m = layer.matrix;
    const int channels = layer.in_channels;
    const int out_len = (in_len + 2 - 3) / layer.stride + 1;
    for (int t = 0; t < out_len; ++t) {
        float* col = cols + static_cast<std::size_t>(t) * m.stride;
        std::fill(col, col + m.stride, 0.0f);
        for (int k = 0; k < 3; ++k) {
            const int position = t * layer.stride + k - 1;
            if (position < 0 || position >= in_len) continue;
            const float* source = in + static_cast<std::size_t>(position) * channels;
            for (int i = 0; i < channels; ++i) col[i * 3 + k] = source[i];
        }
    }
    multiply(m, cols, out_len, m.stride, out, m.rows);
    for (int i = 0; i < out_len * m.rows; ++i) out[i] = std::max(out[i], 0.0f);
    return out_len;
}

}  // namespace

struct SileroStream::State {
    std::array<float, SileroModel::kContext> context{};
    std::vector<float> lstm_input;  // [x (128) | h (128)], padded to the LSTM matrix stride
    std::array<float, Weights::kHidden> cell{};
    // Scratch of one process() call.
    std::array<float, Weights::kInput + Weights::kPad> signal{};
    std::array<float, Weights::kFrames * 2 * Weights::kBins> spectrum{};
    std::vector<float> activation_a, activation_b, cols;
    std::array<float, 4 * Weights::kHidden> gates{};
};

SileroStream::SileroStream(std::shared_ptr<const SileroModel> model)
    : model_(std::move(model)), state_(std::make_unique<State>()) {
    OMNI_CHECK(model_ != nullptr, "SileroStream: null model");
    const Weights& w = *model_->weights_;
    int widest = Weights::kBins;
    int widest_row = 0;
    for (const Conv3Layer& layer : w.encoder) {
        widest = std::max(widest, layer.matrix.rows);
        widest_row = std::max(widest_row, layer.matrix.stride);
    }
    state_->activation_a.assign(static_cast<std::size_t>(Weights::kFrames) * widest, 0.0f);
    state_->activation_b.assign(static_cast<std::size_t>(Weights::kFrames) * widest, 0.0f);
    state_->cols.assign(static_cast<std::size_t>(Weights::kFrames) * widest_row, 0.0f);
    state_->lstm_input.assign(static_cast<std::size_t>(w.lstm.stride), 0.0f);
}

SileroStream::~SileroStream() = default;
SileroStream::SileroStream(SileroStream&&) noexcept = default;
SileroStream& SileroStream::operator=(SileroStream&&) noexcept = default;

void SileroStream::reset() {
    state_->context.fill(0.0f);
    std::fill(state_->lstm_input.begin(), state_->lstm_input.end(), 0.0f);
    state_->cell.fill(0.0f);
}

float SileroStream::process(std::span<const float> window) {
    OMNI_CHECK(window.size() == SileroModel::kWindow,
               "SileroStream::process: a window is exactly 512 samples");
    const Weights& w = *model_->weights_;
    State& s = *state_;
    constexpr int kHidden = Weights::kHidden;

    // Context + window, then the right-side reflection pad (PyTorch / ONNX "reflect": the edge
    // sample is not repeated).
    float* signal = s.signal.data();
    std::copy(s.context.begin(), s.context.end(), signal);
    std::copy(window.begin(), window.end(), signal + SileroModel::kContext);
    for (int i = 0; i < Weights::kPad; ++i) {
        signal[Weights::kInput + i] = signal[Weights::kInput - 2 - i];
    }
    std::copy(window.end() - SileroModel::kContext, window.end(), s.context.begin());

    // STFT: frame t is signal[128 t, 128 t + 256).
    float* spectrum = s.spectrum.data();
    multiply(w.stft_basis, signal, Weights::kFrames, Weights::kHop, spectrum, 2 * Weights::kBins);
    float* magnitude = s.activation_a.data();  // [frames][129]
    for (int t = 0; t < Weights::kFrames; ++t) {
        const float* frame = spectrum + t * 2 * Weights::kBins;
        for (int f = 0; f < Weights::kBins; ++f) {
            const float re = frame[f];
            const float im = frame[Weights::kBins + f];
            magnitude[t * Weights::kBins + f] = std::sqrt(re * re + im * im);
        }
    }

    float* in = s.activation_a.data();
    float* out = s.activation_b.data();
    int length = Weights::kFrames;
    for (const Conv3Layer& layer : w.encoder) {
        length = conv3_relu(layer, in, length, s.cols.data(), out);
        std::swap(in, out);
    }
    // The encoder ends at length 1 with 128 channels: the LSTM's input.
    float* lstm_input = s.lstm_input.data();
    std::copy(in, in + kHidden, lstm_input);

    float* gates = s.gates.data();
    multiply(w.lstm, lstm_input, 1, 0, gates, 0);
    float* hidden = lstm_input + kHidden;
    float logit = w.head_bias;
    for (int j = 0; j < kHidden; ++j) {
        const float input_gate = sigmoid(gates[j]);
        const float forget_gate = sigmoid(gates[kHidden + j]);
        const float cell_candidate = fast_tanh(gates[2 * kHidden + j]);
        const float output_gate = sigmoid(gates[3 * kHidden + j]);
        s.cell[j] = forget_gate * s.cell[j] + input_gate * cell_candidate;
        hidden[j] = output_gate * fast_tanh(s.cell[j]);
        logit += w.head_weight[j] * std::max(hidden[j], 0.0f);
    }
    return sigmoid(logit);
}

}  // namespace omnirt::vad
