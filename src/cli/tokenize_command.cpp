#include "cli/tokenize_command.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "text/tokenizer.h"

namespace omnirt::cli {
namespace {

struct TokenizeOptions {
    std::string model_path;
    std::vector<std::string> inputs;
    bool no_special = false;
    bool decode = false;
    bool skip_special = false;
};

int tokenize(const TokenizeOptions& options) {
    const auto path = std::filesystem::path(options.model_path) / "tokenizer.json";
    auto tokenizer = text::Tokenizer::from_file(path.string());
    if (!tokenizer) {
        std::cerr << "omnirt tokenize: " << tokenizer.error().to_string() << "\n";
        return 1;
    }
    if (options.decode) {
        std::vector<text::TokenId> ids;
        for (const auto& input : options.inputs) {
            try {
                std::size_t used = 0;
                long long id = std::stoll(input, &used);
                if (used != input.size() || id < 0 || id > text::kMaxTokenId) throw 0;
                ids.push_back(static_cast<text::TokenId>(id));
            } catch (...) {
                std::cerr << "omnirt tokenize: --decode: '" << input << "' is not a token id\n";
                return 2;
            }
        }
        auto decoded = (*tokenizer)->decode(ids, {.skip_special_tokens = options.skip_special});
        if (!decoded) {
            std::cerr << "omnirt tokenize: " << decoded.error().to_string() << "\n";
            return 1;
        }
        std::cout << nlohmann::json(*decoded).dump(-1, ' ', false,
                                                   nlohmann::json::error_handler_t::replace)
                  << "\n";
        return 0;
    }
    std::string text;
    for (std::size_t i = 0; i < options.inputs.size(); ++i) {
        if (i > 0) text += ' ';
        text += options.inputs[i];
    }
    text::EncodeOptions encode_options;
    encode_options.match_special_tokens = !options.no_special;
    auto ids = (*tokenizer)->encode(text, encode_options);
    if (!ids) {
        std::cerr << "omnirt tokenize: " << ids.error().to_string() << "\n";
        return 1;
    }
    std::cout << nlohmann::json(*ids).dump() << "\n";
    return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int& exit_code) {
    auto options = std::make_shared<TokenizeOptions>();
    CLI::App* command = app.add_subcommand(
        "tokenize", "Print the token ids of a text (or, with --decode, the text of token ids)");
    command
        ->add_option("--model-path", options->model_path, "Checkpoint directory (tokenizer.json)")
        ->required();
    command->add_option("input", options->inputs, "Text (words are joined by spaces), or ids")
        ->required();
    command->add_flag("--no-special", options->no_special,
                      "Encode special-token text (<|im_start|>, ...) as plain text");
    command->add_flag("--decode", options->decode, "Inputs are ids: print their text");
    command->add_flag("--skip-special", options->skip_special,
                      "With --decode: leave out special tokens");
    command->callback([options, &exit_code] { exit_code = tokenize(*options); });
}

}  // namespace omnirt::cli
