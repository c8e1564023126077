// omnirt-linear-bench: the decode-step linears of a Qwen3 shape through omnirt's small-batch
// kernel (engine/cpu_linear.h) and through the library's at::linear (oneDNN for bfloat16,
// OpenBLAS for float32), alternating matrix set by matrix set in one process so that both see the
// same host. It tells where each path is faster, by row count (the batch of a decode step); the
// row limit of the kernel (kSmallBatchMaxRows) and the streaming path's follow from it. A
// benchmark, not a test (docs/benchmarks.md, issue 20).
//
//   omnirt-linear-bench [--dtype bfloat16|float32] [--shape 0.6b|8b] [--rows 1,4,8,16,32,64]
//                       [--threads N] [--repeats N]
//
// Per row count: the median and best time of one pass over the set (every layer's q, k, v, o,
// gate, up and down projections and the lm_head, as one decode step reads them) for each path,
// the library against the first path, and the rate of the fastest over the unpacked bytes. The
// weights are bfloat16 values in either dtype (as a bfloat16 checkpoint gives them), so both
// dtypes also run the engine's packed copies ("packed": engine/cpu_packed_weight.h, 12 bits a
// weight; the kernel takes them up to 4 bfloat16 / 8 float32 rows, more rows read the weight),
// where the CPU packs.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/cpu_linear.h"

