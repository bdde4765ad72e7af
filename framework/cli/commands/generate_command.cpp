#include "commands/generate_command.h"

#include <ATen/autocast_mode.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include "experiment/generation.h"
#include "experiment/generation_config.h"
#include "experiment/inference.h"
#include "experiment/model_only.h"
#include "experiment/model_source.h"
#include "experiment/session.h"
#include "mixt/autocast.h"
#include "mixt/helpers/chat_template.h"
#include "mixt/tokenizer.h"
#include "recipe/recipe_loader.h"
#include "sdk/tokenizer/utf8.h"

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
                                     const Tokenizer* tokenizer, const std::optional<ChatTemplate>& chat) {
  if (chat) {  // --chat: the prompt as the user's turn, then the assistant's header
    const ChatTokens formatted =
        tokenize_chat(*tokenizer, render_chat(*chat, {{"user", options.prompt}}, /*add_generation_prompt=*/true));
    return {formatted.ids.begin(), formatted.ids.end()};
  }
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

// The command line's values, else what model.from's folder says (transformers' generate on it),
// else mixt's own: sampling at temperature 1 from every token, stopping at the tokenizer's end
// of text.
SamplingOptions sampling_options(const GenerateOptions& options, const Recipe& recipe, const Tokenizer* tokenizer,
                                 std::int64_t context_length, std::string& source) {
  SamplingOptions sampling;
  const std::string from = recipe_from(recipe);
  if (!from.empty() && std::filesystem::is_directory(from)) {
    const GenerationDefaults defaults = read_generation_defaults(from);
    source = defaults.source;
    sampling.temperature = defaults.do_sample ? defaults.temperature : 0.0;
    sampling.top_k = defaults.top_k;
    sampling.top_p = defaults.top_p;
    sampling.repetition_penalty = defaults.repetition_penalty;
    sampling.stop_tokens = defaults.eos;
  } else if (tokenizer != nullptr && tokenizer->end_of_text()) {
    source = "the tokenizer's end of text";
    sampling.stop_tokens = {*tokenizer->end_of_text()};
  }
  if (options.temperature) sampling.temperature = *options.temperature;
  if (options.top_k) sampling.top_k = *options.top_k;
  if (options.top_p) sampling.top_p = *options.top_p;
  if (options.repetition_penalty) sampling.repetition_penalty = *options.repetition_penalty;
  if (options.ignore_eos) sampling.stop_tokens.clear();
  sampling.max_new_tokens = options.max_new_tokens;
  sampling.seed = options.seed;
  sampling.use_cache = !options.no_cache;
  sampling.context_length = context_length;
  return sampling;
}

// One line on stderr before the text: the policy and the autocast the model runs under (a
// run's bfloat16 autocast changes what is drawn), and how tokens are drawn and end.
void say_how(const Recipe& recipe, const Sampler& s, const SamplingOptions& sampling, const std::string& source) {
  const Config config = recipe.config();
  const std::string policy = config.has("precision") ? config.section("precision").string("name") : "fp32";
  std::string autocast = "no autocast";
  {
    const AutocastScope scope = s.precision.autocast(s.device.type());
    if (at::autocast::is_autocast_enabled(s.device.type())) {
      autocast = std::string("autocast to ") + c10::toString(at::autocast::get_autocast_dtype(s.device.type()));
    }
  }
  // A model may hold no parameter (a plugin's fixed function): then there is no dtype to name.
  const std::vector<at::Tensor> parameters = s.model.parameters();
  const std::string weights = parameters.empty() ? "none" : c10::toString(parameters.front().scalar_type());
  std::string how = sampling.temperature <= 0 ? std::string("the likeliest token")
                                              : "sampling at temperature " + std::to_string(sampling.temperature);
  if (sampling.temperature > 0 && sampling.top_k > 0) how += ", top_k " + std::to_string(sampling.top_k);
  if (sampling.temperature > 0 && sampling.top_p < 1) how += ", top_p " + std::to_string(sampling.top_p);
  if (sampling.repetition_penalty != 1) how += ", repetition_penalty " + std::to_string(sampling.repetition_penalty);
  std::string stops;
  for (const auto id : sampling.stop_tokens) stops += (stops.empty() ? "" : ", ") + std::to_string(id);
  std::fprintf(stderr, "mixt generate: precision %s (%s, weights %s on %s); %s; %s\n", policy.c_str(), autocast.c_str(),
               weights.c_str(), s.device.str().c_str(), how.c_str(),
               stops.empty() ? "no stop token" : ("stops at token " + stops + " (" + source + ")").c_str());
}

// --chat: the chat template of the tokenizer's folder (tokenizer_config.json), a recipe error
// naming the file when there is none this code writes.
std::optional<ChatTemplate> chat_template_for(const GenerateOptions& options, const Recipe& recipe,
                                              const Tokenizer* tokenizer) {
  if (!options.chat) return std::nullopt;
  if (tokenizer == nullptr) {
    throw usage_error(
        "--chat formats the prompt with the tokenizer folder's chat template, and the recipe names no "
        "tokenizer",
        "give model.from a transformers folder with tokenizer.json and tokenizer_config.json");
  }
  const std::filesystem::path config =
      std::filesystem::path(recipe_tokenizer(recipe)).parent_path() / "tokenizer_config.json";
  ChatTemplate chat;
  try {
    chat = read_chat_template(config, std::nullopt);
  } catch (const ChatTemplateError& e) {
    throw recipe_error(e.what(), SourceLocation{config.string()}, {},
                       "--chat writes the families " + chat_families_supported());
  }
  if (options.date) {
    if (chat.family != ChatFamily::llama3_1) {
      throw usage_error(std::string("--date: the ") + chat_family_name(chat.family) + " chat format of " +
                            config.string() + " writes no date",
                        "only Llama 3.1's kind of template (3.1, 3.2, 3.3) dates its system header");
    }
    chat.date_string = *options.date;
  }
  return chat;
}

int sample(const GenerateOptions& options, const Recipe& recipe, const Sampler& s) {
  const std::unique_ptr<Tokenizer> tokenizer = recipe_tokenizer_for(recipe, s.vocabulary);
  const std::optional<ChatTemplate> chat = chat_template_for(options, recipe, tokenizer.get());
  const std::vector<std::int64_t> ids = prompt_ids(options, s.vocabulary, tokenizer.get(), chat);
  const at::Tensor prompt = at::tensor(ids, at::kLong).view({1, -1}).to(s.device);

  std::string source;
  SamplingOptions sampling = sampling_options(options, recipe, tokenizer.get(), s.context_length, source);
  // A chat turn ends with its end-of-turn token, whatever else generation_config.json names.
  if (chat && !options.ignore_eos) {
    if (const auto end = tokenizer->token_id(chat_end_of_turn(chat->family))) {
      if (std::find(sampling.stop_tokens.begin(), sampling.stop_tokens.end(), *end) == sampling.stop_tokens.end()) {
        sampling.stop_tokens.push_back(*end);
        source += std::string(source.empty() ? "" : "; ") + chat_end_of_turn(chat->family) + ", the chat's end of turn";
      }
    }
  }
  say_how(recipe, s, sampling, source);
  // Printed as drawn: the prompt, then each token (decoded text with a tokenizer, bytes for a
  // byte-level model, else ids one per word).
  const auto print = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  std::optional<TextStream> stream;
  if (tokenizer) stream.emplace(*tokenizer);
  const bool bytes = !tokenizer && s.vocabulary == kByteVocabulary;
  std::string unfinished;  // a byte-level model's bytes of a character not yet complete
  const auto show = [&](std::int64_t token, bool first) {
    if (stream) {
      print(stream->push(static_cast<TokenId>(token)));
    } else if (bytes) {
      // Valid UTF-8 as the tokenizers stream it: U+FFFD for bytes that cannot complete a character.
      unfinished.push_back(static_cast<char>(token));
      const std::size_t ready = text::complete_utf8_prefix(unfinished);
      print(text::repair_utf8(std::string_view(unfinished).substr(0, ready)));
      unfinished.erase(0, ready);
    } else {
      std::printf("%s%lld", first ? "" : " ", static_cast<long long>(token));
    }
    std::fflush(stdout);
  };
  for (std::size_t i = 0; i < ids.size(); ++i) show(ids[i], i == 0);
  mixt::generate(s.model, s.precision, prompt, sampling, [&](std::int64_t token) { show(token, false); });
  if (stream) print(stream->finish());
  print(text::repair_utf8(unfinished));
  std::printf("\n");
  return 0;
}

}  // namespace

