#pragma once
// Private to omnirt_vad: the Silero VAD v5 16 kHz network's weights, laid out for the kernels in
// kernels.h.
//
// The network (verified against the ONNX graph by silero_model.cpp):
//   x[576] = 64 context samples + 512 new ones
//   reflection pad on the right by 64             -> 640 samples
//   STFT as Conv1d(1 -> 258, kernel 256, stride 128) with the file's basis (no window applied
//   here: it is folded into the basis)            -> [258, 4]: 129 real rows, 129 imaginary rows
//   magnitude sqrt(re^2 + im^2)                    -> [129, 4]
//   encoder: 4 x (Conv1d kernel 3, padding 1, + ReLU): 129->128 s1, 128->64 s2, 64->64 s2,
//            64->128 s1                            -> [128, 1]
//   LSTMCell(128, 128) on the state (h, c), gate order i, f, g, o (PyTorch's)
//   ReLU(h') -> Conv1d(128 -> 1, kernel 1) -> sigmoid -> the probability
#include <array>
#include <vector>

#include "vad/kernels.h"
#include "vad/silero_vad.h"

namespace omnirt::vad {

// A Conv1d with kernel 3 and padding 1 as a matrix [out, in * 3] (the ONNX weight [out, in, 3]
// flattened), applied to im2col columns.
struct Conv3Layer {
    PaddedMatrix matrix;
    int in_channels = 0;
    int stride = 1;
};

struct SileroModel::Weights {
    static constexpr int kInput = kContext + kWindow;  // 576
    static constexpr int kFilterLength = 256;
    static constexpr int kHop = 128;
    static constexpr int kPad = kFilterLength / 4;       // 64, reflection, right side only
    static constexpr int kBins = kFilterLength / 2 + 1;  // 129
    static constexpr int kFrames = (kInput + kPad - kFilterLength) / kHop + 1;  // 4
    static constexpr int kHidden = 128;

    PaddedMatrix stft_basis;            // [258, 256], no bias
    std::array<Conv3Layer, 4> encoder;  // strides read from the file
    PaddedMatrix lstm;                  // [4 * 128, 128 + 128]: [W_ih | W_hh], bias b_ih + b_hh
    std::vector<float> head_weight;     // [128]
    float head_bias = 0;
};

}  // namespace omnirt::vad
