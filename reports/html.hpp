#pragma once
/// The parts every HTML report page shares (`check --format html`, `run
/// --format html`): the head with the one inline stylesheet and the bubble
/// pattern, and the tail with the one inline script.

#include <string>

namespace pipecheck::reports {

/// `<!DOCTYPE html>` through `<body>`: the escaped title, the stylesheet and
/// an invisible SVG defining the `#hatch` pattern timelines shade bubbles with.
std::string html_head(const std::string &title);

/// The script (it counts the rows of `table.summary` and the timeline bars
/// into `data-rows` / `data-bars` of <body> and sets `data-rendered="yes"`)
/// and the closing tags.
std::string html_tail();

} // namespace pipecheck::reports
