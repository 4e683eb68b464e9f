#!/bin/sh
# ctest plugin.example_against_installed_package: installs kforge into a temporary prefix, builds the example
# plug-in (examples/plugin) against that installed package with find_package(kforge), and runs the installed
# kforge with --plugin on the example's config. Arguments: CMAKE BUILD_DIR EXAMPLE_DIR WORK_DIR.
set -eu
cmake=$1 build=$2 example=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
echo "== cmake --install $build --prefix $work/prefix"
"$cmake" --install "$build" --prefix "$work/prefix" --component kforge > "$work/install.log"
# Nothing of the build tree may be reachable: the example sees only the prefix.
echo "== configure and build $example against $work/prefix"
"$cmake" -S "$example" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release
"$cmake" --build "$work/build"
plugin=$(ls "$work/build"/*.so)
# kforge_DIR must be the prefix's package (the work folder may lie inside the build tree, so compare whole).
found=$(sed -n 's/^kforge_DIR:PATH=//p' "$work/build/CMakeCache.txt")
case "$found" in
  "$work/prefix/"*) ;;
  *) echo "FAIL: the example found kforge in '$found', not under $work/prefix"; exit 1 ;;
esac
echo "== $work/prefix/bin/kforge run $example/config.yaml --plugin $plugin"
"$work/prefix/bin/kforge" run "$example/config.yaml" --plugin "$plugin" --output "$work/run" --quiet
"$work/prefix/bin/kforge" plugins --plugin "$plugin" | grep -q "strategy example_walk"
echo "PASS: the example plug-in built against the installed package and ran"
