#include "recipe/recipe_loader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "common/closest_match.h"

namespace mixt {

namespace fs = std::filesystem;

namespace {

// What one recipe file may expand to. YAML aliases and merge keys let a file of a kilobyte
// describe billions of values (an "alias bomb"); real recipes have a few hundred.
constexpr std::size_t kMaxRecipeValues = 100000;
constexpr int kMaxRecipeDepth = 64;      // nesting of maps and lists
constexpr std::size_t kMaxBaseDepth = 32;  // files in one base: chain
constexpr std::uintmax_t kMaxRecipeBytes = 1 << 20;

// Counts the values a file expands to, so that the expansion stops at the bound.
struct Expansion {
  const std::string& source;
  std::size_t values = 0;

  void add(std::size_t count) {
    values += count;
    if (values <= kMaxRecipeValues) return;
    throw recipe_error("the recipe expands to more than " + std::to_string(kMaxRecipeValues) +
                           " values (YAML aliases or merge keys that repeat one another?); mixt reads at most "
                           "that many, so that a small file cannot take the machine's memory",
                       SourceLocation{source}, {}, "write the sections out instead of nesting aliases");
  }
};

// The values below `node`, counted up to just past `limit`.
std::size_t values_in(const RecipeNode& node, std::size_t limit) {
  std::size_t count = 1;
  for (const auto& entry : node.entries) {
    if (count > limit) break;
    count += values_in(*entry.value, limit - count);
  }
  for (const auto& item : node.items) {
    if (count > limit) break;
    count += values_in(*item, limit - count);
  }
  return count;
}

SourceLocation location_of(const YAML::Mark& mark, const std::string& source) {
  // yaml-cpp counts from 0; editors and compilers count from 1.
  if (mark.line < 0) return SourceLocation{source};
  return SourceLocation{source, mark.line + 1, mark.column + 1};
}

// YAML's merge key (`<<: *anchor` or `<<: [*a, *b]`), which yaml-cpp 0.7 reads as an
// ordinary key: recipes use it to share a section's settings (data.val from data.train).
void collect_merge_sources(const RecipeNodePtr& value, std::vector<RecipeNodePtr>& maps) {
  if (value->is_map()) {
    maps.push_back(value);
    return;
  }
  if (value->type == RecipeNode::Type::sequence) {
    for (const auto& item : value->items) {
      if (!item->is_map()) {
        throw recipe_error("<<: expected a map to merge, got " + describe_node(*item), item->where);
      }
      maps.push_back(item);
    }
    return;
  }
  throw recipe_error("<<: expected a map or a list of maps to merge, got " + describe_node(*value), value->where,
                     {}, "write `<<: *name` after an anchor `&name` on a map");
}

// The map's own keys win over merged ones, and earlier merged maps over later ones (the
// YAML merge-key specification), wherever the `<<` line stands.
void apply_merge_key(RecipeNode& node, const std::vector<RecipeNodePtr>& maps, Expansion& expansion) {
  if (maps.empty()) return;
  std::unordered_set<std::string> keys;
  for (const auto& entry : node.entries) keys.insert(entry.key);
  for (const auto& map : maps) {
    for (const auto& entry : map->entries) {
      if (!keys.insert(entry.key).second) continue;
      expansion.add(values_in(*entry.value, kMaxRecipeValues));
      node.entries.push_back({entry.key, entry.key_where, entry.value->deep_copy()});
    }
  }
}

RecipeNodePtr convert(const YAML::Node& yaml, Expansion& expansion, int depth) {
  const std::string& source = expansion.source;
  auto node = std::make_shared<RecipeNode>();
  node->where = location_of(yaml.Mark(), source);
  expansion.add(1);
  if (depth > kMaxRecipeDepth) {
    throw recipe_error("maps and lists nested more than " + std::to_string(kMaxRecipeDepth) + " deep", node->where,
                       {}, "a recipe's sections nest a few levels; this is not one");
  }
  switch (yaml.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: node->type = RecipeNode::Type::null; break;
    case YAML::NodeType::Scalar:
      node->type = RecipeNode::Type::scalar;
      node->scalar = yaml.Scalar();
      node->quoted = yaml.Tag() == "!";  // yaml-cpp tags quoted scalars "!", plain ones "?"
      break;
    case YAML::NodeType::Sequence:
      node->type = RecipeNode::Type::sequence;
      for (const auto& item : yaml) node->items.push_back(convert(item, expansion, depth + 1));
      break;
    case YAML::NodeType::Map: {
      node->type = RecipeNode::Type::map;
      std::vector<RecipeNodePtr> merged_maps;
      std::unordered_set<std::string> keys;  // a map of 100,000 keys is checked in linear time
      for (const auto& pair : yaml) {
        const auto key_where = location_of(pair.first.Mark(), source);
        if (!pair.first.IsScalar()) {
          throw recipe_error("keys must be plain names", key_where);
        }
        const std::string key = pair.first.Scalar();
        if (key == "<<" && pair.first.Tag() != "!") {
          collect_merge_sources(convert(pair.second, expansion, depth + 1), merged_maps);
          continue;
        }
        if (!keys.insert(key).second) throw recipe_error("duplicate key '" + key + "'", key_where);
        node->entries.push_back({key, key_where, convert(pair.second, expansion, depth + 1)});
      }
      apply_merge_key(*node, merged_maps, expansion);
      break;
    }
  }
  return node;
}

// /dev/fd/N and /proc/self/fd/N: a descriptor the shell opened for mixt (process
// substitution), which has no path of its own to resolve.
bool is_open_descriptor(const fs::path& path) {
  const std::string text = path.string();
  return text.rfind("/dev/fd/", 0) == 0 || text.rfind("/proc/self/fd/", 0) == 0;
}

std::string display_path(const fs::path& path) {
  std::error_code ec;
  const fs::path relative = fs::relative(path, fs::current_path(), ec);
  if (!ec && !relative.empty() && relative.native().rfind("..", 0) != 0) return relative.string();
  return path.string();
}

RecipeNodePtr parse_file(const fs::path& file) {
  if (fs::is_directory(file)) {
    std::vector<std::string> recipes;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(file, ec)) {
      if (entry.path().extension() == ".yaml" || entry.path().extension() == ".yml") {
        recipes.push_back(entry.path().filename().string());
      }
    }
    std::sort(recipes.begin(), recipes.end());
    std::string hint = "name a recipe file";
    for (std::size_t i = 0; i < recipes.size(); ++i) hint += (i == 0 ? " there: " : ", ") + recipes[i];
    throw recipe_error("a directory, not a recipe file", SourceLocation{display_path(file)}, {}, hint);
  }
  // A regular file, or the pipe of a shell's process substitution (`mixt check <(...)`),
  // read once. A device (/dev/zero), a named FIFO (which blocks until a writer comes) or a
  // socket is no recipe.
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (!fs::is_regular_file(status) && !(fs::is_fifo(status) && is_open_descriptor(file))) {
    throw recipe_error("not a regular file (a device, a FIFO or a socket): not a recipe",
                       SourceLocation{display_path(file)}, {}, "name a .yaml file");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw recipe_error("cannot read recipe file", SourceLocation{display_path(file)});
  std::string text(kMaxRecipeBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxRecipeBytes) {
    throw recipe_error("the file is larger than " + std::to_string(kMaxRecipeBytes >> 20) +
                           " MiB: too large for a recipe", SourceLocation{display_path(file)}, {},
                       "a recipe is a few hundred lines; name the recipe file itself");
  }
  return parse_yaml(text, display_path(file));
}

// `_delete_: true` in a child map means "do not inherit this map, take mine as it is".
bool strip_delete_marker(RecipeNode& node) {
  const RecipeEntry* marker = node.find("_delete_");
  if (!marker) return false;
  const auto& value = *marker->value;
  const bool yes = value.type == RecipeNode::Type::scalar && (value.scalar == "true" || value.scalar == "True");
  const bool no = value.type == RecipeNode::Type::scalar && (value.scalar == "false" || value.scalar == "False");
  if (!yes && !no) throw recipe_error("must be true or false", value.where, "_delete_");
  node.erase("_delete_");
  return yes;
}

// Deep merge: maps merge key by key, the child wins; scalars and lists replace.
void merge_into(RecipeNode& parent, const RecipeNode& child) {
  std::unordered_map<std::string, std::size_t> index;  // linear in the keys, not quadratic
  for (std::size_t i = 0; i < parent.entries.size(); ++i) index.emplace(parent.entries[i].key, i);
  for (const auto& entry : child.entries) {
    RecipeNodePtr value = entry.value->deep_copy();
    const auto found = index.find(entry.key);
    RecipeEntry* existing = found == index.end() ? nullptr : &parent.entries[found->second];
    const bool replace_whole = value->is_map() && strip_delete_marker(*value);
    if (existing && existing->value->is_map() && value->is_map() && !replace_whole) {
      merge_into(*existing->value, *value);
    } else if (existing) {
      existing->value = value;
      existing->key_where = entry.key_where;
    } else {
      index.emplace(entry.key, parent.entries.size());
      parent.entries.push_back({entry.key, entry.key_where, value});
    }
  }
}

void strip_all_delete_markers(RecipeNode& node) {
  if (!node.is_map()) return;
  strip_delete_marker(node);
  for (auto& entry : node.entries) strip_all_delete_markers(*entry.value);
}

constexpr const char* kRecipeShape =
    "a recipe is a map of sections: model, precision, optimizer, data, trainer (docs/recipes.md)";

// `loaded`: each file's merged result, so that a file named by several bases is read and
// merged once (a "diamond" of bases would otherwise take time exponential in its depth).
RecipeNodePtr load_with_bases(const fs::path& file, std::vector<fs::path>& chain,
                              const SourceLocation& included_from, std::map<fs::path, RecipeNodePtr>& loaded) {
  std::error_code ec;
  const fs::path canonical = is_open_descriptor(file) ? file : fs::weakly_canonical(file, ec);
  if (ec) {  // a symbolic link loop, a path too long: std::filesystem's words, with the place
    throw recipe_error("cannot resolve " + display_path(file) + ": " + ec.message(), included_from,
                       chain.empty() ? "" : "base", "name the recipe file itself");
  }
  if (std::find(chain.begin(), chain.end(), canonical) != chain.end()) {
    std::string cycle;
    for (const auto& link : chain) cycle += display_path(link) + " -> ";
    cycle += display_path(canonical);
    throw recipe_error("cycle: " + cycle, included_from, "base", "remove one of the base: links so the chain ends");
  }
  if (chain.size() >= kMaxBaseDepth) {
    throw recipe_error("base: chains more than " + std::to_string(kMaxBaseDepth) + " files deep",
                       included_from, "base", "a recipe inherits from a few files; shorten the chain");
  }
  if (const auto done = loaded.find(canonical); done != loaded.end()) return done->second;
  if (!chain.empty() && fs::is_directory(canonical, ec)) {  // base: "" or base: some/folder
    throw recipe_error("base: names a directory, not a recipe file: " + display_path(file), included_from, "base",
                       "name a .yaml file; base: paths are relative to the file that names them");
  }
  if (!fs::exists(canonical)) {
    if (chain.empty()) {
      throw recipe_error("recipe file not found", SourceLocation{display_path(file)});
    }
    std::string via;
    for (const auto& link : chain) via += (via.empty() ? "" : " -> ") + display_path(link);
    throw recipe_error("base file not found: " + display_path(file), included_from, "base",
                       "included via " + via + "; base: paths are relative to the file that names them");
  }
  RecipeNodePtr node = parse_file(canonical);
  if (node->type == RecipeNode::Type::null) {
    if (chain.empty()) throw recipe_error("the recipe is empty", node->where, {}, kRecipeShape);
    node->type = RecipeNode::Type::map;  // an empty base adds nothing
  }
  if (!node->is_map()) {
    throw recipe_error("a recipe must be a map of sections, got " + describe_node(*node), node->where);
  }
  if (const RecipeEntry* marker = node->find("_delete_")) {
    throw recipe_error("_delete_ belongs in a section (model:, data: ...), not at the top of a recipe",
                       marker->key_where, "_delete_",
                       "to inherit nothing, drop base:; to replace one section, put _delete_: true inside it");
  }
  const RecipeEntry* base = node->find("base");
  if (!base) return loaded[canonical] = node;

  std::vector<RecipeNodePtr> base_files;
  if (base->value->type == RecipeNode::Type::scalar) {
    base_files.push_back(base->value);
  } else if (base->value->type == RecipeNode::Type::sequence) {
    base_files = base->value->items;
  } else {
    throw recipe_error("expected a file name or a list of file names, got " + describe_node(*base->value),
                       base->value->where, "base");
  }
  chain.push_back(canonical);
  auto merged = std::make_shared<RecipeNode>();
  merged->type = RecipeNode::Type::map;
  merged->where = node->where;
  for (const auto& base_file : base_files) {
    if (base_file->type != RecipeNode::Type::scalar) {
      throw recipe_error("expected a file name, got " + describe_node(*base_file), base_file->where, "base");
    }
    const fs::path path = canonical.parent_path() / base_file->scalar;
    merge_into(*merged, *load_with_bases(path, chain, base_file->where, loaded));
  }
  chain.pop_back();
  node->erase("base");
  merge_into(*merged, *node);
  return loaded[canonical] = merged;
}

// Where each YAML document of `text` starts. yaml-cpp 0.7 (Debian 12's) never ends LoadAll
// on a token it cannot start a node with, such as a ',' outside [ ] or { } ("," alone, or
// "[a]\n,"): every call reads one more empty document at that token without consuming it,
// so a 1-byte recipe ran forever (found by fuzz/recipe_fuzz.cpp). A document that starts
// where the one before started is that token, and a syntax error here.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;  // where each document starts (its `---`, if any)
  std::vector<YAML::Mark> nodes;   // where each document's node starts (its start, if none)
  void OnDocumentStart(const YAML::Mark& mark) override {
    starts.push_back(mark);
    nodes.push_back(mark);
    awaiting_node_ = true;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { node(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& mark) {
    if (awaiting_node_) nodes.back() = mark;
    awaiting_node_ = false;
  }
  bool awaiting_node_ = false;
};

// The node marks of `text`'s documents.
std::vector<YAML::Mark> document_nodes(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts handler;
  while (parser.HandleNextDocument(handler)) {
    const std::vector<YAML::Mark>& starts = handler.starts;
    if (starts.size() >= 2 && starts.back().pos == starts[starts.size() - 2].pos) {
      const auto at = static_cast<std::size_t>(std::max(starts.back().pos, 0));
      const std::string token = at < text.size() ? std::string(1, text[at]) : std::string("end of file");
      throw recipe_error("YAML syntax error: unexpected '" + token + "' where a value should start" +
                             (token == "," ? " (a ',' separates items only inside [ ] or { })" : ""),
                         location_of(starts.back(), source));
    }
  }
  return handler.nodes;
}

// yaml-cpp's message for a tab in the indentation ("illegal map value", "end of map not
// found") does not say that YAML forbids tabs there. It reports the tab's line or the next.
std::string syntax_hint(const std::string& text, const YAML::Mark& mark) {
  if (mark.line < 0) return {};
  std::istringstream lines(text);
  std::string line;
  for (int number = 0; number <= mark.line && std::getline(lines, line); ++number) {
    const std::string indentation = line.substr(0, line.find_first_not_of(" \t"));
    if (number >= mark.line - 1 && indentation.find('\t') != std::string::npos) {
      return "line " + std::to_string(number + 1) + " is indented with a tab; YAML allows only spaces there";
    }
  }
  return {};
}

}  // namespace

RecipeNodePtr parse_yaml(const std::string& text, const std::string& source) {
  try {
    const std::vector<YAML::Mark> documents = document_nodes(text, source);
    // A second document (after `---`) would be dropped without a word.
    if (documents.size() > 1) {
      throw recipe_error(
          "this holds " + std::to_string(documents.size()) + " YAML documents (--- starts each); a recipe is one",
          location_of(documents[1], source), {},
          "merge them, or put the second in a file of its own that names this one in base:");
    }
    Expansion expansion{source};
    return convert(YAML::Load(text), expansion, 0);
  } catch (const YAML::ParserException& e) {
    throw recipe_error("YAML syntax error: " + e.msg, location_of(e.mark, source), {}, syntax_hint(text, e.mark));
  } catch (const YAML::Exception& e) {
    throw recipe_error("cannot read YAML: " + e.msg, location_of(e.mark, source));
  }
}

Recipe load_recipe(const fs::path& file, const std::vector<std::string>& overrides) {
  std::vector<fs::path> chain;
  std::map<fs::path, RecipeNodePtr> loaded;
  Recipe recipe;
  recipe.file = file;
  recipe.root = load_with_bases(file, chain, SourceLocation{display_path(file)}, loaded);
  strip_all_delete_markers(*recipe.root);
  for (const auto& assignment : overrides) apply_override(*recipe.root, assignment);
  return recipe;
}

// The file of every node an override makes: "command line 'trainer.epochs=3'".
constexpr std::string_view kCommandLine = "command line '";

bool from_command_line(const SourceLocation& where) { return where.file.rfind(kCommandLine, 0) == 0; }

// The item of `list` that an override's key names by its 0-based index. A bare scalar item
// (`callbacks: [early_stopping]`) becomes the map it reads as, {name: early_stopping}, so that
// an option can be set beside its name.
RecipeNodePtr& list_item(RecipeNode& list, const std::string& index, const std::string& dotted,
                         const std::string& walked) {
  const std::size_t count = list.items.size();
  const std::string items = count == 0 ? "no items" : "items 0 to " + std::to_string(count - 1);
  const bool digits = !index.empty() && index.size() <= 9 &&
                      index.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoul(index) >= count) {
    throw usage_error("cannot set '" + dotted + "': " + walked + " is a list with " + items + ", and '" + index +
                          "' is none of them",
                      "name a list item by its index, e.g. " + walked + ".0.<key>=<value>");
  }
  RecipeNodePtr& item = list.items[std::stoul(index)];
  if (item->type == RecipeNode::Type::scalar) {
    auto map = std::make_shared<RecipeNode>();
    map->type = RecipeNode::Type::map;
    map->where = item->where;
    map->entries.push_back({"name", item->where, item});
    item = map;
  } else if (item->type == RecipeNode::Type::null) {
    auto map = std::make_shared<RecipeNode>();
    map->type = RecipeNode::Type::map;
    map->where = item->where;
    item = map;
  }
  return item;
}

namespace {

// An override's dotted key and its value's YAML text.
struct Assignment {
  std::string dotted;
  std::string text;
};

Assignment split_assignment(const std::string& assignment) {
  const auto equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw usage_error("override '" + assignment + "' is not key=value",
                      "write overrides as dotted keys, e.g. optimizer.lr=0.1 trainer.epochs=2");
  }
  const std::string dotted = assignment.substr(0, equals);
  // YAML reads a key of at most 1024 characters without `? `, counted as written (a control
  // character is 4): a longer one made a run's recipe.yaml unreadable (found by
  // fuzz/recipe_fuzz.cpp). No option is named so.
  constexpr std::size_t kLongestKey = 256;
  if (dotted.size() > kLongestKey) {
    throw usage_error("override key is " + std::to_string(dotted.size()) + " bytes long (at most " +
                          std::to_string(kLongestKey) + ")",
                      "write overrides as dotted keys, e.g. optimizer.lr=0.1 trainer.epochs=2");
  }
  const auto control = std::find_if(dotted.begin(), dotted.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
  if (control != dotted.end()) {
    throw usage_error("override key has a control character (byte " +
                          std::to_string(static_cast<unsigned char>(*control)) + " at " +
                          std::to_string(control - dotted.begin() + 1) + ")",
                      "write overrides as dotted keys, e.g. optimizer.lr=0.1 trainer.epochs=2");
  }
  if (dotted == "_delete_" || (dotted.size() > 9 && dotted.compare(dotted.size() - 9, 9, "._delete_") == 0)) {
    throw usage_error("override '" + assignment + "': _delete_ is for recipe files",
                      "on the command line a whole map replaces the recipe's, e.g. "
                      "optimizer={name: adamw, lr: 0.001}");
  }
  // `key=` is nearly always an empty shell variable (trainer.epochs=$EPOCHS): as YAML it
  // would be null, which silently means "the default".
  if (assignment.find_first_not_of(" \t", equals + 1) == std::string::npos) {
    throw usage_error("override '" + assignment + "' has no value",
                      "to unset a key on purpose write " + dotted + "=null");
  }
  const std::string text = assignment.substr(equals + 1);
  // `"a"b`: YAML reads the string a and then something else (in a file, a syntax error).
  const std::size_t first = text.find_first_not_of(" \t"), last = text.find_last_not_of(" \t");
  if ((text[first] == '"' || text[first] == '\'') && (last == first || text[last] != text[first])) {
    throw usage_error("override '" + assignment + "': the value starts with a quote but does not end with it",
                      "quote the whole value, e.g. " + dotted + "='\"a b\"' in the shell");
  }
  return {dotted, text};
}

// The override's value, every node of it located at `source`, the command line.
RecipeNodePtr override_value(const std::string& text, const std::string& source) {
  RecipeNodePtr value = parse_yaml(text, source);
  // Every node of the override points at the command line, not at the YAML snippet.
  std::function<void(RecipeNode&)> relocate = [&](RecipeNode& node) {
    node.where = SourceLocation{source};
    for (auto& entry : node.entries) {
      entry.key_where = SourceLocation{source};
      relocate(*entry.value);
    }
    for (auto& item : node.items) relocate(*item);
  };
  relocate(*value);
  // A map given here replaces the recipe's whole map, as `_delete_: true` asks a recipe's
  // map to: written here out of habit, it is no unknown key.
  strip_all_delete_markers(*value);
  return value;
}

// Walks `dotted` down from `root`, making the maps it lacks, and sets its last key to `value`.
void set_dotted(RecipeNode& root, const std::string& assignment, const std::string& dotted, const RecipeNodePtr& value,
                const std::string& source) {
  RecipeNode* node = &root;
  std::string walked;
  std::size_t start = 0;
  while (true) {
    const auto dot = dotted.find('.', start);
    const std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) throw usage_error("override '" + assignment + "' has an empty key");
    if (node->type == RecipeNode::Type::sequence) {
      // `callbacks.0.threshold=0`: one item of a list, by its index.
      RecipeNodePtr& item = list_item(*node, key, dotted, walked);
      walked += "." + key;
      if (dot == std::string::npos) {
        item = value;
        return;
      }
      node = item.get();
      start = dot + 1;
      continue;
    }
    walked += (walked.empty() ? "" : ".") + key;
    RecipeEntry* entry = node->find(key);
    if (dot == std::string::npos) {
      if (entry) {
        entry->value = value;
      } else {
        // A key the recipe does not spell out yet (e.g. trainer.resume): allowed here,
        // rejected later by check_unknown_keys if no component knows it.
        node->entries.push_back({key, SourceLocation{source}, value});
      }
      return;
    }
    if (!entry) {
      auto map = std::make_shared<RecipeNode>();
      map->type = RecipeNode::Type::map;
      map->where = SourceLocation{source};
      node->entries.push_back({key, SourceLocation{source}, map});
      entry = &node->entries.back();
    }
    if (!entry->value->is_map() && entry->value->type != RecipeNode::Type::sequence) {
      throw recipe_error("cannot set '" + dotted + "': " + walked + " is " + describe_node(*entry->value) +
                             ", not a map or a list",
                         SourceLocation{source}, walked);
    }
    node = entry->value.get();
    start = dot + 1;
  }
}

}  // namespace

