#include "commands/generate_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <sstream>

#include "experiment/generation.h"
#include "experiment/inference.h"
#include "experiment/model_only.h"
#include "experiment/model_source.h"
#include "experiment/session.h"
#include "mixt/tokenizer.h"

namespace mixt::cli {

namespace {

// A vocabulary of 256 is the text dataset's: each token is one byte of UTF-8.
constexpr std::int64_t kByteVocabulary = 256;

// "15496, 11, 995" or "15496 11 995" as ids, each checked against the vocabulary.
std::vector<std::int64_t> parse_tokens(const std::string& text, std::int64_t vocabulary) {
  std::string spaced = text;
  for (char& c : spaced) c = c == ',' ? ' ' : c;
  std::istringstream in(spaced);
  std::vector<std::int64_t> ids;
  std::string word;
  while (in >> word) {
    std::size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id < 0 || id >= vocabulary) {
      throw usage_error("--tokens: '" + word + "' is not a token id of this model (0 .. " +
                        std::to_string(vocabulary - 1) + ")");
    }
    ids.push_back(id);
  }
  if (ids.empty()) throw usage_error("--tokens is empty", "give token ids, e.g. --tokens '15496, 11, 995'");
  return ids;
}

// The prompt's ids: --tokens; else --prompt encoded by the recipe's tokenizer (with the
// special tokens it adds, as transformers' tokenizer(prompt) does), or as bytes for a
// byte-level model. Without either: the tokenizer's end-of-text token (GPT-2's unconditional
// start), or "\n" for a byte-level model, as nanoGPT's sample.py starts.
std::vector<std::int64_t> prompt_ids(const GenerateOptions& options, std::int64_t vocabulary,
                                     const Tokenizer* tokenizer) {
  if (!options.tokens.empty()) return parse_tokens(options.tokens, vocabulary);
  if (tokenizer != nullptr) {
    std::vector<TokenId> ids;
    if (!options.prompt.empty()) {
      ids = tokenizer->encode(options.prompt, true);
    } else if (const auto end = tokenizer->end_of_text()) {
      ids = {*end};
    }
    if (ids.empty()) throw usage_error("the prompt encodes to no token", "give --prompt TEXT");
    return {ids.begin(), ids.end()};
  }
  if (vocabulary != kByteVocabulary) {
    throw usage_error(
        "--prompt takes text for a byte-level model (vocabulary 256) or a model with a tokenizer; "
        "this one has " +
            std::to_string(vocabulary) + " tokens and no tokenizer",
        "name one in the recipe (model.tokenizer: tokenizer.json), or give token ids with --tokens");
  }
  const std::string text = options.prompt.empty() ? "\n" : options.prompt;
  std::vector<std::int64_t> ids;
  for (unsigned char byte : text) ids.push_back(byte);
  return ids;
}

// model.tokenizer, checked against the model's vocabulary; null when the recipe names none.
std::unique_ptr<Tokenizer> recipe_tokenizer_for(const Recipe& recipe, std::int64_t vocabulary) {
  const std::string file = recipe_tokenizer(recipe);
  if (file.empty()) return nullptr;
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(file);
  if (tokenizer->vocab_size() > vocabulary) {
    throw recipe_error("the tokenizer has " + std::to_string(tokenizer->vocab_size()) + " tokens, more than the " +
                           std::to_string(vocabulary) + " the model predicts",
                       SourceLocation{file}, {}, "model.tokenizer must be the tokenizer the model was trained with");
  }
  return tokenizer;
}

}  // namespace

