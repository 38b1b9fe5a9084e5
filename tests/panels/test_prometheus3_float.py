"""`prometheus3_float` against the cases Prometheus and Go themselves test, as literals.

Prometheus 3 stores a classic bucket's `le` and a summary's `quantile` as `labels.FormatOpenMetricsFloat` gives
them (prometheus/prometheus model/labels/float.go at d15adb9ad7e5d9fbde3a9a8f30200593a5a14d86): 1, 0, -1, NaN
and ±Inf hard-coded as "1.0", "0.0", "-1.0", "NaN", "+Inf"/"-Inf"; otherwise Go's
`strconv.AppendFloat(f, 'g', -1, 64)` with ".0" appended where the text has neither "." nor "e". Prometheus has
no table test of the function itself; its parser tests pin what it does to label values (PARSER_CASES), and
Go's own `TestFtoa` pins the 'g', -1 text it builds on (GO_FTOA_CASES, each + ".0" where the rule adds it).
"""

import math

import pytest

from llmdash.panels.promql import prometheus3_float

# prometheus/prometheus model/textparse/promparse_test.go, TestPromParse, at
# d15adb9ad7e5d9fbde3a9a8f30200593a5a14d86: the exposition's label text -> the stored label value.
PARSER_CASES = [
    ('quantile="0"', "0", "0.0"),
    ('quantile="0.25"', "0.25", "0.25"),
    ('quantile="0.5"', "0.5", "0.5"),
    ('quantile="0.9"', "0.9", "0.9"),
    ('quantile="1.0"', "1.0", "1.0"),
    ('quantile="2.0"', "2.0", "2.0"),
    ('le="1"', "1", "1.0"),
    ('le="2"', "2", "2.0"),
    ('le="+Inf"', "+Inf", "+Inf"),
]

# golang/go src/strconv/ftoa_test.go, ftoatests, at 165ceb09f95fdcf76ebf894908b9a170d7b7524b: every
# (value, 'g', -1) case, with FormatOpenMetricsFloat's ".0" added where the text has neither "." nor "e".
GO_FTOA_CASES = [
    (1, "1.0"),                                            # "1"
    (20, "20.0"),                                          # "20"
    (1234567.8, "1.2345678e+06"),
    (200000, "200000.0"),                                  # "200000": exponent 5, still fixed
    (2000000, "2e+06"),                                    # exponent 6: %e from here
    (0, "0.0"),
    (-1, "-1.0"),
    (12, "12.0"),
    (123456700, "1.234567e+08"),
    (1e23, "1e+23"),
    (99999999999999974834176, "9.999999999999997e+22"),    # below1e23
    (100000000000000008388608, "1.0000000000000001e+23"),  # above1e23
    (5e-324, "5e-324"),                                    # fdiv(5e-304, 1e20)
    (-5e-324, "-5e-324"),
    (32, "32.0"),
    (2.2250738585072012e-308, "2.2250738585072014e-308"),
    (2.2250738585072011e-308, "2.225073858507201e-308"),
    (383260575764816448, "3.8326057576481645e+17"),
    (-5.8339553793802237e+23, "-5.8339553793802237e+23"),
    (math.inf, "+Inf"),
    (-math.inf, "-Inf"),
]

# The exponent boundaries of Go's shortest %g (ftoa.go: %e where the exponent is < -4 or >= 6), a value
# on each side, and the cases FormatOpenMetricsFloat hard-codes.
BOUNDARIES = [
    (100000, "100000.0"),      # 1e5: fixed
    (999999, "999999.0"),
    (1000000, "1e+06"),        # 1e6: exponent form
    (1500000, "1.5e+06"),
    (1e20, "1e+20"),           # Go, unlike JavaScript (which switches at 1e21), is in %e long before
    (1e21, "1e+21"),
    (0.0001, "0.0001"),        # exponent -4: fixed
    (0.00012, "0.00012"),
    (0.00001, "1e-05"),        # exponent -5: exponent form, two exponent digits
    (0.000012, "1.2e-05"),
    (0.1, "0.1"),
    (0.25, "0.25"),
    (2.5, "2.5"),
    (5000, "5000.0"),          # Triton's first-response bucket bound in ms
    (-0.0, "0.0"),             # f == 0 holds for -0 in Go
    (-0.5, "-0.5"),
    (-1000000, "-1e+06"),
]


@pytest.mark.parametrize("label, text, stored", PARSER_CASES, ids=[c[0] for c in PARSER_CASES])
def test_what_prometheus_stores_for_the_parser_test_labels(label, text, stored):
    assert prometheus3_float(float(text)) == stored


@pytest.mark.parametrize("value, expected", GO_FTOA_CASES, ids=[c[1] for c in GO_FTOA_CASES])
def test_go_ftoa_cases(value, expected):
    assert prometheus3_float(value) == expected


@pytest.mark.parametrize("value, expected", BOUNDARIES, ids=[c[1] for c in BOUNDARIES])
def test_exponent_boundaries(value, expected):
    assert prometheus3_float(value) == expected


def test_nan_as_prometheus_gives_it():
    assert prometheus3_float(math.nan) == "NaN"
    assert prometheus3_float(-math.nan) == "NaN"     # ftoatests: {-math.NaN(), 'g', -1, "NaN"}