int generate(const GenerateOptions& options) {
  if (!options.prompt.empty() && !options.tokens.empty()) throw usage_error("give --prompt or --tokens, not both");
  if (options.chat && options.prompt.empty()) throw usage_error("--chat needs --prompt TEXT, the user's message");
  if (options.date && !options.chat) throw usage_error("--date dates a chat's system header: give --chat too");
  if (options.date && options.date->empty()) throw usage_error("--date needs a date, e.g. '26 Jul 2024'");
  if (options.max_new_tokens < 1) throw usage_error("--max-new-tokens must be at least 1");
  if (options.temperature && *options.temperature < 0) {
    throw usage_error("--temperature must be 0 (the likeliest token) or more");
  }
  if (options.top_k && *options.top_k < 0) throw usage_error("--top-k must be 0 (no cut) or more");
  if (options.top_p && !(*options.top_p > 0 && *options.top_p <= 1)) throw usage_error("--top-p must be in (0, 1]");
  if (options.repetition_penalty && !(*options.repetition_penalty > 0)) {
    throw usage_error("--repetition-penalty must be above 0 (1: none)");
  }
  const ModelTarget target = resolve_model_target(options.target, "generate", options.best);
  ModelPlan plan = plan_model(target, options.overrides, options.ema);
  if (!options.precision.empty()) {
    // Sampling under another policy than the run trained with (fp32 where bf16 autocast bites).
    plan.recipe.root->erase("precision");
    plan.recipe.root->entries.push_back(
        {"precision", SourceLocation{"--precision"}, parse_yaml("{name: " + options.precision + "}", "--precision")});
  }
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
  command->add_flag(
      "--chat", o->chat,
      "the prompt as a user's turn in the chat template of the tokenizer's folder "
      "(tokenizer_config.json: Llama 3's, 3.1's, ChatML or Qwen3's), followed by the assistant's header; stops at "
      "the end of the assistant's turn too");
  command->add_option("--date", o->date,
                      "with --chat and Llama 3.1's kind of template: the system header's \"Today Date\", e.g. the "
                      "instruct dataset's `date` the model was tuned with (default: the template's; today's for "
                      "3.2's, as transformers renders it)");
  command->add_option("--max-new-tokens", o->max_new_tokens, "tokens to draw")->capture_default_str();
  command->add_option("--temperature", o->temperature,
                      "divides the logits; 0: always the likeliest token (default: model.from's "
                      "generation_config.json, else 1)");
  command->add_option("--top-k", o->top_k,
                      "draw among the k likeliest tokens only, 0: all (default: generation_config.json, else 0)");
  command->add_option("--top-p", o->top_p,
                      "draw among the fewest likeliest tokens whose probability reaches p (default: "
                      "generation_config.json, else 1)");
  command->add_option("--repetition-penalty", o->repetition_penalty,
                      "above 1: tokens already in the text are less likely (default: generation_config.json, else 1)");
  command->add_flag("--ignore-eos", o->ignore_eos,
                    "draw --max-new-tokens even past the end-of-sequence token (generation_config.json's "
                    "eos_token_id, else the tokenizer's end of text)");
  command->add_option("--precision", o->precision,
                      "the precision policy to run under instead of the recipe's, e.g. fp32");
  command->add_option("--seed", o->seed, "seed of the draws")->capture_default_str();
  command->add_flag("--no-cache", o->no_cache, "run the whole sequence for each token instead of the KV cache");
  command->add_flag("--ema", o->ema, "the ema callback's average of the weights (from a checkpoint)");
  command->add_flag("--best", o->best, kBestHelp);
  commands.push_back({command, [o] { return generate(*o); }});
}

}  // namespace mixt::cli
