// The tokens and text dataset plugins (datasets/tokens). The token files come from
// tests/golden/make_token_files.py (the token_files fixture), written as nanoGPT's
// prepare.py and llm.c's write_datafile write theirs from a known sequence,
// ids[i] = (7919 i + 13) mod 50257: every id is distinct, so an id says where it came from.
// Broken files for the error cases are written here, byte by byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "data_support.h"
#include "doc_tables.h"
#include "expect_error.h"
#include "mixt/padded_shards.h"
#include "plugins/option_table.h"

namespace mixt {
namespace {

const fs::path kFiles = testing::configured::token_files_dir();
constexpr std::int64_t kCount = 4099;  // tokens in tokens.*.bin
constexpr std::int64_t kShardSplit = 1500;

std::int64_t known(std::int64_t i) { return (7919 * i + 13) % 50257; }

// Where id `id` sits in the known sequence.
std::int64_t position_of(std::int64_t id) {
  static const std::map<std::int64_t, std::int64_t> positions = [] {
    std::map<std::int64_t, std::int64_t> p;
    for (std::int64_t i = 0; i < kCount; ++i) p[known(i)] = i;
    return p;
  }();
  return positions.at(id);
}

std::string file(const std::string& name) { return (kFiles / name).string(); }

std::unique_ptr<Dataset> make(testing::BuiltPlugins& plugins, const std::string& yaml, std::uint64_t seed = 0,
                              std::int64_t rank = 0, std::int64_t world_size = 1, const std::string& split = "train") {
  return testing::make_dataset(plugins, yaml, DatasetContext{split, seed, rank, world_size, at::kCPU});
}

// A YAML list of two files. (Appended, not `"[" + a + ...`: gcc 12 warns on that chain.)
std::string two_files(const std::string& a, const std::string& b) {
  std::string list = "[";
  list.append(file(a)).append(", ").append(file(b)).append("]");
  return list;
}

std::string tokens(const std::string& files, const std::string& options) {
  return "{name: tokens, files: " + files + ", " + options + "}";
}

// The first position of every window of an epoch, in delivery order; checks on the way that
// each row is a contiguous slice of the known sequence and its targets are its inputs
// shifted by one.
std::vector<std::int64_t> window_starts(Dataset& data, std::int64_t epoch, std::int64_t context) {
  std::vector<std::int64_t> starts;
  for (const Batch& batch : testing::collect_epoch(data, epoch)) {
    EXPECT_EQ(batch.inputs.scalar_type(), at::kLong);
    EXPECT_EQ(batch.targets.scalar_type(), at::kLong);
    EXPECT_EQ(batch.inputs.sizes(), batch.targets.sizes());
    EXPECT_EQ(batch.inputs.size(1), context);
    const auto in = batch.inputs.accessor<std::int64_t, 2>();
    const auto out = batch.targets.accessor<std::int64_t, 2>();
    for (std::int64_t row = 0; row < in.size(0); ++row) {
      const std::int64_t start = position_of(in[row][0]);
      for (std::int64_t t = 0; t < context; ++t) {
        EXPECT_EQ(in[row][t], known(start + t)) << "row " << row << ", token " << t;
        EXPECT_EQ(out[row][t], known(start + t + 1)) << "row " << row << ", token " << t;
      }
      starts.push_back(start);
    }
  }
  return starts;
}

std::vector<std::int64_t> multiples(std::int64_t first, std::int64_t step, std::int64_t count) {
  std::vector<std::int64_t> values;
  for (std::int64_t i = 0; i < count; ++i) values.push_back(first + i * step);
  return values;
}

TEST(TokenFiles, BothFormatsReadTheKnownTokens) {
  testing::BuiltPlugins plugins;
  for (const char* name : {"tokens.nanogpt.bin", "tokens.llmc.bin"}) {
    auto data = make(plugins, tokens(file(name), "context: 16, batch_size: 32, shuffle: false"));
    EXPECT_EQ(data->num_classes(), 50257) << name;
    EXPECT_EQ(data->sample_shape(), (std::vector<std::int64_t>{16})) << name;
    EXPECT_EQ(window_starts(*data, 0, 16), multiples(0, 16, (kCount - 1) / 16)) << name;
  }
  // And the same batches, format by format, named or detected.
  auto nanogpt = make(plugins, tokens(file("tokens.nanogpt.bin"), "format: nanogpt, context: 8, shuffle: false"));
  auto llmc = make(plugins, tokens(file("tokens.llmc.bin"), "format: llmc, context: 8, shuffle: false"));
  EXPECT_TRUE(testing::same_batches(testing::collect_epoch(*nanogpt, 0), testing::collect_epoch(*llmc, 0)));
}

TEST(TokenFiles, ShuffledWindowsAreSlicesOfTheFileStartingAtMultiplesOfTheContext) {
  testing::BuiltPlugins plugins;
  auto data = make(plugins, tokens(file("tokens.llmc.bin"), "context: 64, batch_size: 5"), 3);
  std::vector<std::int64_t> starts = window_starts(*data, 1, 64);
  EXPECT_NE(starts, multiples(0, 64, 64));  // shuffled: data.train's default
  std::sort(starts.begin(), starts.end());
  EXPECT_EQ(starts, multiples(0, 64, 64));  // floor(4098 / 64) = 64 windows, each once
}

TEST(TokenFiles, ASpanOfNTokensHoldsFloorOfNMinusOneOverContextWindows) {
  testing::BuiltPlugins plugins;
  // 4099 tokens: 4098 / 4098 = 1, 4098 / 4097 = 1, 4098 / 41 = 99.95, 4098 / 2 = 2049.
  for (const std::int64_t context : {1, 2, 41, 4097, 4098}) {
    auto data = make(plugins, tokens(file("tokens.nanogpt.bin"),
                                     "context: " + std::to_string(context) + ", batch_size: 1000, shuffle: false"));
    const std::int64_t windows = (kCount - 1) / context;
    EXPECT_EQ(data->size(), windows) << context;
    EXPECT_EQ(window_starts(*data, 0, context), multiples(0, context, windows)) << context;
  }
}

TEST(TokenFiles, FromAndToSplitTheFileIntoDisjointSpans) {
  testing::BuiltPlugins plugins;
  const std::int64_t cut = static_cast<std::int64_t>(0.9 * kCount);  // nanoGPT's int(n * 0.9): 3689
  auto train = make(plugins, tokens(file("tokens.llmc.bin"), "context: 10, to: 0.9"));
  auto val = make(plugins, tokens(file("tokens.llmc.bin"), "context: 10, from: 0.9"), 0, 0, 1, "val");
  EXPECT_EQ(train->size(), (cut - 1) / 10);
  EXPECT_EQ(val->size(), (kCount - cut - 1) / 10);
  std::vector<std::int64_t> train_starts = window_starts(*train, 0, 10);
  std::sort(train_starts.begin(), train_starts.end());
  EXPECT_EQ(train_starts, multiples(0, 10, (cut - 1) / 10));
  EXPECT_LT(train_starts.back() + 10, cut);  // the last target is inside the span
  // Validation does not shuffle, and starts at the cut.
  EXPECT_EQ(window_starts(*val, 0, 10), multiples(cut, 10, (kCount - cut - 1) / 10));
}

TEST(TokenFiles, ShardsAreReadInOrderAsOneStream) {
  testing::BuiltPlugins plugins;
  auto whole = make(plugins, tokens(file("tokens.llmc.bin"), "context: 7, batch_size: 16, shuffle: false"));
  auto shards = make(plugins, tokens(two_files("shard_0.bin", "shard_1.bin"),
                                     "context: 7, batch_size: 16, shuffle: false"));
  // 1500 = 214 * 7 + 2: window 214 runs from the first shard into the second.
  static_assert(kShardSplit % 7 != 0);
  EXPECT_TRUE(testing::same_batches(testing::collect_epoch(*whole, 0), testing::collect_epoch(*shards, 0)));
  EXPECT_EQ(window_starts(*shards, 0, 7), multiples(0, 7, (kCount - 1) / 7));
}

TEST(TokenFiles, TheEpochOrderDependsOnlyOnTheSeedAndTheEpoch) {
  testing::BuiltPlugins plugins;
  const std::string yaml = tokens(file("tokens.nanogpt.bin"), "context: 32, batch_size: 8");
  auto a = make(plugins, yaml, 7);
  auto b = make(plugins, tokens(file("tokens.nanogpt.bin"), "context: 32, batch_size: 3, workers: 0"), 7);
  auto c = make(plugins, yaml, 8);
  const std::vector<std::int64_t> epoch3 = window_starts(*a, 3, 32);
  EXPECT_EQ(window_starts(*b, 3, 32), epoch3);
  EXPECT_EQ(window_starts(*a, 3, 32), epoch3);
  EXPECT_NE(window_starts(*a, 4, 32), epoch3);
  EXPECT_NE(window_starts(*c, 3, 32), epoch3);
}

TEST(TokenFiles, RanksTakeDisjointShardsThatCoverTheEpochInAsManyBatches) {
  testing::BuiltPlugins plugins;
  // 4098 / 50 = 81 windows over 2 and 4 ranks: 41 and 21 each, the last padded from the start.
  const std::int64_t windows = 81;
  for (const std::int64_t world : {2, 4}) {
    std::vector<std::int64_t> own_starts;
    std::set<std::int64_t> batches;
    for (std::int64_t rank = 0; rank < world; ++rank) {
      auto data = make(plugins, tokens(file("tokens.llmc.bin"), "context: 50, batch_size: 4"), 5, rank, world);
      batches.insert(data->batches_per_epoch());
      const std::vector<std::int64_t> starts = window_starts(*data, 2, 50);
      EXPECT_EQ(static_cast<std::int64_t>(starts.size()), (windows + world - 1) / world);
      ASSERT_NE(data->capabilities().pads_shards, nullptr);
      const std::int64_t own = own_samples_of(*data);
      own_starts.insert(own_starts.end(), starts.begin(), starts.begin() + own);
    }
    EXPECT_EQ(batches.size(), 1u) << "every rank the same number of batches, world " << world;
    std::sort(own_starts.begin(), own_starts.end());
    EXPECT_EQ(own_starts, multiples(0, 50, windows)) << "each window on exactly one rank, world " << world;
  }
}

TEST(TokenFiles, StartingAnEpochMidwayContinuesItExactly) {
  testing::BuiltPlugins plugins;
  auto data = make(plugins, tokens(file("tokens.llmc.bin"), "context: 20, batch_size: 6"), 11);
  const std::vector<Batch> whole = testing::collect_epoch(*data, 2);
  ResumesMidEpoch* resumes = data->capabilities().resumes_mid_epoch;
  ASSERT_NE(resumes, nullptr);
  resumes->start_epoch_at(2, 5);
  std::vector<Batch> rest;
  while (auto batch = data->next_batch()) rest.push_back(*batch);
  EXPECT_TRUE(testing::same_batches(rest, {whole.begin() + 5, whole.end()}));
  EXPECT_EQ(resumes->position(), static_cast<std::int64_t>(whole.size()));
}

TEST(TokenFiles, DescribesItsTokensAndWindows) {
  testing::BuiltPlugins plugins;
  auto llmc = make(plugins, tokens(file("tokens.llmc.bin"), "context: 8"));
  EXPECT_EQ(preprocessing_of(*llmc), "uint16 token ids from llm.c files (vocabulary 50257), windows of 9");
  auto both = make(plugins, tokens(two_files("tokens.nanogpt.bin", "shard_0.bin"), "vocab: 50304"));
  EXPECT_EQ(both->num_classes(), 50304);
  EXPECT_EQ(both->sample_shape(), (std::vector<std::int64_t>{1024}));
  EXPECT_EQ(preprocessing_of(*both), "uint16 token ids from nanoGPT and llm.c files (vocabulary 50304), windows of 1025");
}

// llm.c's LLaMA 3 files (magic 20240801, version 7, uint32 ids; dev/data/data_common.py),
// written here byte by byte with ids past uint16's range: each window holds them as written.
TEST(TokenFiles, ReadsLlmcUint32FilesForLargeVocabularies) {
  TempDir dir;
  std::vector<std::int32_t> header(256, 0);
  header[0] = 20240801, header[1] = 7, header[2] = 40;
  std::vector<std::uint32_t> ids(40);
  for (std::uint32_t i = 0; i < 40; ++i) ids[i] = 70000 + 1000 * i;
  std::string bytes(1024 + 4 * ids.size(), '\0');
  std::memcpy(bytes.data(), header.data(), 1024);
  std::memcpy(bytes.data() + 1024, ids.data(), 4 * ids.size());
  const fs::path llama = dir.write("llama3.bin", bytes);
  testing::BuiltPlugins plugins;
  auto data = make(plugins, tokens(llama.string(), "vocab: 128256, context: 4, batch_size: 1, shuffle: false"));
  EXPECT_EQ(preprocessing_of(*data), "uint32 token ids from llm.c files (vocabulary 128256), windows of 5");
  const std::vector<Batch> batches = testing::collect_epoch(*data, 0);
  ASSERT_FALSE(batches.empty());
  for (const Batch& batch : batches) {
    const std::int64_t first = batch.inputs[0][0].item<std::int64_t>();
    ASSERT_EQ((first - 70000) % 1000, 0);
    for (std::int64_t t = 0; t < 4; ++t) {
      EXPECT_EQ(batch.inputs[0][t].item<std::int64_t>(), first + 1000 * t);
      EXPECT_EQ(batch.targets[0][t].item<std::int64_t>(), first + 1000 * (t + 1));
    }
  }
}

// --- text ---------------------------------------------------------------------------------

// The text encoded by a tokenizer: a hand-made BPE (merges "b c", then "a bc"; pieces split at
// spaces) turns "abc ab c abc" into abc=5, a=0 b=1, c=2, abc=5, worked out by hand.
TEST(TokenText, WithATokenizerItsWindowsHoldTheTokenizersIds) {
  TempDir dir;
  const fs::path tokenizer = dir.write("tokenizer.json", R"({
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": false},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5}, "merges": ["b c", "a bc"]}
  })");
  const fs::path text = dir.write("input.txt", "abc ab c abc");
  testing::BuiltPlugins plugins;
  auto data = make(plugins, "{name: text, file: " + text.string() + ", tokenizer: " + tokenizer.string() +
                                ", context: 2, batch_size: 2, shuffle: false}");
  EXPECT_EQ(data->num_classes(), 6);
  const std::vector<Batch> batches = testing::collect_epoch(*data, 0);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(at::equal(batches[0].inputs, at::tensor({5, 0, 1, 2}, at::kLong).view({2, 2})));
  EXPECT_TRUE(at::equal(batches[0].targets, at::tensor({0, 1, 2, 5}, at::kLong).view({2, 2})));
  const Error missing = testing::thrown_error(
      [&] { make(plugins, "{name: text, file: " + text.string() + ", tokenizer: /nonexistent.json}"); });
  EXPECT_THAT(missing.what(), HasSubstr("data.tokenizer: tokenizer file does not exist: /nonexistent.json"));
}

TEST(TokenText, AMultiByteCharacterComesOutAsItsBytes) {
  testing::BuiltPlugins plugins;
  TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "a\xE2\x82\xAC" "b\n";  // a, the euro sign's 3 bytes, b, newline
  const fs::path path = dir.write("euro.txt", text);
  auto data = make(plugins, "{name: text, file: " + path.string() + ", context: 8, batch_size: 4, shuffle: false}");
  EXPECT_EQ(data->num_classes(), 256);
  EXPECT_EQ(data->size(), (240 - 1) / 8);
  std::int64_t row_start = 0;
  for (const Batch& batch : testing::collect_epoch(*data, 0)) {
    for (std::int64_t row = 0; row < batch.inputs.size(0); ++row, row_start += 8) {
      for (std::int64_t t = 0; t < 8; ++t) {
        EXPECT_EQ(batch.inputs[row][t].item<std::int64_t>(), static_cast<unsigned char>(text[row_start + t]));
        EXPECT_EQ(batch.targets[row][t].item<std::int64_t>(), static_cast<unsigned char>(text[row_start + t + 1]));
      }
    }
  }
  EXPECT_EQ(row_start, 29 * 8);
  auto first = testing::collect_epoch(*data, 0).front().inputs[0];
  EXPECT_TRUE(at::equal(first.slice(0, 0, 5), at::tensor({97, 0xE2, 0x82, 0xAC, 98}, at::kLong)));
  EXPECT_EQ(preprocessing_of(*data), "UTF-8 bytes as tokens (vocabulary 256), windows of 9");
}

TEST(TokenText, ReadsTheGpl3ByDefault) {
  testing::BuiltPlugins plugins;
  auto data = make(plugins, "{name: text}");
  const std::string gpl = testing::read_file("/usr/share/common-licenses/GPL-3");
  EXPECT_EQ(data->sample_shape(), (std::vector<std::int64_t>{256}));
  EXPECT_EQ(data->size(), static_cast<std::int64_t>((gpl.size() - 1) / 256));
  EXPECT_EQ(data->batches_per_epoch(), (data->size() + 63) / 64);
}

// --- errors -------------------------------------------------------------------------------

// An llm.c header (256 int32) with these first three values, then `ids`.
std::string llmc_file(std::int32_t magic, std::int32_t version, std::int32_t count, std::vector<std::uint16_t> ids) {
  std::vector<std::int32_t> header(256, 0);
  header[0] = magic, header[1] = version, header[2] = count;
  std::string bytes(1024 + 2 * ids.size(), '\0');
  std::memcpy(bytes.data(), header.data(), 1024);
  std::memcpy(bytes.data() + 1024, ids.data(), 2 * ids.size());
  return bytes;
}

Error tokens_error(const std::string& files, const std::string& options = "context: 4") {
  testing::BuiltPlugins plugins;
  return testing::thrown_error([&] { make(plugins, tokens(files, options)); });
}

TEST(TokenErrors, AMissingFileIsARecipeErrorAtTheKey) {
  const Error e = tokens_error("/nonexistent/train.bin");
  EXPECT_EQ(e.kind(), ErrorKind::recipe);
  EXPECT_THAT(e.what(), HasSubstr("test.yaml:1:"));
  EXPECT_THAT(e.what(), HasSubstr("data.files: token file does not exist: /nonexistent/train.bin"));
  TempDir dir;
  const Error folder = tokens_error(dir.path().string());
  EXPECT_THAT(folder.what(), HasSubstr(dir.path().string() + " is a folder, not a token file"));
  testing::BuiltPlugins plugins;
  const Error text = testing::thrown_error([&] { make(plugins, "{name: text, file: /nonexistent/input.txt}"); });
  EXPECT_THAT(text.what(), HasSubstr("data.file: text file does not exist: /nonexistent/input.txt"));
}

TEST(TokenErrors, AnLlmcHeaderIsCheckedAndNamed) {
  TempDir dir;
  const std::vector<std::uint16_t> ids(100, 7);
  const fs::path magic = dir.write("magic.bin", llmc_file(20240521, 1, 100, ids));
  EXPECT_THAT(tokens_error(magic.string(), "format: llmc").what(),
              HasSubstr(magic.string() + " is not an llm.c token file: its first int32 is 20240521, llm.c's magics "
                                         "are 20240520 (uint16 tokens) and 20240801 (uint32)"));
  const fs::path llama = dir.write("llama.bin", llmc_file(20240801, 1, 50, ids));
  EXPECT_THAT(tokens_error(llama.string(), "format: llmc").what(),
              HasSubstr(llama.string() + ": llm.c header version 1 with magic 20240801; that magic goes with "
                                         "version 7 (uint32 tokens)"));
  const fs::path llama_count = dir.write("llama_count.bin", llmc_file(20240801, 7, 100, ids));
  EXPECT_THAT(tokens_error(llama_count.string()).what(),
              HasSubstr(llama_count.string() + ": the llm.c header says 100 tokens, the file holds 50 (200 bytes "
                                               "after the 1024-byte header, 4 per token)"));
  const fs::path version = dir.write("version.bin", llmc_file(20240520, 2, 100, ids));
  EXPECT_THAT(tokens_error(version.string()).what(),
              HasSubstr(version.string() + ": llm.c header version 2 with magic 20240520; that magic goes with "
                                           "version 1 (uint16 tokens)"));
  const fs::path count = dir.write("count.bin", llmc_file(20240520, 1, 120, ids));
  const Error e = tokens_error(count.string());
  EXPECT_EQ(e.kind(), ErrorKind::recipe);
  EXPECT_THAT(e.what(), HasSubstr(count.string() + ": the llm.c header says 120 tokens, the file holds 100"));
  const fs::path shorter = dir.write("short.bin", std::string(100, '\0'));
  EXPECT_THAT(tokens_error(shorter.string(), "format: llmc").what(),
              HasSubstr(shorter.string() + " holds 100 bytes, less than llm.c's 1024-byte header"));
}

TEST(TokenErrors, ANanogptFileOfAnOddSizeIsNamed) {
  TempDir dir;
  const fs::path odd = dir.write("odd.bin", std::string(2001, 'x'));
  const Error e = tokens_error(odd.string());
  EXPECT_EQ(e.kind(), ErrorKind::recipe);
  EXPECT_THAT(e.what(), HasSubstr(odd.string() + ": a nanoGPT file holds uint16 ids, but its size, 2001 bytes, is "
                                                 "not a multiple of 2"));
}

TEST(TokenErrors, ASpanShorterThanAWindowSaysHowShort) {
  // 4099 tokens from 0.9: 410 tokens, less than a window of 1025.
  const Error e = tokens_error(file("tokens.nanogpt.bin"), "from: 0.9");
  EXPECT_EQ(e.kind(), ErrorKind::recipe);
  EXPECT_THAT(e.what(), HasSubstr("data.context: " + file("tokens.nanogpt.bin") +
                                  ": needs at least context + 1 = 1025 tokens, the span holds 410"));
  testing::BuiltPlugins plugins;
  TempDir dir;
  const fs::path empty = dir.write("empty.txt", "");
  const Error text = testing::thrown_error([&] { make(plugins, "{name: text, file: " + empty.string() + "}"); });
  EXPECT_THAT(text.what(), HasSubstr(empty.string() + ": needs at least context + 1 = 257 tokens, the span holds 0"));
  EXPECT_THAT(tokens_error(file("tokens.llmc.bin"), "from: 0.5, to: 0.5").what(),
              HasSubstr("data.to: must be above from (0.5)"));
}

TEST(TokenErrors, ATokenOutsideTheVocabularyStopsTheBatchNamingFileAndOffset) {
  testing::BuiltPlugins plugins;
  // known(0) = 13, known(1) = 7932: the first window holds the first id >= 1000 at token 1.
  for (const std::string name : {"tokens.llmc.bin", "tokens.nanogpt.bin"}) {
    auto data = make(plugins, tokens(file(name), "vocab: 1000, context: 4, batch_size: 2, shuffle: false"));
    data->start_epoch(0);
    const Error e = testing::thrown_error([&] { data->next_batch(); });
    EXPECT_EQ(e.kind(), ErrorKind::runtime);
    const std::string byte = name == "tokens.llmc.bin" ? "1026" : "2";
    EXPECT_THAT(e.what(), HasSubstr(file(name) + ", token 1 (byte " + byte +
                                    "): token id 7932 is not below the vocabulary size 1000"));
  }
  // An llm.c file read as nanoGPT's: its header's first id, 20240520 & 0xffff = 55432, is out of range.
  auto misread = make(plugins, tokens(file("tokens.llmc.bin"), "format: nanogpt, context: 4, shuffle: false"));
  misread->start_epoch(0);
  EXPECT_THAT(testing::thrown_error([&] { misread->next_batch(); }).what(),
              HasSubstr(file("tokens.llmc.bin") + ", token 0 (byte 0): token id 55432 is not below the vocabulary "
                                                  "size 50257"));
}

// Nothing is skipped as a bad sample, so the loader's key for that is refused, not ignored.
TEST(TokenErrors, OnBadSampleIsRefused) {
  const Error e = tokens_error(file("tokens.llmc.bin"), "on_bad_sample: skip");
  EXPECT_EQ(e.kind(), ErrorKind::recipe);
  EXPECT_THAT(e.what(), HasSubstr("data.on_bad_sample: token windows are never skipped"));
}

// --- docs ---------------------------------------------------------------------------------

// docs/datasets.md's option tables are the declarations written out (`mixt describe dataset
// NAME --markdown`).
TEST(TokenDocs, TheOptionTablesAreTheDeclarations) {
  testing::BuiltPlugins plugins;
  for (const std::string name : {"tokens", "text"}) {
    const std::string rows = option_table_rows(plugins.registry.find(ComponentKind::dataset, name)->info.options);
    EXPECT_EQ(testing::doc_table_rows("datasets.md", "### `" + name + "` options"), rows)
        << "docs/datasets.md's " << name << " table should read:\n" << rows;
  }
}

}  // namespace
}  // namespace mixt
