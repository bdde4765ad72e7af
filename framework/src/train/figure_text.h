// How the epoch's line and its warnings write a task's figure: "top-1 91.20%",
// "perplexity 3.4412".
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "mixt/task.h"

namespace mixt {

inline std::string figure_text(const Figure& figure) {
  char text[96];
  if (figure.percent) {
    std::snprintf(text, sizeof(text), "%s %.2f%%", figure.label.c_str(), 100.0 * figure.value);
  } else {
    std::snprintf(text, sizeof(text), "%s %.4f", figure.label.c_str(), figure.value);
  }
  return text;
}

// "top-1 91.20%, top-5 99.10%"; "" for none.
inline std::string figures_text(const std::vector<Figure>& figures) {
  std::string text;
  for (const Figure& figure : figures) text += (text.empty() ? "" : ", ") + figure_text(figure);
  return text;
}

}  // namespace mixt
