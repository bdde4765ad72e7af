// The list of images of an ImageFolder tree (root/<class>/**/<image>), as torchvision's
// ImageFolder makes it: classes are the sorted sub-folder names, files are walked in
// sorted order, and only known image extensions count (case-insensitive).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace image_folder {

struct FolderIndex {
  std::string root;  // the tree it lists, absolute
  std::vector<std::string> classes;
  std::vector<std::string> files;     // relative to the root
  std::vector<std::int64_t> labels;   // index into classes, one per file
};

// Problems with the tree itself (missing root, empty class): the caller turns them into a
// recipe error at the `root` key.
struct TreeError {
  std::string message;
  std::string hint;
};

bool is_image_file(const std::filesystem::path& file);

// The class folders of `root`, sorted (one directory listing). Throws TreeError.
std::vector<std::string> list_classes(const std::filesystem::path& root);

// Walks the tree. Throws TreeError.
FolderIndex scan_folder(const std::filesystem::path& root);

// A cached index, so a tree of a million files is walked once: a text file that starts
// with kIndexHeader, names its root, counts its files and ends with a line "end".
// read_index returns false when the file is absent, not an index of this version (an older
// one is simply rebuilt) or incomplete: v2 had no count, so an index cut short by a full
// disk read as a smaller dataset.
inline constexpr const char* kIndexHeader = "mixt image_folder index v3";
bool read_index(const std::filesystem::path& file, FolderIndex& index);
void write_index(const std::filesystem::path& file, const FolderIndex& index);

// Why a cached index cannot stand for `root` ("" when it can): made for another tree (the
// same index: file named for train and val), or class folders added, removed or renamed
// since — either would silently train on the wrong files or shift the labels. Files added
// inside a class are not looked for (that would be the walk the index saves).
std::string stale_index_reason(const FolderIndex& index, const std::filesystem::path& root);

}  // namespace image_folder
