#!/usr/bin/env bash
# The module arrows hold in the sources, not only at link time: every `#include "DIR/..."` of a
# module's file names its own module or one it links (directly or through PUBLIC links, as
# each module's CMakeLists.txt declares). Every module exports the repository root as its
# include path, so a header-only type of a module one does not link would otherwise compile.
#
# Usage: include_arrows_test.sh REPO_ROOT. Prints each wrong arrow; exit 1 when there is one.
set -euo pipefail
root="$1"
cd "$root"

declare -A dir_of      # ll_x -> module directory
declare -A module_of   # module directory -> ll_x
declare -A public_deps # ll_x -> PUBLIC ll_* deps
declare -A all_deps    # ll_x -> PUBLIC and PRIVATE ll_* deps

# Each library's directory and its link lines (a call may span lines up to its ')').
while IFS= read -r cm; do
  dir=$(dirname "$cm")
  dir=${dir#./}
  [ "$dir" = "tests" ] && continue
  lib=$(grep -oE 'add_library\((ll_[a-z_]+)' "$cm" | head -n 1 | sed 's/add_library(//') || true
  [ -n "$lib" ] || continue
  dir_of[$lib]=$dir
  module_of[$dir]=$lib
  links=$(awk -v lib="$lib" '
    $0 ~ "target_link_libraries\\(" lib "[ )]" { on = 1 }
    on { printf "%s ", $0; if ($0 ~ /\)/) on = 0 }' "$cm")
  pub=$(echo "$links" | sed -E 's/PRIVATE.*//' | grep -oE 'll_[a-z_]+' | grep -vx "$lib" | tr '\n' ' ' || true)
  every=$(echo "$links" | grep -oE 'll_[a-z_]+' | grep -vx "$lib" | tr '\n' ' ' || true)
  public_deps[$lib]=$pub
  all_deps[$lib]=$every
done < <(find . -name CMakeLists.txt -not -path './build*' -not -path '*/node_modules/*' \
           -not -path './tests/*' | sort)

# What a module may include: itself, its direct deps, and their PUBLIC deps, transitively.
allowed_for() {
  local lib=$1 seen=" $1 " queue=(${all_deps[$1]}) next
  while [ ${#queue[@]} -gt 0 ]; do
    next=${queue[0]}
    queue=("${queue[@]:1}")
    case "$seen" in *" $next "*) continue ;; esac
    seen+="$next "
    queue+=(${public_deps[$next]:-})
  done
  echo "$seen"
}

# One pass over every module's sources: "file include" pairs, then awk attributes each path
# to the longest module directory that prefixes it and checks the arrow.
table=""
for lib in "${!dir_of[@]}"; do
  table+="${dir_of[$lib]} $lib $(allowed_for "$lib")"$'\n'
done
# Explicit source lists (a library that does not glob its directory, e.g. bench/ whose
# benchmark executables link more): only those .cpp files are the library's.
explicit=""
for lib in "${!dir_of[@]}"; do
  cm="${dir_of[$lib]}/CMakeLists.txt"
  if ! grep -q "file(GLOB" "$cm"; then
    srcs=$(grep -oE "add_library\($lib STATIC[^)]*\)" "$cm" | grep -oE '[a-z_0-9]+\.cpp' | tr '\n' ' ')
    explicit+="${dir_of[$lib]} $srcs"$'\n'
  fi
done

dirs=$(for lib in "${!dir_of[@]}"; do echo "${dir_of[$lib]}"; done | sort -u)
# shellcheck disable=SC2086
grep -rHoE '^#include "[^"]+"' --include='*.h' --include='*.cpp' $dirs |
  sed -E 's/:#include "(.*)"$/ \1/' |
  awk -v table="$table" -v explicit="$explicit" '
    BEGIN {
      n = split(table, rows, "\n")
      for (i = 1; i <= n; ++i) {
        if (rows[i] == "") continue
        split(rows[i], f, " ")
        dir[f[2]] = f[1]; lib_at[f[1]] = f[2]; allowed[f[2]] = " " rows[i] " "
      }
      m = split(explicit, ex, "\n")
      for (i = 1; i <= m; ++i) {
        if (ex[i] == "") continue
        k = split(ex[i], g, " ")
        only[g[1]] = 1
        for (j = 2; j <= k; ++j) listed[g[1] "/" g[j]] = 1
      }
    }
    function owner(path,   d, best) {
      best = ""
      for (d in lib_at) if (index(path, d "/") == 1 && length(d) > length(best)) best = d
      return best == "" ? "" : lib_at[best]
    }
    {
      file = $1; inc = $2
      lib = owner(file)
      if (lib == "") next
      if (only[dir[lib]] && file ~ /\.cpp$/ && !listed[file]) next
      target = owner(inc)
      if (target == "") next
      ++checked
      if (index(allowed[lib], " " target " ") == 0) {
        printf "wrong arrow: %s includes %s (%s does not link %s)\n", file, inc, lib, target
        bad = 1
      }
    }
    END {
      printf "include arrows: %d includes checked\n", checked
      if (checked < 100) { print "too few includes checked: the module scan is broken"; exit 1 }
      exit bad
    }'
