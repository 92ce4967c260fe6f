/* test_report.c — tuning reports: the HTML is one self-contained page (one summary row and
 * one well-formed SVG chart per task, no URL of any kind, user text escaped), the CSV quotes
 * what needs quoting, the JSON parses back, and the text report has a line per task. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_report.h"

static int failures;
static void check(bool ok, const char *name, const char *why) {
  printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, ok ? "" : ": ", ok ? "" : why);
  failures += !ok;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* Every element opened inside each <svg> is closed (or self-closed) in order. */
static bool svg_well_formed(const char *html) {
  const char *p = html;
  while ((p = strstr(p, "<svg"))) {
    const char *end = strstr(p, "</svg>");
    if (!end) return false;
    const char *stack[64];
    int depth = 0;
    for (const char *q = p; q < end + 6; q++) {
      if (*q != '<') continue;
      if (q[1] == '/') {
        if (depth == 0) return false;
        size_t len = strcspn(q + 2, ">");
        if (strncmp(stack[depth - 1], q + 2, len) != 0) return false;
        depth--;
      } else {
        const char *close = strchr(q, '>');
        if (!close) return false;
        if (close[-1] != '/') {
          if (depth == 64) return false;
          stack[depth++] = q + 1;
        }
      }
    }
    if (depth != 0) return false;
    p = end + 6;
  }
  return true;
}

static char *render(pk_ctx *ctx, const pk_report_task *t, int n, pk_report_format fmt) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  pk_status s = pk_report_write(ctx, t, n, fmt, f);
  fclose(f);
  if (s != PK_OK) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* Usage: test_report [--html OUT]  (--html also writes the sample report, for the
 * headless-browser check in scripts/report-screenshot.sh) */
int main(int argc, char **argv) {
  pk_ctx *ctx = pk_ctx_new();
  static const pk_curve_point c1[] = {{1, 2.0}, {10, 30.0}, {50, 61.5}};
  static const pk_curve_point c2[] = {{1, 0.5}, {4, 3.0}};
  pk_report_task tasks[3] = {
      {.name = "matmul_1024x1024x1024_f32", .workload = "ab12", .target = "c",
       .default_gflops = 0.4, .best_gflops = 61.5, .extern_gflops = 70.1,
       .best_trace = "{\"version\":1,\"steps\":[]}", .trials = 50, .npoints = 3, .curve = c1},
      {.name = "evil <script>alert(\"x\")</script> & 'q'", .workload = "cd34", .target = "c",
       .default_gflops = 0.1, .best_gflops = 3.0, .trials = 4, .npoints = 2, .curve = c2},
      {.name = "conv,with,commas", .workload = "ef56", .target = "c -march=znver3", .trials = 0},
  };
  tasks[1].failures[PK_MEAS_CRASH] = 2;
  tasks[1].failures[PK_MEAS_TIMEOUT] = 1;

  char *html = render(ctx, tasks, 3, PK_REPORT_HTML);
  check(html != NULL, "html_written", pk_ctx_error(ctx));
  if (html) {
    check(count(html, "<tr class=\"task\">") == 3, "html_one_row_per_task", "row count");
    check(count(html, "<svg") == 3 && count(html, "</svg>") == 3, "html_one_chart_per_task", "svg count");
    check(svg_well_formed(html), "html_svg_well_formed", "unbalanced SVG elements");
    check(!strstr(html, "http") && !strstr(html, "://") && !strstr(html, "src=") &&
              !strstr(html, "href=") && !strstr(html, "@import"),
          "html_no_external_urls", "found a URL or an external reference");
    check(!strstr(html, "<script") && strstr(html, "&lt;script&gt;"), "html_escapes_names",
          "task name reached the page unescaped");
    check(count(html, "<polyline") == 2, "html_curves_drawn", "expected two tuning curves");
    check(strstr(html, "crash 2 timeout 1") != NULL, "html_failures_by_status", "failures missing");
    free(html);
  }

  char *csv = render(ctx, tasks, 3, PK_REPORT_CSV);
  check(csv && count(csv, "\n") == 4 && strstr(csv, "\"conv,with,commas\"") &&
            strstr(csv, "\"evil <script>alert(\"\"x\"\")</script> & 'q'\""),
        "csv_quoting", csv ? csv : "no output");
  free(csv);

  char *json = render(ctx, tasks, 3, PK_REPORT_JSON);
  cJSON *doc = json ? cJSON_Parse(json) : NULL;
  cJSON *arr = doc ? cJSON_GetObjectItem(doc, "tasks") : NULL;
  check(arr && cJSON_GetArraySize(arr) == 3 &&
            cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "best_gflops")->valuedouble == 61.5 &&
            cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "curve")) == 3,
        "json_parses_back", json ? json : "no output");
  cJSON_Delete(doc);
  free(json);

  char *text = render(ctx, tasks, 3, PK_REPORT_TEXT);
  check(text && count(text, "\n") == 5 && strstr(text, "matmul_1024x1024x1024_f32"), "text_lines",
        text ? text : "no output");
  free(text);

  if (argc == 3 && !strcmp(argv[1], "--html")) {
    FILE *out = fopen(argv[2], "w");
    check(out && pk_report_write(ctx, tasks, 3, PK_REPORT_HTML, out) == PK_OK && fclose(out) == 0,
          "html_file_written", argv[2]);
  }

  pk_report_format f;
  check(pk_report_format_from_name("html", &f) && f == PK_REPORT_HTML &&
            !pk_report_format_from_name("pdf", &f),
        "format_names", "");
  pk_ctx_free(ctx);
  printf("%s report\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
