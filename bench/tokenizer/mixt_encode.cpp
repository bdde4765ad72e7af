// Encodes the documents of a JSONL file ({"text": ...} per line) with mixt's tokenizer on N
// threads, as `mixt tokenize` does, and prints {"bytes", "tokens", "seconds", "checksum"}:
// the time covers encoding only (the documents are read first).
//
//   mixt_bench_tokenizer TOKENIZER DOCUMENTS.jsonl THREADS [REPEATS]
#include <mixt/tokenizer.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER DOCUMENTS.jsonl THREADS [REPEATS]\n", argv[0]);
    return 2;
  }
  const auto tokenizer = mixt::load_tokenizer(argv[1]);
  std::vector<std::string> documents;
  std::ifstream in(argv[2]);
  std::size_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    documents.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
    bytes += documents.back().size();
  }
  const int threads = std::atoi(argv[3]);
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 1;
  double best = 1e300;
  std::int64_t tokens = 0;
  std::uint64_t checksum = 0;
  for (int r = 0; r < repeats; ++r) {
    std::vector<std::vector<mixt::TokenId>> ids(documents.size());
    std::atomic<std::size_t> next{0};
    const auto start = std::chrono::steady_clock::now();
    const auto work = [&] {
      for (std::size_t i = next++; i < documents.size(); i = next++) ids[i] = tokenizer->encode(documents[i]);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    tokens = 0;
    checksum = 0;
    for (const auto& document : ids) {
      tokens += static_cast<std::int64_t>(document.size());
      for (const mixt::TokenId id : document) checksum = checksum * 1000003u + static_cast<std::uint64_t>(id);
    }
  }
  std::printf("{\"bytes\": %zu, \"tokens\": %lld, \"seconds\": %.6f, \"checksum\": %llu}\n", bytes,
              static_cast<long long>(tokens), best, static_cast<unsigned long long>(checksum));
  return 0;
}
