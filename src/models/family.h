#pragma once
// Model families behind one seam. A family (src/models/<family>/) describes itself with a
// ModelFamily and registers it (its family.cpp); the generic layers (cli, serve, bench, runner)
// look families up by name, by arch id or from a checkpoint's config.json, and never name one.
// The CMake of src/models/ lists every family directory and generates the call that registers
// them all (builtin_families.h).
//
// A family entry holds only torch-free pieces: the checkpoint maker, presets, the chat template,
// the torch-free stage factories and what the bench needs to size a decode step. The stages that
// need libtorch come from the family's plugin (ServeDefaults::plugin_file), loaded by configs.
//
// Thread safety: FamilyRegistry::add() is not thread-safe; a registry that is no longer
// modified (builtin_families()) may be read from any thread. The callbacks of a family may run
// on any thread.
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/progress.h"
#include "checkpoint/safetensors_writer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/value.h"

namespace omnirt::models {

// The options of `omnirt make-checkpoint`, for any family.
struct CheckpointRequest {
    std::string arch;    // as given to --arch: the family's name or one of its arch ids
    std::string preset;  // one of ModelFamily::presets
    bool moe = false;    // the mixture-of-experts variant, where the family has one
    std::uint64_t seed = 0;
    DType dtype = DType::bf16;
    double init_std = 0.02;
    std::uint64_t max_shard_bytes = checkpoint::kDefaultMaxShardBytes;
    bool overwrite = false;                 // write into a directory that is not empty
    checkpoint::ProgressCallback progress;  // weights writing; may be empty
};

struct MadeCheckpoint {
    std::string description;  // "qwen3 tiny moe"
    checkpoint::WrittenFiles weights;
};

// What one decode step of a model reads, in elements, for `omnirt bench generate`'s roofline.
// A step of B sequences reads dense_elements + B * embedding_row_elements, plus, for a
// mixture of experts, expert_elements * min(num_experts, B * experts_per_token) / num_experts.
struct DecodeFootprint {
    std::string description;  // "qwen3 hidden 1024, 28 layers, ..."
    std::int64_t parameters = 0;
    std::int64_t vocab_size = 0;
    std::int64_t dense_elements = 0;          // layers without experts, final norm, lm_head
    std::int64_t embedding_row_elements = 0;  // one embedding row (per sequence)
    std::int64_t expert_elements = 0;         // all experts of all layers; 0 when dense
    int num_experts = 0;
    int experts_per_token = 0;
    std::int64_t kv_elements_per_token = 0;  // keys and values of one position, all layers
};

// What `omnirt serve` needs to serve a checkpoint of the family without --config.
struct ServeDefaults {
    // The chat pipeline (YAML). The caller sets its model_path and plugins.
    std::string_view pipeline_yaml;
    // The plugin holding the family's libtorch stages: $<plugin_env> when set, else
    // <bin>/../lib/<plugin_file>.
    std::string plugin_file;
    std::string plugin_env;
    // The generated checkpoint served when no --model-path is given: made with
    // default_preset (seed 0) into <cache>/<default_checkpoint_name>. Bump the name when the
    // generated checkpoint changes.
    std::string default_checkpoint_name;
    std::string default_preset;
};

struct ModelFamily {
    std::string name;  // "qwen3"; the `--arch` of make-checkpoint and bench generate
    // config.json model_type values (and other --arch spellings) of the family: "qwen3_moe".
    std::vector<std::string> arch_ids;
    // config.json `architectures` entries: "Qwen3ForCausalLM".
    std::vector<std::string> architectures;
    // Preset sizes of make-checkpoint and bench generate, in the order help lists them.
    std::vector<std::string> presets;
    // The default family of `omnirt serve` (at most one registered family may say so).
    bool serve_by_default = false;

    // Writes a generated checkpoint (Hugging Face layout) into `directory`.
    std::function<Result<MadeCheckpoint>(const std::filesystem::path& directory,
                                         const CheckpointRequest& request)>
        make_checkpoint;
    // config.json of a preset (no weights), with torch_dtype set to `dtype` ("bfloat16").
    std::function<Result<nlohmann::json>(const std::string& preset, const std::string& dtype)>
        preset_config;
    // The decode footprint of a config.json; invalid_argument for a config the family rejects.
    std::function<Result<DecodeFootprint>(const nlohmann::json& config)> decode_footprint;
    // Renders request messages (OmniRequest inputs.messages: [{"role", "content"}...]) with the
    // family's chat template. `who` starts error messages. May be empty: no chat template.
    std::function<Result<std::string>(const Value& messages, bool add_generation_prompt,
                                      const std::string& who)>
        render_chat;
    // The voices a checkpoint speaks with (config.json), lower-case; empty: no speech out (or no
    // fixed list). The server answers a request for another voice with a 400. May be empty.
    std::function<std::vector<std::string>(const nlohmann::json& config)> voices;
    // The family's speech pipeline clones the voice of inputs.references (reference clips), so
    // `omnirt serve --voices-dir` may map a request's `voice` onto saved references.
    bool clones_voices = false;
    // Registers the family's torch-free stage factories with the global registry. Idempotent.
    std::function<Status()> register_stages;
    // The stage factory of the family's autoregressive model (in the plugin): "qwen3.thinker".
    std::string ar_stage_factory;
    ServeDefaults serve;
};

class FamilyRegistry {
  public:
    // invalid_argument for an empty name; already_exists when the name or an arch id is taken,
    // or when a second family says serve_by_default.
    [[nodiscard]] Status add(ModelFamily family);

    // By name or arch id. not_found listing the known families ("unknown arch 'x'; known:
    // qwen3 (qwen3, qwen3_moe)").
    [[nodiscard]] Result<const ModelFamily*> find(std::string_view name_or_arch) const;

    // The family of a config.json: its model_type, else one of its `architectures`.
    // invalid_argument when it is not an object, not_found (listing the known families) when no
    // family claims it. `where` (the file) starts error messages.
    [[nodiscard]] Result<const ModelFamily*> detect(const nlohmann::json& config,
                                                    const std::string& where) const;
    // detect() of <directory>/config.json; not_found when the file is missing,
    // invalid_argument when it is not JSON.
    [[nodiscard]] Result<const ModelFamily*> detect_directory(
        const std::filesystem::path& directory) const;

    // The family with serve_by_default; not_found when none.
    [[nodiscard]] Result<const ModelFamily*> default_family() const;

    // In registration order. Entries stay where they are when more are added.
    [[nodiscard]] const std::deque<ModelFamily>& families() const { return families_; }
    // "qwen3 (qwen3, qwen3_moe), other"; "none" when empty.
    [[nodiscard]] std::string describe_known() const;

  private:
    std::deque<ModelFamily> families_;
};

}  // namespace omnirt::models
