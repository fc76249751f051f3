// Text read from files (node and tensor names, paths) goes into diagnostics
// printed on a terminal, where control characters would act instead of
// showing: an escape sequence recolours or clears the screen, a carriage
// return overwrites the line, a newline fakes a second message.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// `name` for a one-line message: every control character (C0, DEL, C1) and
// every byte that is not part of valid UTF-8 as \xNN; other UTF-8 kept.
std::string printableName(std::string_view name);

// The same for a whole message, which may span lines: newlines and tabs are
// kept.
std::string printableText(std::string_view text);

} // namespace kiln
