/* report_svg.c — the inline-SVG chart code every Pock HTML report draws with (the tuning
 * report, the sparse-search report): a framed plot with a grid and axis titles, lines,
 * polylines and points in data coordinates, and HTML escaping for every text. */
#include <math.h>

#include "pk_report.h"

void pk_report_html_text(FILE *out, const char *s) {
  for (const char *p = s ? s : ""; *p; p++) {
    switch (*p) {
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '&': fputs("&amp;", out); break;
    case '"': fputs("&quot;", out); break;
    case '\'': fputs("&#39;", out); break;
    default: fputc(*p, out);
    }
  }
}

enum { PAD_L = 56, PAD_B = 32, PAD_T = 14, PAD_R = 16 };

static double plot_w(const pk_svg_chart *c) { return c->width - PAD_L - PAD_R; }
static double plot_h(const pk_svg_chart *c) { return c->height - PAD_T - PAD_B; }

double pk_svg_x(const pk_svg_chart *c, double v) {
  double span = c->xmax > c->xmin ? c->xmax - c->xmin : 1;
  return PAD_L + (v - c->xmin) / span * plot_w(c);
}

double pk_svg_y(const pk_svg_chart *c, double v) {
  double span = c->ymax > c->ymin ? c->ymax - c->ymin : 1;
  return PAD_T + plot_h(c) - (v - c->ymin) / span * plot_h(c);
}

void pk_svg_begin(FILE *out, const pk_svg_chart *c) {
  const double pw = plot_w(c), ph = plot_h(c);
  fprintf(out, "<svg class=\"chart\" id=\"%s\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" role=\"img\">\n", c->id, c->width, c->height, c->width,
          c->height);
  fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" stroke=\"#999\"/>\n",
          PAD_L, PAD_T, pw, ph);
  for (int g = 0; g <= 4; g++) { /* y grid and labels */
    double v = c->ymin + (c->ymax - c->ymin) * g / 4;
    fprintf(out, "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                 "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.*f</text>\n",
            PAD_L, PAD_L + pw, pk_svg_y(c, v), pk_svg_y(c, v), PAD_L - 4, pk_svg_y(c, v) + 3,
            c->y_decimals, v);
  }
  fprintf(out, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">", PAD_L + pw / 2,
          c->height - 6);
  pk_report_html_text(out, c->x_label);
  fprintf(out, "</text>\n<text x=\"12\" y=\"%.1f\" font-size=\"11\" transform=\"rotate(-90 12 %.1f)\" "
               "text-anchor=\"middle\">", PAD_T + ph / 2, PAD_T + ph / 2);
  pk_report_html_text(out, c->y_label);
  fputs("</text>\n", out);
}

void pk_svg_hline(FILE *out, const pk_svg_chart *c, double y, const char *cls, const char *color,
                  const char *dash) {
  fprintf(out, "<line class=\"%s\" x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
               "stroke-dasharray=\"%s\"/>\n", cls, PAD_L, PAD_L + plot_w(c), pk_svg_y(c, y),
          pk_svg_y(c, y), color, dash);
}

void pk_svg_vline(FILE *out, const pk_svg_chart *c, double x, const char *cls, const char *color,
                  const char *dash) {
  fprintf(out, "<line class=\"%s\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%.1f\" stroke=\"%s\" "
               "stroke-dasharray=\"%s\"/>\n", cls, pk_svg_x(c, x), pk_svg_x(c, x), PAD_T,
          PAD_T + plot_h(c), color, dash);
}

void pk_svg_polyline(FILE *out, const pk_svg_chart *c, const char *cls, const char *color,
                     const double *xs, const double *ys, int n) {
  fprintf(out, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
          cls, color);
  for (int p = 0; p < n; p++)
    fprintf(out, "%s%.1f,%.1f", p ? " " : "", pk_svg_x(c, xs[p]), pk_svg_y(c, ys[p]));
  fputs("\"/>\n", out);
}

void pk_svg_point(FILE *out, const pk_svg_chart *c, double x, double y, double r, const char *cls,
                  const char *fill, const char *stroke, const char *title) {
  fprintf(out, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\" stroke=\"%s\">",
          cls, pk_svg_x(c, x), pk_svg_y(c, y), r, fill, stroke);
  if (title) {
    fputs("<title>", out);
    pk_report_html_text(out, title);
    fputs("</title>", out);
  }
  fputs("</circle>\n", out);
}

void pk_svg_end(FILE *out, const pk_svg_chart *c, const char *xmax_label) {
  fprintf(out, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">", PAD_L + plot_w(c),
          c->height - PAD_B + 12);
  pk_report_html_text(out, xmax_label);
  fputs("</text>\n</svg>\n", out);
}
