// The run report as one self-contained HTML page (no network needed to view it): a summary,
// loss and accuracy curves, throughput, GPU utilisation and memory (the host's CPU and the
// process's memory on a CPU run), the budget burn-down with a projection to the run's end, the
// checkpoint timeline, the op profile table when the run has one, and the config. Charts are
// inline SVG (svg_chart.h); everything taken from the run's files is HTML-escaped. A small inline
// script checks, once the page has loaded, that every chart drew its points, and records that
// (and any script error) on <body> as data-charts-drawn, data-charts-expected and data-errors,
// which is what the headless-browser test reads.
#pragma once

#include <string>

#include "hourglass/obs/run_report.h"

namespace hg::obs {

struct ReportHtml {
  std::string html;
  int charts = 0;  // <svg class="chart"> elements drawn
};

ReportHtml render_report_html(const RunReport& report);

}  // namespace hg::obs
