#pragma once
// Commands the CLI prints for the user to run next ("continue with: sprintnet train --resume DIR") must
// survive a copy and paste into a POSIX shell whatever DIR holds.
#include <string>
#include <string_view>

namespace sprintnet {

// The path `word` as one shell word: unchanged when it holds only characters no shell treats specially
// (letters, digits, and _ - . / + = : , @ %), single-quoted otherwise (a ' inside as '\''); ./ in front of a
// relative path starting with '-', which a command would take for an option.
std::string shell_quoted(std::string_view word);

}  // namespace sprintnet
