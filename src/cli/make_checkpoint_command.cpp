#include "cli/make_checkpoint_command.h"

#include <algorithm>
#include <charconv>
#include <iostream>

#include "checkpoint/progress.h"
#include "models/builtin_families.h"

namespace omnirt::cli {
namespace {

struct MakeCheckpointArgs {
    std::string arch;  // empty: the default family
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

// The family of --arch (a family name or arch id), else the default one; its --preset.
Result<const models::ModelFamily*> find_family(const MakeCheckpointArgs& args) {
    const models::FamilyRegistry& families = models::builtin_families();
    OMNI_TRY(const models::ModelFamily* family,
             args.arch.empty() ? families.default_family() : families.find(args.arch));
    if (!family->make_checkpoint) {
        return fail(ErrorCode::invalid_argument,
                    "--arch " + family->name + ": the family cannot generate checkpoints");
    }
    if (std::ranges::find(family->presets, args.preset) == family->presets.end()) {
        std::string known;
        for (const std::string& preset : family->presets) {
            known += (known.empty() ? "" : ", ") + preset;
        }
        return fail(ErrorCode::invalid_argument, "--preset: " + family->name + " has no preset '" +
                                                     args.preset + "' (presets: " + known + ")");
    }
    return family;
}

int run(const MakeCheckpointArgs& args) {
    auto family = find_family(args);
    if (!family) {
        std::cerr << "omnirt make-checkpoint: " << family.error().message << "\n";
        return 2;
    }
    auto dtype = parse_weight_dtype(args.dtype);
    auto shard = parse_size(args.max_shard_size);
    if (!dtype || !shard) {
        std::cerr << "omnirt make-checkpoint: "
                  << (dtype ? shard.error().message : dtype.error().message) << "\n";
        return 2;
    }
    models::CheckpointRequest request{.arch = args.arch.empty() ? (*family)->name : args.arch,
                                      .preset = args.preset,
                                      .moe = args.moe,
                                      .seed = args.seed,
                                      .dtype = *dtype,
                                      .init_std = args.init_std,
                                      .max_shard_bytes = *shard,
                                      .overwrite = args.force};
    if (!args.quiet) request.progress = checkpoint::terminal_progress("writing " + args.out);
    auto made = (*family)->make_checkpoint(args.out, request);
    if (!made) {
        std::cerr << "omnirt make-checkpoint: " << made.error().to_string() << "\n";
        return made.error().code == ErrorCode::not_found ? 2 : 1;
    }
    std::cout << args.out << ": " << made->description << ", " << made->weights.tensor_count
              << " tensors, " << checkpoint::format_bytes(made->weights.tensor_bytes) << " in "
              << (made->weights.sharded ? made->weights.files.size() - 1 : 1) << " file(s), "
              << to_string(*dtype) << ", seed " << args.seed << "\n";
    return 0;
}

std::string default_family_name() {
    auto family = models::builtin_families().default_family();
    return family ? (*family)->name : "none";
}

// "<family>: <preset>, <preset>; <family>: ..." for --help.
std::string describe_presets() {
    std::string out;
    for (const models::ModelFamily& family : models::builtin_families().families()) {
        if (!family.make_checkpoint) continue;
        out += (out.empty() ? "" : "; ") + family.name + ":";
        for (std::size_t i = 0; i < family.presets.size(); ++i) {
            out += (i > 0 ? ", " : " ") + family.presets[i];
        }
    }
    return out;
}

}  // namespace

void add_make_checkpoint_command(CLI::App& app, int& exit_code) {
    auto args = std::make_shared<MakeCheckpointArgs>();
    CLI::App* command = app.add_subcommand(
        "make-checkpoint",
        "Write a Hugging Face checkpoint with a real architecture and seeded random weights");
    command->add_option("--arch", args->arch,
                        "Model family or arch id (default " + default_family_name() +
                            "): " + models::builtin_families().describe_known());
    command->add_option("--preset", args->preset, "Model size: " + describe_presets())->required();
    command->add_flag("--moe", args->moe,
                      "Mixture-of-experts variant, where the family has one (e.g. tiny only)");
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
