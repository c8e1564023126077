// Fuzzes the Silero VAD model loader (the ONNX file is external input: --vad-model names any
// file). Whatever loads must run a window and give a probability in [0, 1] or NaN (weights are
// checked finite, but finite weights can still overflow). Seeds: a non-Silero ModelProto and a
// skeleton of the v5 16 kHz branch (every weight named, shaped and attributed as in the real
// file, without the data: the real file is 2.3 MB).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "vad/silero_vad.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace omnirt;
    auto model = vad::SileroModel::load_from_bytes(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
    if (!model.has_value()) return 0;
    vad::SileroStream stream(*model);
    const std::vector<float> window(vad::SileroModel::kWindow, 0.25f);
    const float p = stream.process(window);
    if (!std::isnan(p) && (p < 0.0f || p > 1.0f)) {
        std::fprintf(stderr, "silero_model_fuzz: probability %f outside [0, 1]\n", p);
        std::abort();
    }
    return 0;
}
