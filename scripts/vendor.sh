#!/usr/bin/env bash
# Vendors the pinned front-end packages from the npm registry into
# static/vendor/ and records what was copied in static/vendor/VERSIONS
# (package, version, file, sha256). Run it after changing a pin below and
# commit the result; the build never fetches anything.
#
# htmx stays on 2.x with htmx-ext-ws 2.x: htmx 4 renames the websocket
# attributes and the two do not work together.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# package@version  dist-file  vendored-name
PINS=(
	"htmx.org@2.0.11 dist/htmx.min.js htmx.min.js"
	"htmx-ext-ws@2.0.4 dist/ws.min.js htmx-ext-ws.min.js"
)

command -v npm >/dev/null || { echo "vendor.sh: npm is required (apt-get install -y npm)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
dest=static/vendor
mkdir -p "$dest"

specs=()
for pin in "${PINS[@]}"; do
	read -r spec _ _ <<<"$pin"
	specs+=("$spec")
done
# --ignore-scripts: nothing from the registry runs here.
(cd "$tmp" && npm init -y >/dev/null && npm install --no-save --no-audit --no-fund --ignore-scripts "${specs[@]}" >/dev/null)

{
	echo "# Vendored by scripts/vendor.sh from the npm registry. Do not edit by hand."
	echo "# package version file sha256"
} >"$dest/VERSIONS.tmp"
for pin in "${PINS[@]}"; do
	read -r spec file name <<<"$pin"
	pkg="${spec%@*}"
	want="${spec##*@}"
	got="$(node -p "require('$tmp/node_modules/$pkg/package.json').version")"
	if [[ "$got" != "$want" ]]; then
		echo "vendor.sh: $pkg installed as $got, want $want" >&2
		exit 1
	fi
	cp "$tmp/node_modules/$pkg/$file" "$dest/$name"
	sum="$(sha256sum "$dest/$name" | cut -d' ' -f1)"
	echo "$pkg $got $name $sum" >>"$dest/VERSIONS.tmp"
done
mv "$dest/VERSIONS.tmp" "$dest/VERSIONS"
cat "$dest/VERSIONS"
