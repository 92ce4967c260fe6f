# Tuning reports (text, CSV, JSON, self-contained HTML with SVG).
pk_add_test(test_report LIBS pk_autotune LABELS autotune sanitize)
add_test(NAME test_report_screenshot COMMAND sh -c
  "$<TARGET_FILE:test_report> --html report_sample.html >/dev/null && ${PROJECT_SOURCE_DIR}/scripts/report-screenshot.sh report_sample.html report_sample.png")
set_tests_properties(test_report_screenshot PROPERTIES LABELS "autotune" TIMEOUT 300
  SKIP_RETURN_CODE 77)
