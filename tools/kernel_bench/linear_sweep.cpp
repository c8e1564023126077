// The one-row bfloat16 linear of a Qwen3-0.6B decode step in isolation: the 113 weight matrices
// of a step (28 x qkv, o, gate/up, down, and the 151936-row lm_head; 1.19 GB) through
// engine::cpu::small_batch_linear with one input row, next to a plain read of the same bytes on
// the same threads. Prints the best and median of 10 passes of each. Build and run: README.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/cpu_linear.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
    double best_ms;
    double median_ms;
};

template <class Pass>
Timing time_passes(Pass pass) {
    std::vector<double> ms;
    for (int i = 0; i < 10; ++i) {
        const auto start = Clock::now();
        pass();
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return {ms.front(), ms[ms.size() / 2]};
}

// XOR of every 64-bit word of [data, data + bytes), split among the intra-op threads.
std::uint64_t read_all(const std::uint8_t* data, std::int64_t bytes) {
    std::vector<std::uint64_t> partial(static_cast<std::size_t>(at::get_num_threads()), 0);
    at::parallel_for(0, bytes / 8, 1 << 16, [&](std::int64_t begin, std::int64_t end) {
        std::uint64_t x = 0;
        for (std::int64_t i = begin; i < end; ++i) {
            std::uint64_t word;
            std::memcpy(&word, data + 8 * i, 8);
            x ^= word;
        }
        partial[static_cast<std::size_t>(at::get_thread_num())] ^= x;
    });
    std::uint64_t x = 0;
    for (std::uint64_t p : partial) x ^= p;
    return x;
}

}  // namespace

int main() {
    std::vector<at::Tensor> weights;
    for (int layer = 0; layer < 28; ++layer) {
        for (auto [out, in] : {std::pair{4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}}) {
            weights.push_back((at::randn({out, in}) * 0.05).to(at::kBFloat16));
        }
    }
    weights.push_back((at::randn({151936, 1024}) * 0.05).to(at::kBFloat16));
    double bytes = 0;
    for (const at::Tensor& w : weights) bytes += static_cast<double>(w.nbytes());
    std::vector<at::Tensor> inputs;
    for (const at::Tensor& w : weights)
        inputs.push_back(at::randn({1, w.size(1)}).to(at::kBFloat16));

    volatile std::uint64_t sink = 0;
    const Timing read = time_passes([&] {
        for (const at::Tensor& w : weights) {
            sink = sink ^ read_all(static_cast<const std::uint8_t*>(w.data_ptr()), w.nbytes());
        }
    });
    const Timing linear = time_passes([&] {
        for (std::size_t i = 0; i < weights.size(); ++i) {
            const at::Tensor y = omnirt::engine::cpu::small_batch_linear(inputs[i], weights[i]);
            if (!y.defined()) {
                std::fprintf(stderr, "small_batch_linear declined (no AVX512-BF16?)\n");
                std::exit(1);
            }
        }
    });
    std::printf("%d threads, %zu matrices, %.2f GB\n", at::get_num_threads(), weights.size(),
                bytes / 1e9);
    std::printf("read    best %6.2f ms (%.1f GB/s)  median %6.2f ms\n", read.best_ms,
                bytes / read.best_ms / 1e6, read.median_ms);
    std::printf("linear  best %6.2f ms (%.1f GB/s)  median %6.2f ms\n", linear.best_ms,
                bytes / linear.best_ms / 1e6, linear.median_ms);
    return 0;
}
