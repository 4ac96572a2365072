// The doctor's findings as one self-contained HTML page: the verdict and the
// headline numbers, evidence and advice, a timeline (one lane per thread, the
// spans as colored bars, CPU utilization as lines) and per-stage bars of busy
// and waiting time. Inline CSS and inline SVG only: no scripts, fonts or
// anything fetched over the network, so the file opens anywhere, offline.
#pragma once

#include <string>

#include "doctor/diagnosis.h"

namespace stoke::doctor {

std::string render_html_report(const Diagnosis& d);

// Text made safe for HTML content and attribute values (& < > " ').
std::string html_escape(const std::string& text);

}  // namespace stoke::doctor
