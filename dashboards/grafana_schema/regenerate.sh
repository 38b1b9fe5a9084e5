#!/usr/bin/env bash
# Regenerate the *.schema.json beside this script from @grafana/schema (`make grafana-schemas`).
# Needs node >= 18 with npm (ts-json-schema-generator >= 2.5 needs node 22, hence 2.4.0) and python3.
# Works in a temporary directory: nothing from npm stays in the repository.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
GRAFANA_SCHEMA=13.2.3
TS_JSON_SCHEMA_GENERATOR=2.4.0
TYPESCRIPT=5.9.3   # the generator needs typescript ^5.8; typescript 7 has no JS compiler API

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
npm init -y >/dev/null
npm install --no-audit --no-fund --save-exact \
  "@grafana/schema@${GRAFANA_SCHEMA}" "ts-json-schema-generator@${TS_JSON_SCHEMA_GENERATOR}" "typescript@${TYPESCRIPT}"

PKG=node_modules/@grafana/schema
RAW_TYPES=$PKG/dist/types/raw    # the package ships only dist/**/*.d.ts (no src/)
# Without --additional-properties every interface comes out closed (additionalProperties: false).
GEN="npx --no-install ts-json-schema-generator --no-type-check --jsDoc extended"
mkdir raw
$GEN --path $RAW_TYPES/dashboard/x/types.gen.d.ts                      --type Dashboard   -o raw/dashboard.json
$GEN --path $RAW_TYPES/composable/timeseries/panelcfg/x/types.gen.d.ts --type Options     -o raw/timeseries.Options.json
$GEN --path $RAW_TYPES/composable/timeseries/panelcfg/x/types.gen.d.ts --type FieldConfig -o raw/timeseries.FieldConfig.json
$GEN --path $RAW_TYPES/composable/stat/panelcfg/x/types.gen.d.ts       --type Options     -o raw/stat.Options.json
$GEN --path $RAW_TYPES/composable/text/panelcfg/x/types.gen.d.ts       --type Options     -o raw/text.Options.json
$GEN --path $RAW_TYPES/composable/table/panelcfg/x/types.gen.d.ts      --type Options     -o raw/table.Options.json
# The table's own `interface FieldConfig extends ui.TableFieldOptions`, declared in this file.
$GEN --path $RAW_TYPES/composable/table/panelcfg/x/types.gen.d.ts      --type FieldConfig -o raw/table.FieldConfig.json
# Schema v2 (dashboard.grafana.app/v2, what Grafana 13 serves beside v1): the resource's `spec`.
$GEN --path $PKG/dist/types/schema/dashboard/v2/types.spec.gen.d.ts     --type Spec        -o raw/dashboard.v2.json
# Not --type FieldConfig on stat/text: they declare none, and the generator would silently pick the
# dashboard FieldConfig re-exported through `import * as common from '@grafana/schema'`.

python3 "$HERE/relax.py" raw "$HERE" "$PKG"
echo "wrote $(ls "$HERE"/*.schema.json | wc -l) schemas to $HERE"