void apply_override(RecipeNode& root, const std::string& assignment) {
  const std::string source = std::string(kCommandLine) + assignment + "'";
  const Assignment split = split_assignment(assignment);
  const RecipeNodePtr value = override_value(split.text, source);
  set_dotted(root, assignment, split.dotted, value, source);
}

namespace {
// Where below `node` the key is known: `epochs=2` meant trainer.epochs, `batch_size: 64`
// at the top data.train.batch_size (and data.val's).
void find_deeper(const RecipeNode& node, const std::string& key, const std::string& path,
                 std::vector<std::string>& found) {
  for (const auto& entry : node.entries) {
    if (!entry.value->is_map() || !entry.value->opened) continue;
    const std::string below = path.empty() ? entry.key : path + "." + entry.key;
    if (entry.value->known_keys.contains(key)) found.push_back(below + "." + key);
    find_deeper(*entry.value, key, below, found);
  }
}

void check_keys(const RecipeNode& node, const std::string& path) {
  for (const auto& entry : node.entries) {
    const std::string key_path = path.empty() ? entry.key : path + "." + entry.key;
    // null unsets a key: nobody reading it is no mistake. `optimizer.name=adamw
    // optimizer.momentum=null` drops what the recipe's sgd had and adamw does not know.
    if (entry.value->type == RecipeNode::Type::null) continue;
    if (!node.known_keys.contains(entry.key)) {
      const std::vector<std::string> known(node.known_keys.begin(), node.known_keys.end());
      const std::string where = path.empty() ? "the recipe" : "'" + path + "'";
      std::vector<std::string> deeper;
      find_deeper(node, entry.key, path, deeper);
      std::string hint;
      for (const std::string& candidate : deeper) hint += (hint.empty() ? "did you mean " : " or ") + candidate;
      hint = hint.empty() ? suggestion_hint(entry.key, known, "known keys") : hint + "?";
      throw recipe_error("unknown key '" + entry.key + "' in " + where, entry.key_where, key_path, hint);
    }
    if (entry.value->is_map() && entry.value->opened) check_keys(*entry.value, key_path);
    // Lists of maps read through Config::sections (e.g. transforms:).
    for (std::size_t i = 0; i < entry.value->items.size(); ++i) {
      const RecipeNode& item = *entry.value->items[i];
      if (item.is_map() && item.opened) check_keys(item, key_path + "[" + std::to_string(i) + "]");
    }
  }
}

// yaml-cpp writes a scalar with a carriage return or another control character plain,
// where reading it back drops or refuses the character (found by fuzz/recipe_fuzz.cpp: a
// quoted "cosine\r" came back as cosine). Quoted, they are escapes.
bool has_control_character(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
}

void emit(YAML::Emitter& out, const RecipeNode& node) {
  switch (node.type) {
    case RecipeNode::Type::null: out << YAML::Null; break;
    case RecipeNode::Type::scalar:
      if (node.quoted || has_control_character(node.scalar)) out << YAML::DoubleQuoted;
      out << node.scalar;
      break;
    case RecipeNode::Type::sequence:
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& item : node.items) emit(out, *item);
      out << YAML::EndSeq;
      break;
    case RecipeNode::Type::map:
      out << YAML::BeginMap;
      for (const auto& entry : node.entries) {
        out << YAML::Key;
        // Written plain, a key named << would be read back as YAML's merge key (found by
        // fuzz/recipe_fuzz.cpp: the override `optimizer.<<=0.1` made recipe.yaml unreadable).
        if (entry.key == "<<" || has_control_character(entry.key)) out << YAML::DoubleQuoted;
        out << entry.key << YAML::Value;
        emit(out, *entry.value);
      }
      out << YAML::EndMap;
      break;
  }
}
}  // namespace

void check_unknown_keys(const RecipeNode& root) { check_keys(root, ""); }

void check_unknown_keys(const RecipeNode& root, const std::string& section) {
  const RecipeEntry* entry = root.find(section);
  if (entry && entry->value->is_map() && entry->value->opened) check_keys(*entry->value, section);
}

std::string to_yaml(const RecipeNode& root) {
  YAML::Emitter out;
  emit(out, root);
  return std::string(out.c_str()) + "\n";
}

}  // namespace mixt
