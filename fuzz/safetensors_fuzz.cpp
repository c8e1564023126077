// Fuzzes the safetensors header parser (checkpoint files are external input: a user points
// --model-path at any directory). Whatever parses must describe tensors inside the file.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace omnirt;
    const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
    auto header = checkpoint::parse_safetensors_header(file, "fuzz.safetensors");
    if (!header.has_value()) return 0;
    if (header->data_offset + header->data_size > size) {
        std::fprintf(stderr, "safetensors_fuzz: data section outside the file\n");
        std::abort();
    }
    for (const auto& entry : header->tensors) {
        if (entry.begin > entry.end || entry.end > header->data_size) {
            std::fprintf(stderr, "safetensors_fuzz: entry '%s' outside the file\n",
                         entry.name.c_str());
            std::abort();
        }
    }
    return 0;
}
