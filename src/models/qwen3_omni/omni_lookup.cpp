#include "models/qwen3_omni/omni_lookup.h"

#include <map>

#include "checkpoint/dummy.h"
#include "models/qwen3_omni/omni_config.h"
#include "models/qwen3_omni/omni_weights.h"

namespace omnirt::models::qwen3_omni {

Result<OmniWeights> open_omni_weights(const std::filesystem::path& directory,
                                      const std::string& load_format, DType dummy_dtype,
                                      std::uint64_t dummy_seed) {
    OmniWeights out;
    if (load_format == "dummy") {
        OMNI_TRY(out.config, checkpoint::read_json_file(directory / checkpoint::kConfigFile));
        OMNI_TRY(OmniConfig parsed, parse_omni_config(out.config));
        OMNI_TRY(auto specs, omni_tensor_specs(parsed, dummy_dtype));
        auto by_name =
            std::make_shared<std::map<std::string, checkpoint::TensorSpec, std::less<>>>();
        for (checkpoint::TensorSpec& spec : specs) by_name->emplace(spec.name, std::move(spec));
        out.lookup = [by_name, init = checkpoint::DummyInit{.seed = dummy_seed}](
                         const std::string& name) -> Result<Tensor> {
            auto spec = by_name->find(name);
            if (spec == by_name->end()) {
                return fail(ErrorCode::not_found,
                            "'" + name + "' is not a tensor of this config (dummy weights)");
            }
            return checkpoint::dummy_tensor(spec->second, init);
        };
        return out;
    }
    if (load_format != "auto" && load_format != "safetensors") {
        return fail(
            ErrorCode::invalid_argument,
            "arg 'load_format' must be auto, safetensors or dummy, got '" + load_format + "'");
    }
    OMNI_TRY(std::unique_ptr<checkpoint::Checkpoint> opened,
             checkpoint::Checkpoint::open(directory));
    out.checkpoint = std::move(opened);
    out.config = out.checkpoint->config();
    out.lookup = [raw = out.checkpoint](const std::string& name) { return raw->tensor(name); };
    return out;
}

}  // namespace omnirt::models::qwen3_omni