namespace {

struct Shape {
    std::int64_t hidden, heads, kv_heads, head_dim, intermediate, layers, vocab;
};

Shape shape_named(const std::string& name) {
    if (name == "8b") return {4096, 32, 8, 128, 12288, 36, 151936};
    return {1024, 16, 8, 128, 3072, 28, 151936};  // Qwen3-0.6B
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Decode-step linears: omnirt's small-batch kernel against at::linear"};
    std::string dtype_name = "bfloat16";
    std::string shape_name = "0.6b";
    std::vector<int> rows_list = {1, 2, 4, 8, 16, 32, 64};
    int threads = 0;
    int repeats = 7;
    app.add_option("--dtype", dtype_name, "bfloat16 or float32")
        ->check(CLI::IsMember({"bfloat16", "float32"}));
    app.add_option("--shape", shape_name, "0.6b or 8b (Qwen3 shapes)")
        ->check(CLI::IsMember({"0.6b", "8b"}));
    app.add_option("--rows", rows_list,
                   "Row counts (decode batch sizes; float32 also prefill rows), 1..64 "
                   "(float32: 1..4096)")
        ->delimiter(',')
        ->check(CLI::Range(1, 4096));
    app.add_option("--threads", threads, "ATen intra-op threads (default: as ATen chooses)")
        ->check(CLI::Range(0, 1024));
    app.add_option("--repeats", repeats, "Passes per path and row count (median and best)")
        ->check(CLI::Range(1, 1000));
    CLI11_PARSE(app, argc, argv);

    const at::ScalarType dtype = dtype_name == "float32" ? at::kFloat : at::kBFloat16;
    for (int rows : rows_list) {
        if (dtype == at::kBFloat16 && rows > omnirt::engine::cpu::kSmallBatchMaxRows) {
            std::fprintf(stderr, "omnirt-linear-bench: bfloat16 takes at most %lld rows\n",
                         static_cast<long long>(omnirt::engine::cpu::kSmallBatchMaxRows));
            return 1;
        }
    }
    if (!omnirt::engine::cpu::small_batch_linear_supported(dtype)) {
        std::fprintf(stderr,
                     "omnirt-linear-bench: this CPU lacks the instructions of the %s "
                     "kernel (engine/cpu_linear.h)\n",
                     dtype_name.c_str());
        return 1;
    }
    if (threads > 0) at::set_num_threads(threads);
    const Shape s = shape_named(shape_name);
    at::manual_seed(0);
    std::vector<at::Tensor> weights;
    double bytes = 0;
    auto add = [&](std::int64_t out, std::int64_t in) {
        // bfloat16 values in either dtype, as a bfloat16 checkpoint gives them.
        weights.push_back((at::randn({out, in}) * 0.02).to(at::kBFloat16).to(dtype));
        bytes += static_cast<double>(weights.back().nbytes());
    };
    for (std::int64_t layer = 0; layer < s.layers; ++layer) {
        add(s.heads * s.head_dim, s.hidden);
        add(s.kv_heads * s.head_dim, s.hidden);
        add(s.kv_heads * s.head_dim, s.hidden);
        add(s.hidden, s.heads * s.head_dim);
        add(s.intermediate, s.hidden);
        add(s.intermediate, s.hidden);
        add(s.hidden, s.intermediate);
    }
    add(s.vocab, s.hidden);
    const std::int64_t widest = std::max(s.intermediate, s.heads * s.head_dim);
    std::printf(
        "%s, Qwen3 %s decode-step linears: %zu matrices, %.2f GB; %d threads; "
        "%d alternating passes each\n",
        dtype_name.c_str(), shape_name.c_str(), weights.size(), bytes / 1e9, at::get_num_threads(),
        repeats);
    // The paths, alternating: bfloat16 the AMX kernel and the AVX512-BF16 one (streaming and
    // tiles); float32 the kernel as the engine calls it and the tiles alone; the library
    // (at::linear; for float32 also one at::mv per row, what the engine's one float32 row takes).
    using omnirt::engine::cpu::LinearKernel;
    enum class Via { kernel, packed, linear, mv };
    struct Path {
        const char* name;
        Via via;
        LinearKernel kernel;
    };
    std::vector<Path> paths;
    // The engine's packed copies (engine/cpu_packed_weight.h), where this CPU packs.
    std::vector<omnirt::engine::cpu::PackedWeightPtr> packed;
    for (const at::Tensor& w : weights)
        packed.push_back(omnirt::engine::cpu::PackedWeight::pack(w));
    const bool all_packed =
        std::all_of(packed.begin(), packed.end(), [](const auto& p) { return p != nullptr; });
    if (all_packed) paths.push_back({"packed", Via::packed, LinearKernel::vector});
    if (dtype == at::kBFloat16) {
        paths.push_back({"amx", Via::kernel, LinearKernel::amx});
        paths.push_back({"avx512", Via::kernel, LinearKernel::vector});
    } else {
        paths.push_back({"omnirt", Via::kernel, LinearKernel::fastest});
        paths.push_back({"tiles", Via::kernel, LinearKernel::tiles});
        paths.push_back({"mv", Via::mv, LinearKernel::fastest});
    }
    paths.push_back({"at::linear", Via::linear, LinearKernel::fastest});
    std::printf("%5s", "rows");
    for (const Path& path : paths) std::printf(" %11s ms %8s", path.name, "best");
    std::printf(" %8s %8s\n", "GB/s", "vs lib");
    for (int rows : rows_list) {
        const at::Tensor x = (at::randn({rows, widest}) * 0.5).to(dtype);
        std::vector<std::vector<double>> times(paths.size());
        for (int repeat = 0; repeat < repeats; ++repeat) {
            for (std::size_t p = 0; p < paths.size(); ++p) {
                if (paths[p].via == Via::mv && rows > 4) continue;  // a row at a time: slow
                const auto start = std::chrono::steady_clock::now();
                for (std::size_t i = 0; i < weights.size(); ++i) {
                    const at::Tensor& w = weights[i];
                    const at::Tensor input = x.narrow(1, 0, w.size(1));
                    at::Tensor y;
                    if (paths[p].via == Via::linear) {
                        y = at::linear(input, w);
                    } else if (paths[p].via == Via::mv) {
                        y = at::empty({rows, w.size(0)}, input.options());
                        for (int row = 0; row < rows; ++row) {
                            at::Tensor out_row = y[row];
                            at::mv_out(out_row, w, input[row]);
                        }
                    } else if (paths[p].via == Via::packed) {
                        y = omnirt::engine::cpu::small_batch_linear(input, w, {}, paths[p].kernel,
                                                                    packed[i].get());
                    } else {
                        y = omnirt::engine::cpu::small_batch_linear(input, w, {}, paths[p].kernel);
                    }
                    if (!y.defined()) {
                        std::fprintf(stderr, "omnirt-linear-bench: the kernel declined %d rows\n",
                                     rows);
                        return 1;
                    }
                }
                times[p].push_back(std::chrono::duration<double, std::milli>(
                                       std::chrono::steady_clock::now() - start)
                                       .count());
            }
        }
        std::printf("%5d", rows);
        double fastest = 1e30;
        for (const auto& t : times) {
            if (t.empty()) {
                std::printf(" %14s %8s", "-", "-");
                continue;
            }
            std::printf(" %14.1f %8.1f", median(t), *std::min_element(t.begin(), t.end()));
            fastest = std::min(fastest, *std::min_element(t.begin(), t.end()));
        }
        std::printf(" %8.1f %7.2fx\n", bytes / fastest / 1e6,
                    median(times.back()) / median(times[0]));
        std::fflush(stdout);
    }
    return 0;
}
