#pragma once
// report's HTML: one self-contained page per activity and an index page — inline CSS and SVG, no
// script, no external URL (a Content-Security-Policy of default-src 'none' says so to the browser
// too), readable offline and attachable to an incident ticket.
//
// Every chart has a title and its numbers in a table beside it (<details>), so the page reads
// without the picture; the tables carry data-k attributes naming each figure for scripts and tests.
// All text from the database is escaped; the renderers are pure functions of the Data.
#include <string>
#include <vector>

#include "jobs/report/report.hpp"

namespace rc::jobs::report {

// `generated_at` is printed in the footer; `index_href`, when not empty, links back to the index.
std::string render_activity(const Data& d, Millis generated_at, const std::string& index_href = "");

// One row per activity with a sparkline of its requests, linking to "<code>.html".
std::string render_index(const std::vector<Data>& all, Millis generated_at);

// Text for HTML element content and attribute values: & < > " ' escaped.
std::string html_escape(const std::string& s);

}  // namespace rc::jobs::report
