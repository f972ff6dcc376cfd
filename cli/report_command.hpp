// `dlscale report FILE...`: tables, CSV/JSON exports, figures and an HTML page. The report is
// Python (report/dlscale_report.py, matplotlib and pandas: the field's plotting tools); this
// command finds the script and the interpreter and hands over.
#pragma once

namespace dlscale::cli {

// argv[0] is `report`; returns only if the script cannot be started.
int report_command(int argc, char** argv);

}  // namespace dlscale::cli
