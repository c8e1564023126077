#include "cli/make_checkpoint_command.h"

#include <charconv>
#include <iostream>

#include "checkpoint/progress.h"
#include "models/qwen3/make_checkpoint.h"

namespace omnirt::cli {
namespace {

struct MakeCheckpointArgs {
    std::string arch = "qwen3";
    std::string preset;
    bool moe = false;
    std::uint64_t seed = 0;
    std::string dtype = "bf16";
    double init_std = 0.02;
    std::string max_shard_size = "2G";
    bool force = false;
    std::string out;
    bool quiet = false;
};

// "2G", "512M", "64K", "1000" (powers of 1024).
Result<std::uint64_t> parse_size(const std::string& text) {
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    std::string_view suffix(end, text.data() + text.size() - end);
    int shift = -1;
    if (suffix.empty() || suffix == "B") shift = 0;
    if (suffix == "K" || suffix == "KiB") shift = 10;
    if (suffix == "M" || suffix == "MiB") shift = 20;
    if (suffix == "G" || suffix == "GiB") shift = 30;
    if (ec != std::errc() || end == text.data() || shift < 0 || value == 0 ||
        value > (std::uint64_t{1} << (63 - shift))) {
        return fail(ErrorCode::invalid_argument,
                    "--max-shard-size: expected a positive size such as 2G, 512M or 64K, not '" +
                        text + "'");
    }
    return value << shift;
}

Result<DType> parse_weight_dtype(const std::string& text) {
    if (text == "bf16" || text == "bfloat16") return DType::bf16;
    if (text == "f16" || text == "float16") return DType::f16;
    if (text == "f32" || text == "float32") return DType::f32;
    return fail(ErrorCode::invalid_argument,
                "--dtype: expected bf16, f16 or f32, not '" + text + "'");
}

int run(const MakeCheckpointArgs& args) {
    auto dtype = parse_weight_dtype(args.dtype);
    auto shard = parse_size(args.max_shard_size);
    if (!dtype || !shard) {
        std::cerr << "omnirt make-checkpoint: "
                  << (dtype ? shard.error().message : dtype.error().message) << "\n";
        return 2;
    }
    models::qwen3::MakeCheckpointOptions options{.preset = args.preset,
                                                 .moe = args.moe,
                                                 .seed = args.seed,
                                                 .dtype = *dtype,
                                                 .init_std = args.init_std,
                                                 .max_shard_bytes = *shard,
                                                 .overwrite = args.force};
    if (!args.quiet) options.progress = checkpoint::terminal_progress("writing " + args.out);
    auto made = models::qwen3::make_checkpoint(args.out, options);
    if (!made) {
        std::cerr << "omnirt make-checkpoint: " << made.error().to_string() << "\n";
        return made.error().code == ErrorCode::not_found ? 2 : 1;
    }
    std::cout << args.out << ": qwen3 " << args.preset << (args.moe ? " moe" : "") << ", "
              << made->weights.tensor_count << " tensors, "
              << checkpoint::format_bytes(made->weights.tensor_bytes) << " in "
              << (made->weights.sharded ? made->weights.files.size() - 1 : 1) << " file(s), "
              << to_string(*dtype) << ", seed " << args.seed << "\n";
    return 0;
}

}  // namespace

void add_make_checkpoint_command(CLI::App& app, int& exit_code) {
    auto args = std::make_shared<MakeCheckpointArgs>();
    CLI::App* command = app.add_subcommand(
        "make-checkpoint",
        "Write a Hugging Face checkpoint with a real architecture and seeded random weights");
    command->add_option("--arch", args->arch, "Model family (qwen3)")
        ->check(CLI::IsMember({"qwen3"}));
    command->add_option("--preset", args->preset, "Model size: tiny or 0.6b")
        ->required()
        ->check(CLI::IsMember({"tiny", "0.6b"}));
    command->add_flag("--moe", args->moe, "Mixture-of-experts variant (Qwen3-MoE; tiny only)");
    command->add_option("--seed", args->seed, "Seed of the random weights (default 0)");
    command->add_option("--dtype", args->dtype, "Weight dtype: bf16 (default), f16 or f32");
    command->add_option("--init-std", args->init_std,
                        "Standard deviation of the random weights (default 0.02)");
    command->add_option("--max-shard-size", args->max_shard_size,
                        "Largest safetensors file before sharding (default 2G)");
    command->add_flag("--force", args->force, "Write into a non-empty directory");
    command->add_flag("--quiet", args->quiet, "No progress on stderr");
    command->add_option("--out", args->out, "Output directory (created when missing)")->required();
    command->callback([args, &exit_code] { exit_code = run(*args); });
}

}  // namespace omnirt::cli
