#pragma once
// Silero VAD v5 (snakers4/silero-vad, MIT): the real network with its real weights, read from the
// upstream ONNX file and computed in plain C++ (no ONNX runtime, no libtorch). One window of 512
// samples at 16 kHz (32 ms) in, the probability that it holds speech out.
//
// Threads and ownership: a SileroModel is immutable after load() and shared by every stream as
// shared_ptr<const SileroModel>; any thread may use it. A SileroStream carries one audio
// stream's recurrent state and is not thread-safe: one thread at a time (it never blocks and
// allocates nothing after construction).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"

namespace omnirt::vad {

class SileroStream;

class SileroModel {
  public:
    static constexpr int kSampleRate = 16000;
    static constexpr int kWindow = 512;  // samples per process() call: 32 ms
    static constexpr int kContext = 64;  // samples of the previous window the network also sees

    // Reads the 16 kHz branch of a Silero VAD v5 ONNX export (the `If` on the sample rate; the
    // weights are Constant nodes or initializers of that branch) and checks every tensor's shape
    // and the convolutions' kernel / stride / padding against the network computed here.
    // Errors: not_found (the file cannot be opened; the message names scripts/fetch_vad_model.sh),
    // data_loss (not a protobuf ONNX model, e.g. truncated or garbage), invalid_argument (an
    // ONNX model that is not Silero VAD v5, or weights stored in an unsupported form).
    [[nodiscard]] static Result<std::shared_ptr<const SileroModel>> load(
        const std::string& onnx_path);
    // The same from the file's bytes (at most 64 MiB); `name` appears in error messages.
    [[nodiscard]] static Result<std::shared_ptr<const SileroModel>> load_from_bytes(
        std::string_view onnx_bytes, const std::string& name = "<memory>");

    ~SileroModel();
    SileroModel(const SileroModel&) = delete;
    SileroModel& operator=(const SileroModel&) = delete;

    struct Weights;  // defined in silero_weights.h (private to the layer)

  private:
    explicit SileroModel(std::unique_ptr<const Weights> weights);
    std::unique_ptr<const Weights> weights_;
    friend class SileroStream;
};

// One audio stream's state: the LSTM's h and c ([2, 1, 128] in the ONNX graph) and the last 64
// samples of the previous window, exactly as the upstream OnnxWrapper (and @ricky0123/vad-web)
// run the ONNX model.
class SileroStream {
  public:
    explicit SileroStream(std::shared_ptr<const SileroModel> model);
    ~SileroStream();
    SileroStream(SileroStream&&) noexcept;
    SileroStream& operator=(SileroStream&&) noexcept;

    // window: exactly kWindow samples at 16 kHz, nominally in [-1, 1] (pcm16 / 32768). Returns
    // the speech probability in [0, 1]. Another length is a caller bug (aborts).
    [[nodiscard]] float process(std::span<const float> window);
    // Back to the state of a new stream (zero LSTM state, zero context).
    void reset();

  private:
    struct State;
    std::shared_ptr<const SileroModel> model_;
    std::unique_ptr<State> state_;
};

// Where scripts/fetch_vad_model.sh puts the model:
// ${OMNIRT_CACHE_DIR:-$HOME/.cache/omnirt}/silero_vad/silero_vad_v5.onnx (HOME unset:
// /tmp/omnirt-cache/...). The file may not exist; SileroModel::load says so.
[[nodiscard]] std::string default_model_path();

}  // namespace omnirt::vad
