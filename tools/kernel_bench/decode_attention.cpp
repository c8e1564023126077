// Decode attention of Qwen3-0.6B's shape (16 heads, 8 kv heads, head_dim 128, bfloat16, blocks of
// 16) at batch B and context L: paged_attention_cpu over 28 layers' KV caches whose blocks are
// in random order. Prints the best of 12 passes in ms per 28-layer step and the KV bytes read
// per second. Usage: decode_attention [B=32] [L=576]; build and run: README.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/paged_attention.h"

int main(int argc, char** argv) {
    using omnirt::engine::paged_attention_cpu;
    using omnirt::engine::SequenceInput;
    const int batch = argc > 1 ? std::atoi(argv[1]) : 32;
    const int length = argc > 2 ? std::atoi(argv[2]) : 576;
    if (batch < 1 || batch > 4096 || length < 1 || length > 65536) {
        std::fprintf(stderr, "usage: decode_attention [batch 1-4096] [context 1-65536]\n");
        return 2;
    }
    const int layers = 28;
    const int kv_heads = 8, heads = 16, dim = 128, block = 16;
    const int blocks_per_seq = (length + block - 1) / block;
    const int total_blocks = blocks_per_seq * batch + 16;
    std::vector<int> order(total_blocks);
    for (int i = 0; i < total_blocks; ++i) order[i] = i;
    std::mt19937 rng(1);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<SequenceInput> seqs(batch);
    for (int s = 0; s < batch; ++s) {
        seqs[s].request_id = "r" + std::to_string(s);
        seqs[s].tokens = {1};
        seqs[s].start_position = length - 1;
        for (int b = 0; b < blocks_per_seq; ++b)
            seqs[s].block_table.push_back(order[s * blocks_per_seq + b]);
    }
    std::vector<at::Tensor> keys, values;
    for (int l = 0; l < layers; ++l) {
        keys.push_back((at::randn({total_blocks, block, kv_heads, dim}) * 0.3).to(at::kBFloat16));
        values.push_back(at::randn({total_blocks, block, kv_heads, dim}).to(at::kBFloat16));
    }
    const at::Tensor query = at::randn({batch, heads, dim}).to(at::kBFloat16);
    double best = 1e9;
    for (int it = 0; it < 12; ++it) {
        auto t0 = std::chrono::steady_clock::now();
        for (int l = 0; l < layers; ++l) {
            at::Tensor out = paged_attention_cpu(query, keys[l], values[l], seqs, 0.088);
        }
        best = std::min(
            best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                      .count());
    }
    const double bytes = 2.0 * layers * batch * length * kv_heads * dim * 2;
    std::printf("batch %d length %d threads %d: best %.2f ms per step, %.1f GB/s of KV\n", batch,
                length, at::get_num_threads(), best, bytes / best / 1e6);
}