namespace {

// What generate samples from: the model, the policy it runs under, the vocabulary it
// predicts and the longest sequence it takes, from a prepared experiment (a recipe with data)
// or from the model alone (experiment/model_only.h).
struct Sampler {
  Model& model;
  const PrecisionPolicy& precision;
  at::Device device;
  std::int64_t vocabulary;
  std::int64_t context_length;  // 0: the model's own (mixt::CachedDecoding) or no limit
};

void refuse_unless_language_model(const Task& task) {
  if (!task.predicts_next_token()) {
    throw usage_error("mixt generate needs a language model: the recipe's task does not predict the next token",
                      "train one with task: {name: causal_lm} (docs/recipes.md, Tasks)");
  }
}

int sample(const GenerateOptions& options, const Recipe& recipe, const Sampler& s) {
  const std::unique_ptr<Tokenizer> tokenizer = recipe_tokenizer_for(recipe, s.vocabulary);
  const std::vector<std::int64_t> ids = prompt_ids(options, s.vocabulary, tokenizer.get());
  const at::Tensor prompt = at::tensor(ids, at::kLong).view({1, -1}).to(s.device);

  SamplingOptions sampling;
  sampling.max_new_tokens = options.max_new_tokens;
  sampling.temperature = options.temperature;
  sampling.top_k = options.top_k;
  sampling.seed = options.seed;
  sampling.use_cache = !options.no_cache;
  sampling.context_length = s.context_length;
  // Printed as drawn: the prompt, then each token (decoded text with a tokenizer, bytes for a
  // byte-level model, else ids one per word).
  const auto print = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  std::optional<TextStream> stream;
  if (tokenizer) stream.emplace(*tokenizer);
  const bool bytes = !tokenizer && s.vocabulary == kByteVocabulary;
  const auto show = [&](std::int64_t token, bool first) {
    if (stream) {
      print(stream->push(static_cast<TokenId>(token)));
    } else if (bytes) {
      std::fputc(static_cast<int>(token), stdout);
    } else {
      std::printf("%s%lld", first ? "" : " ", static_cast<long long>(token));
    }
    std::fflush(stdout);
  };
  for (std::size_t i = 0; i < ids.size(); ++i) show(ids[i], i == 0);
  mixt::generate(s.model, s.precision, prompt, sampling, [&](std::int64_t token) { show(token, false); });
  if (stream) print(stream->finish());
  std::printf("\n");
  return 0;
}

}  // namespace

int generate(const GenerateOptions& options) {
  if (!options.prompt.empty() && !options.tokens.empty()) throw usage_error("give --prompt or --tokens, not both");
  if (options.max_new_tokens < 1) throw usage_error("--max-new-tokens must be at least 1");
  if (options.temperature < 0) throw usage_error("--temperature must be 0 (the likeliest token) or more");
  if (options.top_k < 0) throw usage_error("--top-k must be 0 (no cut) or more");
  const ModelTarget target = resolve_model_target(options.target, "generate", options.best);
  ModelPlan plan = plan_model(target, options.overrides, options.ema);
  Session session;
  if (!recipe_has_data(plan.recipe)) {
    // Nothing to sample the data from: the model's own options say what it predicts.
    session.load_plugins_of(plan.recipe);
    const ModelOnly only = build_model_only(plan, session.registry(), options.ema, "generate");
    refuse_unless_language_model(*only.task);
    return sample(
        options, plan.recipe,
        {only.inference->model(), *only.precision, only.inference->device(), only.vocabulary, only.context_length});
  }
  Experiment e = session.prepare(std::move(plan.recipe));
  Components& c = e.components;
  refuse_unless_language_model(*c.task);
  const Inference inference(c, e.facts, plan, options.ema, e.options.seed);
  const std::vector<std::int64_t> shape = c.train->sample_shape();
  return sample(
      options, e.recipe,
      {inference.model(), *c.precision, inference.device(), c.train->num_classes(), shape.empty() ? 0 : shape.front()});
}

void add_generate_command(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* command = app.add_subcommand("generate", "sample text or tokens from a trained language model");
  command
      ->add_option("target", o->target,
                   "a run directory, its checkpoints/ or a checkpoint file (each brings its recipe.yaml), or a "
                   "recipe with model.weights=FILE.safetensors")
      ->required();
  command->add_option("overrides", o->overrides, "key=value overrides, as for mixt run");
  command->add_option("--prompt", o->prompt,
                      "text to continue, encoded by the recipe's model.tokenizer (or as bytes for a byte-level "
                      "model); default the tokenizer's end-of-text token, or a newline");
  command->add_option("--tokens", o->tokens, "token ids to continue, e.g. '15496, 11, 995'");
  command->add_option("--max-new-tokens", o->max_new_tokens, "tokens to draw")->capture_default_str();
  command->add_option("--temperature", o->temperature, "divides the logits; 0: always the likeliest token")
      ->capture_default_str();
  command->add_option("--top-k", o->top_k, "draw among the k likeliest tokens only (0: all)")->capture_default_str();
  command->add_option("--seed", o->seed, "seed of the draws")->capture_default_str();
  command->add_flag("--no-cache", o->no_cache, "run the whole sequence for each token instead of the KV cache");
  command->add_flag("--ema", o->ema, "the ema callback's average of the weights (from a checkpoint)");
  command->add_flag("--best", o->best, kBestHelp);
  commands.push_back({command, [o] { return generate(*o); }});
}

}  // namespace mixt::cli
