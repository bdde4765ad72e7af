#include "folder_index.h"

#include <algorithm>
#include <cctype>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace image_folder {

namespace fs = std::filesystem;

bool is_image_file(const fs::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // torchvision's IMG_EXTENSIONS, all of which OpenCV decodes.
  for (const char* known : {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}) {
    if (ext == known) return true;
  }
  return false;
}

std::vector<std::string> list_classes(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    throw TreeError{(fs::exists(root, ec) ? "dataset root is not a folder: " : "dataset root does not exist: ") +
                        root.string(),
                    "point root: at a folder laid out as root/<class>/<image>"};
  }
  std::vector<std::string> classes;
  fs::directory_iterator it(root, fs::directory_options::follow_directory_symlink, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code probe;
    if (it->is_directory(probe)) classes.push_back(it->path().filename().string());
  }
  if (ec) {
    throw TreeError{"cannot list " + root.string() + ": " + ec.message(),
                    "make the folder readable, or point root at another tree"};
  }
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) {
    throw TreeError{"no class folders in " + root.string(), "lay the images out as root/<class>/<image>"};
  }
  return classes;
}

namespace {
std::string absolute_root(const fs::path& root) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(fs::absolute(root), ec);
  return (ec ? fs::absolute(root) : canonical).string();
}

// The images below class_dir (symbolic links followed), relative to root. A link to a
// folder above it would be walked without end (torchvision's os.walk(followlinks=True)
// recurses until the path is too long): it is an error naming the link, as is a folder
// that cannot be read.
std::vector<std::string> list_images(const fs::path& class_dir, const fs::path& root) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::path last = class_dir;  // what the walk saw last, for the message when it fails
  fs::recursive_directory_iterator it(class_dir, fs::directory_options::follow_directory_symlink, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    last = entry.path();
    std::error_code probe;  // a broken link is no image and no folder: passed over, as before
    if (entry.is_symlink(probe) && entry.is_directory(probe)) {
      const fs::path target = fs::canonical(entry.path(), probe);
      const fs::path parent = fs::canonical(entry.path().parent_path(), probe);
      if (!probe) {
        // A target that is the parent or one of its ancestors contains the link itself.
        if (std::mismatch(target.begin(), target.end(), parent.begin(), parent.end()).first == target.end()) {
          throw TreeError{"symbolic link loop: " + entry.path().string() + " points to " + target.string() +
                              ", a folder that contains it",
                          "remove the link, or point root at a tree without loops"};
        }
      }
    }
    if (entry.is_regular_file(probe) && is_image_file(entry.path())) {
      files.push_back(fs::relative(entry.path(), root).string());
    }
  }
  if (ec) {
    throw TreeError{"cannot read the tree under " + class_dir.string() + ": " + ec.message() + " (after " +
                        last.string() + ")",
                    "make the folders readable, or point root at another tree"};
  }
  return files;
}
}  // namespace

FolderIndex scan_folder(const fs::path& root) {
  FolderIndex index;
  index.classes = list_classes(root);
  index.root = absolute_root(root);
  for (std::size_t label = 0; label < index.classes.size(); ++label) {
    const fs::path class_dir = root / index.classes[label];
    std::vector<std::string> files = list_images(class_dir, root);
    if (files.empty()) {
      throw TreeError{"class folder " + class_dir.string() + " has no images",
                      "remove the empty folder, or add .jpg/.jpeg/.png/.bmp/.webp/.tif/.tiff/.ppm/.pgm files to it"};
    }
    std::sort(files.begin(), files.end());
    for (auto& file : files) {
      index.files.push_back(std::move(file));
      index.labels.push_back(static_cast<std::int64_t>(label));
    }
  }
  return index;
}

// Format: the header line, "root<TAB>path", the class count, one class per line, then
// "label<TAB>path" per file.
bool read_index(const fs::path& file, FolderIndex& index) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line) || line != kIndexHeader) return false;
  FolderIndex read;
  if (!std::getline(in, line) || line.rfind("root\t", 0) != 0) return false;
  read.root = line.substr(5);
  std::size_t classes = 0;
  if (!(in >> classes) || !std::getline(in, line)) return false;
  for (std::size_t i = 0; i < classes && std::getline(in, line); ++i) read.classes.push_back(line);
  std::size_t files = 0;
  if (read.classes.size() != classes || !std::getline(in, line) || line.rfind("files\t", 0) != 0) return false;
  try {
    files = std::stoull(line.substr(6));
    for (std::size_t i = 0; i < files; ++i) {
      const auto tab = std::getline(in, line) ? line.find('\t') : std::string::npos;
      if (tab == std::string::npos) return false;
      const std::int64_t label = std::stoll(line.substr(0, tab));
      if (label < 0 || label >= static_cast<std::int64_t>(read.classes.size())) return false;
      read.labels.push_back(label);
      read.files.push_back(line.substr(tab + 1));
    }
  } catch (const std::logic_error&) {  // stoull/stoll: not a number
    return false;
  }
  if (!std::getline(in, line) || line != "end" || read.files.empty()) return false;
  index = std::move(read);
  return true;
}

void write_index(const fs::path& file, const FolderIndex& index) {
  // Every rank of a data-parallel run builds the dataset, so several processes may write
  // the same index at once: each through a temporary file of its own, renamed whole.
  const fs::path temporary = file.string() + ".tmp." + std::to_string(::getpid());
  std::ofstream out(temporary);
  out << kIndexHeader << "\nroot\t" << index.root << "\n" << index.classes.size() << "\n";
  for (const auto& name : index.classes) out << name << "\n";
  out << "files\t" << index.files.size() << "\n";
  for (std::size_t i = 0; i < index.files.size(); ++i) out << index.labels[i] << "\t" << index.files[i] << "\n";
  out << "end\n";
  out.close();
  std::error_code ec;
  if (!out) {  // a full disk: keep no partial file, and leave the old index alone
    fs::remove(temporary, ec);
    throw std::runtime_error("writing " + temporary.string() + " failed");
  }
  fs::rename(temporary, file, ec);
  if (ec) {
    fs::remove(temporary, ec);
    throw std::runtime_error("cannot put it at " + file.string() + ": " + ec.message());
  }
}

std::string stale_index_reason(const FolderIndex& index, const fs::path& root) {
  if (index.root != absolute_root(root)) return "it lists " + index.root;
  std::vector<std::string> classes;
  try {
    classes = list_classes(root);
  } catch (const TreeError& e) {
    return e.message;
  }
  if (classes == index.classes) return "";
  std::vector<std::string> added, removed;
  std::set_difference(classes.begin(), classes.end(), index.classes.begin(), index.classes.end(),
                      std::back_inserter(added));
  std::set_difference(index.classes.begin(), index.classes.end(), classes.begin(), classes.end(),
                      std::back_inserter(removed));
  const auto some = [](const std::vector<std::string>& names, const char* what) {
    std::string text;  // appended piece by piece: gcc 12 misreads the operator+ chain (-Wstringop-overflow)
    if (names.empty()) return text;
    text.append(" ").append(std::to_string(names.size())).append(" ").append(what).append(" (").append(names.front());
    return text.append(names.size() > 1 ? ", ...)" : ")");
  };
  return "the class folders changed since it was written:" + some(added, "added") + some(removed, "gone");
}

}  // namespace image_folder
